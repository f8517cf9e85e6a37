"""The Steer page opened from a link naming a method the app does not have: it said only "No circuit
of this prompt is open" and its "Compute it on Explore" carried the name on, guessing silently. It
says so in one sentence, names where to pick a method, and labels the default method's circuit."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")


def test_a_steer_link_with_an_unknown_method_says_so_and_uses_the_default(tmp_path, monkeypatch):
    from explore_session import QUERY, explore_session, run_it
    from test_labels import _steer_from_link, _tiny_app_with_an_sae

    import circuitviz.ui.loaders as loaders
    from circuitviz.methods import available_methods, default_method

    _tiny_app_with_an_sae(tmp_path, monkeypatch)
    default = default_method(list(available_methods()))
    explored = run_it(explore_session({**QUERY, "method": default}))  # the default's circuit, stored
    assert not explored.exception, explored.exception
    loaders._REMEMBERED.clear()
    at = _steer_from_link({**QUERY, "method": "nonsense<b>"}, tmp_path / "sae")
    said = [w.value.replace("\\", "") for w in at.warning if "does not have" in w.value]
    label = available_methods()[default].label
    assert said == [
        "The link names a method this app does not have ('nonsense<b>'): Steer looks for the circuit "
        f"of {label} instead; to label another method's circuit, pick it in Explore's method box (it "
        "lists every method) and come back."
    ]
    assert at.query_params["method"] in (default, [default])  # the address holds what is used
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any(c.startswith("The ") and "nodes of the circuit at budget" in c for c in captions), captions
    assert any(label in c for c in captions)
    at.run()  # a rerun: said once, when the method was replaced
    assert not any("does not have" in w.value for w in at.warning)


def test_a_steer_link_with_a_known_method_says_nothing_of_it(tmp_path, monkeypatch):
    from explore_session import QUERY
    from test_labels import _steer_from_link, _tiny_app_with_an_sae

    _tiny_app_with_an_sae(tmp_path, monkeypatch)
    at = _steer_from_link(QUERY, tmp_path / "sae")
    assert not any("does not have" in w.value for w in at.warning)
    assert at.query_params["method"] in ("eap", ["eap"])
