"""A Steer link reopens the features its user chose to zero (``zero`` in the URL, as each
feature's label names it: ``L0/5``; ``state.Session.steer_features``): until 2026-12-06 the link
carried the prompt, answer and foil but not the features, so a shared Steer view opened with none
chosen. A feature no node of the circuit offers is named in one sentence and left out."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.ui.steer import feature_name, missing_features_sentence  # noqa: E402


def _steer(tmp_path, **query) -> AppTest:
    """Steer on the tiny model with its SAE from tmp_path/sae and three nodes typed (no circuit)."""
    from test_labels import PROMPT

    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {"prompt": PROMPT, "answer": " Mary", "foil": " John", **query}.items():
        at.query_params[name] = value
    at.switch_page("pages/steer.py").run()
    at.radio(key="steer.source").set_value("local folder").run()
    at.text_input(key="steer.folder").set_value(str(tmp_path / "sae")).run()
    at.text_input(key="steer.nodes").set_value("a0.h0, m0, a1.h1").run()
    assert not at.exception, at.exception
    return at


def test_a_steer_link_reopens_the_features_chosen_and_names_those_it_lacks(tmp_path, monkeypatch):
    from test_labels import _steer_setup

    _steer_setup(tmp_path, monkeypatch)
    at = _steer(tmp_path)
    picker = at.multiselect(key="steer.features")
    assert len(picker.options) >= 2 and picker.value == []
    picker.select(picker.options[1]).select(picker.options[0]).run()
    chosen = at.multiselect(key="steer.features").value
    assert len(chosen) == 2
    names = at.query_params["zero"].split(",")
    assert len(names) == 2 and all(name.startswith("L") and "/" in name for name in names)
    again = _steer(tmp_path, zero=at.query_params["zero"])  # the link in a new browser
    assert again.multiselect(key="steer.features").value == chosen
    assert not [i.value for i in again.info if "features to zero" in i.value]
    assert not again.button(key="steer.zero").disabled  # one press zeroes them
    # a feature no node offers, and text that is no feature: one sentence, the real one kept
    hostile = ["L99/1", "[x](https://example.com)"]
    lacking = _steer(tmp_path, zero=",".join([names[0], *hostile]))
    said = [i.value for i in lacking.info if "features to zero" in i.value]
    assert said == [missing_features_sentence(hostile)]
    assert "\\[x\\]" in said[0]  # the link's text escaped
    assert len(lacking.multiselect(key="steer.features").value) == 1
    assert lacking.query_params["zero"] == names[0]
    lacking.run()  # said once
    assert not [i.value for i in lacking.info if "features to zero" in i.value]


def test_a_feature_is_named_as_its_label_names_it():
    assert feature_name((6, 123)) == "L6/123"
    many = missing_features_sentence([f"L{n}/1" for n in range(8)])
    assert many.endswith("left out\\.") and "and 3 more" in many and "are not among" in many
    assert " is not among " in missing_features_sentence(["L1/1"])


def test_a_steer_link_reopens_the_nodes_typed_where_no_circuit_is(tmp_path, monkeypatch):
    """``nodes``: the Nodes box, where no circuit of the prompt is open (the example's own nodes,
    the default, stay out of the URL); a node the model lacks is named by the box's own sentence."""
    from test_labels import _steer_setup

    _steer_setup(tmp_path, monkeypatch)
    at = _steer(tmp_path)  # three nodes typed
    assert at.query_params["nodes"] == "a0.h0, m0, a1.h1"
    at.text_input(key="steer.nodes").set_value("a3.h0, m5, m9, m14").run()  # the default: unsaid
    assert "nodes" not in at.query_params
    linked = AppTest.from_file("../app.py", default_timeout=300)
    from test_labels import PROMPT

    for name, value in {"prompt": PROMPT, "answer": " Mary", "foil": " John", "nodes": "m0, zz9"}.items():
        linked.query_params[name] = value
    linked.switch_page("pages/steer.py").run()
    linked.radio(key="steer.source").set_value("local folder").run()
    linked.text_input(key="steer.folder").set_value(str(tmp_path / "sae")).run()
    assert not linked.exception, linked.exception
    assert linked.text_input(key="steer.nodes").value == "m0, zz9"
    assert any("'zz9' is not a node" in e.value.replace("\\", "") for e in linked.error), [
        e.value for e in linked.error
    ]
