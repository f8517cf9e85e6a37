"""The node and edge cards sent with a drawing (``render.cards.card_data``): what the browser shows
at a click, checked against the circuit's edges recomputed by hand."""

from __future__ import annotations

import html

import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec
from circuitviz.render.cards import card_data
from circuitviz.render.groups import group_edges

SPEC = GraphSpec(n_layers=3, n_heads=2)
EDGES = {
    "input->a0.h1<q>": 0.5,
    "input->m0": -0.25,
    "a0.h1->m1": -2.0,
    "m0->m1": 0.75,
    "m1->a2.h0<v>": 1.0,
    "a0.h1->a2.h0<k>": -0.1,
    "a2.h0->logits": 4.0,
    "m1->logits": -3.0,
}


def _drawing(groups=None):
    scores = torch.zeros(SPEC.n_forward, SPEC.n_backward, device="cpu")
    for name, value in EDGES.items():
        scores[SPEC.edge_position(name)] = value
    return render.circuit_graph_html(SPEC, scores, SPEC.mask_from_edge_names(EDGES), groups=groups)


def test_every_drawn_node_has_its_card_with_its_edges_strongest_first():
    drawing = _drawing()
    labels = {"m1": {"promotes": [" Mary", "<b>x</b>"], "suppresses": [" John"]}}
    cards = card_data(drawing.vis.nodes, drawing.edges, labels)
    assert set(cards["nodes"]) == {node["id"] for node in drawing.vis.nodes}
    m1 = cards["nodes"]["m1"]
    assert m1["title"] == "m1" and m1["what"] == "the MLP of layer 1"
    # by hand: into m1 from a0.h1 (-2.0) then m0 (0.75); out of m1 to logits (-3.0) then a2.h0 (1.0)
    assert m1["in"]["head"] == "In (2 edges, strongest first)"
    assert m1["in"]["rows"] == [["a0.h1", "← a0.h1 (mlp)  -2"], ["m0", "← m0 (mlp)  +0.75"]]
    assert [row[0] for row in m1["out"]["rows"]] == ["logits", "a2.h0"]
    assert m1["score"].startswith(f"its 2 edges out in this circuit: scores summing to {-3.0 + 1.0:+.4g}")
    # the lens as plain text (the browser sets it as text, so markup stays visible, never parsed)
    assert m1["lens"] == "promotes:   ' Mary', '<b>x</b>'\nsuppresses: ' John'"
    assert cards["nodes"]["logits"]["out"] == {"head": "", "rows": []}
    edge = cards["edges"]["a0.h1->m1"]
    assert edge["title"] == "edge a0.h1->m1" and edge["lines"][-1] == "score -2"


def test_a_group_has_one_card_summing_its_members_edges():
    groups = {"movers": ["a0.h1", "m0"]}
    drawing = _drawing(groups)
    cards = card_data(drawing.vis.nodes, group_edges(drawing.edges, groups))
    card = cards["nodes"]["group:movers"]
    assert card["group"] == "group movers" and card["members"] == "members: a0.h1, m0"
    assert card["what"] == "a group of 2 nodes"
    # out of the group: a0.h1->m1 (-2.0), m0->m1 (0.75), a0.h1->a2.h0 (-0.1); no edge inside it
    assert [row[0] for row in card["out"]["rows"]] == ["m1", "m1", "a2.h0"]
    assert card["score"].startswith(
        f"its 3 edges out in this circuit: scores summing to {-2.0 + 0.75 - 0.1:+.4g}"
    )
    assert "a0.h1" not in cards["nodes"] and "m0" not in cards["nodes"]


def _fan(n_out: int):
    """A drawing where m0 sends ``n_out`` edges out (to every later head's query, key and value and the
    MLPs), each weaker than the last."""
    spec = GraphSpec(n_layers=4, n_heads=4)
    names = [name for name in spec.edge_names if name.startswith("m0->")][:n_out]
    scores = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")
    for i, name in enumerate(names):
        scores[spec.edge_position(name)] = -(len(names) - i) / 10
    return spec, render.circuit_graph_html(spec, scores, spec.mask_from_edge_names(names)), names


def test_a_card_lists_every_edge_and_says_how_many_wait_behind_its_button():
    """a12.h2's card said "Out (12 edges, strongest first)" over 8 rows, and nothing of the other 4."""
    _, drawing, names = _fan(12)
    out = card_data(drawing.vis.nodes, drawing.edges)["nodes"]["m0"]["out"]
    assert out["head"] == "Out (12 edges, strongest first)"
    assert len(out["rows"]) == 12  # every one of them, the strongest first
    assert [row[1].split()[1] for row in out["rows"]] == [name.split("->")[1].split("<")[0] for name in names]
    assert out.get("shown") == 8 and out.get("more") == "show the 4 weaker edges"
    assert out.get("unlisted") == ""
    few = card_data(drawing.vis.nodes, drawing.edges[:3])["nodes"]["m0"]["out"]
    assert few.get("more") == "" and len(few["rows"]) == 3


def test_a_card_says_what_its_figure_sums_and_how_the_figure_under_the_name_differs():
    """A node captioned "+2" (it raises the metric, over all its edges out) had a card reading
    "score in this circuit: -1.728" (its circuit's edges out, summed as scored): each now says
    what it sums and which sign means what."""
    drawing = render.circuit_graph_html(
        SPEC, _scores(), SPEC.mask_from_edge_names(EDGES), captions={"m1": "+2.3"}
    )
    cards = card_data(
        drawing.vis.nodes, drawing.edges, captions=drawing.captions, estimates_metric=drawing.estimates_metric
    )
    m1 = cards["nodes"]["m1"]
    assert m1["score"] == (
        "its 2 edges out in this circuit: scores summing to -2, the metric's estimated change if they are "
        "corrupted (negative: they carry the answer)"
    )
    assert m1["caption"].startswith("+2.3 under its name: how much it raises the metric, estimated from all")
    assert "in this circuit or not (minus their summed score)" in m1["caption"]
    logit = cards["nodes"]["logits"]["score"]
    assert logit.startswith("the 2 edges into it in this circuit: scores summing to +1,")
    assert logit.endswith("(positive: they work against the answer)")
    # the hover says the card's words; a method whose scores are its own says no effect
    title = next(node["title"] for node in drawing.vis.nodes if node["id"] == "m1")
    assert "its 2 edges out in this circuit: scores summing to -2" in title
    assert "+2.3 under its name: how much it raises the metric" in title
    own = card_data(drawing.vis.nodes, drawing.edges, captions={"m1": "+2.3"}, estimates_metric=False)
    assert own["nodes"]["m1"]["score"].endswith("(the method's own scores, not an effect on the metric)")
    assert own["nodes"]["m1"]["caption"] == ""


def _scores():
    scores = torch.zeros(SPEC.n_forward, SPEC.n_backward, device="cpu")
    for name, value in EDGES.items():
        scores[SPEC.edge_position(name)] = value
    return scores


def _card_of_m0(scores: list[float]) -> dict:
    """m0's card when its edges out, to the heads of layer 1 and 2, have ``scores``."""
    targets = ["a1.h0", "a1.h1", "a2.h0", "a2.h1", "m1", "m2"]
    edges = [
        render.GraphEdge(f"m0->{target}", "m0", target, "mlp", score)
        for target, score in zip(targets, scores, strict=False)
    ]
    nodes = [{"id": node} for node in ["m0", *targets[: len(scores)]]]
    return card_data(nodes, edges)["nodes"]["m0"]


def _figure(text: str) -> float:
    return float(text.rsplit(None, 1)[-1].rstrip(","))


def test_a_cards_sum_is_written_as_the_edges_it_sums():
    """m0's card read "scores summing to +0.9537" over its one edge, listed as "+0.954"; and a sum
    written to more decimals than its rows ("+5.123" and "-5" summing to "+0.1233") does not add
    up as shown. The rows are written as the edge's own card and hover write it, the sum to the
    strongest row's decimals."""
    one = _card_of_m0([0.953712])
    assert one["out"]["rows"][0][1].endswith("  +0.9537")
    assert "summing to +0.9537," in one["score"]
    assert "summing to +0.123," in _card_of_m0([5.1234, -5.0001])["score"]
    assert "summing to +2.466," in _card_of_m0([0.9537, 0.8123, 0.7])["score"]
    assert "summing to 0," in _card_of_m0([0.5, -0.5])["score"]


def test_a_cards_rows_add_up_to_its_sum_as_shown():
    """Whatever the scores, the figures a card shows add up to the sum it shows, to the sum's last
    digit and the rounding of each row."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    for _ in range(200):
        n = int(torch.randint(1, 7, (1,), generator=generator, device="cpu"))
        size = 10.0 ** float(torch.randint(-3, 3, (1,), generator=generator, device="cpu"))
        scores = (torch.randn(n, generator=generator, device="cpu") * size).tolist()
        card = _card_of_m0(scores)
        shown = [_figure(row[1]) for row in card["out"]["rows"]]
        summed = card["score"].split("summing to ", 1)[1].split(",", 1)[0]
        decimals = len(summed.split(".")[1]) if "." in summed else 0
        # each row off by at most half its last digit, which is no coarser than the sum's
        slack = (n + 1) * 0.5 * 10.0**-decimals + 1e-9
        assert abs(sum(shown) - float(summed)) <= slack, (scores, shown, summed)


def test_a_nodes_hover_writes_its_sum_as_its_card_does():
    scores = torch.zeros(SPEC.n_forward, SPEC.n_backward, device="cpu")
    names = {"m0->m1": 5.1234, "m0->a2.h0<q>": -5.0001, "m1->logits": 0.953712}
    for name, value in names.items():
        scores[SPEC.edge_position(name)] = value
    drawing = render.circuit_graph_html(SPEC, scores, SPEC.mask_from_edge_names(names))
    cards = card_data(drawing.vis.nodes, drawing.edges)["nodes"]
    for node in ("m0", "m1", "logits"):
        title = next(n["title"] for n in drawing.vis.nodes if n["id"] == node)
        assert html.escape(cards[node]["score"]) in title, node
    assert "summing to +0.123," in cards["m0"]["score"]
