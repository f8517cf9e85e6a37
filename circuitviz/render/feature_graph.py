"""CircuitLasso's circuit over SAE features drawn as every circuit is (``render.vis``): the
features in their layers' rows (the earliest layer at the bottom), the metric at the top, an edge
per selected dependency (its width the |coefficient|, blue when positive, red and dashed when
negative), each feature named by its label when one is given.

The data is ``details.feature_circuit`` (``methods.lasso``): ``{layers, nodes: [{id, layer,
feature, prompt_activation}], edges: [{source, target, coefficient}], note}``. Pure; user text
(labels) is escaped in hovers and kept to canvas text on the drawing.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.text import counted
from .graph_html import GraphDrawing, GraphEdge, canvas_caption, dash_pattern
from .vis import CHAR_WIDTH, LINE_HEIGHT, NODE_MARGIN, VisGraph, escape, frame_height, standalone_page

FONT = 20
POSITIVE, NEGATIVE = "#0072B2", "#D55E00"
FEATURE_COLOUR = "#F0E442"
CAPTION_CHARACTERS = 16
PER_ROW = 8  # features a row at most: a fitted drawing of 15 in a row was unreadable at 1,000 px


def feature_circuit_html(
    circuit: Mapping, labels: Mapping[str, str] | None = None, title: str = "", max_edges: int = 600
) -> GraphDrawing:
    """The feature circuit as a ``GraphDrawing`` (its ``vis`` for the app, its page for download)."""
    nodes_in = list(circuit.get("nodes") or [])
    edges_in = sorted(circuit.get("edges") or [], key=lambda e: -abs(float(e.get("coefficient", 0.0))))
    drawn = edges_in[: max(0, int(max_edges))]
    notes = [str(circuit["note"])] if circuit.get("note") else []
    if len(edges_in) > len(drawn):
        notes.append(f"Drawing the {len(drawn):,} strongest of {len(edges_in):,} dependencies.")
    if not nodes_in:
        notes.append("The feature circuit is empty: no SAE feature has a selected path into the metric.")
    labels = labels or {}

    def label_of(node: Mapping) -> str:
        name = f"L{node['layer']} #{node['feature']}"
        text = labels.get(str(node["id"]))
        return f"{name}\n{canvas_caption(text, CAPTION_CHARACTERS)}" if text else name

    lines = 2 if any(labels.get(str(n["id"])) for n in nodes_in) else 1
    width = max([len(line) for n in nodes_in for line in label_of(n).split("\n")] or [8])
    column = width * FONT * CHAR_WIDTH + 2 * NODE_MARGIN + 0.9 * FONT
    row = lines * FONT * LINE_HEIGHT + 2 * NODE_MARGIN + 1.2 * FONT
    layers = sorted({int(n["layer"]) for n in nodes_in})
    by_layer: dict[int, list[Mapping]] = {}
    for node in sorted(nodes_in, key=lambda n: (int(n["layer"]), int(n["feature"]))):
        by_layer.setdefault(int(node["layer"]), []).append(node)
    widest = max((len(members) for members in by_layer.values()), default=1)
    across = min(widest, PER_ROW)  # a wider layer wraps onto staggered rows of PER_ROW
    # layers far enough apart that edges between them are not near-horizontal lines on top of each
    # other once the drawing is fitted to the frame (about 3:1 for the whole drawing at most)
    gap = max(row, across * column / (3.0 * (len(layers) + 1)))
    wrap = lines * FONT * LINE_HEIGHT + 2 * NODE_MARGIN + 0.8 * FONT  # between one layer's rows
    vis_nodes, y = [], 0.0
    for layer in layers:
        members = by_layer[layer]
        chunks = [members[start : start + PER_ROW] for start in range(0, len(members), PER_ROW)]
        for sub, chunk in enumerate(chunks):
            first = -(len(chunk) - 1) * column / 2 + (column / 2 if sub % 2 else 0.0)
            for index, node in enumerate(chunk):
                vis_nodes.append(
                    _feature_node(node, label_of(node), labels, first + index * column, y - sub * wrap)
                )
        y -= (len(chunks) - 1) * wrap + gap
    target = str(circuit.get("target") or "metric")
    vis_nodes.append(
        {
            "id": target,
            "label": "the metric",
            "title": "the answer's metric (the regression's target)",
            "x": 0.0,
            "y": y,
            "shape": "box",
            "color": {"background": "#4d4d4d", "border": "#333333"},
            "font": {"size": FONT, "color": "#ffffff"},
        }
    )
    top = max((abs(float(e["coefficient"])) for e in drawn), default=1.0) or 1.0
    vis_edges, graph_edges = [], []
    for edge in drawn:
        value = float(edge["coefficient"])
        vis_edges.append(
            {
                "id": f"{edge['source']}->{edge['target']}",
                "from": str(edge["source"]),
                "to": str(edge["target"]),
                "title": f"{escape(edge['source'])} → {escape(edge['target'])}<br>coefficient {value:+.4g}",
                "color": {"color": POSITIVE if value >= 0 else NEGATIVE, "opacity": 0.9},
                "width": 1 + 6 * abs(value) / top,
                "dashes": dash_pattern(value < 0, 1 + 6 * abs(value) / top),
                "smooth": False,
                "arrows": {"to": {"enabled": True, "scaleFactor": 0.4}},
            }
        )
        graph_edges.append(
            GraphEdge(vis_edges[-1]["id"], str(edge["source"]), str(edge["target"]), "link", value)
        )
    legend = (
        f'<span class="cv-item"><span class="cv-line" style="border-top:3px solid {POSITIVE}"></span>positive</span>'
        f'<span class="cv-item"><span class="cv-line" style="border-top:3px dashed {NEGATIVE}"></span>negative</span>'
        "width: |coefficient|; rows: layers, the metric at the top"
    )
    more = (
        "CircuitLasso's circuit over SAE features: a feature is a node in its layer's row (earliest at "
        "the bottom), an edge a dependency the Lasso selected on a path into the metric; width says the "
        f"|standardised coefficient| (a dependency skeleton, not an effect size). A layer of more than {PER_ROW} "
        "features wraps onto staggered rows."
    )
    graph = VisGraph(
        vis_nodes, vis_edges, legend=legend, legend_more=more, title=title, notes=notes, kind="features"
    )
    return GraphDrawing(
        html=standalone_page(graph),
        height=frame_height(graph, 1000, 60 + 18 * len(notes)),
        nodes=[n["id"] for n in vis_nodes],
        edges=graph_edges,
        n_circuit_edges=len(edges_in),
        n_left_out=len(edges_in) - len(drawn),
        notes=notes,
        vis=graph,
    )


def _twins_line(node: Mapping) -> list[str]:
    """The tooltip's line naming the features merged into this one (none: no line)."""
    twins = [int(feature) for feature in node.get("twins") or []]
    if not twins:
        return []
    shown = ", ".join(f"#{feature}" for feature in twins[:8]) + (
        f" and {len(twins) - 8} more" if len(twins) > 8 else ""
    )
    return [f"stands for {counted(len(twins), 'identical feature')} of its layer: {shown}"]


def _feature_node(node: Mapping, label: str, labels: Mapping[str, str], x: float, y: float) -> dict:
    """One feature's box at (x, y), its tooltip naming it, its prompt activation and its twins."""
    return {
        "id": str(node["id"]),
        "label": label,
        "title": "<br>".join(
            [
                f"<b>{escape(node['id'])}</b>",
                f"SAE feature {int(node['feature'])} of layer {int(node['layer'])}",
                f"mean activation on the prompt: {float(node.get('prompt_activation', 0.0)):.4g}",
                *_twins_line(node),
                *([escape(labels[str(node["id"])])] if labels.get(str(node["id"])) else []),
            ]
        ),
        "x": x,
        "y": y,
        "shape": "box",
        "color": {"background": FEATURE_COLOUR, "border": "#333333"},
        "font": {"size": FONT, "color": "#111111"},
    }
