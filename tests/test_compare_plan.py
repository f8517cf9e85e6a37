"""Compare says before its Run button what the run will do (an audit, 2026-12-07): each method was
priced only just before it ran, so a user choosing three methods, one of them Edge Pruning at about
a minute, learnt the wait only as it went by. AppTest on the tiny model; the sentence also alone."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.measure.evaluate import _PROMPT_RUNS  # noqa: E402
from circuitviz.ui.compare_plan import Step, plan_sentence  # noqa: E402

TIMEOUT = 300

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)


def _compare(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for name, value in {**dict(LINK), **query}.items():
        at.query_params[name] = value
    at.run()
    return at.switch_page("pages/compare.py").run()


def _plan(at) -> list[str]:
    return [c.value.replace("\\", "") for c in at.caption if c.value.startswith("Running the comparison")]


def test_the_total_wait_and_each_methods_part_are_said_before_the_run():
    at = _compare(compare="eap,eap-ig")
    assert not at.exception, at.exception
    said = _plan(at)
    assert len(said) == 1, [c.value for c in at.caption]
    assert "in all, the methods one after another (EAP: " in said[0], said
    assert "; EAP-IG (inputs): " in said[0], said
    assert "priced without" not in said[0], said  # the page's next-token view made the prompt's runs
    _PROMPT_RUNS.clear()  # as after a restart: the first method makes them, the second reads them back
    said = _plan(at.run())
    assert "EAP-IG (inputs) is priced without the prompt's clean and corrupted runs" in said[0], said
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    at.run()  # (the line above the button was drawn before the press ran them)
    assert _plan(at) == [
        "Running the comparison reads every chosen method's result from the store, no wait (EAP: from "
        "the store, no wait; EAP-IG (inputs): from the store, no wait)."
    ], _plan(at)


def test_a_method_over_a_limit_is_refused_before_the_run(monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_MAX_IG_STEPS", "1")
    at = _compare(compare="eap,eap-ig")
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]
    refused = [e for e in errors if e.startswith("EAP-IG (inputs): ")]
    assert len(refused) == 1 and "IG steps is over the limit of 1" in refused[0], errors
    assert refused[0].endswith("It is left out of this comparison."), refused
    said = _plan(at)
    assert len(said) == 1 and "EAP-IG" not in said[0], said
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader] == []  # one method ran: nothing to set beside it
    assert not [c for c in at.caption if "EAP-IG" in c.value and "Estimate" in c.value]


def test_the_total_is_the_sum_of_the_parts():
    steps = {
        "a": Step("A", (3.0, 3.0)),
        "b": Step("B", (0.0, 0.0), stored=True),
        "c": Step("C", (50.0, 70.0), shares=True),
    }
    assert plan_sentence(steps).replace("\\", "") == (
        "Running the comparison takes 53 s to 73 s in all, the methods one after another (A: about 3 s; "
        "B: from the store, no wait; C: 50 s to 70 s). C is priced without the prompt's clean and "
        "corrupted runs, which a method before it makes and the run reads back."
    )


def test_a_method_with_its_own_count_shares_the_prompts_runs_too():
    """ACDC builds its own cost: it named no prompt runs, so the plan priced it as making them
    again after EAP had made them, and its record counted them (session 47)."""
    at = _compare(compare="eap,acdc")
    assert not at.exception, at.exception
    _PROMPT_RUNS.clear()  # the first method makes them, the second reads them back
    said = _plan(at.run())
    assert len(said) == 1 and "ACDC" in said[0] and " is priced without the prompt's clean" in said[0], said
