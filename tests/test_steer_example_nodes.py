"""Steer with no circuit open labels the Nodes box's own example nodes (a3.h0, m5, m9, m14) and
tabled their features as though they were a circuit's: one line above the table says they are an
example, and goes once the box holds the user's own nodes."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

EXAMPLE_LINE = "Example nodes (the Nodes box's own), not a circuit's"


def test_the_example_nodes_table_says_it_is_an_example(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from test_labels import _steer_folder_inputs, _steer_setup

    from circuitviz.ui import state

    _steer_setup(tmp_path, monkeypatch)
    # the tiny model's own nodes as the box's example (Gemma's a3.h0 ... m14 are past its 2 layers)
    monkeypatch.setattr(state.Session.steer_nodes, "default", "a0.h0, m1")
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.switch_page("pages/steer.py").run()
    _steer_folder_inputs(at, tmp_path)
    assert not at.exception, at.exception
    assert at.table, "the features' table"
    said = [c.value for c in at.caption if c.value.startswith(EXAMPLE_LINE)]
    assert said == [f"{EXAMPLE_LINE}: type yours, or compute the circuit above."]
    at.text_input(key="steer.nodes").set_value("a0.h0, m0").run()  # the user's own nodes
    assert not at.exception, at.exception
    assert at.table and not [c for c in at.caption if c.value.startswith(EXAMPLE_LINE)]
