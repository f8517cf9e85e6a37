"""The drawing of a circuit over token positions, as a reader sees it: what its file says of
itself, and where its labels sit against its links (``render.attribution_graph``)."""

from __future__ import annotations

import html
import json
import re

from circuitviz.positions.view import AttributionGraph, GraphLink, GraphNode
from circuitviz.render.attribution_graph import attribution_graph_html

OPENED = "Opened at 100 units, the most faithful circuit of at most 40 nodes (36 nodes, NDF 0.30): none that small reaches NDF 0.8; the smallest that does has 96 nodes (at 500 units, on the slider)."


def page_nodes(page: str) -> list[dict]:
    """The vis-network nodes a standalone page draws."""
    return json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", page, re.S).group(1))


def column_graph() -> AttributionGraph:
    """The Eiffel Tower's shape on Gemma-3-270M: an embedding feeding MLPs straight up its column
    (input@2 -> m0@2 -> m3@2 and input@2 -> m3@2), m3 feeding a head at the last position."""
    tokens = ["<bos>", "The", " Eiffel", " Tower", " of"]
    nodes = [
        GraphNode("input@2", "input", "embedding", -1, 2, influence=1.0),
        GraphNode("m0@2", "m0", "mlp", 0, 2, influence=0.3),
        GraphNode("m3@2", "m3", "mlp", 3, 2, influence=0.8),
        GraphNode("a5.h1@4", "a5.h1", "head", 5, 4, head=1, influence=0.8),
        GraphNode("logits@4", "logits", "logit", 6, 4),
    ]
    links = [
        GraphLink("input@2", "m0@2", 0.3, "mlp"),
        GraphLink("m0@2", "m3@2", 0.3, "mlp"),
        GraphLink("input@2", "m3@2", 0.7, "mlp"),
        GraphLink("m3@2", "a5.h1@4", 0.8, "v"),
        GraphLink("a5.h1@4", "logits@4", 0.8, "logits"),
    ]
    return AttributionGraph(tokens, nodes, links, n_layers=6, title="tiny · eap-ig over positions · 5 units")


def test_the_downloaded_page_leaves_out_why_the_view_opened_there():
    """The position view's "Graph (HTML)" download carried "Opened at 100 units ... (on the
    slider)": the page's opening state, in a file that opens at nothing and has no slider. The
    frame in the app says it; the file does not."""
    drawing = attribution_graph_html(column_graph(), view_notes=[OPENED])
    assert drawing.vis.notes[0] == OPENED and OPENED in drawing.notes  # the app's frame says why
    assert "Opened at" not in drawing.html and html.escape(OPENED) not in drawing.html
    assert "on the slider" not in drawing.html
    assert "5 units" in drawing.html  # the title says what the file shows


def test_the_app_frame_and_the_file_differ_only_by_the_view_notes():
    graph = column_graph()
    plain = attribution_graph_html(graph)
    viewed = attribution_graph_html(graph, view_notes=[OPENED])
    assert viewed.html == plain.html
    assert viewed.vis.notes == [OPENED, *plain.vis.notes]


def test_only_a_frame_whose_click_opens_a_card_says_so():
    """The downloaded page's key said "Click a node for its card." of a click that does nothing
    there; the app's frame with cards says it (``legend_block(cards=True)``), the file does not."""
    from circuitviz.render.vis import CARD_SENTENCE, legend_block

    drawing = attribution_graph_html(column_graph())
    assert CARD_SENTENCE not in drawing.html
    assert CARD_SENTENCE not in legend_block(drawing.vis)
    assert html.escape(CARD_SENTENCE) in legend_block(drawing.vis, cards=True)
