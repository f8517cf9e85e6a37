"""What a drawing's key and canvas say, read as a user reads them: the key's sentence on what is
under a name says it once (it read "Under a name: under each name: ..." on the page and in the
Graph HTML)."""

from __future__ import annotations

import math
import re

import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec
from circuitviz.labels.captions import CAPTION_KEY, LENS_CAPTION_KEY

SPEC = GraphSpec(n_layers=3, n_heads=2)


def _scores(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(SPEC.n_forward, SPEC.n_backward, generator=generator, device="cpu") * SPEC.edge_mask


def _under_a_name(text: str) -> list[str]:
    return re.findall(r"under (?:a|each) name", text, flags=re.I)


def test_the_key_says_what_is_under_a_name_once():
    from circuitviz.ui.result_view import SAE_KEY

    mask = SPEC.mask_from_edge_names(["input->a0.h1<q>", "a0.h1->m1", "m1->logits"])
    for key in (CAPTION_KEY, LENS_CAPTION_KEY, SAE_KEY):
        drawing = render.circuit_graph_html(
            SPEC, _scores(), mask, captions={"a0.h1": "+2", "m1": "↑' Mary'"}, caption_key=key
        )
        more = drawing.vis.legend_more
        assert len(_under_a_name(more)) == 1, more
        assert key[:1].upper() + key[1:] in more  # its sentence with a capital, as the key's others
        assert not re.search(r"under (a|each) name:\s*under", drawing.html, flags=re.I)  # the download


def test_the_position_graphs_key_says_nothing_under_a_name():
    from test_positions import SPEC as POSITION_SPEC
    from test_positions import _circuit

    from circuitviz.positions.view import from_position_circuit
    from circuitviz.render.attribution_graph import attribution_graph_html

    scores, mask = _circuit()
    graph = from_position_circuit(POSITION_SPEC, scores, mask, ["a", "b", "c", "d"], prompt="a b c d")
    # nothing is written under a name over positions (names are inside the nodes, captions in the
    # hover): the key said "Under a name: ↑/↓ ..." of captions no canvas drew
    more = attribution_graph_html(graph).vis.legend_more
    assert not _under_a_name(more) and "hover says what it does" not in more, more
    graph.nodes[1].caption = "raises ' Mary' over ' John' by 1.2"
    more = attribution_graph_html(graph).vis.legend_more
    assert not _under_a_name(more) and more.count("A node's hover says what it does.") == 1, more


VIS_SELECTED = "#d2e5ff"  # vis-network's fill of a selected or hovered node that sets none


def contrast(first: str, second: str) -> float:
    """WCAG's contrast ratio of two '#rrggbb' colours, worked out here (not the module's own)."""

    def luminance(colour: str) -> float:
        r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_a_selected_or_hovered_nodes_label_stays_readable():
    """A clicked or pinned node is drawn selected: 'logits' was white on vis-network's pale blue
    (1.3:1). Every node's label, on its selected and its hovered fill, reads at 4.5:1 at least."""
    from circuitviz.render.groups import grouped

    mask = SPEC.mask_from_edge_names(["input->a0.h1<q>", "a0.h1->m1", "m1->logits", "input->m0"])
    drawing = render.circuit_graph_html(SPEC, _scores(), mask, show_faded=True)
    graphs = [drawing.vis, grouped(drawing.vis, {"g": ["a0.h1", "m0"]})]
    for graph in graphs:
        for node in graph.to_data()["nodes"]:
            if "background" not in node.get("color", {}):
                continue
            label = node.get("font", {}).get("color", "#343434")
            for state in ("highlight", "hover"):
                fill = node["color"].get(state, {}).get("background", VIS_SELECTED)
                assert contrast(label, fill) >= 4.5, (node["id"], state, label, fill)
    logits = next(n for n in drawing.vis.to_data()["nodes"] if n["id"] == "logits")
    assert logits["color"]["highlight"]["background"] != logits["color"]["background"]  # still shows selected


def test_nodes_whose_every_edge_is_left_out_are_counted_and_named():
    """At budget 10,342 the drawing keeps the 1,500 strongest edges, and heads such as a14.h0,
    whose edges were all weaker, vanished with no word: the note now counts and names them."""
    scores = _scores(3)
    drawing = render.circuit_graph_html(SPEC, scores, SPEC.edge_mask, max_edges=2)
    every = {e.source for e in render.circuit_edges(SPEC, scores, SPEC.edge_mask)}
    every |= {e.target for e in render.circuit_edges(SPEC, scores, SPEC.edge_mask)}
    drawn = {node["id"] for node in drawing.vis.nodes}
    unseen = [name for name in SPEC.node_names if name in every - drawn]
    assert unseen  # two edges cannot reach every node of this graph
    (note,) = [n for n in drawing.notes if "weaker ones are left out" in n]
    assert f"{len(unseen)} nodes of the circuit whose every edge is among them are not drawn" in note, note
    assert all(name in note for name in unseen[:12])
    whole = render.circuit_graph_html(SPEC, scores, SPEC.edge_mask)  # every edge drawn: no such clause
    assert not any("whose every edge" in n for n in whole.notes)
    faded = render.circuit_graph_html(SPEC, scores, SPEC.edge_mask, max_edges=2, show_faded=True)
    assert any("are drawn grey, as if outside it" in n for n in faded.notes)


def test_the_position_graphs_key_names_only_the_inputs_its_links_feed():
    """ACC++'s signals on Signals feed queries and keys alone, and the key listed the value and
    MLP-input colours too, drawn nowhere; an imported graph's links feed no input we can name, and
    its key said "link colour = the input it feeds" before five colours none of its links has."""
    from circuitviz.positions.view import AttributionGraph, GraphLink, GraphNode
    from circuitviz.render.attribution_graph import attribution_graph_html

    nodes = [
        GraphNode("E_0_0", "emb", "input", -1, 0, influence=1.0),
        GraphNode("a0.h0@1", "a0.h0", "head", 0, 1, head=0, influence=1.0),
        GraphNode("logit", "logit", "logits", 1, 1, influence=1.0),
    ]

    def key(kinds: tuple[str, str]) -> str:
        links = [GraphLink("E_0_0", "a0.h0@1", 1.0, kinds[0]), GraphLink("a0.h0@1", "logit", 0.5, kinds[1])]
        graph = AttributionGraph(tokens=["a", "b"], nodes=nodes, links=links, n_layers=1, title="t")
        # both drawn in colour, as Signals draws one decision's signals (a grey link is not keyed)
        return attribution_graph_html(
            graph, highlight={(link.source, link.target) for link in links}
        ).vis.legend

    signals = key(("q", "k"))
    assert "query" in signals and "key" in signals and "value" not in signals and "MLP input" not in signals
    imported = key(("link", "link"))
    assert "the input it feeds" not in imported and "query" not in imported, imported


def test_the_position_graphs_key_names_only_the_colours_it_draws():
    """A link off the strongest paths is drawn grey whatever input it feeds, and the key keyed its
    colour anyway: Explore's IOI view over positions (EAP-IG, 20 units, Gemma-3-270M) showed a
    query swatch beside a graph whose only query links were grey (Chromium, 2026-12-07)."""
    from circuitviz.positions.view import AttributionGraph, GraphLink, GraphNode
    from circuitviz.render.attribution_graph import attribution_graph_html
    from circuitviz.render.graph_html import FADED

    nodes = [
        GraphNode("E_0_0", "emb", "input", -1, 0, influence=1.0),
        GraphNode("a0.h0@1", "a0.h0", "head", 0, 1, head=0, influence=1.0),
        GraphNode("logit", "logit", "logits", 1, 1, influence=1.0),
    ]
    links = [GraphLink("E_0_0", "a0.h0@1", 1.0, "v"), GraphLink("a0.h0@1", "logit", 0.5, "logits")]
    weak = GraphLink("E_0_0", "logit", 0.1, "q")  # no head between: a pale link beside the path
    graph = AttributionGraph(tokens=["a", "b"], nodes=nodes, links=[*links, weak], n_layers=1, title="t")
    drawing = attribution_graph_html(graph, highlight={("E_0_0", "a0.h0@1"), ("a0.h0@1", "logit")})
    colours = {edge["color"]["color"] for edge in drawing.vis.edges}
    assert FADED in colours  # the query link is drawn, grey
    assert "value" in drawing.vis.legend and "logits" in drawing.vis.legend
    assert "query" not in drawing.vis.legend, drawing.vis.legend


def test_the_edge_graphs_key_names_only_the_colours_it_draws():
    """The circuit graph keyed all five input colours whatever its edges feed: Explore's 7-edge
    IOI circuit of EAP-IG (Gemma-3-270M, budget 20) showed the key input's green swatch, and none
    of its edges feeds a key (Chromium, 2026-12-07). A grey edge (outside the highlight) is not
    keyed either."""
    mask = SPEC.mask_from_edge_names(["input->a0.h1<q>", "a0.h1->m1", "m1->logits"])

    def swatches(legend: str) -> set[str]:
        return set(re.findall(r"</span>([^<]+)</span>", legend))

    drawing = render.circuit_graph_html(SPEC, _scores(), mask)
    assert swatches(drawing.vis.legend) == {"query", "MLP input", "logits"}, drawing.vis.legend
    lit = render.circuit_graph_html(SPEC, _scores(), mask, highlight={"m1->logits"})
    assert swatches(lit.vis.legend) == {"logits"}, lit.vis.legend
    colour = render.circuit_graph_html(SPEC, _scores(), mask, highlight={"m1->logits"}, others="colour")
    assert swatches(colour.vis.legend) == {"query", "MLP input", "logits"}, colour.vis.legend


def test_the_position_graphs_key_line_says_what_a_dash_is():
    """The graph over positions (Explore with "positions" ticked) dashes the links that work
    against the answer and said so only on the key's hover; its key line says so now."""
    from circuitviz.positions.view import AttributionGraph, GraphLink, GraphNode
    from circuitviz.render.attribution_graph import attribution_graph_html

    nodes = [
        GraphNode("E_0_0", "emb", "input", -1, 0, influence=1.0),
        GraphNode("a0.h0@1", "a0.h0", "head", 0, 1, head=0, influence=1.0),
        GraphNode("logit", "logit", "logits", 1, 1, influence=1.0),
    ]
    links = [GraphLink("E_0_0", "a0.h0@1", -1.0, "v"), GraphLink("a0.h0@1", "logit", 0.5, "logits")]
    graph = AttributionGraph(tokens=["a", "b"], nodes=nodes, links=links, n_layers=1, title="t")
    assert "dashed: works against the answer" in attribution_graph_html(graph).vis.legend
    own = attribution_graph_html(graph, estimates_metric=False).vis.legend
    assert "dashed: a negative score" in own and "against the answer" not in own


def _one_position_circuit(estimates_metric: bool):
    """One circuit drawn both ways: the edge graph of its scores and the graph over its one token
    position, with the edges of either sign (the same units, so the same dashes are due)."""
    from circuitviz.positions.view import from_position_circuit
    from circuitviz.render.attribution_graph import attribution_graph_html

    names = ["input->a0.h1<q>", "a0.h1->m1", "m1->a2.h0<v>", "a2.h0->logits", "input->m1", "m1->logits"]
    values = [0.5, -2.0, 1.0, -4.0, 0.3, 1.5]
    scores = torch.zeros(SPEC.n_forward, SPEC.n_backward, device="cpu")
    mask = torch.zeros(SPEC.n_forward, SPEC.n_backward, dtype=torch.bool, device="cpu")
    forward, backward = SPEC.edge_index
    for name, value in zip(names, values):
        index = SPEC.edge_names.index(name)
        scores[forward[index], backward[index]] = value
        mask[forward[index], backward[index]] = True
    edges = render.circuit_graph_html(SPEC, scores, mask, estimates_metric=estimates_metric)
    graph = from_position_circuit(SPEC, scores[..., None], mask[..., None], ["a"])
    if not estimates_metric:  # a method's own scores are drawn as they are, not as a rise of the metric
        import dataclasses

        links = [dataclasses.replace(link, weight=-link.weight) for link in graph.links]
        graph = dataclasses.replace(graph, links=links)
    positions = attribution_graph_html(graph, estimates_metric=estimates_metric)
    return dict(zip(names, values)), edges, positions


def _dashed_units(drawing, positions: bool) -> set[str]:
    if not positions:
        return {edge["id"] for edge in drawing.vis.edges if edge["dashes"]}
    by_index = {int(edge["id"].rsplit("#", 1)[1]): edge for edge in drawing.vis.edges}
    return {drawing.edges[i].name.removesuffix("@0") for i, edge in by_index.items() if edge["dashes"]}


def test_a_dash_means_the_same_in_the_edge_graph_and_the_graph_over_positions():
    """Explore's edge graph dashed the edges of negative score, for the EAP family those the
    answer relies on, while the graph over positions dashes the links that work against the
    answer: a user switching views read one dash two opposite ways. Both dash the edges of positive
    score now (corrupting one raises the metric), and their keys and hovers say the same."""
    values, edges, positions = _one_position_circuit(estimates_metric=True)
    against = {name for name, value in values.items() if value > 0}
    assert _dashed_units(edges, positions=False) == against
    assert _dashed_units(positions, positions=True) == against
    for drawing in (edges, positions):
        assert "dashed: works against the answer" in drawing.vis.legend, drawing.vis.legend
        assert "carries the answer" not in drawing.vis.legend
    assert "Dashed: a positive score (corrupting the edge raises the metric: it works against" in (
        edges.vis.legend_more
    )
    titles = {edge["id"]: edge["title"] for edge in edges.vis.edges}
    assert "(positive: it works against the answer)" in titles["m1->logits"]
    assert "(negative: it carries the answer)" in titles["a2.h0->logits"]
    # the file a user downloads keys its dashes the same way
    assert "dashed: works against the answer" in edges.html


def test_a_methods_own_scores_are_dashed_alike_and_said_to_be_its_own():
    """Where the scores are the method's own (CircuitLasso's, ACC++'s), neither drawing may say a
    dashed edge works against the answer: both dash a negative score, and say it is the method's."""
    values, edges, positions = _one_position_circuit(estimates_metric=False)
    negative = {name for name, value in values.items() if value < 0}
    assert _dashed_units(edges, positions=False) == negative
    assert _dashed_units(positions, positions=True) == negative
    for drawing in (edges, positions):
        said = drawing.vis.legend + drawing.vis.legend_more
        assert "dashed: a negative score" in drawing.vis.legend
        assert "against the answer" not in said and "carries the answer" not in said
    titles = " ".join(edge["title"] for edge in edges.vis.edges)
    assert "the method's own score, not an effect on the metric" in titles and "answer" not in titles


def test_a_frame_too_narrow_for_readable_labels_is_drawn_wider_and_scrolls():
    """Fitted to a 652 px page (a 1,000 px window), Compare's three SmolLM2-135M circuits in one
    layout drew their labels at 10.0 px and the graph over 15 token positions at 6.8 px: the
    drawing now says the width that draws its labels at ``HELD_LABEL_PX`` (at most
    ``SCROLL_WIDTH``), and the frame is that wide, its box scrolling sideways (Chromium measures
    it in ``tests/test_browser_page_margins.py``)."""
    from circuitviz.render.vis import DRAW_SCRIPT, HELD_LABEL_PX, SCROLL_WIDTH, VisGraph

    def wide(right: float) -> VisGraph:
        nodes = [{"id": str(i), "label": "a1.h1", "x": x, "y": 0.0, "shape": "box", "font": {"size": 22}}
                 for i, x in enumerate((0.0, right / 2, right))]  # fmt: skip
        return VisGraph(nodes, [])

    graph = wide(1500.0)
    left, _, right, _ = graph.bounds()
    data = graph.to_data()
    assert data["min_width"] == math.ceil(graph.readable_width()) > 652
    # fitted to that width (95 % of it, as cvFit does), a label is drawn at HELD_LABEL_PX
    assert abs((data["min_width"] - 2) * 0.95 / (right - left) * 22 - HELD_LABEL_PX) < 0.05
    assert (
        wide(50_000.0).to_data()["min_width"] == SCROLL_WIDTH
    )  # a huge drawing: its hint says how to read it
    assert 'return data.min_width + "px"' in DRAW_SCRIPT  # unless the box draws them at NEAR_LABEL_PX
    assert "container.style.minWidth = cvMinWidth(container, data)" in DRAW_SCRIPT
    assert 'container.parentElement.style.overflowX = "auto"' in DRAW_SCRIPT
    # vis-network's own fit keeps a margin of its own: the frame is widened by the labels' shortfall
    assert "HELD_LABEL_PX / (least || 1)" in DRAW_SCRIPT and data["scroll_width"] == SCROLL_WIDTH
    assert data["scroll_hint"].startswith("The drawing is wider than the page")
