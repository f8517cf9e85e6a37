"""Which budget a result opens at on Explore (``state.open_budget``): a new result (another model,
another method, a new prompt) opens at its own opening budget with the sentence that says why;
a budget the user moved by hand stays while its result is on screen. Before, the budget left by
the first result of a prompt (Gemma's stored result at 20) stayed on the next model's result
(SmolLM2's, whose opening is 200), with no sentence and no offer of a circuit that carries over."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz import render  # noqa: E402
from circuitviz.bench.toy_models import IOI_TASK  # noqa: E402
from circuitviz.models.catalog import EMBEDDED_MODEL, SUPPORTED_MODELS  # noqa: E402
from circuitviz.ui.result_view import GOOD_NDF  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
BASE = dict(LINK)  # the tiny IOI task's link (explore_session)
OTHER_MODEL = next(m for m in SUPPORTED_MODELS if m != EMBEDDED_MODEL and not SUPPORTED_MODELS[m].needs_hub)


def _run(at: AppTest) -> AppTest:
    next(b for b in at.button if b.label == "Run").click()
    return at.run()


def _result(at: AppTest):
    return at.session_state["results"][at.session_state["method"]]


def _opening(at: AppTest):
    return render.opening_view(_result(at).curve, good_ndf=GOOD_NDF)


def _other_budget(at: AppTest) -> int:
    return next(b for b in (5, 10, 20, 40) if b != _opening(at).budget)


def _assert_opened(at: AppTest) -> None:
    """The slider at the result's opening budget, with its sentence."""
    assert not at.exception, at.exception
    opening = _opening(at)
    assert at.select_slider(key="w.budget").value == opening.budget == at.session_state["budget"]
    assert any(c.value == opening.reason for c in at.caption), [c.value for c in at.caption]


def test_another_models_result_opens_at_its_own_budget():
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**BASE, "method": "eap"}.items():
        at.query_params[name] = value
    at = _run(at.run())
    _assert_opened(at)
    # the budget another result's opening left (Gemma's 20), which the user never chose
    at.session_state["budget"] = _other_budget(at)
    at.sidebar.selectbox(key="w.model").set_value(OTHER_MODEL).run()
    at = _run(at)
    assert _result(at).model_id == OTHER_MODEL
    _assert_opened(at)


def test_a_budget_moved_by_hand_stays_on_its_result_only():
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**BASE, "method": "eap"}.items():
        at.query_params[name] = value
    at = _run(at.run())
    _assert_opened(at)
    moved = _other_budget(at)
    at.select_slider(key="w.budget").set_value(moved).run()
    at = _run(at)  # the same request again: the same result, the user's budget stays
    assert at.select_slider(key="w.budget").value == moved == at.session_state["budget"]
    at.switch_page("pages/signals.py").run()
    at.switch_page("pages/explore.py").run()
    assert at.select_slider(key="w.budget").value == moved
    # another method: a new result, whose budget the user did not choose
    at.selectbox(key="w.method").set_value("eap-ig").run()
    _assert_opened(_run(at))
    # another model, after a budget moved by hand on this one
    at.select_slider(key="w.budget").set_value(_other_budget(at)).run()
    at.sidebar.selectbox(key="w.model").set_value(OTHER_MODEL).run()
    _assert_opened(_run(at))
    # another prompt
    at.select_slider(key="w.budget").set_value(_other_budget(at)).run()
    at.text_area(key="w.prompt").set_value(IOI_TASK.clean.replace("Mary", "Anna")).run()
    _assert_opened(_run(at))


def test_a_links_budget_the_run_lacks_is_said_with_the_budget_opened():
    """A link's budget that is not one of the result's (7 among 5, 10, 20, 40) opened at the
    nearest without a word; now one sentence names both, until the slider is moved."""
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**BASE, "method": "eap", "budget": "7"}.items():
        at.query_params[name] = value
    at = _run(at.run())
    assert not at.exception, at.exception
    shown = at.select_slider(key="w.budget").value
    expected = (
        f"The link asks for budget 7, which is not one of the budgets this run evaluated: opened at {shown}, "
        "the nearest on a log scale."
    )
    assert shown in (5, 10) and expected in [c.value for c in at.caption], [c.value for c in at.caption]
    at.select_slider(key="w.budget").set_value(20).run()
    assert not [c.value for c in at.caption if c.value.startswith("The link asks")]
