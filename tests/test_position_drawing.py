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


INSIDE = ("box", "circle", "ellipse", "text")  # shapes vis-network writes the label inside


def name_region(node: dict) -> tuple[float, float, float, float]:
    """Where a node's name is written (layout units): inside its box, or under a dot-like shape."""
    from circuitviz.render.vis import CHAR_WIDTH, LINE_HEIGHT, node_box

    left, top, right, bottom = node_box(node)
    if node.get("shape", "box") in INSIDE:
        lines = str(node.get("label", "")).split("\n")
        font = float(node["font"]["size"])
        half_w = max(len(line) for line in lines) * font * CHAR_WIDTH / 2
        half_h = len(lines) * font * LINE_HEIGHT / 2
        return node["x"] - half_w, node["y"] - half_h, node["x"] + half_w, node["y"] + half_h
    return left, node["y"] + float(node.get("size", 10)), right, bottom


def shape_region(node: dict) -> tuple[float, float, float, float]:
    """The node's drawn shape (a link is drawn up to its border, not inside it)."""
    from circuitviz.render.vis import node_box

    if node.get("shape", "box") in INSIDE:
        return node_box(node)
    size = float(node.get("size", 10))
    return node["x"] - size, node["y"] - size, node["x"] + size, node["y"] + size


def _inside(points, box, shrink: float = 1.0):
    left, top, right, bottom = box
    return (
        (points[:, 0] > left + shrink)
        & (points[:, 0] < right - shrink)
        & (points[:, 1] > top + shrink)
        & (points[:, 1] < bottom - shrink)
    )


def names_crossed(vis) -> list[tuple[str, str]]:
    """(link, node) for each drawn link that runs through a node's name (its own nodes' too: a
    name under a dot is outside the shape the link ends at), or behind another node."""
    from circuitviz.render.routing import edge_points

    where = {node["id"]: node for node in vis.nodes}
    found = []
    for edge in vis.edges:
        ends = where[edge["from"]], where[edge["to"]]
        points = edge_points(*[(n["x"], n["y"]) for n in ends], edge.get("smooth"), samples=400)
        drawn = ~(_inside(points, shape_region(ends[0]), 0.0) | _inside(points, shape_region(ends[1]), 0.0))
        points = points[drawn]
        for node in vis.nodes:
            own = node["id"] in (edge["from"], edge["to"])
            from circuitviz.render.vis import node_box

            region = name_region(node) if own or node.get("shape") == "text" else node_box(node)
            if _inside(points, region).any():
                found.append((edge["id"], node["id"]))
    return found


def cell_graph() -> AttributionGraph:
    """A busier column: a cell of two heads and an MLP at layer 1, each feeding a head at layer 4
    of the same position (the MLP from the right, below), the embedding feeding all three."""
    tokens = ["<bos>", " a", " b"]
    nodes = [GraphNode("input@1", "input", "embedding", -1, 1, influence=1.0)]
    links = []
    for head in (0, 3):
        nodes.append(GraphNode(f"a1.h{head}@1", f"a1.h{head}", "head", 1, 1, head=head, influence=0.2))
    nodes.append(GraphNode("m1@1", "m1", "mlp", 1, 1, influence=0.5))
    nodes.append(GraphNode("a4.h2@1", "a4.h2", "head", 4, 1, head=2, influence=0.9))
    nodes.append(GraphNode("logits@2", "logits", "logit", 5, 2))
    for node in ("a1.h0@1", "a1.h3@1", "m1@1"):
        links.append(GraphLink("input@1", node, 0.3, "v" if node != "m1@1" else "mlp"))
        links.append(GraphLink(node, "a4.h2@1", 0.3, "q"))
    links.append(GraphLink("a1.h0@1", "m1@1", 0.1, "mlp"))
    links.append(GraphLink("a4.h2@1", "logits@2", 0.9, "logits"))
    return AttributionGraph(tokens, nodes, links, n_layers=5)


def test_no_link_is_drawn_through_a_name():
    """The embedding's link into its MLP ran up through the name "MLP" written under the square
    (the Eiffel Tower's EAP-IG circuit over positions, Gemma-3-270M), as every link into a node
    from below did, and the link past an MLP in between ran through that MLP and its name. Names
    are written inside the nodes (a link ends at the border) and a link is bent round the nodes
    it does not join."""
    for graph in (column_graph(), cell_graph()):
        for frame in (540, 1000, 2000):
            vis = attribution_graph_html(graph, frame_width=frame).vis
            assert names_crossed(vis) == []
            heads = [n for n in vis.nodes if "@" in n["id"] and n["id"].split("@")[0][:1] in "am"]
            assert heads and all(n["shape"] in INSIDE and n["label"] for n in heads)


def test_a_nodes_size_still_says_its_contribution_and_no_two_overlap():
    from circuitviz.render.vis import node_box, overlapping

    for graph in (column_graph(), cell_graph()):
        vis = attribution_graph_html(graph).vis
        assert overlapping(vis.nodes) == []
        box = {n["id"]: node_box(n) for n in vis.nodes}
        width = {name: right - left for name, (left, _, right, _) in box.items()}
        influence = {n.id: abs(n.influence) for n in graph.nodes if n.kind in ("head", "mlp")}
        strongest, weakest = max(influence, key=influence.get), min(influence, key=influence.get)
        assert width[strongest] > width[weakest]
        assert all(width[name] >= width[weakest] for name in influence)


def test_a_pale_links_long_detour_is_drawn_straight_a_bold_ones_kept():
    """Bent round a busy column, the factual prompt's pale links looped across the frame (179
    links at 150 units): a pale link whose bend strays more than two slots from its straight
    path is drawn straight (behind the nodes, never over a name); a bold one keeps its bend."""
    from circuitviz.render.attribution_graph import MAX_STRAY, near_bends

    nodes = [{"id": "a", "x": 0.0, "y": 1000.0}, {"id": "b", "x": 0.0, "y": 0.0}]
    wide = {"type": "curvedCW", "roundness": 1.0}  # its via point 1,000 units aside
    near = {"type": "curvedCW", "roundness": 0.05}
    edges = [
        {"id": "pale wide", "from": "a", "to": "b", "smooth": wide},
        {"id": "bold wide", "from": "a", "to": "b", "smooth": wide},
        {"id": "pale near", "from": "a", "to": "b", "smooth": near},
    ]
    drawn = {edge["id"]: edge["smooth"] for edge in near_bends(nodes, edges, {"bold wide"})}
    assert drawn == {"pale wide": False, "bold wide": wide, "pale near": near}
    assert MAX_STRAY < 500  # the wide bend strays about 500 units


def test_the_file_names_the_task_its_ndf_was_measured_on():
    """The downloaded page's title said "NDF 0.30" of a task it never named: the foil and the
    corrupted prompt were on the page above the figures only. The file says them (escaped:
    the corrupted prompt is the user's text); the app's frame, under that text, does not."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.render import task_note

    hostile = "The <script>alert(1)</script> is located in the city of"
    task = PromptTask(clean="The Eiffel Tower is located in the city of", corrupted=hostile,
                      answer=" Paris", foils=(" Rome",))  # fmt: skip
    note = task_note(task)
    assert (
        note
        == f"The metric: the logit difference of ' Paris' over ' Rome'; the corrupted prompt: {hostile!r}."
    )
    drawing = attribution_graph_html(column_graph(), file_notes=[note])
    assert html.escape(note) in drawing.html and "<script>alert" not in drawing.html
    assert note not in drawing.vis.notes
    plain = PromptTask(clean="The Eiffel Tower is in", corrupted="", answer=" Paris", metric="logprob")
    assert task_note(plain) == "The metric: log p(' Paris')."


def test_the_edge_graphs_file_names_its_task_and_the_apps_frame_does_not_repeat_it():
    """The edge view's downloaded page gave 'NDF 0.22' in its title with no word of the foil or the
    corrupted prompt it was measured against (the position view's files name them since
    2026-12-07); the app shows the task above the frame, so the frame itself leaves it out."""
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.entry.api import discover
    from circuitviz.render import result_graph_html, task_note

    result = discover(tiny_model("gpt2"), IOI_TASK, "eap", {}, budgets=[5, 10])[0]
    drawing = result_graph_html(result, 10)
    note = task_note(result.task)
    assert note.startswith("The metric: the logit difference of ' Mary' over ' John'; the corrupted prompt:")
    assert html.escape(note, quote=True) in drawing.html or note.replace("'", "&#x27;") in drawing.html
    assert note not in drawing.vis.notes
