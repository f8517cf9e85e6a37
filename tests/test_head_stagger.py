"""An edge out of a head is seen leaving it. In the layered layout a head with a head of the next
layer right above it (the same column) sent every edge upwards straight into that box: the gap
between the two boxes is shorter than a label, no curve vis-network draws from a box's centre
leaves it sideways within it, and a3.h1 -> logits read as a4.h1's own edge (Gemma-3-270M's
Explore circuits at budgets 20, 50 and 100 hid 11 edges so). Every other row's heads now stand
half a column left (``layout.HEAD_STAGGER``), so no head has one of the next row over it.

Checked on the page's own data: the nodes' places and the edges' curves the HTML holds, each
curve worked out as vis-network draws it (``routing.edge_points``)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec
from circuitviz.render import layout
from circuitviz.render.layout import packed_columns
from circuitviz.render.routing import hidden_edges
from circuitviz.render.vis import node_box, overlapping

GEMMA = GraphSpec(n_layers=18, n_heads=4)


def _page(drawing) -> tuple[list[dict], list[dict]]:
    """(nodes, edges) as the drawing's standalone page holds them (its vis DataSets)."""
    found = [
        json.loads(re.search(rf"{name} = new vis\.DataSet\((.*?)\);", drawing.html, re.S).group(1))
        for name in ("nodes", "edges")
    ]
    return found[0], found[1]


def _covered(nodes: list[dict], row_height: float) -> list[tuple[str, str]]:
    """(head, the head of the next row whose box stands over the middle of its top), for every
    such pair (y grows downwards: the next row is ``row_height`` less)."""
    heads = [node for node in nodes if re.fullmatch(r"a\d+\.h\d+", node["id"])]
    found = []
    for below in heads:
        left, _, right, _ = node_box(below)
        for above in heads:
            next_row = abs(below["y"] - row_height - above["y"]) < 1e-6
            if next_row and abs(above["x"] - below["x"]) < (right - left) / 2:
                found.append((below["id"], above["id"]))
    return found


# the Gallery's circuits (Gemma-3-270M): (example, budget, names in words) -> the edges out of a
# head that ran behind the head right above it (a14.h3 -> a16.h2 behind a15.h3, ...), with its head
SEEN = {
    ("gender-bias", 20, True): [("a9.h2->a14.h3<v>", "a12.h2"), ("a14.h3->a16.h2<v>", "a15.h3")],
    ("ioi", 100, False): [("a11.h3->a13.h3<q>", "a12.h3"), ("a11.h2->a15.h2<v>", "a12.h2")],
}


@pytest.mark.parametrize("slug, budget, words", list(SEEN), ids=["gender-20-words", "ioi-100-names"])
def test_an_edge_out_of_a_head_is_not_hidden_by_the_head_above_it(slug, budget, words, monkeypatch):
    from browser_page import gallery_result

    def page():
        drawing = render.result_graph_html(gallery_result(slug), budget, words=words)
        nodes, edges = _page(drawing)
        return _covered(nodes, drawing.grid[1]), hidden_edges(nodes, edges), nodes

    covered, hidden, nodes = page()
    assert covered == [] and overlapping(nodes) == []
    assert not set(SEEN[slug, budget, words]) & set(hidden), hidden
    monkeypatch.setattr(layout, "HEAD_STAGGER", 0.0)  # every row's heads in their columns, as before
    covered, hidden, _ = page()
    for edge, head in SEEN[slug, budget, words]:
        assert (edge.split("->")[0], head) in covered and (edge, head) in hidden


def test_no_head_of_a_gallery_circuit_has_a_head_right_above_it(monkeypatch):
    """The Gallery's five circuits at budgets 20, 50 and 100, names and names in words: no head
    under another (22 edges ran behind the head right above their own; 37 with names in words on
    one line), no two boxes overlapping, and fewer edges behind any box (``hidden_edges``: 24 and
    49 of 714 with the heads in columns, 11 and 31 now)."""
    from browser_page import gallery_result

    def drawn() -> tuple[int, int]:
        covered = hidden = 0
        for slug in ("ioi", "factual", "arithmetic", "multiple-choice", "gender-bias"):
            result = gallery_result(slug)
            for budget in (20, 50, 100):
                for words in (False, True):
                    drawing = render.result_graph_html(result, budget, words=words)
                    graph = drawing.vis
                    assert overlapping(graph.nodes) == []
                    covered += len(_covered(graph.nodes, drawing.grid[1]))
                    hidden += len({edge for edge, _ in hidden_edges(graph.nodes, graph.edges)})
        return covered, hidden

    covered, hidden = drawn()
    monkeypatch.setattr(layout, "HEAD_STAGGER", 0.0)
    covered_before, hidden_before = drawn()
    assert covered == 0 < covered_before
    assert hidden < hidden_before, (hidden_before, hidden)


def test_only_a_row_over_heads_in_its_columns_moves():
    """A row stands half a column left only where a head of it would stand right over one of the
    row below: a row over other columns, or over a row already moved, keeps its columns."""
    columns = packed_columns(GEMMA, ["input", "a3.h0", "a3.h3", "a4.h3", "a5.h0", "m5", "a6.h3", "logits"])
    assert columns.slot == {"a3.h0": 0, "a3.h3": 1, "a4.h3": 1, "a5.h0": 0, "a6.h3": 1}
    assert columns.shift == {3: 0.0, 4: layout.HEAD_STAGGER, 5: 0.0, 6: 0.0}


def test_every_head_drawn_keeps_its_column_in_a_brick_pattern():
    """With every head of the model drawn (``show_faded``) each head keeps its index's column, every
    other row's half a column left: a head of one row stands over the gap between two of the next."""
    scores = torch.ones(GEMMA.n_forward, GEMMA.n_backward, device="cpu")
    edges = ["input->a3.h1<v>", "a3.h1->a4.h1<q>", "a4.h1->logits"]
    drawing = render.circuit_graph_html(GEMMA, scores, GEMMA.mask_from_edge_names(edges), show_faded=True)
    column = drawing.grid[0]
    for node in drawing.vis.nodes:
        found = re.fullmatch(r"a(\d+)\.h(\d+)", node["id"])
        if found:
            shift = layout.HEAD_STAGGER if int(found.group(1)) % 2 else 0.0
            assert node["x"] == pytest.approx((int(found.group(2)) - shift) * column)
    assert _covered(drawing.vis.nodes, drawing.grid[1]) == [] and overlapping(drawing.vis.nodes) == []
