"""A streamlit script for tests/test_browser_upset.py: the Paraphrases page's UpSet view
(``ui.paraphrase_view.shared_edges``, the real one) over candidate circuits given as JSON in
``UPSET_TEST_SETS`` ({candidate: [edge, ...]}), with no model, and the edges it returns to light
up in the graph printed below it."""

import json
import os
import types

import streamlit as st

from circuitviz.ui import bon, paraphrase_view

SETS = {name: set(edges) for name, edges in json.loads(os.environ["UPSET_TEST_SETS"]).items()}
bon.candidate_edge_sets = lambda *args, **kwargs: SETS  # given, not computed from a run
result = types.SimpleNamespace(
    model_id="none", method="bon", any_budget=False, details=types.SimpleNamespace(shared=[])
)
circuit = set().union(*SETS.values())  # the circuit drawn holds every edge
lit = paraphrase_view.shared_edges(None, result, 10, circuit)
st.markdown(f"lit up: {' '.join(sorted(lit)) if lit else 'nothing'}")
