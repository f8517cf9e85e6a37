"""The ACC++ circuit as plain data: a graph with a position axis, and its projection on the engine.

``circuit_json`` (kept in a result's ``ACCDetails``) holds

- ``nodes``: a component at a position, ``{"id": "a5.h1@12", "component": "a5.h1", "kind":
  "head" | "mlp" | "input" | "bias" | "logits", "layer", "head", "position", "token"}``
  (input has layer -1, logits n_layers);
- ``edges``: the signals, one per (upstream node, decision, side): ``{"source", "target",
  "side": "q" | "k" | "logits", "decision": index | None, "directions": [k, ...], "rank",
  "attribution": summed IG, "weight_drop": how much the weight fell as they were removed,
  "via_source": m | None}`` (for an upstream head, m is the source it read); edges into
  ``logits`` carry the seed's ``direct_effect`` and, as attribution, its share of the seeds'
  total |direct effect|;
- ``decisions``: ``{"index", "node", "layer", "head", "destination", "source", "weight",
  "threshold", "depth", "decomposition_error", "n_candidates", "query"/"key": {"reached",
  "curve": weight before and after each removal, "removals": [{"component", "node",
  "position", "via_source", "direction", "attribution", "weight_after"}]}}``.

``engine_scores`` projects the signals on the engine's edge graph: a signal from component c
into head (l, h)'s query is edge ``c -> a{l}.h{h}<q>``, key side ``<k>``, scored by summed IG
(attention-probability units); seeds become ``c -> logits`` scored by their share of direct
effect. The bias has no engine node and is left out of the projection.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from ..core.graph import GraphSpec
from ..details.base import MethodDetails
from .trace import Signal, Trace, TracedDecision


def node_id(component: str, position: int) -> str:
    return f"{component}@{position}"


def _node(spec: GraphSpec, component, position: int, tokens: list[str]) -> dict:
    kind = component.kind
    return {
        "id": node_id(component.name, position),
        "component": component.name,
        "kind": kind,
        "layer": spec.n_layers if kind == "logits" else component.layer,
        "head": component.head,
        "position": int(position),
        "token": tokens[position] if 0 <= position < len(tokens) else "",
    }


def _logits_node(spec: GraphSpec, position: int, tokens: list[str]) -> dict:
    return {
        "id": node_id("logits", position),
        "component": "logits",
        "kind": "logits",
        "layer": spec.n_layers,
        "head": None,
        "position": int(position),
        "token": tokens[position] if 0 <= position < len(tokens) else "",
    }


def _head_node(spec: GraphSpec, decision: TracedDecision, tokens: list[str]) -> dict:
    name = spec.forward_names[spec.head_forward(decision.layer).start + decision.head]
    return {
        "id": node_id(name, decision.destination),
        "component": name,
        "kind": "head",
        "layer": decision.layer,
        "head": decision.head,
        "position": decision.destination,
        "token": tokens[decision.destination] if decision.destination < len(tokens) else "",
    }


def _removal(signal: Signal) -> dict:
    return {
        "component": signal.component.name,
        "node": node_id(signal.component.name, signal.position),
        "position": int(signal.position),
        "via_source": signal.component.source,
        "direction": int(signal.direction),
        "attribution": float(signal.attribution),
        "weight_after": float(signal.weight_after),
    }


def circuit_json(spec: GraphSpec, trace: Trace, tokens: list[str]) -> dict:
    """The position-resolved circuit as plain JSON-serialisable data (see the module docstring)."""
    nodes: dict[str, dict] = {}
    edges: list[dict] = []
    decisions: list[dict] = []
    last = trace.n_positions - 1
    logits = _logits_node(spec, last, tokens)
    nodes[logits["id"]] = logits
    seed_total = sum(abs(seed.direct_effect) for seed in trace.seeds) or 1.0
    for seed in trace.seeds:
        node = _node(spec, seed.component, seed.position, tokens)
        nodes.setdefault(node["id"], node)
        edges.append(
            {
                "source": node["id"],
                "target": logits["id"],
                "side": "logits",
                "decision": None,
                "directions": [],
                "rank": 0,
                "attribution": seed.direct_effect / seed_total,
                "direct_effect": seed.direct_effect,
                "weight_drop": 0.0,
                "via_source": seed.component.source,
            }
        )
    for index, decision in enumerate(trace.decisions):
        target = _head_node(spec, decision, tokens)
        nodes.setdefault(target["id"], target)
        record = {
            "index": index,
            "node": target["id"],
            "layer": decision.layer,
            "head": decision.head,
            "destination": decision.destination,
            "source": decision.source,
            "destination_token": tokens[decision.destination] if decision.destination < len(tokens) else "",
            "source_token": tokens[decision.source] if decision.source < len(tokens) else "",
            "weight": decision.weight,
            "threshold": decision.threshold,
            "depth": decision.depth,
            "decomposition_error": decision.decomposition_error,
            "n_candidates": decision.n_candidates,
        }
        for side, label in (("q", "query"), ("k", "key")):
            signals = decision.signals.get(side, [])
            record[label] = {
                "reached": bool(decision.reached.get(side, False)),
                "curve": [float(w) for w in decision.weight_curve.get(side, [])],
                "removals": [_removal(signal) for signal in signals],
            }
            groups: dict[tuple, list[tuple[int, Signal]]] = defaultdict(list)
            for step, signal in enumerate(signals):
                key = (signal.component.name, signal.position, signal.component.source)
                groups[key].append((step, signal))
            curve = decision.weight_curve.get(side, [decision.weight])
            for (_name, position, via), members in groups.items():
                first = members[0][1]
                upstream = _node(spec, first.component, position, tokens)
                nodes.setdefault(upstream["id"], upstream)
                drop = sum(curve[step] - curve[step + 1] for step, _ in members if step + 1 < len(curve))
                edges.append(
                    {
                        "source": upstream["id"],
                        "target": target["id"],
                        "side": side,
                        "decision": index,
                        "directions": [int(s.direction) for _, s in members],
                        "rank": len(members),
                        "attribution": float(sum(s.attribution for _, s in members)),
                        "weight_drop": float(drop),
                        "via_source": via,
                    }
                )
        decisions.append(record)
    signal_edges = [e for e in edges if e["side"] != "logits"]
    return {
        "nodes": list(nodes.values()),
        "edges": edges,
        "decisions": decisions,
        "seeds": [
            {
                "node": node_id(seed.component.name, seed.position),
                "via_source": seed.component.source,
                "direct_effect": seed.direct_effect,
            }
            for seed in trace.seeds
        ],
        "tokens": list(tokens),
        "summary": {
            "n_nodes": len(nodes),
            "n_edges": len(edges),
            "n_signal_edges": len(signal_edges),
            "n_decisions": len(decisions),
            "n_signals": sum(e["rank"] for e in signal_edges),
            "rank1_fraction": (sum(e["rank"] == 1 for e in signal_edges) / len(signal_edges))
            if signal_edges
            else 0.0,
            "thresholds_reached": sum(d["query"]["reached"] and d["key"]["reached"] for d in decisions),
            "max_decomposition_error": max((d["decomposition_error"] for d in decisions), default=0.0),
        },
        "limits": trace.limits,
    }


def engine_scores(spec: GraphSpec, circuit: dict) -> torch.Tensor:
    """Summed attributions on the engine's edges (from the circuit's JSON, so on the CPU).
    # [n_forward, n_backward] float32"""
    scores = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")
    forward_index = {name: index for index, name in enumerate(spec.forward_names)}
    node_component = {node["id"]: node for node in circuit["nodes"]}
    for edge in circuit["edges"]:
        source = node_component[edge["source"]]
        if source["component"] not in forward_index:
            continue  # the bias has no engine node
        row = forward_index[source["component"]]
        if edge["side"] == "logits":
            scores[row, spec.logits_backward] += edge["attribution"]
            continue
        target = node_component[edge["target"]]
        column = spec.head_backward(target["layer"], edge["side"]).start + target["head"]
        scores[row, column] += edge["attribution"]
    return scores * spec.edge_mask


def to_networkx(circuit: dict | MethodDetails):
    """The position graph as a networkx DiGraph.

    Nodes carry the node records; parallel signals between two nodes (several decisions or both
    sides) are merged into one edge with ``attribution`` summed, ``sides`` and ``signals`` (the
    edge records) kept.
    """
    import networkx as nx

    if isinstance(circuit, MethodDetails):
        circuit = circuit.to_dict()
    graph = nx.DiGraph()
    for node in circuit["nodes"]:
        graph.add_node(node["id"], **node)
    for edge in circuit["edges"]:
        u, v = edge["source"], edge["target"]
        if graph.has_edge(u, v):
            data = graph.edges[u, v]
            data["attribution"] += edge["attribution"]
            data["sides"] = sorted(set(data["sides"]) | {edge["side"]})
            data["signals"].append(edge)
        else:
            graph.add_edge(u, v, attribution=edge["attribution"], sides=[edge["side"]], signals=[edge])
    return graph
