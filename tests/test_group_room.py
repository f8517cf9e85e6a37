"""A group's name fits its column: a group (supernode) is drawn at its lowest member's place with
its name (up to ``GROUP_ROOM`` characters), and since a small circuit's columns are only as wide
as its labels (fd0df04) a name such as 'middle writers' ran over the head beside it: Gemma-3-270M's
layout has columns 6 characters wide ('a17.h3') when no captions are drawn."""

from __future__ import annotations

import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec, top_n
from circuitviz.render.groups import propose_groups
from circuitviz.render.vis import overlapping

GEMMA = GraphSpec(n_layers=18, n_heads=4)
SMOLLM = GraphSpec(n_layers=30, n_heads=9)


def test_a_group_beside_a_head_does_not_cover_it():
    edges = ["input->a5.h0<v>", "input->a5.h1<v>", "a5.h0->a9.h0<v>", "a9.h0->logits", "a5.h1->logits"]
    scores = torch.ones(GEMMA.n_forward, GEMMA.n_backward, device="cpu")
    mask = GEMMA.mask_from_edge_names(edges)
    drawing = render.circuit_graph_html(GEMMA, scores, mask, groups={"middle writers": ["a5.h0", "a9.h0"]})
    ids = {node["id"] for node in drawing.vis.nodes}
    assert "group:middle writers" in ids and "a5.h1" in ids
    assert overlapping(drawing.vis.nodes) == []


def test_proposed_groups_never_overlap():
    """The proposed grouping (demo mode draws it) of random circuits of 5 to 40 edges on both
    embedded models' graphs, with and without captions: no two boxes overlap (Gemma's 40-edge
    circuit of seed 1 drew 'late writers' over 'late MLPs')."""
    for spec in (GEMMA, SMOLLM):
        for edges in (5, 10, 20, 40):
            for seed in range(6):
                generator = torch.Generator(device="cpu").manual_seed(seed)
                scores = torch.randn(spec.n_forward, spec.n_backward, generator=generator, device="cpu")
                scores = scores * spec.edge_mask
                mask = top_n(spec, scores, edges)
                plain = render.circuit_graph_html(spec, scores, mask)
                groups = propose_groups(plain.edges, spec.n_layers)
                for captions in (None, {name: "↓' Mary'" for name in plain.nodes}):
                    drawing = render.circuit_graph_html(spec, scores, mask, groups=groups, captions=captions)
                    assert overlapping(drawing.vis.nodes) == [], (spec.n_heads, edges, seed)
