"""A Signals link reopens the attention decision its user was looking at (``decision`` in the
URL, ``state.Session.signals_decision``): until 2026-12-06 the link carried the prompt, its task
and ACC++'s settings but not the decision, so a shared view opened at decision #0. A decision the
circuit does not have, or a value that is no decision number, gets one sentence and decision #0."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.ui.link_values import INDEX, unreadable_link_value  # noqa: E402
from circuitviz.ui.signals_view import missing_decision_sentence  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
DECISION = "w.signals.decision"
SETTINGS = '{"k": 1.0}'  # a lower threshold than the default's: the tiny task traces 7 decisions


def _signals(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**LINK, "acc_settings": SETTINGS, **query}.items():
        at.query_params[name] = value
    at.switch_page("pages/signals.py")  # the link's page on the session's first run, as a browser opens it
    return at.run()


def _ran() -> AppTest:
    """Signals with ACC++ run on the tiny IOI task (stored, so a new session's link finds it)."""
    at = _signals()
    next(b for b in at.button if b.label == "Run ACC++").click()
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_signals_link_reopens_the_decision_chosen():
    at = _ran()
    options = at.selectbox(key=DECISION).options
    assert len(options) > 2, options  # the tiny task traces several decisions
    assert at.selectbox(key=DECISION).value == 0
    at.selectbox(key=DECISION).set_value(2).run()
    assert not at.exception, at.exception
    assert at.query_params["decision"] == "2"
    link = {name: at.query_params[name] for name in at.query_params}
    again = _signals(**link)  # the link in a new browser: the stored result, at decision #2
    assert not again.exception, again.exception
    assert again.selectbox(key=DECISION).value == 2
    assert not [i.value for i in again.info if "decision" in i.value]
    # another circuit's decision #2 is another decision: a new result opens at its first
    again.number_input(key="signals.acc++.k").set_value(0.5).run()
    next(b for b in again.button if b.label == "Run ACC++").click()
    again.run()
    assert not again.exception, again.exception
    assert len(again.selectbox(key=DECISION).options) != len(options)
    assert again.selectbox(key=DECISION).value == 0 and again.query_params["decision"] == "0"


def test_a_decision_the_circuit_lacks_or_no_number_is_said_once_and_the_first_shown():
    at = _ran()
    options = at.selectbox(key=DECISION).options
    lacking = _signals(decision="999")
    assert not lacking.exception, lacking.exception
    said = [i.value for i in lacking.info if "decision #999" in i.value]
    indices = [int(option.split(" ")[0].lstrip("#")) for option in options]
    assert said == [missing_decision_sentence(999, indices)]
    assert said[0].startswith("The link's decision #999 is not one of this circuit's ")
    assert lacking.selectbox(key=DECISION).value == 0
    lacking.run()  # a rerun: said once
    assert not [i.value for i in lacking.info if "decision #999" in i.value]
    for text in ("abc", "-1", "1.5", "9" * 5000):
        tampered = _signals(decision=text)
        assert not tampered.exception, (text, tampered.exception)
        warned = [w.value for w in tampered.warning if "The link's decision" in w.value]
        assert warned == [unreadable_link_value("decision", INDEX, text)], text
        assert tampered.selectbox(key=DECISION).value == 0


def test_a_link_naming_a_decision_opens_with_the_form_folded():
    """The stored result is found inside the form's expander, once the engine has loaded: a link
    opened it unfolded, the whole form above the decision the link names."""
    at = _ran()
    at.selectbox(key=DECISION).set_value(1).run()
    link = {name: at.query_params[name] for name in at.query_params}
    again = _signals(**link)
    assert not again.expander[0].proto.expanded
    assert again.selectbox(key=DECISION).value == 1
    plain = _signals()  # no decision named: the form unfolded, as before
    assert plain.expander[0].proto.expanded


def test_a_link_naming_a_decision_of_no_stored_result_opens_the_form():
    """A link's decision of a result this machine does not hold (a link from another machine, or
    settings never run here) folded the form all the same: the page said "Run ACC++ above" with
    its Run button out of sight. The form unfolds, the button in view."""
    at = _signals(decision="3", acc_settings='{"k": 1.5}')
    assert not at.exception, at.exception
    assert at.expander[0].proto.expanded
    assert any(b.label == "Run ACC++" for b in at.button)
