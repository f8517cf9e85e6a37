"""Three figures of the Dataset page that did not say what they were (an audit in Chromium,
2026-12-06, on a batch of 3 prompts run from the page at budgets 20 and 100 and on the stored
arithmetic atlas): MIB's CPR and CMD over budgets that span 0.8 % of the edges (0.003 and 0.004
beside "CPR per prompt 0.381"), an NDF interval reaching -0.608, and the consensus's edges table
listing 50 of a consensus's 60 edges, unsaid."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from ioi_batch_folder import ioi_batch  # noqa: E402
from test_dataset_page import NAMES, _dataset  # noqa: E402

from circuitviz.batch import atlas  # noqa: E402
from circuitviz.ui import dataset as ui  # noqa: E402
from circuitviz.ui.dataset_curves import off_grid_sentence  # noqa: E402


def test_mib_areas_over_a_narrow_span_say_so_with_the_curve_s_mean_height():
    fractions = [20 / 10342, 100 / 10342]
    said = off_grid_sentence(fractions, 0.003, 0.0047)
    assert "here 0.19% to 0.97% (a width of 0.00774" in said
    assert "small by the width alone" in said
    assert f"stands {0.003 / (80 / 10342):.3f} high on average (CPR)" in said
    assert "one budget there is no area" in off_grid_sentence([0.01], 0.0, 0.0)


def test_an_ndf_interval_stays_within_0_and_1_and_nfs_is_left_as_it_is():
    band = {"budget": 20, "mean": 0.184, "low": -0.608, "high": 1.4}
    assert ui.within_range([band], "ndf") == [dict(band, low=0.0, high=1.0)]
    assert ui.within_range([band], "necessity") == [dict(band, low=0.0, high=1.0)]
    assert ui.within_range([band], "nfs") == [band]


def test_the_page_lists_every_consensus_edge_and_says_its_areas_span(tmp_path, monkeypatch):
    folder = ioi_batch(tmp_path, monkeypatch, NAMES, ["eap-ig"], {"ig_steps": 3}, [4, 10, 25, 60], 60)
    monkeypatch.setattr(ui, "EDGES_SHOWN", 2)  # fewer rows than the consensus holds
    at = _dataset(folder)
    assert not at.exception, at.exception
    batch = atlas.BatchTable.load(folder)
    label = batch.labels[0]
    scores = atlas.mib_scores(batch, label)
    assert off_grid_sentence(scores["fractions"], scores["cpr"], scores["cmd"]) in [
        c.value for c in at.caption
    ]
    budget = at.session_state["dataset.budget"]
    matrix = atlas.circuit_matrix(batch, label, budget)
    consensus = atlas.consensus_edges(matrix, 0.5)
    assert len(consensus) > 2
    edges = at.dataframe[1].value
    assert len(edges) == len(consensus) and edges["in consensus"].all()
    names = set(edges["edge"])
    assert all(batch.spec.edge_names[i] in names for i in consensus)
    held = int((atlas.edge_frequency(matrix) > 0).sum())
    assert any(
        c.value.startswith(
            f"The {len(consensus)} edges in the most prompts' circuits at budget {budget}, of the {held}"
        )
        for c in at.caption
    )
