"""Steer's "Compute it on Explore" on a prompt without a corrupted prompt (Steer's own example, a
link without one): its sentence said the button runs the circuit on Explore, and Explore opened
with a proposed corrupted prompt, unrun (seen in Chromium on "The nurse said that", 2026-12-06).
It runs now, on the corrupted prompt Explore would propose, whose note Explore shows."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")


def test_compute_it_on_explore_runs_a_prompt_that_had_no_corrupted_prompt(tmp_path, monkeypatch):
    from explore_session import QUERY
    from test_labels import _steer_from_link, _tiny_app_with_an_sae

    from circuitviz.ui import steer

    _tiny_app_with_an_sae(tmp_path, monkeypatch)
    link = {name: value for name, value in QUERY.items() if name != "corrupted"}
    at = _steer_from_link(link, tmp_path / "sae")
    said = [c.value for c in at.caption]
    # the link names no corrupted prompt: Steer says it could not look one up, not "nor stored"
    assert steer.NO_CIRCUIT not in said
    assert any(
        c.startswith(
            "No circuit of this prompt is open in this session, and the link names no corrupted prompt"
        )
        for c in said
    ), said
    next(b for b in at.button if b.label == "Compute it on Explore").click()
    at.run()
    assert not at.exception, at.exception
    result = at.session_state["results"].get("eap")
    assert result is not None, "Explore did not run the circuit the button said it runs"
    assert result.task.clean == link["prompt"] and result.task.corrupted
    assert result.task.corrupted == at.session_state["corrupted"] != link["prompt"]
    assert at.session_state["corrupted_note"]  # where it came from, said on Explore


def test_an_opened_task_runs_even_where_its_request_was_cancelled_before(tmp_path, monkeypatch):
    """A task opened to run (Steer's button, the Gallery's 'Re-run live') is a new press: a Cancel
    of the same request earlier, in this session or another, kept it from running, and Explore
    showed the old 'Cancelled after N s' under the button that had said it runs (a Compare test's
    cancelled run of this request, earlier in the same process, showed it)."""
    from explore_session import QUERY
    from test_labels import _steer_from_link, _tiny_app_with_an_sae

    from circuitviz.ui import run

    _tiny_app_with_an_sae(tmp_path, monkeypatch)
    monkeypatch.setattr(run, "cancelled_sentence", lambda key: "Cancelled after 3 s; nothing was stored.")
    at = _steer_from_link(
        {name: value for name, value in QUERY.items() if name != "corrupted"}, tmp_path / "sae"
    )
    next(b for b in at.button if b.label == "Compute it on Explore").click()
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["results"].get("eap") is not None


def test_a_link_without_method_or_budgets_finds_explores_default_run(tmp_path, monkeypatch):
    """A Steer link with the prompt, corrupted prompt, answer and foil but no method or budgets
    said no circuit was stored ("nor stored by this version") while Explore's default run of them
    was: Steer looks it up as Explore opened on that link runs it (the default method, the model's
    default budgets) and labels it."""
    from explore_session import LINK, explore_session, run_it
    from test_labels import _steer_from_link, _tiny_app_with_an_sae

    import circuitviz.ui.loaders as loaders
    from circuitviz.ui import steer

    _tiny_app_with_an_sae(tmp_path, monkeypatch)
    link = {name: value for name, value in LINK.items() if name != "budgets"}  # and no method
    explored = run_it(explore_session(link))  # Explore's defaults: stored under them
    assert not explored.exception, explored.exception
    loaders._REMEMBERED.clear()
    at = _steer_from_link(link, tmp_path / "sae")  # a new browser: no session, the link alone
    said = [c.value for c in at.caption]
    assert steer.NO_CIRCUIT not in said and not any(
        c.startswith("No circuit of this prompt") for c in said
    ), said
