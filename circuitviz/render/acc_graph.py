"""ACC++ drawings: the position-resolved circuit as a graph page, and a decision's removal curve.

The graph is the shared attribution-graph drawing (``render.attribution_graph``): one column per
token position (the tokens as the axis), one row per layer (embeddings at the bottom, logits at
the top), the heads and the MLP of a layer side by side within their position's column. Query-
side signals are blue, key-side signals green, edges into the logits orange; width says the
summed attribution. Everything comes from a result's ``ACCDetails`` (plain data); user text is
escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ..positions.view import AttributionGraph, GraphLink, GraphNode
from .attribution_graph import attribution_graph_html
from .graph_html import KIND_COLOURS, GraphDrawing

SIDE_NAMES = {"q": "query side", "k": "key side", "logits": "direct effect on the answer"}
SIDE_COLOURS = {"q": KIND_COLOURS["q"], "k": KIND_COLOURS["k"], "logits": KIND_COLOURS["logits"]}
DEFAULT_MAX_EDGES = 800
_KINDS = {"head": "head", "mlp": "mlp", "input": "embedding", "logits": "logit", "bias": "other"}


def _decision_lines(decisions: Sequence[Mapping]) -> dict[str, str]:
    """Hover lines of a head node: each attention decision it makes."""
    return {
        f"decision {d['index']}": (
            f"attends {d['source_token']!r} (position {d['source']}) with weight {d['weight']:.3f}"
        )
        for d in decisions
    }


def _link_unit(edge: Mapping, decision: Mapping | None) -> str:
    """What an ACC++ signal edge is, for its hover: side, its signals' directions, attribution, the
    decision (it read "query side signal, singular direction(s) ... (rank 13)", a signal of rank 13
    where the page's counts take a signal for one direction)."""
    if edge["side"] == "logits":
        return (
            f"{edge['source']} → logits: direct effect {edge.get('direct_effect', edge['attribution']):+.4g}"
        )
    directions = ", ".join(str(k) for k in edge["directions"])
    text = (
        f"{SIDE_NAMES[edge['side']]} signal edge of rank {edge['rank']}: signal(s) along singular "
        f"direction(s) {directions}, "
        f"IG {edge['attribution']:+.4g} to the attention weight, weight drop {edge['weight_drop']:.3f}"
    )
    if decision is not None:
        text += f"; decision {decision['destination_token']!r} → {decision['source_token']!r}"
    return text


def acc_attribution_graph(details, title: str = "") -> AttributionGraph:
    """ACC++'s signals (a result's ``ACCDetails``) as the shared attribution-graph data: a node per
    component and position, a link per (upstream node, head node, side) weighted by its summed IG
    attribution (over the decisions of that head there; edges into the logits: over the seeds)."""
    decisions = list(details.decisions)
    by_node: dict[str, list[Mapping]] = {}
    for decision in decisions:
        by_node.setdefault(decision["node"], []).append(decision)
    nodes = [
        GraphNode(
            id=node["id"],
            component=str(node["component"]),
            kind=_KINDS.get(node["kind"], "other"),
            layer=int(node["layer"]),
            position=int(node["position"]),
            head=node.get("head"),
            details=_decision_lines(by_node.get(node["id"], [])),
        )
        for node in details.nodes
    ]
    # one link per (upstream node, head node, side): the signals of two decisions of one head at one
    # position (a15.h3 at ' of' attending ' of' and ' in'), or two seeds of one head reading two
    # sources, were two links on one line, the upper one's hover alone in reach, and two rows alike
    # on the card ("<- m11@9 (q) +0.0282", "<- m11@9 (q) +0.0267"); their IG is summed, their units joined
    merged: dict[tuple[str, str, str], GraphLink] = {}
    for edge in details.edges:
        decision = decisions[edge["decision"]] if edge.get("decision") is not None else None
        kind = edge["side"] if edge["side"] in ("q", "k") else "logits"
        key = (edge["source"], edge["target"], kind)
        unit = _link_unit(edge, decision)
        if key in merged:
            link = merged[key]
            link.weight += float(edge["attribution"])
            link.unit = f"{link.unit} + {unit}"
        else:
            merged[key] = GraphLink(edge["source"], edge["target"], float(edge["attribution"]), kind, unit)
    links = list(merged.values())
    by_id = {node.id: node for node in nodes}
    for link in links:
        if link.source in by_id:
            by_id[link.source].influence += abs(link.weight)
    layers = [node.layer for node in nodes if node.kind != "logit"]
    return AttributionGraph(
        tokens=list(details.tokens),
        nodes=nodes,
        links=links,
        n_layers=max(layers, default=-1) + 1,
        title=title,
    )


def position_graph_html(
    details,
    *,
    title: str = "",
    max_edges: int = DEFAULT_MAX_EDGES,
    highlight_decision: int | None = None,
    height_px: int | None = None,
) -> GraphDrawing:
    """The ACC++ circuit in ``details`` (a result's ``ACCDetails``) as one standalone HTML page,
    in the same drawing as every position-resolved circuit (``render.attribution_graph``).

    ``highlight_decision``: draw that decision's signals bold (default: the strongest paths).
    """
    graph = acc_attribution_graph(details, title)
    notes = (
        [] if details.edges else ["ACC++ found no attention decision above the threshold for this prompt."]
    )
    highlight = None
    if highlight_decision is not None:
        highlight = {
            (e["source"], e["target"]) for e in details.edges if e.get("decision") == highlight_decision
        }
    return attribution_graph_html(  # a signal's weight is an attention attribution, not the metric's change
        graph,
        highlight=highlight,
        max_links=max_edges,
        height_px=height_px,
        notes=notes,
        estimates_metric=False,
        bold=f"decision #{highlight_decision}'s signals" if highlight_decision is not None else "",
    )


def removal_figure(decision: Mapping, height: int = 320) -> go.Figure:
    """How the decision's attention weight falls as its signals are removed one by one.

    One line per side (query, key): step 0 is the clean weight, step i the weight after the
    i-th removal; the dotted line is the threshold tau(d). Hover names the removed signal. The x
    axis counts whole signals; the y axis runs from 0 to a little over the highest weight.
    """
    figure = go.Figure()
    for side, label in (("q", "query"), ("k", "key")):
        record = decision[label]
        curve = record["curve"]
        removed = ["(clean)"] + [
            f"{r['node']} direction {r['direction']}, IG {r['attribution']:+.3g}" for r in record["removals"]
        ]
        figure.add_trace(
            go.Scatter(
                x=list(range(len(curve))),
                y=curve,
                mode="lines+markers",
                name=f"{SIDE_NAMES[side]} signals removed",
                line={"color": SIDE_COLOURS[side], "width": 2.5, "dash": "solid" if side == "q" else "dash"},
                customdata=removed[: len(curve)],
                hovertemplate="after %{x} removals: weight %{y:.3f}<br>removed %{customdata}<extra></extra>",
            )
        )
    # the threshold as a legend entry, not a label on the chart, which the curves cross
    steps = max((len(decision[label]["curve"]) for label in ("query", "key")), default=1)
    figure.add_trace(
        go.Scatter(
            x=[0, max(steps - 1, 1)],
            y=[decision["threshold"]] * 2,
            mode="lines",
            name=f"threshold tau = {decision['threshold']:.3f}",
            line={"dash": "dot", "color": "#555555"},
            hoverinfo="skip",
        )
    )
    # a count: whole ticks (a decision of one signal a side had ticks 0, 0.2, ... 1 "signals removed");
    # the weight's axis up to a little over its highest point, so a fall from 0.172 to 0.160 across
    # tau = 0.167 is seen (on 0 to 1 the lines and tau lay on one another)
    highest = max(
        [decision["threshold"], *(w for label in ("query", "key") for w in decision[label]["curve"])]
    )
    figure.update_layout(
        height=height,
        margin={"l": 50, "r": 20, "t": 30, "b": 40},
        xaxis_title="signals removed",  # largest IG first: the heading above the chart says so
        xaxis={"tick0": 0, "dtick": 1} if steps <= 11 else {"tickformat": "d"},
        yaxis_title="attention weight",
        yaxis={"range": [0, min(1.02, max(0.05, 1.15 * highest))]},
        # at the figure's foot, under the axis's title (plotly grows the bottom margin for its rows):
        # at y -0.2 one row of it sat on the axis's ticks and title, and above the plot it ran under
        # plotly's mode bar at the top right at 1,000 px
        legend={
            "orientation": "h",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "xanchor": "left",
            "x": 0,
        },
    )
    return figure
