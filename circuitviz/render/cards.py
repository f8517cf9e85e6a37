"""A node's card as plain data: what it is, its edges in and out by weight, its logit lens, and
for a head ACC++'s signals (which source token it attends to, which upstream parts wrote the
signal). Pure: the drawn edges, the labels and an ACC++ result's details in, a dict out; the
app's card (``ui.node_card``) shows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

_HEAD = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP = re.compile(r"^m(\d+)$")


def component_of(node_id: str) -> str:
    """The component a node id names: 'a9.h1@14' -> 'a9.h1'; 'a9.h1' -> 'a9.h1'."""
    return str(node_id).split("@")[0]


def describe(node_id: str) -> str:
    """What a node is, in words."""
    component = component_of(node_id)
    position = str(node_id).split("@")[1] if "@" in str(node_id) else None
    where = f" at position {position}" if position is not None else ""
    head = _HEAD.match(component)
    if head:
        return f"attention head {head.group(2)} of layer {head.group(1)}{where}"
    mlp = _MLP.match(component)
    if mlp:
        return f"the MLP of layer {mlp.group(1)}{where}"
    if component == "input":
        return f"the token and position embeddings{where}"
    if component == "logits":
        return f"the answer's logit (the metric){where}"
    return component + where


def node_card(
    node_id: str,
    edges: Sequence,
    labels: Mapping[str, Mapping] | None = None,
    limit: int = 8,
) -> dict:
    """{id, what, score, incoming, outgoing, promotes, suppresses}: ``edges`` are the drawing's
    ``GraphEdge``s (score: the estimated change of the metric when the edge is corrupted); in and
    out are sorted by |score|, strongest first, at most ``limit`` each (their totals beside)."""
    incoming = sorted((e for e in edges if e.target == node_id), key=lambda e: -abs(e.score))
    outgoing = sorted((e for e in edges if e.source == node_id), key=lambda e: -abs(e.score))
    label = (labels or {}).get(component_of(node_id)) or {}
    return {
        "id": str(node_id),
        "what": describe(node_id),
        "score": sum(e.score for e in outgoing) if outgoing else sum(e.score for e in incoming),
        "incoming": [_row(e, e.source) for e in incoming[:limit]],
        "outgoing": [_row(e, e.target) for e in outgoing[:limit]],
        "n_incoming": len(incoming),
        "n_outgoing": len(outgoing),
        "promotes": list(label.get("promotes") or []),
        "suppresses": list(label.get("suppresses") or []),
    }


def _row(edge, other: str) -> dict:
    return {"node": other, "edge": edge.name, "kind": edge.kind, "score": float(edge.score)}


def acc_signals(details, component: str, position: int | None = None) -> list[dict]:
    """ACC++'s decisions of head ``component`` (at ``position``, default: the answer's, the last)
    with the upstream parts that wrote each one's signal, strongest first: [{source_token, source,
    weight, destination_token, query: [(node, attribution)], key: [...]}]."""
    if details is None:
        return []
    tokens = list(getattr(details, "tokens", []) or [])
    position = len(tokens) - 1 if position is None else position
    node = f"{component}@{position}"
    found = []
    for decision in details.decisions:
        if decision.get("node") != node:
            continue
        writers: dict[str, list[tuple[str, float]]] = {"q": [], "k": []}
        for edge in details.edges:
            if edge.get("decision") == decision.get("index") and edge.get("side") in writers:
                writers[edge["side"]].append((str(edge["source"]), float(edge["attribution"])))
        for side in writers.values():
            side.sort(key=lambda item: -abs(item[1]))
        found.append(
            {
                "source": decision.get("source"),
                "source_token": decision.get("source_token"),
                "destination_token": decision.get("destination_token"),
                "weight": float(decision.get("weight", 0.0)),
                "query": writers["q"],
                "key": writers["k"],
            }
        )
    found.sort(key=lambda item: -item["weight"])
    return found
