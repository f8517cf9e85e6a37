"""ACC++ drawings: the position-resolved circuit as a graph page, and a decision's removal curve.

The graph is laid out on a grid: one column per token position (the token written above it),
one row per layer (input at the top, logits at the bottom), the heads and the MLP of a layer
side by side within their position's column. Query-side signals are solid blue, key-side
signals dashed green, edges into the logits orange; width says the summed attribution.
Everything comes from a result's ``ACCDetails`` (plain data); user text is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from .graph_html import FADED, KIND_COLOURS, NODE_COLOURS, GraphDrawing, _escape, _finish_page

SIDE_NAMES = {"q": "query side", "k": "key side", "logits": "direct effect on the answer"}
SIDE_COLOURS = {"q": KIND_COLOURS["q"], "k": KIND_COLOURS["k"], "logits": KIND_COLOURS["logits"]}
SLOT_SPACING = 62
COLUMN_GAP = 46
ROW_SPACING = 58
ROW_LABEL_GAP = 70  # the layer names sit left of the first column
FONT_SIZE = 22
DEFAULT_MAX_EDGES = 800


def _slot(node: Mapping) -> tuple[int, int]:
    """Order within a (position, layer) cell: heads by index, then the MLP, then the rest."""
    if node["kind"] == "head":
        return (0, int(node["head"]))
    return (1 if node["kind"] == "mlp" else 2, 0)


def short_label(node: Mapping) -> str:
    """A node's name inside its cell (the row says the layer, the column the position)."""
    if node["kind"] == "head":
        return f"h{node['head']}"
    return {"mlp": "MLP", "input": "emb", "logits": "logit", "bias": "bias"}.get(
        node["kind"], str(node["kind"])
    )


def layer_rows(nodes: Sequence[Mapping]) -> list[int]:
    """The layers that hold nodes, top to bottom: a row each, so no row is empty."""
    return sorted({int(node["layer"]) for node in nodes})


def position_layout(nodes: Sequence[Mapping]) -> tuple[dict[str, tuple[float, float]], dict[int, float]]:
    """(x, y) of every node, and the x of each position's column.

    y by layer row (input on top, logits at the bottom; only layers that hold nodes get a row);
    x by token position, only positions that hold nodes get a column, as wide as its busiest
    layer; the nodes of one (position, layer) cell sit side by side.
    """
    cells: dict[tuple[int, int], list[Mapping]] = {}
    for node in nodes:
        cells.setdefault((node["position"], node["layer"]), []).append(node)
    widths: dict[int, int] = {}
    for (position, _), members in cells.items():
        widths[position] = max(widths.get(position, 1), len(members))
    centres: dict[int, float] = {}
    x = 0.0
    for position in sorted(widths):
        span = widths[position] * SLOT_SPACING
        centres[position] = x + span / 2
        x += span + COLUMN_GAP
    rows = layer_rows(nodes)
    layout = {}
    for (position, layer), members in cells.items():
        members = sorted(members, key=_slot)
        first = centres[position] - (len(members) - 1) * SLOT_SPACING / 2
        for index, node in enumerate(members):
            layout[node["id"]] = (first + index * SLOT_SPACING, (rows.index(int(layer)) + 1) * ROW_SPACING)
    return layout, centres


def fitted_height(layout_width: float, layout_height: float, frame_width: float = 1150) -> int:
    """The canvas height (px) at which the layout, scaled to the frame's width, fills it."""
    scale = frame_width / max(layout_width, 1.0)
    return int(min(720, max(260, layout_height * scale + 40)))


def _legend(title: str, notes: list[str]) -> str:
    items = "".join(
        f'<span class="cv-item"><span class="cv-line" style="border-top:3px {style} {SIDE_COLOURS[side]}">'
        f"</span>{SIDE_NAMES[side]}</span>"
        for side, style in (("q", "solid"), ("k", "dashed"), ("logits", "solid"))
    )
    items += (
        '<span class="cv-item">width = |attribution|; columns = token positions, rows = layers (L), '
        "h = head, MLP, emb = embedding</span>"
    )
    heading = f'<div class="cv-title">{_escape(title)}</div>' if title else ""
    note_html = "".join(f'<div class="cv-note">{_escape(note)}</div>' for note in notes)
    return f'<div class="cv-legend">{heading}<div>{items}</div>{note_html}</div>'


def _node_title(node: Mapping, decisions: Sequence[Mapping]) -> str:
    kinds = {
        "head": f"attention head {node['head']} of layer {node['layer']}",
        "mlp": f"MLP of layer {node['layer']}",
        "input": "token (and position) embedding",
        "bias": "constant terms (biases)",
        "logits": "the answer's logit",
    }
    lines = [
        f"<b>{_escape(node['id'])}</b>",
        kinds.get(node["kind"], node["kind"]),
        f"position {node['position']}: {_escape(repr(node.get('token', '')))}",
    ]
    for decision in decisions:
        lines.append(
            f"attends {_escape(repr(decision['source_token']))} (position {decision['source']}) "
            f"with weight {decision['weight']:.3f}"
        )
    return "<br>".join(lines)


def _edge_title(edge: Mapping, decision: Mapping | None) -> str:
    lines = [f"<b>{_escape(edge['source'])} → {_escape(edge['target'])}</b>", SIDE_NAMES[edge["side"]]]
    if edge["side"] == "logits":
        lines.append(f"direct effect {edge.get('direct_effect', edge['attribution']):+.4g}")
    else:
        directions = ", ".join(str(k) for k in edge["directions"])
        lines.append(f"singular direction(s) {directions} (rank {edge['rank']})")
        lines.append(f"IG attribution {edge['attribution']:+.4g}; weight drop {edge['weight_drop']:.3f}")
        if decision is not None:
            lines.append(
                f"for the decision {_escape(repr(decision['destination_token']))} → "
                f"{_escape(repr(decision['source_token']))} (weight {decision['weight']:.3f})"
            )
        if edge.get("via_source") is not None:
            lines.append(f"the upstream head's output read from position {edge['via_source']}")
    return "<br>".join(lines)


def position_graph_html(
    details,
    *,
    title: str = "",
    max_edges: int = DEFAULT_MAX_EDGES,
    highlight_decision: int | None = None,
    height_px: int | None = None,
) -> GraphDrawing:
    """The ACC++ circuit in ``details`` (a result's ``ACCDetails``) as one standalone HTML page.

    ``highlight_decision``: draw that decision's signals in colour and the rest in grey.
    """
    from pyvis.network import Network

    nodes = list(details.nodes)
    edges = sorted(details.edges, key=lambda e: -abs(e["attribution"]))
    drawn = edges[: max(0, int(max_edges))]
    notes = []
    if len(edges) > len(drawn):
        notes.append(f"Drawing the {len(drawn):,} strongest of {len(edges):,} signal edges.")
    if not edges:
        notes.append("ACC++ found no attention decision above the threshold for this prompt.")
    decisions = list(details.decisions)
    by_node: dict[str, list[Mapping]] = {}
    for decision in decisions:
        by_node.setdefault(decision["node"], []).append(decision)
    layout, centres = position_layout(nodes)
    rows = layer_rows(nodes) or [0]
    top = 0.0
    width = (max(centres.values(), default=0.0) + SLOT_SPACING) + ROW_LABEL_GAP
    if height_px is None:
        height_px = fitted_height(width, (len(rows) + 1.5) * ROW_SPACING)
    network = Network(height=f"{height_px}px", width="100%", directed=True, cdn_resources="in_line")
    left = min(centres.values(), default=0.0) - SLOT_SPACING / 2 - ROW_LABEL_GAP
    kinds = {}
    for node in nodes:
        kinds.setdefault(int(node["layer"]), set()).add(node["kind"])
    for row, layer in enumerate(rows):
        name = "input" if layer < 0 else ("output" if kinds.get(layer) == {"logits"} else f"L{layer}")
        network.add_node(
            f"layer@{layer}",
            label=name,
            x=left,
            y=(row + 1) * ROW_SPACING,
            physics=False,
            shape="text",
            font={"size": FONT_SIZE, "color": "#666666"},
        )
    tokens = list(details.tokens)
    for position, x in centres.items():
        token = tokens[position] if position < len(tokens) else ""
        network.add_node(
            f"token@{position}",
            label=f"{position}\n{repr(token)[:12]}".replace("<", "‹").replace(">", "›"),
            title=f"position {position}: {_escape(repr(token))}",
            x=x,
            y=top,
            physics=False,
            shape="text",
            font={"size": FONT_SIZE, "color": "#222222"},
        )
    for node in nodes:
        x, y = layout[node["id"]]
        kind = node["kind"] if node["kind"] in NODE_COLOURS else "input"
        network.add_node(
            node["id"],
            label=short_label(node),
            title=_node_title(node, by_node.get(node["id"], [])),
            x=x,
            y=y,
            physics=False,
            shape="ellipse" if node["kind"] == "head" else "box",
            color={"background": NODE_COLOURS.get(kind, "#cccccc"), "border": "#333333"},
            font={"size": FONT_SIZE, "color": "#ffffff" if kind in ("input", "logits") else "#111111"},
        )
    scale = max((abs(e["attribution"]) for e in drawn), default=1.0) or 1.0
    for edge in drawn:
        decision = decisions[edge["decision"]] if edge.get("decision") is not None else None
        lit = highlight_decision is None or edge.get("decision") == highlight_decision
        network.add_edge(
            edge["source"],
            edge["target"],
            title=_edge_title(edge, decision),
            color={"color": SIDE_COLOURS[edge["side"]] if lit else FADED, "opacity": 1.0 if lit else 0.5},
            width=1 + 6 * abs(edge["attribution"]) / scale,
            dashes=edge["side"] == "k",
            smooth={"type": "curvedCW", "roundness": 0.15} if edge["side"] == "k" else False,
            arrows={"to": {"enabled": True, "scaleFactor": 0.4}},
        )
    network.set_options(
        json.dumps(
            {
                "physics": {"enabled": False},
                "interaction": {"hover": True, "tooltipDelay": 80, "zoomView": False},
                "nodes": {"margin": 5, "scaling": {"label": {"drawThreshold": 3}}},
            }
        )
    )
    page = _finish_page(network.generate_html(), _legend(title, notes))
    return GraphDrawing(
        html=page,
        height=height_px + 70,
        nodes=[node["id"] for node in nodes],
        edges=drawn,
        n_circuit_edges=len(edges),
        n_left_out=len(edges) - len(drawn),
        notes=notes,
    )


def removal_figure(decision: Mapping, height: int = 320) -> go.Figure:
    """How the decision's attention weight falls as its signals are removed one by one.

    One line per side (query, key): step 0 is the clean weight, step i the weight after the
    i-th removal; the dotted line is the threshold tau(d). Hover names the removed signal.
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
    figure.add_hline(
        y=decision["threshold"],
        line={"dash": "dot", "color": "#555555"},
        annotation_text=f"tau = {decision['threshold']:.3f}",
        annotation_position="top right",
    )
    figure.update_layout(
        height=height,
        margin={"l": 50, "r": 20, "t": 30, "b": 40},
        xaxis_title="signals removed (largest IG first)",
        yaxis_title="attention weight",
        yaxis={"range": [0, 1.02]},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure
