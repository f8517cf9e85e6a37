"""An attribution graph drawn as the field reads them: x = token position, y = layer.

One column per token position, the prompt's tokens written under the columns as the axis; one
row per layer that holds nodes, the embeddings at the bottom and the answer's logit at the top
(as Neuronpedia and circuit-tracer draw attribution graphs). The heads and the MLP of a
(position, layer) cell sit side by side. A node's size says its contribution (the summed weight
of its links out); a link's width says |weight|, its colour which input of the target it feeds,
dashes a link that works against the answer. The strongest paths to the answer
(``positions.view.strongest_paths``) are drawn in colour and thicker, every other link pale.
Hovering a node gives its component, position, token, contribution and caption; hovering a link
its unit and weight. Text is sized so that it is at least ``MIN_TEXT_PX`` on screen once the
graph is fitted to its frame. Every piece of user text (tokens, labels) is escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from ..positions.view import AttributionGraph, GraphLink, GraphNode, strongest_paths
from .graph_html import (
    FADED,
    KIND_COLOURS,
    KIND_NAMES,
    NODE_COLOURS,
    GraphDrawing,
    GraphEdge,
    _escape,
    _finish_page,
    _template_environment,
    canvas_caption,
)

MIN_TEXT_PX = 12  # on screen, after the graph is fitted to the frame (the issue asks for 11 at least)
SLOT = 84  # layout px between the nodes of one cell (room for a 10-character caption)
TOKEN_WIDTH = 78  # the narrowest column that holds a node: room for its token and a caption
EMPTY_TOKEN_WIDTH = 58  # a column without nodes: room for its token alone (about 8 characters at 12 px)
ROW = 72  # layout px between layer rows (a node, its name and its caption)
LEFT_MARGIN = 70  # the layer names
MAX_NODE_SIZE = 26
MIN_NODE_SIZE = 7
DEFAULT_MAX_LINKS = 800
LINK_KIND_NAMES = {**KIND_NAMES, "attention": "moved by attention", "link": "link"}
SHAPES = {"embedding": "box", "logit": "box", "mlp": "square", "head": "dot", "other": "diamond"}


_SCROLL_STYLE = (
    "<style>html, body {{ overflow-x: auto; }} .card {{ width: {width}px !important; }} "
    ".cv-legend {{ position: sticky; left: 0; width: min(100vw, 100%); box-sizing: border-box; }}</style>"
)


# vis-network reads its canvas size once, before the wide style applies: size it again, then fit
# and open scrolled to the right end, where the last position and the answer are
_RESIZE_SCRIPT = (
    "<script>window.addEventListener('load', function () {{ network.setSize('{width}px', "
    "'{height}px'); network.redraw(); network.fit(); "
    "setTimeout(function () {{ var page = document.scrollingElement || document.documentElement; "
    "page.scrollLeft = page.scrollWidth; document.body.scrollLeft = document.body.scrollWidth; }}, 300); }});</script>"
)


def short_name(node: GraphNode) -> str:
    """A node's name inside its cell: the column says the position, the row the layer."""
    if node.kind == "head" and node.head is not None:
        return f"h{node.head}"
    if node.kind == "mlp":
        return "MLP"
    if node.kind == "embedding":
        return "emb"
    if node.kind == "logit":
        return "logit"
    return canvas_caption(node.component, 10)


def layout(graph: AttributionGraph) -> tuple[dict[str, tuple[float, float]], dict[int, float], list[int]]:
    """(x, y) of every node, the x of each position's column, and the layer rows (bottom first).

    Every position of the prompt gets a column (the sentence reads along the axis), as wide as
    its busiest cell (a column without nodes only as wide as its token, so a 15-token prompt
    fits the frame); only layers that hold nodes get a row.
    """
    cells: dict[tuple[int, int], list[GraphNode]] = {}
    for node in graph.nodes:
        cells.setdefault((node.position, node.layer), []).append(node)
    widths = {position: EMPTY_TOKEN_WIDTH for position in range(len(graph.tokens))}
    for (position, _), members in cells.items():
        widths[position] = max(widths.get(position, TOKEN_WIDTH), len(members) * SLOT)
    centres: dict[int, float] = {}
    x = float(LEFT_MARGIN)
    for position in sorted(widths):
        centres[position] = x + widths[position] / 2
        x += widths[position]
    rows = sorted({node.layer for node in graph.nodes})
    height = (len(rows) + 1) * ROW
    places = {}
    for (position, layer), members in cells.items():
        members = sorted(members, key=lambda n: (n.kind != "head", n.head or 0, n.component))
        first = centres[position] - (len(members) - 1) * SLOT / 2
        y = height - (rows.index(layer) + 1) * ROW  # the embeddings at the bottom
        for index, node in enumerate(members):
            places[node.id] = (first + index * SLOT, float(y))
    return places, centres, rows


def text_scale(layout_width: float, layout_height: float, frame_width: float, height_px: int) -> float:
    """How many screen px one layout px is once the graph is fitted to its frame (vis-network's
    fit never zooms in past 1)."""
    return min(frame_width / max(layout_width, 1.0), height_px / max(layout_height, 1.0), 1.0)


def canvas_height(layout_width: float, layout_height: float, frame_width: float) -> int:
    """A canvas height that shows the layout at its width's scale, so a deep circuit gets a tall
    canvas rather than smaller text (300 to 1400 px; the page scrolls)."""
    scale = min(frame_width / max(layout_width, 1.0), 1.0)
    return int(min(1400, max(300, layout_height * scale + 40)))


def _node_title(node: GraphNode, token: str) -> str:
    kinds = {
        "head": f"attention head {node.head} of layer {node.layer}",
        "mlp": f"MLP of layer {node.layer}",
        "embedding": "the token's embedding",
        "logit": "the answer's logit (the metric)",
    }
    lines = [
        f"<b>{_escape(node.component)}</b> at position {node.position}",
        _escape(kinds.get(node.kind, node.kind)),
        f"token: {_escape(repr(token))}",
        f"contribution: {node.influence:+.4g} (estimated rise of the metric it carries)",
    ]
    if node.caption:
        lines.append(_escape(node.caption))
    for key, value in node.details.items():
        if key != "token":
            lines.append(f"{_escape(key)}: {_escape(value)}")
    return "<br>".join(lines)


def _link_title(link: GraphLink) -> str:
    lines = [f"<b>{_escape(link.unit or link.source + ' → ' + link.target)}</b>"]
    lines.append(f"{_escape(link.source)} → {_escape(link.target)}")
    lines.append(f"feeds the {_escape(LINK_KIND_NAMES.get(link.kind, link.kind))} input")
    verb = "supports the answer" if link.weight >= 0 else "works against the answer"
    lines.append(f"weight {link.weight:+.4g} ({verb})")
    return "<br>".join(lines)


def _legend(graph: AttributionGraph, notes: list[str], caption_key: str) -> str:
    swatches = "".join(
        f'<span class="cv-item"><span class="cv-line" style="border-top:3px solid {colour}"></span>'
        f"{KIND_NAMES[kind]}</span>"
        for kind, colour in KIND_COLOURS.items()
    )
    keys = (
        '<span class="cv-item">x: token position, y: layer (embeddings at the bottom, the answer at '
        "the top); node size: contribution; bold links: the strongest paths to the answer; dashed: "
        "works against the answer; under a name: ↑/↓ the answer or foil among the tokens it "
        "promotes/suppresses most (logit lens), else +x, how much it raises the answer's metric</span>"
    )
    heading = f'<div class="cv-title">{_escape(graph.title)}</div>' if graph.title else ""
    caption = f'<div class="cv-key">{_escape(caption_key)}</div>' if caption_key else ""
    note_html = "".join(f'<div class="cv-note">{_escape(note)}</div>' for note in notes)
    controls = (
        '<span class="cv-zoom"><button onclick="cvZoom(1.25)" title="zoom in">+</button>'
        '<button onclick="cvZoom(0.8)" title="zoom out">&minus;</button>'
        '<button onclick="network.fit()" title="fit the graph to the frame">fit</button></span>'
    )
    return (
        f'<div class="cv-legend">{controls}{heading}<div><span class="cv-key">link colour = the input '
        f"it feeds:</span>{swatches}</div><div>{keys}</div>{caption}{note_html}</div>"
    )


def highlighted_links(graph: AttributionGraph, paths: Iterable[list[str]]) -> set[tuple[str, str]]:
    """The (source, target) pairs along ``paths``."""
    return {(a, b) for path in paths for a, b in zip(path, path[1:])}


def attribution_graph_html(
    graph: AttributionGraph,
    *,
    highlight: set[tuple[str, str]] | None = None,
    n_paths: int = 3,
    max_links: int = DEFAULT_MAX_LINKS,
    frame_width: float = 1150,
    height_px: int | None = None,
    caption_key: str = "",
    notes: list[str] | None = None,
) -> GraphDrawing:
    """The graph as one standalone HTML page (pyvis, every script inline).

    ``highlight``: (source, target) pairs to draw bold (default: the ``n_paths`` strongest paths
    to the answer). At most ``max_links`` links are drawn, the strongest; the page says how many
    were left out.
    """
    from pyvis.network import Network

    notes = list(graph.notes) + list(notes or [])
    links = sorted(graph.links, key=lambda link: -abs(link.weight))
    drawn = links[: max(0, int(max_links))]
    if len(links) > len(drawn):
        notes.append(f"Drawing the {len(drawn):,} strongest of {len(links):,} links.")
    if not graph.nodes:
        notes.append("This circuit has no path from a token to the answer at this budget; raise the budget.")
    if highlight is None:
        paths = strongest_paths(graph, n_paths)
        highlight = highlighted_links(graph, paths)
    places, centres, rows = layout(graph)
    layout_width = max(centres.values(), default=0.0) + TOKEN_WIDTH
    layout_height = (len(rows) + 1.6) * ROW
    # a circuit wider than the frame gets a canvas as wide as itself (the page scrolls sideways)
    # rather than smaller, overlapping text
    canvas_width = max(frame_width, layout_width + 2 * SLOT)
    if height_px is None:
        height_px = canvas_height(layout_width, layout_height, canvas_width)
    scale = text_scale(layout_width, layout_height, canvas_width, height_px)
    font = int(math.ceil(MIN_TEXT_PX / scale))
    width = "100%" if canvas_width <= frame_width else f"{int(canvas_width)}px"
    network = Network(height=f"{height_px}px", width=width, directed=True, cdn_resources="in_line")
    bottom = (len(rows) + 1) * ROW
    # the layer names left of the first column, and right of the last on a canvas that scrolls
    sides = [("", LEFT_MARGIN / 3)]
    if canvas_width > frame_width:
        sides.append((":right", layout_width + SLOT / 2))
    for row, layer in enumerate(rows):
        name = "emb" if layer < 0 else ("answer" if layer >= graph.n_layers else f"L{layer}")
        for side, x in sides:
            network.add_node(
                f"layer@{layer}{side}", label=name, x=x, y=bottom - (row + 1) * ROW, physics=False,
                shape="text", font={"size": font, "color": "#666666"},
            )  # fmt: skip
    for position, x in centres.items():
        token = graph.tokens[position] if position < len(graph.tokens) else ""
        network.add_node(
            f"token@{position}",
            label=f"{canvas_caption(repr(token), 12)}\n{position}",
            title=f"position {position}: {_escape(repr(token))}",
            x=x,
            y=bottom - 0.25 * ROW,
            physics=False,
            shape="text",
            font={"size": font, "color": "#222222"},
        )
    strongest = max((abs(node.influence) for node in graph.nodes), default=1.0) or 1.0
    for node in graph.nodes:
        x, y = places[node.id]
        token = graph.tokens[node.position] if 0 <= node.position < len(graph.tokens) else ""
        kind = (
            node.kind if node.kind in ("head", "mlp") else ("input" if node.kind == "embedding" else "logits")
        )
        size = MIN_NODE_SIZE + (MAX_NODE_SIZE - MIN_NODE_SIZE) * math.sqrt(abs(node.influence) / strongest)
        badge = node.badge or node.caption
        label = f"{short_name(node)}\n{canvas_caption(badge, 10)}" if badge else short_name(node)
        network.add_node(
            node.id,
            label=label,
            title=_node_title(node, token),
            x=x,
            y=y,
            size=size,
            physics=False,
            shape=SHAPES.get(node.kind, "dot"),
            color={"background": NODE_COLOURS.get(kind, "#cccccc"), "border": "#333333"},
            font={"size": font, "color": "#ffffff" if kind in ("input", "logits") else "#111111"},
        )
    top = max((abs(link.weight) for link in drawn), default=1.0) or 1.0
    for link in drawn:
        lit = (link.source, link.target) in highlight
        colour = KIND_COLOURS.get(link.kind, "#777777")
        network.add_edge(
            link.source,
            link.target,
            title=_link_title(link),
            color={"color": colour if lit else FADED, "opacity": 1.0 if lit else 0.7},
            width=(2.5 if lit else 0.5) + 6 * abs(link.weight) / top,
            dashes=link.weight < 0,
            smooth=False,
            arrows={"to": {"enabled": True, "scaleFactor": 0.4}},
        )
    network.templateEnv = _template_environment(network.template_dir)
    network.set_options(
        json.dumps(
            {
                "physics": {"enabled": False},
                "interaction": {"hover": True, "tooltipDelay": 80, "zoomView": False},
                "nodes": {"margin": 5, "scaling": {"label": {"enabled": False}}},
            }
        )
    )
    page = _finish_page(network.generate_html(), _legend(graph, notes, caption_key))
    if canvas_width > frame_width:
        page = page.replace("</head>", _SCROLL_STYLE.format(width=int(canvas_width)) + "</head>", 1)
        resize = _RESIZE_SCRIPT.format(width=int(canvas_width), height=int(height_px))
        page = page.replace("</body>", resize + "</body>", 1)
    return GraphDrawing(
        html=page,
        height=height_px + 110 + 21 * len(notes) + (18 if canvas_width > frame_width else 0),
        nodes=[node.id for node in graph.nodes],
        edges=[
            GraphEdge(
                link.unit or f"{link.source}->{link.target}",
                link.source,
                link.target,
                link.kind,
                -link.weight,
            )
            for link in drawn
        ],
        n_circuit_edges=len(links),
        n_left_out=len(links) - len(drawn),
        notes=notes,
    )
