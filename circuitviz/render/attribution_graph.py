"""An attribution graph drawn as the field reads them: x = token position, y = layer.

One column per token position, the prompt's tokens written under the columns as the axis; one
row per layer that holds nodes, the embeddings at the bottom and the answer's logit at the top
(as Neuronpedia and circuit-tracer draw attribution graphs). The heads and the MLP of a
(position, layer) cell sit side by side. A node's name is written inside it (a link ends at its
border, so none is drawn through a name) and its size says its contribution (the summed weight
of its links out); a link's width says |weight|, its colour which input of the target it feeds,
dashes a link that works against the answer; a link that would run behind a node it does not
join is bent around it (``routing.route_around``). The strongest paths to the answer
(``positions.view.strongest_paths``) are drawn in colour and thicker, every other link pale.
Hovering a node gives its component, position, token, contribution and caption; hovering a link
its unit and weight. Text is sized so that it is at least ``MIN_TEXT_PX`` on screen once the
graph is fitted to its frame. Every piece of user text (tokens, labels) is escaped.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy

from ..positions.view import AttributionGraph, GraphLink, GraphNode, strongest_paths
from .graph_html import (
    FADED,
    KIND_COLOURS,
    KIND_NAMES,
    NODE_COLOURS,
    ROUTED_EDGES,
    GraphDrawing,
    GraphEdge,
    _escape,
    canvas_caption,
    dash_pattern,
)
from .routing import curves_frame, edge_points, route_around
from .vis import CHAR_WIDTH, LINE_HEIGHT, NODE_MARGIN, VisGraph, frame_height, standalone_page

MIN_TEXT_PX = 11  # on screen, in a frame MIN_FRAME_WIDTH px wide, while the labels fit their cells
# the narrowest frame the app draws in: a 1,000 px window with the sidebar open leaves the graph
# 538 px (sized for 1,000, an 11-token circuit's labels were 5.3 px there)
MIN_FRAME_WIDTH = 540
BASE_FONT = 12
SLOT = 84  # layout px between the nodes of one cell (room for a 10-character caption)
TOKEN_WIDTH = 78  # the narrowest column that holds a node: room for its token and a caption
EMPTY_TOKEN_WIDTH = 58  # a column without nodes: room for its token alone (about 8 characters at 12 px)
ROW = 72  # layout px between layer rows at the least (a node with its name inside, and a gap)
LEFT_MARGIN = 70  # the layer names
# a head's or MLP's name is written inside it ("h15", "MLP"), the node sized to its contribution:
# its box is the name's (NAME_CHARS characters) for the weakest, up to 1 + GROW times as wide for
# the strongest. Until 2026-12-07 the names were written under dots and squares, and a link into a
# node from below (the embedding into its MLP: every column's first link) ran through its name
NAME_CHARS = 3
GROW = 0.5
DEFAULT_MAX_LINKS = 800
# more nodes than this are cut to those the drawn links join (an opened file of 40,000 nodes was
# drawn whole, one row 40,000 slots wide: a grey line across the frame)
MAX_DRAWN_NODES = 3000
LINK_KIND_NAMES = {**KIND_NAMES, "attention": "moved by attention", "link": "link"}
# a drawing of more nodes is drawn straight (links behind nodes, never through a name): routing
# IOI's 282 nodes at 2,000 units (400 links) took 5.2 s of CPU, the Eiffel Tower's 96 at 500 1.2 s
ROUTED_NODES = 120
MAX_STRAY = 2 * SLOT  # layout units a pale link's bend may stray from its straight path
# shapes vis-network writes the label inside (links end at their border)
SHAPES = {"embedding": "box", "logit": "box", "mlp": "box", "head": "circle", "other": "box"}


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


TOKEN_CHARS = 8  # a column's token is drawn in at least this many characters (more where it is wider)
MAX_TOKEN_CHARS = 14  # a column widens for its token up to this many; the hover has it whole


def token_chars(width: float, font: float) -> int:
    """How many characters of a token a column ``width`` layout units wide shows at ``font``."""
    fits = int((width - NODE_MARGIN) / (font * CHAR_WIDTH) + 1e-6)  # a room made for n holds n
    return max(TOKEN_CHARS, min(MAX_TOKEN_CHARS, fits))


def column_widths(centres: dict[int, float]) -> dict[int, float]:
    """Each column's width, from the centres ``layout`` gives (the columns abut from LEFT_MARGIN)."""
    widths, edge = {}, float(LEFT_MARGIN)
    for position in sorted(centres):
        widths[position] = 2 * (centres[position] - edge)
        edge += widths[position]
    return widths


def token_room(font: float, token: str = "") -> float:
    """The width (layout units) a column's token label needs at ``font``, with a small gap: the
    token whole (as ``repr`` writes it) up to ``MAX_TOKEN_CHARS`` characters, never less than
    ``TOKEN_CHARS`` (every token was cut to 8: "' Louvr…", "' locat…" even at 2,000 px)."""
    chars = min(MAX_TOKEN_CHARS, max(TOKEN_CHARS, len(repr(str(token)))))
    return chars * font * CHAR_WIDTH + NODE_MARGIN


def layout(
    graph: AttributionGraph, row: float = ROW, font: float = BASE_FONT
) -> tuple[dict[str, tuple[float, float]], dict[int, float], list[int]]:
    """(x, y) of every node, the x of each position's column, and the layer rows (bottom first).

    Every position of the prompt gets a column (the sentence reads along the axis), as wide as
    its busiest cell (a column without nodes only as wide as its token, so a 15-token prompt
    fits the frame), and never narrower than its token's label at ``font`` (at a larger font
    the labels of neighbouring empty columns ran into each other: "'is' 'locat…' 'in'");
    only layers that hold nodes get a row.
    """
    cells: dict[tuple[int, int], list[GraphNode]] = {}
    for node in graph.nodes:
        cells.setdefault((node.position, node.layer), []).append(node)
    widths = {
        position: max(EMPTY_TOKEN_WIDTH, token_room(font, token))
        for position, token in enumerate(graph.tokens)
    }
    for (position, _), members in cells.items():
        slot = slot_width(members, font)
        widths[position] = max(widths.get(position, TOKEN_WIDTH), TOKEN_WIDTH, len(members) * slot)
    centres: dict[int, float] = {}
    x = float(LEFT_MARGIN)
    for position in sorted(widths):
        centres[position] = x + widths[position] / 2
        x += widths[position]
    rows = sorted({node.layer for node in graph.nodes})
    height = (len(rows) + 1) * row
    places = {}
    for (position, layer), members in cells.items():
        members = sorted(members, key=lambda n: (n.kind != "head", n.head or 0, n.component))
        slot = slot_width(members, font)
        first = centres[position] - (len(members) - 1) * slot / 2
        y = height - (rows.index(layer) + 1) * row  # the embeddings at the bottom
        for index, node in enumerate(members):
            places[node.id] = (first + index * slot, float(y))
    return places, centres, rows


def slot_width(members: list[GraphNode], font: float) -> float:
    """Layout units between the nodes of a cell: ``SLOT``, or room for the widest name written
    inside a node of another kind (an opened file's "L12 #4567") at ``font``."""
    chars = max((len(short_name(node)) for node in members if node.kind == "other"), default=0)
    return max(float(SLOT), chars * font * CHAR_WIDTH + 3 * NODE_MARGIN)


def name_box(font: float) -> float:
    """The inner width (layout units, margins aside) of the weakest head's or MLP's node: its name
    of ``NAME_CHARS`` characters, or a line's height where that is more."""
    return max(NAME_CHARS * font * CHAR_WIDTH, font * LINE_HEIGHT)


def fitted_font(layout_width: float, frame_width: float = MIN_FRAME_WIDTH) -> float:
    """The font (layout units) that is ``MIN_TEXT_PX`` on screen once a layout ``layout_width``
    wide is fitted to a ``frame_width`` px frame (at least the base size)."""
    return max(BASE_FONT, MIN_TEXT_PX * layout_width / max(frame_width, 1.0))


def _node_title(node: GraphNode, token: str, estimates_metric: bool = True) -> str:
    """A node's hover. ``estimates_metric`` false (ACC++'s signals: attributions to attention
    weights): its size is said as the method's own scores, not a rise of the metric (its hover
    read "estimated rise of the metric it carries" beside a card saying "not an effect on the
    metric")."""
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
        f"contribution: {node.influence:+.4g} (estimated rise of the metric it carries)"
        if estimates_metric
        else f"size: {node.influence:.4g}, the summed |score| of its links out (the method's own scores, "
        "not an effect on the metric)",
    ]
    if node.caption:
        lines.append(_escape(node.caption))
    for key, value in node.details.items():
        if key != "token":
            lines.append(f"{_escape(key)}: {_escape(value)}")
    return "<br>".join(lines)


def _link_title(link: GraphLink, estimates_metric: bool = True) -> str:
    """A link's hover: its unit, ends, the input it feeds and its weight; ``estimates_metric`` false:
    the weight is the method's own score, said so (an ACC++ signal's attribution to an attention
    weight read "supports the answer")."""
    lines = [f"<b>{_escape(link.unit or link.source + ' → ' + link.target)}</b>"]
    lines.append(f"{_escape(link.source)} → {_escape(link.target)}")
    lines.append(f"feeds the {_escape(LINK_KIND_NAMES.get(link.kind, link.kind))} input")
    if estimates_metric:
        verb = "supports the answer" if link.weight >= 0 else "works against the answer"
        lines.append(f"weight {link.weight:+.4g} ({verb})")
    else:
        lines.append(f"score {link.weight:+.4g} (the method's own score, not an effect on the metric)")
    return "<br>".join(lines)


def legend_line(
    kinds: Iterable[str] | None = None, estimates_metric: bool = True, bold: str = ""
) -> tuple[str, str]:
    """(one-line legend as HTML, the rest of the key as plain text for its hover). ``kinds``: the
    inputs the links drawn in colour feed (the pale ones are grey); only their colours are keyed
    (ACC++'s signals on Signals feed queries and keys alone, and the key listed value and
    MLP-input colours drawn nowhere).
    ``bold``: what the bold links are when the caller chose them (Signals: one decision's
    signals; it read "bold: strongest paths" under "decision #0 highlighted"); default the
    strongest paths. ``estimates_metric`` false: sizes and dashes are said as the method's own
    scores, not as the answer's metric."""
    shown = set(KIND_COLOURS) if kinds is None else set(kinds)
    swatches = "".join(
        f'<span class="cv-item"><span class="cv-line" style="border-top:3px solid {colour}"></span>'
        f"{KIND_NAMES[kind]}</span>"
        for kind, colour in KIND_COLOURS.items()
        if kind in shown
    )
    # an imported graph's links feed no input we can name: no colour key at all
    feeds = f"link colour = the input it feeds: {swatches} " if swatches else ""
    # the dashes' meaning on the line itself (said on the key's hover only until 2026-12-07), the
    # same as the edge graph's beside it (positions off), which dashed the edges that carry the answer
    dashed = "works against the answer" if estimates_metric else "a negative score"
    line = (
        f"x: token, y: layer; {feeds}bold: {_escape(bold) if bold else 'strongest paths'}; dashed: {dashed}"
    )
    more = (
        "x: token position (the prompt's tokens along the bottom), y: layer (embeddings at the bottom, "
        "the answer at the top). "
    )
    strongest = bold or "the strongest paths to the answer"
    if estimates_metric:
        more += f"Node size: contribution. Bold links: {strongest}; dashed: works against the answer."
    else:
        more += (
            "Node size: the summed |score| of its links out; link width: |score|; both the method's own "
            f"scores, not an effect on the answer's metric. Bold links: {strongest}; dashed: a negative score."
        )
    return line, more


def near_bends(nodes: list[dict], edges: list[dict], lit: set[str]) -> list[dict]:
    """``edges`` with each pale one (not in ``lit``) whose bend strays more than ``MAX_STRAY``
    from its straight path drawn straight again, behind the nodes on its way: the detours of
    pale links round a busy column looped across the frame (the factual prompt's 179 links at
    150 units); a bold link keeps its bend, so a strongest path never reads as ending at a node
    it passes."""
    where = {str(node["id"]): (float(node["x"]), float(node["y"])) for node in nodes}
    kept = []
    for edge in edges:
        if edge.get("smooth") and str(edge["id"]) not in lit:
            ends = where[str(edge["from"])], where[str(edge["to"])]
            path, line = edge_points(*ends, edge["smooth"], samples=48), edge_points(*ends, False, samples=48)
            if float(numpy.hypot(*(path - line).T).max()) > MAX_STRAY:
                edge = {**edge, "smooth": False}
        kept.append(edge)
    return kept


def highlighted_links(graph: AttributionGraph, paths: Iterable[list[str]]) -> set[tuple[str, str]]:
    """The (source, target) pairs along ``paths``."""
    return {(a, b) for path in paths for a, b in zip(path, path[1:])}


def _joined_nodes(graph: AttributionGraph, drawn: list[GraphLink]) -> tuple[AttributionGraph, str]:
    """The graph with only the nodes the drawn links join (the strongest by |influence| when they
    join none), at most ``MAX_DRAWN_NODES``, and the sentence saying how many are drawn."""
    joined = {end for link in drawn for end in (link.source, link.target)}
    kept = [node for node in graph.nodes if node.id in joined]
    if not kept:
        kept = sorted(graph.nodes, key=lambda node: -abs(node.influence))
    kept = kept[:MAX_DRAWN_NODES]
    ids = {node.id for node in kept}
    links = [link for link in drawn if link.source in ids and link.target in ids]
    return dataclasses.replace(graph, nodes=kept, links=links), (
        f"Drawing the {len(kept):,} of its {len(graph.nodes):,} nodes "
        + ("the drawn links join." if joined else "of largest influence (it has no link to draw).")
    )


def attribution_graph_html(
    graph: AttributionGraph,
    *,
    highlight: set[tuple[str, str]] | None = None,
    n_paths: int = 3,
    max_links: int = DEFAULT_MAX_LINKS,
    frame_width: float = MIN_FRAME_WIDTH,
    height_px: int | None = None,
    notes: list[str] | None = None,
    estimates_metric: bool = True,
    bold: str = "",
    view_notes: list[str] | None = None,
    file_notes: list[str] | None = None,
) -> GraphDrawing:
    """The graph as a ``VisGraph`` and its standalone page (every script inline).

    ``highlight``: (source, target) pairs to draw bold (default: the ``n_paths`` strongest paths
    to the answer). At most ``max_links`` links are drawn, the strongest; the page says how many
    were left out. ``estimates_metric``: the links' weights estimate the metric's change (what a
    node's card, its hover, a link's hover and the key may say of them; ACC++'s signals do not).
    ``bold``: what the ``highlight`` links are, for the key (default: the strongest paths). The text is sized to be ``MIN_TEXT_PX``
    on screen in a ``frame_width`` px frame; the drawing is fitted to whatever frame it is shown in
    (nothing scrolls sideways). ``view_notes``: sentences about the page showing the drawing (why
    its view opened at this budget), first among the frame's notes in the app (``vis``) and left
    out of the standalone page, a file read on its own: the downloaded graph said "Opened at 100
    units ... (on the slider)" of a file that opens nowhere and has no slider. ``file_notes``:
    sentences the file needs to be read on its own and the page says elsewhere (the task its NDF
    was measured on: the page shows it above the figures), in the standalone page only.
    """
    del height_px
    notes = list(graph.notes) + list(notes or [])
    links = sorted(graph.links, key=lambda link: -abs(link.weight))
    drawn = links[: max(0, int(max_links))]
    if len(links) > len(drawn):
        notes.append(f"Drawing the {len(drawn):,} strongest of {len(links):,} links.")
    if not graph.nodes:
        notes.append("This circuit has no path from a token to the answer at this budget; raise the budget.")
    if len(graph.nodes) > MAX_DRAWN_NODES:
        graph, note = _joined_nodes(graph, drawn)
        notes.append(note)
    if highlight is None:
        paths = strongest_paths(graph, n_paths)
        highlight = highlighted_links(graph, paths)
    _, centres, _ = layout(graph)
    layout_width = max(centres.values(), default=0.0) + TOKEN_WIDTH
    font = fitted_font(layout_width, frame_width)
    # the strongest node, its name inside, fits its slot with a margin between it and the next;
    # captions are in the hover (at any font the slot held they did not fit under a name)
    font = min(font, (SLOT - 3 * NODE_MARGIN) / (NAME_CHARS * CHAR_WIDTH * (1 + GROW)))
    largest = name_box(font) * (1 + GROW) + 2 * NODE_MARGIN
    # a row holds the largest node, with room between rows for the links to bend through
    row_height = max(ROW, largest + 1.3 * font)
    # the columns widened for the tokens' labels at this font (the text then a little smaller on
    # screen than ``MIN_TEXT_PX``, rather than labels drawn over each other)
    places, centres, rows = layout(graph, row_height, font)
    bottom = (len(rows) + 1) * row_height
    nodes: list[dict] = []
    for row, layer in enumerate(rows):
        name = "emb" if layer < 0 else ("answer" if layer >= graph.n_layers else f"L{layer}")
        nodes.append(
            {"id": f"layer@{layer}", "label": name, "x": LEFT_MARGIN / 3, "y": bottom - (row + 1) * row_height,
             "shape": "text", "font": {"size": font, "color": "#666666"}}
        )  # fmt: skip
    widths = column_widths(centres)
    for position, x in centres.items():
        token = graph.tokens[position] if position < len(graph.tokens) else ""
        nodes.append(
            {
                "id": f"token@{position}",
                "label": f"{canvas_caption(repr(token), token_chars(widths[position], font))}\n{position}",
                "title": f"position {position}: {_escape(repr(token))}",
                "x": x,
                "y": bottom - 0.1 * row_height,
                "shape": "text",
                "font": {"size": font, "color": "#222222"},
            }
        )
    strongest = max((abs(node.influence) for node in graph.nodes), default=1.0) or 1.0
    for node in graph.nodes:
        x, y = places[node.id]
        token = graph.tokens[node.position] if 0 <= node.position < len(graph.tokens) else ""
        kind = (
            node.kind if node.kind in ("head", "mlp") else ("input" if node.kind == "embedding" else "logits")
        )
        drawn_node = {
            "id": node.id,
            "label": short_name(node),  # inside the node: a link ends at its border, never crossing it
            "title": _node_title(node, token, estimates_metric),
            "x": x,
            "y": y,
            "shape": SHAPES.get(node.kind, "box"),
            "color": {"background": NODE_COLOURS.get(kind, "#cccccc"), "border": "#333333"},
            # white on the dark embedding and logit boxes ('emb' and 'logit' were dark on dark)
            "font": {"size": font, "color": "#ffffff" if kind in ("input", "logits") else "#111111"},
        }
        if node.kind not in ("embedding", "logit"):  # sized to its contribution, its name inside
            inner = name_box(font) * (1 + GROW * math.sqrt(abs(node.influence) / strongest))
            drawn_node["widthConstraint"] = {"minimum": inner}
            drawn_node["heightConstraint"] = {"minimum": inner}
            if node.kind == "other":  # a rounded box (an MLP's is square)
                drawn_node["shapeProperties"] = {"borderRadius": inner / 2}
        nodes.append(drawn_node)
    top = max((abs(link.weight) for link in drawn), default=1.0) or 1.0
    edges = []
    for index, link in enumerate(drawn):
        lit = (link.source, link.target) in highlight
        colour = KIND_COLOURS.get(link.kind, "#777777")
        edges.append(
            {
                "id": f"{link.source}->{link.target}#{index}",
                "from": link.source,
                "to": link.target,
                "title": _link_title(link, estimates_metric),
                "color": {"color": colour if lit else FADED, "opacity": 1.0 if lit else 0.7},
                "width": (width := (2.5 if lit else 0.5) + 6 * (abs(link.weight) / top)),  # 6 * 1e308 is inf
                "dashes": dash_pattern(link.weight < 0, width),
                "smooth": False,
                "arrows": {"to": {"enabled": True, "scaleFactor": 0.4}},
            }
        )
    # only the colours drawn: a link outside ``highlight`` is grey, whatever it feeds (Explore's
    # IOI view at 20 units keyed the query colour, and its only query links were grey)
    line, more = legend_line(
        {link.kind for link in drawn if (link.source, link.target) in highlight}, estimates_metric, bold
    )
    # nothing is written under a name (the key said "Under a name: ↑/↓ ..." of captions the canvas
    # never drew): a node's hover says what it does, in a sentence
    if any(node.caption for node in graph.nodes):
        more += " A node's hover says what it does."
    vis = VisGraph(
        nodes, edges, legend=line, legend_more=more, title=graph.title, notes=notes, kind="positions"
    )
    # links bent around the nodes they do not join (an edge behind a node reads as ending there)
    obstacles = [str(node["id"]) for node in nodes if node.get("shape") != "text"]
    if len(edges) <= ROUTED_EDGES and len(obstacles) <= ROUTED_NODES:
        bent = route_around(nodes, edges, obstacles, margin=TOKEN_WIDTH / 2)
        lit = {edge["id"] for edge in edges if edge["color"]["color"] != FADED}
        vis.edges = near_bends(nodes, bent, lit)
    vis.frame = curves_frame(vis)  # a bent link beside the nodes is shown whole
    # the file: what is true of the drawing on its own, and what it needs to be read alone
    page = standalone_page(dataclasses.replace(vis, notes=list(file_notes or []) + notes))
    notes = list(view_notes or []) + notes
    vis = dataclasses.replace(vis, notes=notes)
    return GraphDrawing(
        html=page,
        height=frame_height(vis, 1000, 60 + 18 * len(notes)),
        nodes=[node.id for node in graph.nodes],
        edges=[
            GraphEdge(
                link.unit or f"{link.source}->{link.target}",
                link.source,
                link.target,
                link.kind,
                # a score (negative: it carries the answer) from a weight (the rise it carries); a
                # weight that is the method's own score (ACC++'s attribution) is that score: its
                # card read "m11@8 (q) -0.354" above "query signal written by: m11@8 +0.354"
                -link.weight if estimates_metric else link.weight,
            )
            for link in drawn
        ],
        n_circuit_edges=len(links),
        n_left_out=len(links) - len(drawn),
        notes=notes,
        vis=vis,
        estimates_metric=estimates_metric,
    )
