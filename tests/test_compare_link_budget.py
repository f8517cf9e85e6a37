"""A Compare link whose budget not every method evaluated (an audit, 2026-12-07): ``budget=777``
opened the comparison at 1,000 with nothing said; one sentence names the budget asked and the one
shown, until the slider moves. AppTest on the tiny model; the sentence also as a plain function."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)


def test_the_sentence_names_the_budget_asked_and_the_one_shown():
    from circuitviz.ui.link_values import link_budget_sentence

    options = [20, 50, 100, 200, 500, 1000, 10342]
    every, shown = "the budgets every method here evaluated", "the comparison is shown at"
    assert link_budget_sentence(777, 1000, options, 10342, every, shown) == (
        "The link asks for budget 777, which is not one of the budgets every method here evaluated: "
        "the comparison is shown at 1,000, the nearest on a log scale."
    )
    assert link_budget_sentence(99999, 10342, options, 10342, every, shown) == (
        "The link asks for budget 99,999, more than the largest of the budgets every method here "
        "evaluated, 10,342 (every edge of the graph): the comparison is shown at 10,342."
    )
    assert link_budget_sentence(5, 20, options, 10342, every, shown) == (
        "The link asks for budget 5, less than the smallest of the budgets every method here evaluated, 20: "
        "the comparison is shown at 20."
    )


def test_a_links_budget_not_evaluated_is_said_on_compare_until_the_slider_moves():
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**LINK, "compare": "eap,eap-ig", "budget": "7"}.items():
        at.query_params[name] = value
    at.run()
    at = at.switch_page("pages/compare.py").run()
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    slider = at.select_slider(key="w.budget")
    said = [c.value for c in at.caption if c.value.startswith("The link asks for budget 7,")]
    assert said == [
        "The link asks for budget 7, which is not one of the budgets every method here evaluated: "
        f"the comparison is shown at {slider.value:,}, the nearest on a log scale."
    ], said
    assert any(c.value.startswith(f"At budget {slider.value:,} ") for c in at.caption)
    other = next(b for b in slider.options if str(b) != str(slider.value))
    slider.set_value(int(other)).run()
    assert not at.exception, at.exception
    assert not [c.value for c in at.caption if c.value.startswith("The link asks for budget")]
