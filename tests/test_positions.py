"""The position-resolved graph: selection and pruning against brute force, the drawing data, the
strongest paths, the Neuronpedia export (validated against the public schema's required fields
and types) and its import, captions, and escaping of the prompt's tokens."""

from __future__ import annotations

import json
import math
import re

import jsonschema
import pytest
import torch

from circuitviz.core.graph import GraphSpec
from circuitviz.export.neuronpedia import (
    GraphExportError,
    GraphFileError,
    export_problem,
    from_neuronpedia,
    read_neuronpedia,
    to_neuronpedia,
)
from circuitviz.labels.captions import lens_caption, node_caption, role_caption
from circuitviz.positions.graph import (
    alive_nodes,
    n_units,
    node_counts,
    prune_units,
    top_units,
    unit_mask,
    units_at_budgets,
)
from circuitviz.positions.view import (
    AttributionGraph,
    GraphLink,
    GraphNode,
    from_position_circuit,
    path_strength,
    strongest_paths,
)
from circuitviz.render.attribution_graph import attribution_graph_html

SPEC = GraphSpec(n_layers=3, n_heads=2, d_model=4)
POSITIONS = 4


def random_scores(seed: int, spec: GraphSpec = SPEC, positions: int = POSITIONS) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    shape = (spec.n_forward, spec.n_backward, positions)
    scores = torch.randn(shape, generator=generator, dtype=torch.float64, device="cpu")
    return scores * unit_mask(spec, positions)  # [n_forward, n_backward, pos]


# ----- brute force: the node graph spelled out, one unit at a time ------------------------------
def brute_force_alive(spec: GraphSpec, mask: torch.Tensor) -> set[tuple[int, int]]:
    """Nodes (index, position) on a path from an embedding to the logits, by plain search."""
    n_positions = mask.shape[-1]
    owner = spec.tensors().reader_node.tolist()
    arcs: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for f, b, p in mask.nonzero().tolist():
        targets = range(p, n_positions) if spec.backward_kind[b] in ("k", "v") else [p]
        arcs += [((f, p), (owner[b], d)) for d in targets]
    reached = {(0, p) for p in range(n_positions)}
    changed = True
    while changed:
        changed = False
        for source, target in arcs:
            if source in reached and target not in reached:
                reached.add(target)
                changed = True
    reaches = {(spec.n_forward, n_positions - 1)}
    changed = True
    while changed:
        changed = False
        for source, target in arcs:
            if target in reaches and source not in reaches:
                reaches.add(source)
                changed = True
    return reached & reaches


def brute_force_prune(spec: GraphSpec, mask: torch.Tensor) -> torch.Tensor:
    alive = brute_force_alive(spec, mask)
    owner = spec.tensors().reader_node.tolist()
    kept = torch.zeros_like(mask)
    for f, b, p in mask.nonzero().tolist():
        targets = range(p, mask.shape[-1]) if spec.backward_kind[b] in ("k", "v") else [p]
        if (f, p) in alive and any((owner[b], d) in alive for d in targets):
            kept[f, b, p] = True
    return kept


@pytest.mark.parametrize("seed", range(6))
def test_pruning_equals_a_node_by_node_search(seed):
    scores = random_scores(seed)
    budgets = [20, 60, 120, 300]
    masks = top_units(SPEC, scores, budgets)  # [4, fwd, bwd, pos]
    pruned = prune_units(SPEC, masks)
    for mask, kept in zip(masks, pruned):
        mask = mask & unit_mask(SPEC, POSITIONS)
        assert torch.equal(kept, brute_force_prune(SPEC, mask))
        alive = alive_nodes(SPEC, mask[None])[0]
        assert {tuple(x) for x in alive.nonzero().tolist()} == brute_force_alive(SPEC, mask)


def test_top_units_takes_the_strongest_units_and_counts_every_unit():
    scores = random_scores(7)
    total = n_units(SPEC, POSITIONS)
    assert total == int(unit_mask(SPEC, POSITIONS).sum())
    # the logits read the last position only
    assert not unit_mask(SPEC, POSITIONS)[:, SPEC.logits_backward, :-1].any()
    chosen = top_units(SPEC, scores, [10, total + 5])
    assert int(chosen[0].sum()) == 10 and int(chosen[1].sum()) == total
    weakest_kept = scores.abs()[chosen[0]].min()
    strongest_left = scores.abs()[~chosen[0] & unit_mask(SPEC, POSITIONS)].max()
    assert weakest_kept >= strongest_left


def test_the_whole_position_graph_keeps_every_unit_that_can_reach_the_answer():
    full = unit_mask(SPEC, POSITIONS)
    kept = prune_units(SPEC, full)
    # an MLP of the last layer reaches the logits only at the last position
    last_mlp = SPEC.mlp_forward(SPEC.n_layers - 1)
    assert kept[last_mlp, SPEC.logits_backward, -1]
    assert not kept[last_mlp, :, :-1].any()
    # every embedding feeds the first layer's keys and values wherever it sits
    assert kept[0, SPEC.head_backward(0, "v"), :].all()
    assert int(node_counts(SPEC, kept)) == len(brute_force_alive(SPEC, full))


# ----- drawing data --------------------------------------------------------------------------
def _circuit(seed: int = 3, budget: int = 150):
    scores = random_scores(seed).float()
    mask = units_at_budgets(SPEC, scores, [budget])[0]
    return scores, mask


def test_links_carry_each_unit_and_keys_and_values_are_shared_by_attention():
    scores, mask = _circuit()
    patterns = torch.rand(SPEC.n_layers, SPEC.n_heads, POSITIONS, POSITIONS, device="cpu").tril()
    patterns = patterns / patterns.sum(-1, keepdim=True)  # [layer, head, destination, source]
    graph = from_position_circuit(SPEC, scores, mask, ["a", "b", "c", "d"], patterns=patterns)
    ids = {node.id for node in graph.nodes}
    assert all(link.source in ids and link.target in ids for link in graph.links)
    by_unit: dict[str, float] = {}
    for link in graph.links:
        by_unit[link.unit] = by_unit.get(link.unit, 0.0) + link.weight
    # each kept unit's weight is minus its score, in total over the links it is drawn as
    for f, b, p in mask.nonzero().tolist():
        unit = f"{SPEC.forward_names[f]}->{SPEC.backward_names[b]}@{p}"
        assert by_unit[unit] == pytest.approx(-float(scores[f, b, p]), rel=1e-5, abs=1e-6)
    # a value unit at source s goes to the head at destinations d >= s, shared by attention
    moved = [link for link in graph.links if link.kind in ("k", "v")]
    assert moved
    for link in moved:
        source = int(link.source.split("@")[1])
        destination = int(link.target.split("@")[1])
        assert destination >= source
    unit = moved[0].unit
    parts = [link for link in moved if link.unit == unit]
    head = graph.node(parts[0].target)
    layer, source = head.layer, int(parts[0].source.split("@")[1])
    weights = [float(patterns[layer, head.head, int(link.target.split("@")[1]), source]) for link in parts]
    for link, weight in zip(parts, weights):
        assert link.weight == pytest.approx(by_unit[unit] * weight / sum(weights), rel=1e-5, abs=1e-7)


def _chain_graph() -> AttributionGraph:
    """input@0 -> a0.h0@1 -> logits@1 strong; input@1 -> logits@1 weak; input@0 -> m0@0 dead end."""
    nodes = [
        GraphNode("input@0", "input", "embedding", -1, 0),
        GraphNode("input@1", "input", "embedding", -1, 1),
        GraphNode("a0.h0@1", "a0.h0", "head", 0, 1, head=0),
        GraphNode("logits@1", "logits", "logit", 1, 1),
    ]
    links = [
        GraphLink("input@0", "a0.h0@1", 2.0, "v"),
        GraphLink("a0.h0@1", "logits@1", 3.0, "logits"),
        GraphLink("input@1", "logits@1", -1.0, "logits"),
        GraphLink("input@1", "a0.h0@1", 0.5, "q"),
    ]
    return AttributionGraph(["A", "B"], nodes, links, n_layers=1, prompt="A B", model_id="toy")


@pytest.mark.parametrize("where", ["link", "node"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_graph_holding_nan_or_infinity_is_not_written_for_neuronpedia(where, value):
    """json.dumps wrote a NaN weight as the bare word NaN: a file Neuronpedia's viewer (a browser's
    JSON reader) cannot open. Now the export says so in one sentence and writes nothing."""
    graph = _chain_graph()
    assert export_problem(graph) is None
    json.loads(json.dumps(to_neuronpedia(graph), allow_nan=False))  # a finite graph is strict JSON
    if where == "link":
        graph.links[1].weight = value
    else:
        graph.nodes[2].influence = value
    problem = export_problem(graph)
    assert problem and "a0.h0" in problem and "cannot be written for Neuronpedia" in problem
    assert problem.count(". ") == 0 and "\n" not in problem  # one sentence
    with pytest.raises(GraphExportError, match="cannot be written for Neuronpedia"):
        to_neuronpedia(graph)


def test_strongest_paths_follow_the_largest_shares_to_the_answer():
    graph = _chain_graph()
    paths = strongest_paths(graph, n_paths=2)
    assert paths[0] == ["input@0", "a0.h0@1", "logits@1"]
    # 3/4 of the logit's input comes through the head, and 2/2.5 of the head's from input@0
    assert path_strength(graph, paths[0]) == pytest.approx(0.75 * 0.8)
    assert paths[1][0] == "input@1" and len(paths) == 2
    assert path_strength(graph, paths[1]) == pytest.approx(0.25)  # straight to the logit beats 0.75 * 0.2


# ----- Neuronpedia's graph JSON --------------------------------------------------------------
# The required fields and their types, copied from Neuronpedia's published graph schema
# (hijohnnylin/neuronpedia, apps/webapp/app/api/graph/graph-schema.json, draft-07).
NEURONPEDIA_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["metadata", "qParams", "nodes", "links"],
    "properties": {
        "metadata": {
            "type": "object",
            "required": ["slug", "scan", "prompt_tokens", "prompt"],
            "properties": {
                "slug": {"type": "string"},
                "scan": {"type": "string"},
                "prompt_tokens": {"type": "array", "items": {"type": "string"}},
                "prompt": {"type": "string"},
                "node_threshold": {"type": "number"},
                "info": {"type": "object"},
            },
        },
        "qParams": {
            "type": "object",
            "required": [],
            "properties": {
                "pinnedIds": {"type": "array", "items": {"type": "string"}},
                "supernodes": {"type": "array"},
                "linkType": {"type": "string"},
                "clickedId": {"type": "string"},
                "sg_pos": {"type": "string"},
            },
        },
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["node_id", "feature", "layer", "ctx_idx", "feature_type", "jsNodeId", "clerp"],
                "properties": {
                    "node_id": {"type": "string"},
                    "feature": {"type": ["integer", "null"]},
                    "layer": {"type": ["string", "integer"]},
                    "ctx_idx": {"type": "integer"},
                    "feature_type": {"type": "string"},
                    "jsNodeId": {"type": "string"},
                    "clerp": {"type": "string"},
                    "influence": {"type": ["number", "null"]},
                    "activation": {"type": ["number", "null"]},
                },
            },
        },
        "links": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["source", "target", "weight"],
                "properties": {
                    "source": {"type": "string"},
                    "target": {"type": "string"},
                    "weight": {"type": "number"},
                },
            },
        },
    },
}


def validate_neuronpedia(data: dict) -> None:
    """Raise when ``data`` breaks the schema's required fields and types, or its links name
    nodes that are not there, or two nodes share an id."""
    jsonschema.Draft7Validator(NEURONPEDIA_SCHEMA).validate(data)
    ids = [node["node_id"] for node in data["nodes"]]
    assert len(ids) == len(set(ids)), "node ids must be unique"
    js_ids = [node["jsNodeId"] for node in data["nodes"]]
    assert len(js_ids) == len(set(js_ids)), "jsNodeIds must be unique"
    known = set(ids)
    assert all(link["source"] in known and link["target"] in known for link in data["links"])


def test_the_export_meets_the_schema_and_holds_every_node_and_link():
    scores, mask = _circuit()
    tokens = ["<bos>", "When", " Mary", " to"]
    graph = from_position_circuit(SPEC, scores, mask, tokens, prompt="When Mary to", model_id="tiny")
    data = to_neuronpedia(graph, token_ids=[2, 10, 11, 12], answer_id=11)
    json.loads(json.dumps(data))  # plain JSON
    validate_neuronpedia(data)
    assert len(data["nodes"]) == len(graph.nodes) and len(data["links"]) == len(graph.links)
    assert data["metadata"]["prompt_tokens"] == tokens
    types = {node["feature_type"] for node in data["nodes"]}
    assert {"embedding", "logit"} <= types and types <= {
        "embedding",
        "logit",
        "lorsa",
        "mlp reconstruction error",
    }
    for node, ours in zip(data["nodes"], graph.nodes):
        assert node["ctx_idx"] == ours.position
        assert node["clerp"].startswith(ours.component)
    logit = next(node for node in data["nodes"] if node["feature_type"] == "logit")
    assert logit["feature"] == 11 and logit["layer"] == str(SPEC.n_layers + 1)
    # a broken file is caught by the same check (the test can fail)
    broken = json.loads(json.dumps(data))
    broken["nodes"][0]["ctx_idx"] = "2"
    with pytest.raises(jsonschema.ValidationError):
        validate_neuronpedia(broken)


def test_our_file_reads_back_to_the_graph_it_was_written_from():
    scores, mask = _circuit()
    graph = from_position_circuit(SPEC, scores, mask, ["a", "b", "c", "d"], prompt="a b c d", model_id="tiny")
    back = read_neuronpedia(json.dumps(to_neuronpedia(graph)))
    assert back.tokens == graph.tokens and back.n_layers == graph.n_layers
    assert sorted((n.component, n.position, n.kind, n.layer) for n in back.nodes) == sorted(
        (n.component, n.position, n.kind, n.layer) for n in graph.nodes
    )
    assert sorted(round(link.weight, 6) for link in back.links) == sorted(
        round(link.weight, 6) for link in graph.links
    )


def circuit_tracer_file() -> dict:
    """A small graph in circuit-tracer's own conventions (its frontend's node model): CLT features,
    an error node, embeddings at layer 'E' and a logit at layer n_layers + 1."""
    return {
        "metadata": {
            "slug": "toy",
            "scan": "gemma-2-2b",
            "transcoder_list": [],
            "prompt_tokens": ["<bos>", "The", " cat"],
            "prompt": "The cat",
            "node_threshold": 0.8,
            "schema_version": 1,
        },
        "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""},
        "nodes": [
            {"node_id": "E_651_1", "feature": 1, "layer": "E", "ctx_idx": 1, "feature_type": "embedding",
             "jsNodeId": "E_651-1", "clerp": "", "influence": 0.2, "activation": None},
            {"node_id": "3_1234_2", "feature": 77, "layer": "3", "ctx_idx": 2,
             "feature_type": "cross layer transcoder", "jsNodeId": "3_1234-0", "clerp": "animals",
             "influence": 0.1, "activation": 4.5},
            {"node_id": "5_-1_2", "feature": -1, "layer": "5", "ctx_idx": 2,
             "feature_type": "mlp reconstruction error", "jsNodeId": "5_-1-2", "clerp": "", "influence": 0.4},
            {"node_id": "27_9_2", "feature": 9, "layer": "27", "ctx_idx": 2, "feature_type": "logit",
             "jsNodeId": "L_9-2", "clerp": 'Output " sat" (p=0.400)', "token_prob": 0.4, "is_target_logit": True},
        ],
        "links": [
            {"source": "E_651_1", "target": "3_1234_2", "weight": 1.5},
            {"source": "3_1234_2", "target": "27_9_2", "weight": 2.0},
            {"source": "5_-1_2", "target": "27_9_2", "weight": -0.5},
        ],
    }  # fmt: skip


def test_a_circuit_tracer_file_opens_and_draws():
    data = circuit_tracer_file()
    validate_neuronpedia(data)
    graph = from_neuronpedia(data, "toy.json")
    kinds = {node.id: node.kind for node in graph.nodes}
    assert kinds == {"E_651_1": "embedding", "3_1234_2": "mlp", "5_-1_2": "mlp", "27_9_2": "logit"}
    logit = graph.node("27_9_2")
    assert logit.layer == graph.n_layers == 6 and logit.position == 2
    assert graph.node("3_1234_2").caption == "animals"
    assert strongest_paths(graph)[0] == ["E_651_1", "3_1234_2", "27_9_2"]
    drawing = attribution_graph_html(graph)
    assert "E_651_1" in drawing.html and len(drawing.edges) == 3


@pytest.mark.parametrize(
    "text, says",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"metadata": {}, "nodes": []}', "has no links"),
        ('{"metadata": {"prompt_tokens": []}, "nodes": [{"node_id": "x"}], "links": []}', "lacks layer"),
    ],
)
def test_a_file_that_is_not_a_graph_is_refused_in_one_sentence(text, says):
    with pytest.raises(GraphFileError, match=says):
        read_neuronpedia(text, "upload.json")


def _layered(data: dict) -> dict:
    """The file's first node that sits in a numbered layer (not the embeddings nor the logits)."""
    return next(n for n in data["nodes"] if n["feature_type"] not in ("embedding", "logit"))


def _broken(change) -> str:
    data = to_neuronpedia(_chain_graph())
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    "change, says",
    [  # each raised TypeError or IndexError before (found by mutating valid files at random)
        (lambda d: d["links"][0].update(source=["E_0_0"]), "source and target must be node ids"),
        (lambda d: d["nodes"][0].update(ctx_idx=-5), "not a token position"),
        (lambda d: d["nodes"][0].update(ctx_idx=True), "not a token position"),
        # an OverflowError's traceback, or a drawing that failed in the browser on NaN (an audit's)
        (
            lambda d: d["nodes"][0].update(activation=10**400),
            "activation of node .* is 10000000000000000000… \\(401 digits\\), not a finite number",
        ),
        (
            lambda d: d["nodes"][0].update(activation=math.nan),
            "activation of node .* is nan, not a finite number",
        ),
        (lambda d: d["links"][0].update(weight=10**400), "the weight of the link .* not a finite number"),
        (lambda d: d["links"][0].update(weight=-math.inf), "the weight of the link .* is -inf, not a finite"),
        (lambda d: _layered(d).update(layer=math.inf), "layer 'inf' is not a number"),
        (lambda d: _layered(d).update(layer=10**9), "layer '1000000000' is not a layer of a model"),
    ],
)
def test_a_graph_file_with_values_of_the_wrong_kind_is_refused_in_one_sentence(change, says):
    with pytest.raises(GraphFileError, match=says):
        read_neuronpedia(_broken(change), "upload.json")


def test_a_saved_view_that_pins_a_list_drops_that_pin_and_says_so():
    data = to_neuronpedia(_chain_graph(), view={"pins": [], "groups": [], "clicked": ""})
    known = data["nodes"][0]["node_id"]
    data["qParams"]["pinnedIds"] = [known, ["x"], {"a": 1}]
    graph = read_neuronpedia(json.dumps(data), "upload.json")
    assert graph.view["pins"] == [known]
    assert "2 pinned nodes it does not have" in " ".join(graph.notes)
    attribution_graph_html(graph)


# ----- captions ------------------------------------------------------------------------------
def test_a_lens_token_is_named_only_when_it_is_the_answer_or_a_foil():
    noise = {"promotes": ["ocsät", "Фных", "CLUDED"], "suppresses": [" the"]}
    assert lens_caption(noise, " Mary", [" John"]) is None
    assert lens_caption({"promotes": ["x", " Mary"]}, " Mary", [" John"]) == "promotes ' Mary'"
    assert (
        lens_caption({"promotes": ["x"], "suppresses": [" John"]}, " Mary", [" John"]) == "suppresses ' John'"
    )
    assert role_caption(1.234, " Mary", [" John"]) == "raises ' Mary' over ' John' by 1.2"
    assert role_caption(-0.4, " Mary", [" John"]) == "lowers ' Mary' against ' John' by 0.4"
    assert role_caption(0.5, " Paris", [], "logprob") == "raises log p(' Paris') by 0.5"
    assert node_caption(noise, 1.234, " Mary", [" John"]) == "raises ' Mary' over ' John' by 1.2"
    # away from the last position the lens does not read: the role is said instead
    lens = {"promotes": [" Mary"]}
    assert node_caption(lens, 2.0, " Mary", [" John"], at_last_position=False).startswith("raises")


# ----- escaping ------------------------------------------------------------------------------
def test_hostile_tokens_and_labels_are_escaped_in_the_page():
    hostile = "</script><script>alert(1)</script>"
    graph = _chain_graph()
    graph.tokens = [hostile, "<img src=x onerror=alert(2)>"]
    graph.title = hostile
    graph.nodes[2].caption = "<b>caption</b>"
    graph.nodes[2].details["note"] = hostile
    page = attribution_graph_html(graph).html
    assert "<script>alert(1)" not in page and "<img src=x" not in page and "<b>caption" not in page
    # every script block of the page is one of pyvis's or ours: none was opened by a token
    scripts = re.findall(r"<script[^>]*>", page)
    assert all("alert" not in tag for tag in scripts)


def _wide_graph(n_positions: int = 30, per_cell: int = 4) -> AttributionGraph:
    """A graph with a busy cell at every position: as wide as drawings get."""
    nodes, links = [], []
    for position in range(n_positions):
        nodes.append(GraphNode(f"input@{position}", "input", "embedding", -1, position))
        for head in range(per_cell):
            node = GraphNode(
                f"a0.h{head}@{position}", f"a0.h{head}", "head", 0, position, head=head, badge="+1.2"
            )
            nodes.append(node)
            links.append(GraphLink(f"input@{position}", node.id, 1.0, "v"))
            links.append(GraphLink(node.id, f"logits@{n_positions - 1}", 0.5, "logits"))
    nodes.append(GraphNode(f"logits@{n_positions - 1}", "logits", "logit", 1, n_positions - 1))
    return AttributionGraph([f" t{i}" for i in range(n_positions)], nodes, links, n_layers=1)


@pytest.mark.parametrize("n_positions", [2, 30])
def test_the_drawing_fits_its_frame_legibly_and_no_boxes_overlap(n_positions):
    from circuitviz.render.vis import overlapping

    frame = 1000
    drawing = attribution_graph_html(_wide_graph(n_positions), frame_width=frame)
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", drawing.html, re.S).group(1))
    assert overlapping(nodes) == []
    # fitted to a frame ``frame`` px wide (vis-network's fit, never zoomed in past 1): the text is
    # at least 11 px while the labels fit their cells; a wide circuit keeps its names (captions
    # move to the hover) and shrinks rather than scroll sideways
    left, _, right, _ = drawing.vis.bounds()
    fitted = min(frame / (right - left), 1.0)
    sizes = [node["font"]["size"] for node in nodes]
    if n_positions == 2:
        assert min(sizes) * fitted >= 11
    assert "width: 100%" in drawing.html.split("</style>")[0].split("#mynetwork")[1].split("}")[0]
    # hover details: a node's component, position, token and contribution
    head = next(node for node in nodes if node["id"] == "a0.h1@1")
    assert "a0.h1" in head["title"] and "position 1" in head["title"] and "contribution" in head["title"]


def test_the_saved_view_travels_as_qparams_and_reads_back():
    scores, mask = _circuit()
    graph = from_position_circuit(SPEC, scores, mask, ["a", "b", "c", "d"], prompt="a b c d", model_id="tiny")
    members = [node.id for node in graph.nodes if node.kind in ("head", "mlp")][:2]
    clicked = graph.nodes[0].id
    view = {
        "pins": members,
        "groups": {"movers": members},
        "clicked": clicked,
        "names": {clicked: "my label"},
    }
    data = to_neuronpedia(graph, view=view)
    validate_neuronpedia(data)
    ids = {node.id: entry["node_id"] for node, entry in zip(graph.nodes, data["nodes"])}
    assert data["qParams"]["pinnedIds"] == [ids[m] for m in members]
    assert data["qParams"]["supernodes"] == [["movers", *[ids[m] for m in members]]]
    assert data["qParams"]["clickedId"] == ids[clicked]
    assert data["nodes"][0]["clerp"] == "my label"
    back = read_neuronpedia(json.dumps(data))
    assert back.view == {"pins": [ids[m] for m in members], "groups": {"movers": [ids[m] for m in members]},
                         "clicked": ids[clicked]}  # fmt: skip
    assert not back.notes


def test_a_bad_saved_view_is_one_sentence_and_the_graph_without_it():
    scores, mask = _circuit()
    graph = from_position_circuit(SPEC, scores, mask, ["a", "b", "c", "d"], prompt="a b c d", model_id="tiny")
    data = to_neuronpedia(graph)
    data["qParams"] = {
        "pinnedIds": ["no-such-node"] * 3,
        "supernodes": [["empty"], ["ghosts", "x_1", "y_2"], "junk"],
        "clickedId": "nowhere",
    }
    back = read_neuronpedia(json.dumps(data))
    assert back.view == {"pins": [], "groups": {}, "clicked": ""}
    assert len(back.nodes) == len(graph.nodes)
    (sentence,) = [note for note in back.notes if "saved view" in note]
    assert "3 pinned nodes" in sentence and "holds no node" in sentence and "clicked node" in sentence
    huge = to_neuronpedia(graph)
    huge["qParams"]["pinnedIds"] = ["x"] * 5000
    assert "at most" in " ".join(read_neuronpedia(json.dumps(huge)).notes)


@pytest.mark.parametrize("frame", [540, 1000])
def test_the_tokens_labels_never_run_into_each_other(frame):
    """At the font sized for a 540 px frame, the labels of neighbouring empty columns ran into
    each other ("'is' 'locat…' 'in'"): a column is as wide as its token's label at the font."""
    from circuitviz.render.attribution_graph import MAX_TOKEN_CHARS
    from circuitviz.render.vis import CHAR_WIDTH

    tokens = ["<bos>", "The", " Statue", " of", " Liberty", " is", " located", " in", " the", " city", " of"]
    first = GraphNode("input@0", "input", "embedding", -1, 0)
    head = GraphNode("a0.h1@10", "a0.h1", "head", 0, 10, head=1)
    logit = GraphNode("logits@10", "logits", "logit", 1, 10)
    graph = AttributionGraph(
        tokens,
        [first, head, logit],
        [GraphLink(first.id, head.id, 1.0, "v"), GraphLink(head.id, logit.id, 0.5, "logits")],
        n_layers=1,
    )
    drawing = attribution_graph_html(graph, frame_width=frame)
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", drawing.html, re.S).group(1))
    tokens = sorted((node for node in nodes if node["id"].startswith("token@")), key=lambda n: n["x"])
    for left, right in zip(tokens, tokens[1:]):
        reach = max(len(line) for line in left["label"].split("\n")) * left["font"]["size"] * CHAR_WIDTH / 2
        reach_right = (
            max(len(line) for line in right["label"].split("\n")) * right["font"]["size"] * CHAR_WIDTH / 2
        )
        assert left["x"] + reach <= right["x"] - reach_right, (left["label"], right["label"])
    shown = {node["id"]: node["label"].split("\n")[0] for node in tokens}
    assert all(len(label) <= MAX_TOKEN_CHARS for label in shown.values())
    assert not any(label.endswith("…") for label in shown.values()), shown  # every token whole
    assert shown["token@6"] == "' located'"
    dark = [node for node in nodes if node["id"] in (first.id, logit.id)]  # white on the dark boxes
    assert [node["font"]["color"] for node in dark] == ["#ffffff", "#ffffff"]


def test_a_column_is_as_wide_as_its_whole_token_up_to_a_cap():
    """Every token was cut to 8 characters ("' Louvr…", "' locat…" even at 2,000 px, the full token
    only in the hover); a column is now as wide as its token up to 14 characters, cut past that."""
    from circuitviz.render.attribution_graph import MAX_TOKEN_CHARS, column_widths, layout, token_chars

    tokens = ["<bos>", "The", " Louvre", " is", " located", " in", " extraordinarily", " of"]
    source = GraphNode("a0.h1@2", "a0.h1", "head", 0, 2, head=1)
    logit = GraphNode("logits@7", "logits", "logit", 1, 7)
    graph = AttributionGraph(
        tokens, [source, logit], [GraphLink(source.id, logit.id, 1.0, "logits")], n_layers=1
    )
    for frame in (540, 1000, 2000):
        drawing = attribution_graph_html(graph, frame_width=frame)
        nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", drawing.html, re.S).group(1))
        label = {n["id"]: n["label"].split("\n")[0] for n in nodes if n["id"].startswith("token@")}
        assert label["token@2"] == "' Louvre'" and label["token@4"] == "' located'"
        assert label["token@6"] == "' extraordina…" and len(label["token@6"]) == MAX_TOKEN_CHARS
    _, centres, _ = layout(graph)
    widths = column_widths(centres)
    assert widths[4] > widths[3]  # ' located' needs more room than ' is'
    assert token_chars(10_000, 12) == MAX_TOKEN_CHARS and token_chars(10, 12) == 8
