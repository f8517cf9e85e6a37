"""CircuitLasso's circuit over SAE features drawn as every circuit is (``render.vis``): the
features in their layers' rows (the earliest layer at the bottom), the metric at the top, an edge
per selected dependency (its width the |coefficient|, blue when positive, red and dashed when
negative), each feature named by its label when one is given.

The data is ``details.feature_circuit`` (``methods.lasso``): ``{layers, nodes: [{id, layer,
feature, prompt_activation}], edges: [{source, target, coefficient}], note}``. Pure; user text
(labels) is escaped in hovers and kept to canvas text on the drawing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..core.text import counted
from .graph_html import GraphDrawing, GraphEdge, canvas_caption, dash_pattern
from .vis import CHAR_WIDTH, LINE_HEIGHT, NODE_MARGIN, VisGraph, escape, frame_height, standalone_page

FONT = 20
POSITIVE, NEGATIVE = "#0072B2", "#D55E00"
FEATURE_COLOUR = "#F0E442"
CAPTION_CHARACTERS = 14  # each of a description's two lines under a feature's name
PER_ROW = 8  # features a row at most: a fitted drawing of 15 in a row was unreadable at 1,000 px
# a layer's row holds as many features as fit this many layout units (its labels at 10 px and more
# in the 504 px the expander leaves a 1,000 px window): eight named features a row were 1,900
# units wide, fitted at 4.9 px
ROW_UNITS = 900.0


def feature_caption(text: str) -> str:
    """A feature's description as the canvas writes it under its name: what it fires on, then
    (→) what it promotes, a line each of at most ``CAPTION_CHARACTERS``, its id left out (the name
    says it). Written whole ("L3/1286: fires on 'Mary', ...") and cut at 16 characters, it read
    "L3/1286: fires o…" under "L3 #1286"."""
    text = re.sub(r"^L\d+/\d+:\s*", "", " ".join(str(text).split()))
    parts = [part.strip() for part in text.split("; ") if part.strip()] or [text]
    lines = [re.sub(r"^promotes ", "→ ", re.sub(r"^fires on ", "on ", part)) for part in parts[:2]]
    return "\n".join(canvas_caption(line, CAPTION_CHARACTERS) for line in lines)


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
        return f"{name}\n{feature_caption(text)}" if text else name

    lines = max([label_of(n).count("\n") + 1 for n in nodes_in] or [1])
    width = max([len(line) for n in nodes_in for line in label_of(n).split("\n")] or [8])
    column = width * FONT * CHAR_WIDTH + 2 * NODE_MARGIN + 0.9 * FONT
    row = lines * FONT * LINE_HEIGHT + 2 * NODE_MARGIN + 1.2 * FONT
    layers = sorted({int(n["layer"]) for n in nodes_in})
    by_layer: dict[int, list[Mapping]] = {}
    for node in sorted(nodes_in, key=lambda n: (int(n["layer"]), int(n["feature"]))):
        by_layer.setdefault(int(node["layer"]), []).append(node)
    widest = max((len(members) for members in by_layer.values()), default=1)
    per_row = max(2, min(PER_ROW, int(ROW_UNITS // column)))
    across = min(widest, per_row)  # a wider layer wraps onto staggered rows of per_row
    # layers far enough apart that edges between them are not near-horizontal lines on top of each
    # other once the drawing is fitted to the frame (about 3:1 for the whole drawing at most)
    gap = max(row, across * column / (3.0 * (len(layers) + 1)))
    wrap = lines * FONT * LINE_HEIGHT + 2 * NODE_MARGIN + 0.8 * FONT  # between one layer's rows
    vis_nodes, y = [], 0.0
    for layer in layers:
        members = by_layer[layer]
        chunks = [members[start : start + per_row] for start in range(0, len(members), per_row)]
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
        + ("; under a name: what it fires on, → what it promotes" if labels else "")
    )
    more = (
        "CircuitLasso's circuit over SAE features: a feature is a node in its layer's row (earliest at "
        "the bottom), an edge a dependency the Lasso selected on a path into the metric; width says the "
        "|standardised coefficient| (a dependency skeleton, not an effect size). A layer of more features "
        "than a row holds wraps onto staggered rows."
        + (
            " Under a feature's name: the tokens it fires on in its top contexts and (→) the tokens it "
            "promotes; hover it for the whole description."
            if labels
            else ""
        )
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
