"""An attribution graph as plain data: what the position drawing, the Neuronpedia export and the
importer share.

``AttributionGraph`` holds nodes at (layer, position), links with a weight, and the prompt's
tokens. It is built from a position-resolved circuit (``from_position_circuit``), from ACC++'s
signals (``render.acc_graph``), or read from a Neuronpedia / circuit-tracer graph JSON
(``export.neuronpedia``), and drawn by ``render.attribution_graph``.

Weights are *contributions*: how much the unit is estimated to raise the answer's metric,
i.e. minus its score (a score is the estimated change of the metric when the unit is corrupted).
A positive weight supports the answer; a negative one works against it.

How a unit becomes links:
- a query, MLP-input or logits unit (u, v, p) is one link u@p -> v@p;
- a key or value unit at source position s feeds the head at every destination d >= s. It is
  drawn *through the head*: one link u@s -> head@d for each destination d of the head still in
  the circuit, its weight shared out by the head's attention from d to s (the clean run's
  pattern), so the link from ' Mary' at position 2 to the head at the last position carries
  what that head moved from ' Mary' to the end. Without a pattern the weight is shared equally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..core.graph import GraphSpec
from .graph import alive_nodes, unit_mask

NODE_KINDS = ("embedding", "head", "mlp", "logit", "other")


@dataclass
class GraphNode:
    """One node: a component at a position. ``layer`` is -1 for embeddings, n_layers for logits."""

    id: str
    component: str
    kind: str  # one of NODE_KINDS
    layer: int
    position: int
    head: int | None = None
    influence: float = 0.0  # summed weight of its links out (logits: in)
    caption: str = ""  # what it does, in a sentence (hover, explanation, Neuronpedia's clerp)
    badge: str = ""  # the caption's short form on the canvas (empty: the caption, cut short)
    details: dict[str, str] = field(default_factory=dict)  # hover lines: name -> value


@dataclass
class GraphLink:
    """One link: ``weight`` is the estimated rise of the metric it carries; ``kind`` says which
    input of the target it feeds (q, k, v, mlp, logits, or ``link`` when imported)."""

    source: str
    target: str
    weight: float
    kind: str = "link"
    unit: str = ""  # the (edge, position) it comes from, e.g. 'input->a3.h1<v>@2'


@dataclass
class AttributionGraph:
    """A drawable attribution graph."""

    tokens: list[str]
    nodes: list[GraphNode]
    links: list[GraphLink]
    n_layers: int
    title: str = ""
    prompt: str = ""
    answer: str = ""
    model_id: str = ""
    notes: list[str] = field(default_factory=list)
    source: str = "circuitviz"  # who made it: circuitviz, or the file it was read from
    view: dict = field(default_factory=dict)  # pins, groups, clicked node, names (Neuronpedia's qParams)

    def node(self, node_id: str) -> GraphNode:
        return self.node_map[node_id]

    @property
    def node_map(self) -> dict[str, GraphNode]:
        return {node.id: node for node in self.nodes}


def node_id(component: str, position: int) -> str:
    """The id of a component at a position, as ACC++'s circuit writes it: ``a5.h1@12``."""
    return f"{component}@{position}"


def _kind_of(spec: GraphSpec, index: int) -> tuple[str, int | None]:
    """(kind, head) of node ``index`` (writers, then the logits)."""
    if index == 0:
        return "embedding", None
    if index == spec.n_forward:
        return "logit", None
    layer = int(spec.forward_layer[index])
    heads = spec.head_forward(layer)
    if heads.start <= index < heads.stop:
        return "head", index - heads.start
    return "mlp", None


def _make_node(spec: GraphSpec, index: int, position: int, tokens: Sequence[str]) -> GraphNode:
    component = spec.node_names[index]
    kind, head = _kind_of(spec, index)
    layer = (
        -1 if kind == "embedding" else (spec.n_layers if kind == "logit" else int(spec.forward_layer[index]))
    )
    token = tokens[position] if 0 <= position < len(tokens) else ""
    return GraphNode(
        id=node_id(component, position),
        component=component,
        kind=kind,
        layer=layer,
        position=int(position),
        head=head,
        details={"token": repr(token)},
    )


def _shares(pattern: torch.Tensor | None, source: int, destinations: list[int]) -> list[float]:
    """How a key/value unit at ``source`` is shared over ``destinations``: by the head's
    attention from each destination to the source (pattern [pos, pos], destination-major), or
    equally when there is no pattern (or it gives the source no weight)."""
    if pattern is not None:
        weights = [float(pattern[d, source]) for d in destinations]
        total = sum(weights)
        if total > 0:
            return [w / total for w in weights]
    return [1.0 / len(destinations)] * len(destinations)


def from_position_circuit(
    spec: GraphSpec,
    position_scores: torch.Tensor,
    mask: torch.Tensor,
    tokens: Sequence[str],
    *,
    patterns: torch.Tensor | None = None,
    title: str = "",
    prompt: str = "",
    answer: str = "",
    model_id: str = "",
) -> AttributionGraph:
    """The drawing data of one position circuit.

    position_scores: [n_forward, n_backward, pos] (CPU); mask: [n_forward, n_backward, pos]
    bool (pruned); patterns: the clean run's attention [n_layers, n_heads, pos, pos] or None.
    Nodes are those on a path from an embedding to the logits (``alive_nodes``).
    """
    n_positions = position_scores.shape[-1]
    mask = mask.bool() & unit_mask(spec, n_positions, mask.device)
    alive = alive_nodes(spec, mask[None])[0]  # [n_nodes, pos]
    nodes: dict[tuple[int, int], GraphNode] = {}

    def node_at(index: int, position: int) -> GraphNode:
        key = (index, position)
        if key not in nodes:
            nodes[key] = _make_node(spec, index, position, tokens)
        return nodes[key]

    reader_node = spec.tensors().reader_node.tolist()
    links: list[GraphLink] = []
    for forward, backward, position in mask.nonzero().tolist():
        weight = -float(position_scores[forward, backward, position])
        kind = spec.backward_kind[backward]
        owner = reader_node[backward]
        unit = f"{spec.forward_names[forward]}->{spec.backward_names[backward]}@{position}"
        source = node_at(forward, position)
        if kind not in ("k", "v"):
            target = node_at(owner, position)
            links.append(GraphLink(source.id, target.id, weight, kind, unit))
            continue
        destinations = [d for d in range(position, n_positions) if bool(alive[owner, d])]
        if not destinations:
            continue
        _, head = _kind_of(spec, owner)
        layer = int(spec.forward_layer[owner])
        pattern = patterns[layer, head] if patterns is not None else None
        for destination, share in zip(destinations, _shares(pattern, position, destinations)):
            target = node_at(owner, destination)
            links.append(GraphLink(source.id, target.id, weight * share, kind, unit))
    node_map = {node.id: node for node in nodes.values()}
    for link in links:
        if link.kind == "logits":
            node_map[link.target].influence += link.weight
        node_map[link.source].influence += link.weight
    ordered = sorted(nodes.values(), key=lambda n: (n.layer, n.position, n.kind != "head", n.head or 0))
    notes = []
    if patterns is None:
        notes.append(
            "Key and value links are shared equally over a head's destinations (no attention pattern kept)."
        )
    return AttributionGraph(
        tokens=list(tokens),
        nodes=ordered,
        links=links,
        n_layers=spec.n_layers,
        title=title,
        prompt=prompt,
        answer=answer,
        model_id=model_id,
        notes=notes,
    )


# ----- the strongest paths to the answer -------------------------------------------------------
def _level(node: GraphNode) -> tuple[int, int]:
    """Reading order of a node: by layer, a layer's heads before its MLP."""
    return (node.layer, 0 if node.kind in ("embedding", "head") else 1)


def strongest_paths(graph: AttributionGraph, n_paths: int = 3) -> list[list[str]]:
    """The strongest path to the logits from each of the ``n_paths`` best source positions.

    A path's strength is the product, link by link, of the link's share of its target's input
    (|weight| over the summed |weight| into the target): the fraction of the logits' input that
    flows along it, as circuit-tracer's influence measures. Each embedding node's best path is
    found by one sweep over the nodes in reverse reading order; the paths returned start at
    distinct positions, strongest first. Returns lists of node ids, embedding first, logits last.
    """
    into: dict[str, float] = {}
    for link in graph.links:
        into[link.target] = into.get(link.target, 0.0) + abs(link.weight)
    out_links: dict[str, list[GraphLink]] = {}
    for link in graph.links:
        out_links.setdefault(link.source, []).append(link)
    best: dict[str, tuple[float, str | None]] = {}
    for node in sorted(graph.nodes, key=_level, reverse=True):
        if node.kind == "logit":
            best[node.id] = (1.0, None)
            continue
        options = [
            (abs(link.weight) / into[link.target] * best[link.target][0], link.target)
            for link in out_links.get(node.id, [])
            if link.target in best and into.get(link.target, 0.0) > 0
        ]
        if options:
            best[node.id] = max(options)
    starts = sorted(
        (node for node in graph.nodes if node.kind == "embedding" and node.id in best),
        key=lambda node: -best[node.id][0],
    )
    paths = []
    for node in starts[: max(0, int(n_paths))]:
        path, current = [node.id], best[node.id][1]
        while current is not None:
            path.append(current)
            current = best[current][1]
        paths.append(path)
    return paths


def path_strength(graph: AttributionGraph, path: Sequence[str]) -> float:
    """The fraction of the logits' input that flows along ``path`` (see ``strongest_paths``)."""
    into: dict[str, float] = {}
    by_pair: dict[tuple[str, str], float] = {}
    for link in graph.links:
        into[link.target] = into.get(link.target, 0.0) + abs(link.weight)
        by_pair[(link.source, link.target)] = by_pair.get((link.source, link.target), 0.0) + abs(link.weight)
    strength = 1.0
    for source, target in zip(path, path[1:]):
        total = into.get(target, 0.0)
        strength *= by_pair.get((source, target), 0.0) / total if total > 0 else 0.0
    return strength


def apply_captions(graph: AttributionGraph, captions: Mapping[str, str]) -> AttributionGraph:
    """Set each node's caption from ``captions`` (node id -> text); the others keep theirs."""
    for node in graph.nodes:
        if node.id in captions:
            node.caption = captions[node.id]
    return graph
