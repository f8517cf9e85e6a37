"""A circuit as a standalone interactive graph page (pyvis, every script inline, no network).

The layout is layered and fixed, so two circuits of one model are drawn in the same places:
``input`` at the top, one row per layer (its heads in a row, the MLP beside them), ``logits`` at
the bottom; physics is off. Edge colour says which input of the destination the edge feeds
(q, k, v, MLP, logits), width says |score|, dashes mark negative scores; the legend above the
canvas says so in words. Each node can carry a caption on the canvas under its name (what it
does: its top promoted token, or its strongest SAE feature). The canvas is sized to the layout,
so the graph fills its frame; the mouse wheel scrolls the page (zoom has its own buttons).
Hovering a node shows its name, layer/head, score in this circuit and labels; hovering an edge
shows its source, destination, kind and score. Every piece of user text (prompts, tokens,
labels) is escaped.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch

from ..graph import GraphSpec

KIND_COLOURS = {
    "q": "#0072B2",
    "k": "#009E73",
    "v": "#E69F00",
    "mlp": "#CC79A7",
    "logits": "#D55E00",
}
KIND_NAMES = {"q": "query", "k": "key", "v": "value", "mlp": "MLP input", "logits": "logits"}
NODE_COLOURS = {"input": "#4d4d4d", "head": "#56B4E9", "mlp": "#F0E442", "logits": "#4d4d4d"}
FADED = "#d9d9d9"
DEFAULT_MAX_EDGES = 1500
MIN_COLUMN_SPACING = 120
LAYOUT_WIDTH = 1100  # models with few heads spread their row over this width
ROW_SPACING = 80
FONT_SIZE = 26  # layout units: 18 layer rows fitted to 760 px draw it at about 12 px
MLP_DROP = 0.4  # the MLP sits a little below its heads, so head -> MLP edges don't run through heads
LOGITS_DROP = 0.6  # the logits sit clear of the last layer's two-line node labels
_HEAD_NAME = re.compile(r"^a(\d+)\.h(\d+)$")


@dataclass(frozen=True)
class GraphEdge:
    """One edge to draw: EAP-IG name, its parts and its score."""

    name: str
    source: str
    target: str
    kind: str
    score: float


@dataclass
class GraphDrawing:
    """What was drawn: the page, and how much of the circuit it holds."""

    html: str
    height: int  # px the page needs (canvas and legend)
    nodes: list[str]
    edges: list[GraphEdge]
    n_circuit_edges: int
    n_left_out: int
    notes: list[str] = field(default_factory=list)


def node_position(
    spec: GraphSpec, name: str, layers: list[int] | None = None, layout_width: float = LAYOUT_WIDTH
) -> tuple[float, float]:
    """(x, y) of a node in the layered layout; the same for every circuit drawn with ``layers``.

    ``layers``: the layers given a row (default: all); input is above them, logits below.
    ``layout_width``: how wide a layer's row may spread (narrow for graphs side by side).
    """
    rows = list(range(spec.n_layers)) if layers is None else sorted(layers)
    width = spec.n_heads + 1  # heads, then the MLP beside them
    centre = (width - 1) / 2
    spacing = column_spacing(spec, layout_width)
    if name == "input":
        return 0.0, 0.0
    if name == "logits":
        return 0.0, float((len(rows) + 1 + LOGITS_DROP) * ROW_SPACING)
    layer = spec.node_layer(name)
    row = rows.index(layer) if layer in rows else sum(1 for r in rows if r < layer)
    y = float((row + 1) * ROW_SPACING)
    match = _HEAD_NAME.match(name)
    if match:
        return float((int(match.group(2)) - centre) * spacing), y
    return float((spec.n_heads + 0.2 - centre) * spacing), y + MLP_DROP * ROW_SPACING


def column_spacing(spec: GraphSpec, layout_width: float = LAYOUT_WIDTH) -> float:
    """Horizontal distance between heads: wide for few heads (so edges spread out), never tight."""
    return max(MIN_COLUMN_SPACING, layout_width / (spec.n_heads + 1))


def drawn_layers(spec: GraphSpec, node_names) -> list[int]:
    """The layers that hold at least one of ``node_names`` (rows of a compact layout)."""
    layers = {spec.node_layer(name) for name in node_names if name not in ("input", "logits")}
    return sorted(layers)


def graph_height(n_rows: int) -> int:
    """A canvas height (px) for a layout of ``n_rows`` layer rows: legible, and no taller than a
    laptop screen keeps in view (about 46 px a row, 300 to 760 px)."""
    return int(min(760, max(300, 110 + 46 * n_rows)))


def fitted_layout_width(spec: GraphSpec, n_rows: int, height_px: int, frame_width: float) -> float:
    """The row spread that gives the layout the canvas's own aspect ratio, so the fitted graph
    fills a ``frame_width`` x ``height_px`` canvas instead of floating in blank space."""
    layout_height = (n_rows + 1 + LOGITS_DROP) * ROW_SPACING
    wanted = layout_height * frame_width / max(height_px, 1)
    return max(LAYOUT_WIDTH / 2, wanted * (spec.n_heads + 1) / (spec.n_heads + 0.2))


def canvas_caption(text: str, limit: int = 18) -> str:
    """A caption drawn on the canvas: one line, at most ``limit`` characters, angle brackets
    swapped for look-alikes (the label travels inside the page's script as JSON)."""
    text = " ".join(str(text).split()) if str(text).strip() else repr(str(text))
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("<", "‹").replace(">", "›")


def canvas_caption_of(name: str, caption: str | None) -> str:
    """A node's label on the canvas: its name, and its caption on a second line when it has one."""
    return name if caption is None else f"{name}\n{canvas_caption(caption)}"


def circuit_edges(spec: GraphSpec, scores: torch.Tensor, mask: torch.Tensor) -> list[GraphEdge]:
    """The circuit's edges, strongest |score| first (ties in graph order)."""
    forward, backward = spec.edge_index
    keep = (mask & spec.edge_mask)[forward, backward]
    edge_scores = scores[forward, backward].tolist()
    chosen = [i for i, flag in enumerate(keep.tolist()) if flag]
    chosen.sort(key=lambda i: -abs(edge_scores[i]))
    edges = []
    for i in chosen:
        source = spec.forward_names[forward[i]]
        reader = spec.backward_names[backward[i]]
        target = reader.split("<")[0]
        edges.append(
            GraphEdge(spec.edge_names[i], source, target, spec.backward_kind[backward[i]], edge_scores[i])
        )
    return edges


def node_scores(edges: Iterable[GraphEdge]) -> dict[str, float]:
    """A node's score in a circuit: the summed scores of its edges out (logits: its edges in)."""
    totals: dict[str, float] = {}
    for edge in edges:
        totals[edge.source] = totals.get(edge.source, 0.0) + edge.score
        if edge.target == "logits":
            totals["logits"] = totals.get("logits", 0.0) + edge.score
    return totals


def _escape(text: object) -> str:
    """HTML-escape, and break the word 'href' (pyvis switches to raw-HTML tooltips on it)."""
    return html.escape(str(text), quote=True).replace("href", "&#104;ref")


def _node_title(spec: GraphSpec, name: str, score: float | None, labels: Mapping[str, object] | None) -> str:
    lines = [f"<b>{_escape(name)}</b>"]
    match = _HEAD_NAME.match(name)
    if match:
        lines.append(f"attention head {match.group(2)} of layer {match.group(1)}")
    elif name.startswith("m"):
        lines.append(f"MLP of layer {spec.node_layer(name)}")
    elif name == "input":
        lines.append("token and position embeddings")
    else:
        lines.append("the model's output (reads the final residual stream)")
    if score is not None:
        lines.append(f"score in this circuit: {score:+.4g}")
    for key, value in (labels or {}).items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(f"'{v}'" for v in value)  # quotes keep leading spaces visible
        lines.append(f"{_escape(str(key).replace('_', ' '))}: {_escape(value)}")
    return "<br>".join(lines)


def _edge_title(edge: GraphEdge) -> str:
    sign = "positive" if edge.score >= 0 else "negative"
    return "<br>".join(
        [
            f"<b>{_escape(edge.name)}</b>",
            f"from {_escape(edge.source)} to {_escape(edge.target)}",
            f"feeds the {KIND_NAMES.get(edge.kind, edge.kind)} input",
            f"score {edge.score:+.4g} ({sign})",
        ]
    )


def _legend_html(
    title: str, notes: list[str], caption: str = "", compact: bool = False, width_key: str = ""
) -> str:
    """The key in words: colour = which input of the target an edge feeds, width = |score|,
    dashes = a negative score, and what the caption under a node's name is; ``compact``: the
    short words of a narrow frame (side-by-side graphs), each key on lines of its own."""
    swatches = "".join(
        f'<span class="cv-item"><span class="cv-line" style="border-top:3px solid {colour}"></span>'
        f"{KIND_NAMES[kind]}</span>"
        for kind, colour in KIND_COLOURS.items()
    )
    signs = (
        '<span class="cv-item"><span class="cv-line" style="border-top:4px solid #555"></span>'
        "width: |score|, the estimated change of the answer's metric if the edge is corrupted</span>"
        '<span class="cv-item"><span class="cv-line" style="border-top:3px dashed #555"></span>'
        "dashed: negative score (corrupting the edge lowers the metric: it carries the answer); "
        "solid: positive (it works against the answer)</span>"
    )
    if compact:
        signs = (
            '<span class="cv-item"><span class="cv-line" style="border-top:4px solid #555"></span>'
            "width: |score|</span>"
            '<span class="cv-item"><span class="cv-line" style="border-top:3px dashed #555"></span>'
            "dashed: carries the answer (negative score)</span>"
        )
    if width_key:
        signs = (
            '<span class="cv-item"><span class="cv-line" style="border-top:4px solid #555"></span>'
            f"width: {_escape(width_key)}</span>"
        )
    colour_key = f'<span class="cv-key">edge colour = the input it feeds:</span>{swatches}'
    node_key = f'<div class="cv-key">{_escape(caption)}</div>' if caption else ""
    note_html = "".join(f'<div class="cv-note">{_escape(note)}</div>' for note in notes)
    heading = f'<div class="cv-title">{_escape(title)}</div>' if title else ""
    controls = (
        '<span class="cv-zoom"><button onclick="cvZoom(1.25)" title="zoom in">+</button>'
        '<button onclick="cvZoom(0.8)" title="zoom out">&minus;</button>'
        '<button onclick="network.fit()" title="fit the graph to the frame">fit</button></span>'
    )
    return (
        f'<div class="cv-legend">{controls}{heading}<div>{colour_key}</div><div>{signs}</div>'
        f"{node_key}{note_html}</div>"
    )


_STYLE = """
<style>
html, body { overflow: hidden; }
body { margin: 0; font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
.cv-legend { font-size: 13px; padding: 6px 8px; color: #222; }
.cv-title { font-weight: 600; margin-bottom: 4px; }
.cv-item { display: inline-flex; align-items: center; margin-right: 14px; }
.cv-line { display: inline-block; width: 26px; margin-right: 5px; }
.cv-note { color: #8a4b00; margin-top: 3px; }
.cv-key { color: #444; margin-right: 8px; }
.cv-zoom { float: right; }
.cv-zoom button { font-size: 14px; min-width: 30px; margin-left: 4px; cursor: pointer; }
#mynetwork { float: none !important; border: 1px solid #e6e6e6 !important; box-sizing: border-box; }
.card { width: 100% !important; box-sizing: border-box; }
div.vis-tooltip { white-space: normal; max-width: 420px; font-size: 13px; line-height: 1.35; }
</style>
"""

# vis-network shows string titles as plain text; ours are escaped HTML built here, so they are
# turned into elements before the network is made (never from unescaped user text).
_TITLE_SCRIPT = """
function cvTitles(dataset) {
  dataset.forEach(function (item) {
    if (typeof item.title === "string") {
      var box = document.createElement("div");
      box.innerHTML = item.title;
      dataset.update({id: item.id, title: box});
    }
  });
}
cvTitles(nodes); cvTitles(edges);
network = new vis.Network(container, data, options);
// the frame may get its final size after the first draw (columns, tabs): fit the graph again then
window.addEventListener("resize", function () { network.fit(); });
setTimeout(function () { network.fit(); }, 250);
// the wheel scrolls the page, not the graph: zoom with the buttons in the legend
function cvZoom(factor) { network.moveTo({scale: network.getScale() * factor}); }
"""


def circuit_graph_html(
    spec: GraphSpec,
    scores: torch.Tensor,
    mask: torch.Tensor,
    *,
    labels: Mapping[str, Mapping[str, object]] | None = None,
    highlight: set[str] | None = None,
    show_faded: bool = False,
    max_edges: int = DEFAULT_MAX_EDGES,
    title: str = "",
    height_px: int | None = None,
    layers: list[int] | None = None,
    layout_width: float | None = None,
    frame_width: float = 1150,
    captions: Mapping[str, str] | None = None,
    caption_key: str = "",
    others: str = "grey",
    width_key: str = "",
) -> GraphDrawing:
    """The circuit ``mask`` [n_forward, n_backward] with ``scores`` as one standalone HTML page.

    ``highlight``: edge names drawn in colour while every other edge is greyed (overlaps,
    intersections). ``show_faded``: also draw the model's nodes outside the circuit, in grey.
    At most ``max_edges`` edges are drawn, the strongest; the page says how many were left out.
    ``layers``: the layer rows of the layout (default: the layers this circuit uses, or all
    layers with ``show_faded``); give several circuits the same list to draw them alike.
    ``layout_width``: the spread of a row (default: fitted to a ``frame_width`` px wide frame, so
    the graph fills its canvas). ``captions``: a short text per node drawn under its name (what
    it does), and ``caption_key`` the legend's sentence saying what those captions are.
    ``others``: how the edges outside ``highlight`` are drawn: "grey", or "colour" (their own
    colour, thin and translucent, so a graph most of whose edges are shared is not grey).
    ``width_key``: what width means when ``scores`` are not attribution scores (the consensus
    circuit's share of prompts); its legend then says that, and nothing about signs.
    """
    from pyvis.network import Network

    all_edges = circuit_edges(spec, scores, mask)
    drawn = all_edges[: max(0, int(max_edges))]
    left_out = len(all_edges) - len(drawn)
    notes = []
    if left_out:
        notes.append(
            f"Drawing the {len(drawn):,} strongest of {len(all_edges):,} circuit edges; "
            f"{left_out:,} weaker ones are left out to keep the page responsive."
        )
    if not all_edges:
        notes.append("This circuit has no edges at this budget; raise the budget.")
    scale = max((abs(edge.score) for edge in drawn), default=1.0) or 1.0
    totals = node_scores(all_edges)
    in_circuit = {"input", "logits"} | {e.source for e in drawn} | {e.target for e in drawn}

    if layers is None:
        layers = list(range(spec.n_layers)) if show_faded else drawn_layers(spec, in_circuit)
    if height_px is None:
        height_px = graph_height(len(layers))
    if layout_width is None:
        layout_width = fitted_layout_width(spec, len(layers), height_px, frame_width)
        # a narrow frame fits the layout by its width: the canvas is cut to the height it fills
        spread = (spec.n_heads + 0.2) * column_spacing(spec, layout_width) + 2 * MIN_COLUMN_SPACING
        filled = frame_width * (len(layers) + 1 + LOGITS_DROP) * ROW_SPACING / spread + 40
        height_px = int(max(300, min(height_px, filled)))
    network = Network(
        height=f"{height_px}px", width="100%", directed=True, cdn_resources="in_line", bgcolor="#ffffff"
    )
    names = [n for n in spec.node_names if n in in_circuit or (show_faded and _in_layers(spec, n, layers))]
    for name in names:
        x, y = node_position(spec, name, layers, layout_width)
        active = name in in_circuit
        kind = "head" if _HEAD_NAME.match(name) else ("mlp" if name.startswith("m") else name)
        colour = NODE_COLOURS[kind] if active else FADED
        caption = (captions or {}).get(name) if active else None
        network.add_node(
            name,
            label=canvas_caption_of(name, caption),
            title=_node_title(spec, name, totals.get(name) if active else None, (labels or {}).get(name)),
            x=x,
            y=y,
            physics=False,
            shape="box" if kind in ("mlp", "input", "logits") else "ellipse",
            color={"background": colour, "border": "#333333" if active else "#bbbbbb"},
            font={
                "color": "#ffffff" if kind in ("input", "logits") and active else "#111111",
                "size": FONT_SIZE,
            },
        )
    curve_of = {"q": 0.08, "k": 0.14, "v": 0.2, "mlp": 0.0, "logits": 0.0}
    for edge in drawn:
        lit = highlight is None or edge.name in highlight
        coloured = lit or others == "colour"
        colour = KIND_COLOURS.get(edge.kind, "#777777") if coloured else FADED
        width = 1 + 7 * abs(edge.score) / scale
        if highlight is not None:
            width = width + 1.5 if lit else (width * 0.5 if others == "colour" else width)
        network.add_edge(
            edge.source,
            edge.target,
            title=_edge_title(edge),
            color={"color": colour, "opacity": 1.0 if lit else (0.35 if others == "colour" else 0.6)},
            width=width,
            dashes=edge.score < 0,
            smooth={"type": "curvedCW", "roundness": curve_of.get(edge.kind, 0.0)}
            if curve_of.get(edge.kind)
            else False,
            arrows={"to": {"enabled": True, "scaleFactor": 0.4}},
        )
    network.templateEnv = _template_environment(network.template_dir)  # compiled once per process
    network.set_options(
        json.dumps(
            {
                "physics": {"enabled": False},
                "interaction": {
                    "hover": True,
                    "tooltipDelay": 80,
                    "navigationButtons": False,
                    "zoomView": False,
                },
                "edges": {"selectionWidth": 2, "hoverWidth": 1.5},
                "nodes": {"margin": 6},
            }
        )
    )
    page = network.generate_html()
    compact = frame_width < 700
    page = _finish_page(page, _legend_html(title, notes, caption_key if captions else "", compact, width_key))
    return GraphDrawing(
        html=page,
        height=height_px + legend_height(title, notes, bool(captions), frame_width),
        nodes=names,
        edges=drawn,
        n_circuit_edges=len(all_edges),
        n_left_out=left_out,
        notes=notes,
    )


def legend_height(title: str, notes: list[str], captions: bool, frame_width: float) -> int:
    """Pixels the legend above the canvas takes: its lines at ~7 px a character, wrapped."""
    per_line = max(40, int(frame_width / 7))
    lines = 2 + int(captions) + sum(max(1, -(-len(text) // per_line)) for text in [title, *notes] if text)
    if frame_width < 700:
        lines += 2  # the colour key and the width/dash key wrap in a narrow column
    return 16 + 21 * lines


@functools.lru_cache(maxsize=4)
def _template_environment(folder: str):
    """One jinja environment per template folder, so pyvis's page template compiles once
    (pyvis makes a new environment, and recompiles, for every graph: ~0.2 s a slider move)."""
    from jinja2 import Environment, FileSystemLoader

    return Environment(loader=FileSystemLoader(folder))


def _in_layers(spec: GraphSpec, name: str, layers: list[int]) -> bool:
    return name in ("input", "logits") or spec.node_layer(name) in layers


def _finish_page(page: str, legend: str) -> str:
    """Drop pyvis's remote stylesheet/script tags and empty headings; add our style, legend, titles."""
    page = re.sub(r"<link[^>]*https://cdn\.jsdelivr\.net[^>]*/>", "", page, flags=re.S)
    page = re.sub(
        r"<script\s+src=\"https://cdn\.jsdelivr\.net[^\"]*\"[^>]*>\s*</script>", "", page, flags=re.S
    )
    page = re.sub(r"<center>\s*<h1>\s*</h1>\s*</center>", "", page)
    page = page.replace("</head>", _STYLE + "</head>", 1)
    page = re.sub(r"<body>", lambda _: "<body>" + legend, page, count=1)
    page = page.replace("network = new vis.Network(container, data, options);", _TITLE_SCRIPT, 1)
    return page
