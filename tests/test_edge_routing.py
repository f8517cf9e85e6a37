"""An edge is not drawn behind a node it does not join. In the layered layout a circuit's heads
share few columns (``packed_columns``), so an edge into the logits or up a column ran straight
through the boxes above its source: Compare's three IOI circuits on Gemma-3-270M (EAP-IG, EAP,
AtP* at budget 20, drawn over the union of their nodes) put a11.h3, a13.h3 and a17.h2 in one
column under the logits, and a13.h3 -> logits ran behind a17.h2, reading as a17.h2's own edge
(seen in Chromium, 2026-12-06). ``render.routing`` bends such an edge around the boxes, worked
out as vis-network draws its curves."""

from __future__ import annotations

import math

import pytest
import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec
from circuitviz.render.graph_html import FADED
from circuitviz.render.routing import edge_points, hidden_edges, route_around, via_point

GEMMA = GraphSpec(n_layers=18, n_heads=4)
# the union of Compare's three circuits (budget 20, IOI, Gemma-3-270M): a11.h2 and a11.h3 share a
# row, so the layout has two head columns and the logits sit over the second, a11.h3's
UNION = [
    "input->m3",
    "m3->a11.h3<v>",
    "m3->a11.h2<v>",
    "a11.h3->a13.h3<v>",
    "a11.h2->a15.h1<v>",
    "a13.h3->a17.h2<q>",
    "a13.h3->logits",
    "a15.h1->logits",
    "a17.h2->logits",
    "a11.h2->logits",
]


def _drawing(edges, **options):
    scores = torch.zeros(GEMMA.n_forward, GEMMA.n_backward, device="cpu")
    mask = GEMMA.mask_from_edge_names(edges)
    scores[mask] = 1.0
    return render.circuit_graph_html(GEMMA, scores, mask, **options)


def _active(graph):
    return [node["id"] for node in graph.nodes if node["color"]["background"] != FADED]


def test_an_edge_into_the_logits_is_not_drawn_behind_the_head_above_it():
    graph = _drawing(UNION).vis
    x = {node["id"]: node["x"] for node in graph.nodes}
    assert x["a13.h3"] == x["a17.h2"] == x["logits"]  # the layout the page drew: one column
    straight = [{**edge, "smooth": False} if edge["to"] == "logits" else edge for edge in graph.edges]
    assert ("a13.h3->logits", "a17.h2") in hidden_edges(graph.nodes, straight)  # as it was drawn
    assert hidden_edges(graph.nodes, graph.edges, _active(graph)) == []


@pytest.mark.parametrize(
    "options", [{}, {"show_faded": True}, {"words": True}], ids=["own", "faded", "words"]
)
def test_bent_edges_stay_inside_the_drawing(options):
    """A bent edge never leaves the drawing's bounds: the frame is fitted to them (``cvFit``), and
    a curve beside the nodes widens them (``VisGraph.frame``), so it is not cut off at a side."""
    graph = _drawing(UNION, **options).vis
    left, _, right, _ = graph.bounds()
    where = {node["id"]: (node["x"], node["y"]) for node in graph.nodes}
    for edge in graph.edges:
        points = edge_points(where[edge["from"]], where[edge["to"]], edge["smooth"])
        assert left <= points[:, 0].min() and points[:, 0].max() <= right, edge["id"]


def test_the_curve_is_vis_networks():
    """vis-network's via point: roundness 0 is the midpoint; curvedCW bends an upward edge to the
    left (x grows rightwards, y downwards), curvedCCW to the right."""
    start, end = (0.0, 0.0), (0.0, -100.0)
    assert via_point(start, end, {"type": "curvedCW", "roundness": 0.0}) == pytest.approx((0.0, -50.0))
    cw = via_point(start, end, {"type": "curvedCW", "roundness": 0.4})
    ccw = via_point(start, end, {"type": "curvedCCW", "roundness": 0.4})
    assert cw[0] < 0 < ccw[0] and math.isclose(cw[1], ccw[1])
    assert via_point(start, end, False) is None


def test_an_edge_that_crosses_no_box_is_left_as_it_was():
    nodes = [
        {"id": "a", "x": 0.0, "y": 0.0, "label": "a", "font": {"size": 22}},
        {"id": "b", "x": 300.0, "y": -300.0, "label": "b", "font": {"size": 22}},
        {"id": "c", "x": 0.0, "y": -300.0, "label": "c", "font": {"size": 22}},
        {"id": "d", "x": 0.0, "y": -150.0, "label": "d", "font": {"size": 22}},
    ]
    edges = [
        {"id": "a->b", "from": "a", "to": "b", "smooth": False},
        {"id": "a->c", "from": "a", "to": "c", "smooth": False},
    ]
    routed = route_around(nodes, edges)
    assert routed[0] is edges[0]
    assert routed[1]["smooth"] != False  # noqa: E712 - bent around d
    assert hidden_edges(nodes, routed) == []


@pytest.mark.parametrize("slug", ["ioi", "factual", "arithmetic", "multiple-choice", "gender-bias"])
def test_the_gallery_circuits_hide_fewer_edges(slug, monkeypatch):
    """The Gallery's stored circuits at budget 30: 12, 6, 7, 6 and 9 of their 22 to 30 edges ran
    behind a node they do not join; 5, 3, 0, 1 and 3 now (those no curve near the drawing clears,
    mostly edges up a column of several heads)."""
    from browser_page import gallery_result

    from circuitviz.render import graph_html

    def hidden() -> int:
        graph = render.result_graph_html(gallery_result(slug), 30).vis
        return len({edge for edge, _ in hidden_edges(graph.nodes, graph.edges, _active(graph))})

    now = hidden()
    monkeypatch.setattr(graph_html, "ROUTED_EDGES", 0)  # every edge as it was drawn before
    before = hidden()
    assert before > 0 and now <= before / 2, (before, now)
