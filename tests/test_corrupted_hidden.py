"""The corrupted box on Explore for a method that needs no corrupted prompt (flow routes, CD-T,
ACC++): hidden behind a switch, with one sentence saying what NDF, necessity and the curve use
instead; what the box held comes back as it was for a method that needs one. Until 2026-12-07
the box stayed, optional, and a prompt proposed for EAP-IG was silently the flow routes' corrupted
run (issue 33: "the form hides the corrupted box for them")."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK, explore_session, run_it  # noqa: E402

from circuitviz.bench.toy_models import IOI_TASK  # noqa: E402
from circuitviz.methods import method_traits  # noqa: E402
from circuitviz.ui.corrupted_box import OWN_CORRUPTED_USED, SWITCH_KEY, hidden_sentence  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")
SWITCH = SWITCH_KEY


def _boxes(at) -> list[str]:
    return [box.key for box in at.text_area]


def _pick(at, method: str):
    at.selectbox(key="w.method").set_value(method).run()
    assert not at.exception, at.exception
    return at


def test_the_box_hides_for_a_method_that_needs_none_and_comes_back_as_it_was():
    at = explore_session({**LINK, "method": "eap"})
    written = IOI_TASK.corrupted.replace("John", "Anna")
    at.text_area(key="w.corrupted").set_value(written).run()
    for method in ("flow-routes", "cd-t", "acc++"):
        _pick(at, method)  # hidden at once, on the run the method is picked (not one run late)
        assert "w.corrupted" not in _boxes(at) and at.toggle(key=SWITCH).value is False
        assert hidden_sentence(method_traits(method)) in [c.value for c in at.caption]
        assert not any(e.value for e in at.error)
    at = run_it(at)
    result = at.session_state["results"]["acc++"]
    assert result.task.corrupted == ""  # hidden: not the text the box still holds
    assert at.query_params["own_corrupted"] == "0" and at.query_params["corrupted"] == written
    _pick(at, "eap")
    assert at.text_area(key="w.corrupted").value == written  # nothing typed is lost


def test_the_switch_shows_the_box_and_its_prompt_is_the_curves_corrupted_run():
    at = _pick(explore_session({**LINK, "method": "eap"}), "flow-routes")
    at.toggle(key=SWITCH).set_value(True).run()
    assert at.text_area(key="w.corrupted").value == IOI_TASK.corrupted
    assert OWN_CORRUPTED_USED in [c.value for c in at.caption]
    at = run_it(at)
    result = at.session_state["results"]["flow-routes"]
    assert result.task.corrupted == IOI_TASK.corrupted and at.query_params["own_corrupted"] == "1"
    _pick(at, "cd-t")  # the choice holds for the prompt, whatever method needs none
    assert at.toggle(key=SWITCH).value is True and "w.corrupted" in _boxes(at)
    at.text_area(key="w.corrupted").set_value("").run()
    said = [c.value for c in at.caption]
    assert any(c.startswith("Left empty, the box is ignored") for c in said)


def test_a_link_keeps_the_corrupted_prompt_its_run_used():
    """A link from before the switch (no ``own_corrupted``) that names a corrupted prompt with a
    method that needs none showed a run measured against it: it still does. A link of this
    version says which, and a new prompt forgets the choice."""
    at = explore_session({**LINK, "method": "flow-routes"})
    assert at.toggle(key=SWITCH).value is True
    assert at.text_area(key="w.corrupted").value == IOI_TASK.corrupted
    at = explore_session({**LINK, "method": "flow-routes", "own_corrupted": "0"})
    assert at.toggle(key=SWITCH).value is False and "w.corrupted" not in _boxes(at)
    at.text_area(key="w.prompt").set_value("When Anna and Tom went to the park, Tom gave a ball to").run()
    assert not at.exception, at.exception
    assert at.toggle(key=SWITCH).value is False  # the new prompt's own proposal: hidden


def test_a_click_right_after_a_new_prompt_turned_the_switch_off_holds():
    """A new prompt turns the switch off; clicked on at once, it was taken for a stale echo of the
    browser (``state.bind`` hands a widget a value and undoes its old one for 5 s) and went off."""
    at = explore_session({**LINK, "method": "flow-routes"})
    assert at.toggle(key=SWITCH).value is True  # the link's corrupted prompt, its run's
    at.text_area(key="w.prompt").set_value("When Anna and Tom went to the park, Tom gave a ball to").run()
    assert at.toggle(key=SWITCH).value is False
    at.toggle(key=SWITCH).set_value(True).run()
    assert at.toggle(key=SWITCH).value is True and "w.corrupted" in _boxes(at)


def _opened(method: str, **extra):
    """Explore after a task is opened (``state.open_task``'s pending task) with ``method``."""
    at = explore_session({**LINK, "method": "eap"})
    task = {"clean": IOI_TASK.clean, "corrupted": IOI_TASK.corrupted, "answer": " Mary", "foils": [" John"]}
    pending = {"task": task, "model": None, "method": method, "settings": None, "budgets": None}
    at.session_state["_pending_open"] = {
        **pending,
        **{"corrupted_note": None, "foil_note": None, "run": False, "budget": None, "extra": extra},
    }
    at.run()
    assert not at.exception, at.exception
    return at


def test_an_opened_task_keeps_its_corrupted_prompt_for_the_method_it_ran_with():
    """A Gallery example or a batch row of flow routes ran against its task's corrupted prompt:
    opened, the box is shown and used. The same task with a method that needs one, switched to
    flow routes, hides it; a proposed prompt (the MMLU picker's, Steer's) hides too."""
    at = _opened("flow-routes")
    assert at.toggle(key=SWITCH).value is True
    assert at.text_area(key="w.corrupted").value == IOI_TASK.corrupted
    at = _pick(_opened("eap"), "flow-routes")
    assert at.toggle(key=SWITCH).value is False and "w.corrupted" not in _boxes(at)
    at = _opened("flow-routes", corrupted_came_with=None)
    assert at.toggle(key=SWITCH).value is False and "w.corrupted" not in _boxes(at)


def test_the_gallerys_rerun_then_flow_routes_hides_the_examples_corrupted_prompt():
    """The Gallery's examples are Edge Pruning's: re-run on Explore, the example's corrupted prompt
    is in its box; flow routes then hide it (it came with Edge Pruning's run) and give it back."""
    from streamlit.testing.v1 import AppTest

    from circuitviz.ui import loaders

    examples = loaders.gallery_index()
    if not examples:
        pytest.skip("the gallery is not built")
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.switch_page("pages/gallery.py").run()
    at.button(key="gallery.rerun").click().run()
    assert not at.exception, at.exception
    corrupted = at.text_area(key="w.corrupted").value
    assert corrupted and corrupted == examples[0]["task"]["corrupted"]
    at.switch_page("pages/explore.py").run()  # AppTest's page stays the Gallery's on a rerun
    _pick(at, "flow-routes")
    assert at.toggle(key=SWITCH).value is False and "w.corrupted" not in _boxes(at)
    _pick(at, examples[0]["method"])
    assert at.text_area(key="w.corrupted").value == corrupted


def test_a_foil_proposed_from_the_hidden_corrupted_prompt_names_it():
    """CD-T on 'The Eiffel Tower is located in the city of' (Gemma-3-270M) hid the box, and the
    foil's note above it read "The foil is what the corrupted prompt leads to (82.3 % there)" of a
    corrupted prompt the page no longer showed (Chromium, 2026-12-07): it is named, and said unused."""
    at = explore_session({**LINK, "method": "eap"})
    note = "The foil is what the corrupted prompt leads to (82.3% there), a content word or number as the answer is."
    at.session_state["foil_note"], at.session_state["foil_proposed"] = note, IOI_TASK.foils[0]
    _pick(at, "cd-t")
    said = [c.value for c in at.caption]
    assert any(IOI_TASK.corrupted in c and "which this run does not use" in c for c in said), said
    _pick(at, "eap")  # the box is back: no sentence (the box shows the prompt itself)
    assert not any("which this run does not use" in c.value for c in at.caption)
    at.session_state["foil_note"] = "The foil is the other name of the prompt (the repeated subject)."
    _pick(at, "cd-t")
    assert not any("which this run does not use" in c.value for c in at.caption)
