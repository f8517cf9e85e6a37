"""Shared-subcircuit analysis against brute-force set arithmetic on hand-built and random masks."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitviz.core.graph import GraphSpec
from circuitviz.query.overlap import (
    common_edges,
    intersection_size,
    jaccard,
    reference_overlap,
    shared_subcircuit,
    summary_line,
    upset_data,
)

SPEC = GraphSpec(n_layers=2, n_heads=2)


def mask_of(names):
    return SPEC.mask_from_edge_names(names)


A = mask_of(["input->a0.h0<q>", "input->m0", "m0->logits", "a1.h0->logits"])
B = mask_of(["input->a0.h0<q>", "input->m0", "m0->logits", "input->a1.h1<k>"])
C = mask_of(["input->a0.h0<q>", "a0.h1->m1", "m1->logits", "input->m0"])


def test_common_edges_and_jaccard_by_hand():
    assert SPEC.edge_names_of(common_edges([A, B, C])) == ["input->a0.h0<q>", "input->m0"]
    assert jaccard(A, B) == pytest.approx(3 / 5)
    assert jaccard(A, A) == 1.0
    empty = torch.zeros_like(A)
    assert jaccard(empty, empty) == 1.0
    assert jaccard(A, empty) == 0.0


def test_upset_counts_edges_by_exact_subset():
    data = {tuple(entry["members"]): entry["size"] for entry in upset_data([A, B, C])}
    assert data == {(0, 1, 2): 2, (0, 1): 1, (0,): 1, (1,): 1, (2,): 2}
    assert intersection_size([A, B, C], [0, 1]) == 3  # inclusive: the two common to all, and m0->logits


def _brute_force(sets):
    union = set().union(*sets)
    counts = {}
    for edge in union:
        members = tuple(i for i, s in enumerate(sets) if edge in s)
        counts[members] = counts.get(members, 0) + 1
    return counts


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.booleans(), min_size=SPEC.n_edges, max_size=SPEC.n_edges), min_size=1, max_size=5)
)
def test_upset_matches_brute_force(rows):
    masks = []
    for row in rows:
        mask = torch.zeros(SPEC.n_forward, SPEC.n_backward, dtype=torch.bool)
        mask[SPEC.edge_index] = torch.tensor(row)
        masks.append(mask)
    sets = [set(SPEC.edge_names_of(mask)) for mask in masks]
    data = upset_data(masks)
    assert {tuple(e["members"]): e["size"] for e in data} == _brute_force(sets)
    assert sum(e["size"] for e in data) == len(set().union(*sets))
    assert [e["size"] for e in data] == sorted((e["size"] for e in data), reverse=True)
    for members in itertools.combinations(range(len(masks)), min(2, len(masks))):
        assert intersection_size(masks, members) == len(set.intersection(*(sets[i] for i in members)))


def test_reference_overlap_counts():
    overlap = reference_overlap(A, C)
    assert overlap == {
        "circuit_edges": 4,
        "reference_edges": 4,
        "shared": 2,
        "jaccard": pytest.approx(2 / 6),
        "precision": 0.5,
        "recall": 0.5,
    }
    empty = torch.zeros_like(A)
    assert reference_overlap(empty, empty)["precision"] == 0.0


def test_shared_subcircuit_summary_with_reference():
    data = shared_subcircuit(SPEC, [A, B, C], winner=1, reference=C)
    assert data["set_sizes"] == [4, 4, 4]
    assert data["n_common"] == 2
    assert data["common_edges"] == ["input->a0.h0<q>", "input->m0"]
    assert data["jaccard_with_winner"] == [pytest.approx(0.6), 1.0, pytest.approx(2 / 6)]
    assert data["reference"]["winner"]["shared"] == 2
    assert data["reference"]["candidates"][2]["jaccard"] == 1.0
    assert data["reference"]["common"]["shared"] == 2
    assert data["reference"]["common_in_reference"] == ["input->a0.h0<q>", "input->m0"]
    line = summary_line(data)
    assert "2 edges common to all 3 candidates" in line and "reference circuit (4 edges)" in line


def test_masks_of_different_graphs_are_refused():
    other = torch.zeros(3, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="different shapes"):
        common_edges([A, other])
    with pytest.raises(ValueError, match="at least one"):
        upset_data([])
