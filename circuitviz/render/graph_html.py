"""A circuit of heads and MLPs drawn as the field reads them: the embeddings at the bottom, one row
per layer going up (its heads in order, then its MLP), the answer's logit at the top.

The layout is fixed and computed (no physics, ``render.layout``), so two circuits of one model drawn with the same
layers and nodes placed put a node in the same place; a circuit has as many head columns as its
fullest row needs (``packed_columns``), every column as wide as the widest label, so no two node
boxes overlap, and the drawing is fitted to its frame (``render.vis``); an edge that would run
behind a node it does not join is bent around it (``render.routing``). Edge colour says which
input of the destination the edge feeds (q, k, v, MLP, logits), width says |score|, dashes mark
an edge that works against the answer (``dashed``, as the graph over token positions); the legend is one line, the rest of the key on its hover. Each node can carry a
caption under its name (what it does: its top promoted token, or its strongest SAE feature), and
names can be written in words ("layer 12, head 2", on the canvas the layer over the head). Hovering a node shows its name, layer/head,
its summed score in this circuit (what it sums, what its sign means) and labels; hovering an edge its source, destination, kind and score.
Every piece of user text (prompts, tokens, labels) is escaped.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch

from ..core.graph import GraphSpec
from .cards import caption_words, score_words, strongest_scores
from .layout import (  # noqa: F401 - the layout, as graph_html gave it
    _HEAD_NAME,
    LOGITS_DROP,
    MIN_COLUMN_SPACING,
    MLP_DROP,
    MLP_GAP,
    MLP_STAGGER,
    ROW_SPACING,
    Columns,
    drawn_layers,
    node_position,
    packed_columns,
)
from .routing import curves_frame, route_around
from .vis import CHAR_WIDTH, LINE_HEIGHT, NODE_MARGIN, VisGraph, frame_height, standalone_page

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
FONT_SIZE = 22  # layout units
COLUMN_GAP = 0.9  # of the font size: blank space between two columns' boxes
ROW_GAP = 0.9  # of the font size: blank space between two rows' boxes
ROUTED_EDGES = 400  # a denser drawing is edges over nodes whichever way they bend: drawn straight


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
    vis: VisGraph | None = None  # the drawing as data (what the app's component draws)
    captions: Mapping[str, str] = field(default_factory=dict)  # what is written under a name
    estimates_metric: bool = True  # the scores estimate the metric's change (what a card may say)
    grid: tuple[float, float] = (0.0, 0.0)  # (column width, row height) of the layout, layout units


def node_words(spec: GraphSpec, name: str) -> str:
    """A node's name in words: "layer 12, head 2", "layer 3 MLP", "embeddings", "the answer's logit"."""
    match = _HEAD_NAME.match(name)
    if match:
        return f"layer {match.group(1)}, head {match.group(2)}"
    if name == "input":
        return "embeddings"
    if name == "logits":
        return "the answer's logit"
    return f"layer {spec.node_layer(name)} MLP"


def canvas_words(spec: GraphSpec, name: str) -> str:
    """A node's name in words as the canvas writes it: the layer over the head ("layer 12" /
    "head 2", "layer 3" / "MLP"). On one line ("layer 12, head 2") every column was 16 characters
    wide, and the Explore IOI circuit at budget 100 was fitted at 7.6 px in a 1,000 px window."""
    words = node_words(spec, name)
    if name in ("input", "logits"):
        return words
    return words.replace(", ", "\n") if _HEAD_NAME.match(name) else words.replace(" MLP", "\nMLP")


def dashed(score: float, estimates_metric: bool = True) -> bool:
    """Whether an edge of this score is drawn dashed: one that works against the answer (corrupting
    it raises the metric: a positive score) where scores estimate the metric's change, as the graph
    over token positions dashes its links; else a negative score, the method's own. Until
    2026-12-07 this graph dashed the edges that carry the answer, the positions graph the others."""
    return score > 0 if estimates_metric else score < 0


def dash_pattern(negative: bool, width: float) -> list[float] | bool:
    """vis-network's ``dashes`` for an edge of this width: False for a solid line, else [dash, gap]
    in pixels grown with the width. vis's fixed 5-pixel pattern closed up on a wide line, so the
    strongest dashed edge read as solid, the other meaning."""
    if not negative:
        return False
    return [round(6 + 2.5 * width, 1), round(5 + 2 * width, 1)]


def canvas_caption(text: str, limit: int = 18) -> str:
    """A caption drawn on the canvas: one line, at most ``limit`` characters, angle brackets
    swapped for look-alikes (the label travels inside the page's script as JSON)."""
    text = " ".join(str(text).split()) if str(text).strip() else repr(str(text))
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("<", "‹").replace(">", "›")


CAPTION_LINE = 12  # characters the first line of a caption of two lines holds at most
# characters its second line (the token an SAE feature promotes) holds at most, the rest on the
# node's hover: at 12 every column with SAE captions was 12 characters wide (' purchases'), and
# Explore's IOI circuit on Gemma-3-270M (EAP-IG, budget 100) was fitted at 8.8 px in a 1,000 px
# window; at 8, the width of its first line ("L15/1825"), 12.1 px (Chromium)
CAPTION_TOKEN = 8
# a drawing of more layer rows writes names in words on one line: held to the window's height,
# the taller rows of two-line names drew SmolLM2-135M's 27 rows (EAP-IG's IOI circuit at budget
# 200) at 6.5 and 6.7 px at 1,500 and 2,000 px, where one line drew them at 8.5 and 9.0
WORDS_ROWS = 20


def canvas_caption_of(name: str, caption: str | None) -> str:
    """A node's label on the canvas: its name, and its caption under it when it has one. A caption
    of two lines (an SAE feature over the token it promotes: "L15/1825" / "' purch…") is drawn
    as two, the first of at most ``CAPTION_LINE`` characters, the second of ``CAPTION_TOKEN``
    (the hover has it whole, ``caption_in_full``): on one line of 18 it set every column's width,
    and the Explore IOI circuit at budget 100 was fitted at 6.7 px in a 1,000 px window."""
    if caption is None:
        return name
    lines = str(caption).split("\n")
    if len(lines) == 1:
        return f"{name}\n{canvas_caption(caption)}"
    return "\n".join([name, canvas_caption(lines[0], CAPTION_LINE), canvas_caption(lines[1], CAPTION_TOKEN)])


def caption_in_full(caption: str | None) -> str:
    """The hover's line for a caption the canvas cuts short ("under its name, cut short there:
    L15/1825 ' purchases'"); '' for one drawn whole."""
    if not caption:
        return ""
    lines = str(caption).split("\n")
    drawn = canvas_caption_of("", caption).split("\n")[1:]
    if drawn == [canvas_caption(line, len(line) + 1) for line in lines][: len(drawn)]:
        return ""
    whole = [" ".join(line.split()) or repr(line) for line in lines]
    return "under its name, cut short there: " + " ".join(whole)


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


def _node_title(
    spec: GraphSpec,
    name: str,
    score: float | None,
    labels: Mapping[str, object] | None,
    n_edges: int = 0,
    estimates_metric: bool = True,
    caption: str | None = None,
    strongest: float | None = None,
) -> str:
    """A node's hover: what it is, its summed score in the circuit said as its card says it
    (``cards.score_words``: over its ``n_edges`` edges out, the logit's in, ``strongest`` the
    score of the strongest of them), what the figure under
    its name (``caption``) is when it is one, its labels."""
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
        out = name != "logits"
        card = {"n_outgoing": n_edges if out else 0, "n_incoming": 0 if out else n_edges, "score": score}
        card["strongest"] = strongest
        lines.append(_escape(score_words(card, estimates_metric)))
        if caption_words(caption, estimates_metric):
            lines.append(_escape(caption_words(caption, estimates_metric)))
        if caption_in_full(caption):
            lines.append(_escape(caption_in_full(caption)))
    for key, value in (labels or {}).items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(f"'{v}'" for v in value)  # quotes keep leading spaces visible
        lines.append(f"{_escape(str(key).replace('_', ' '))}: {_escape(value)}")
    return "<br>".join(lines)


def _edge_title(edge: GraphEdge, estimates_metric: bool = True) -> str:
    sign = "positive" if edge.score >= 0 else "negative"
    if not estimates_metric:
        sign += ": the method's own score, not an effect on the metric"
    else:  # what the sign means, as the graph over positions says of its links
        sign += ": it works against the answer" if edge.score > 0 else ": it carries the answer"
    return "<br>".join(
        [
            f"<b>{_escape(edge.name)}</b>",
            f"from {_escape(edge.source)} to {_escape(edge.target)}",
            f"feeds the {KIND_NAMES.get(edge.kind, edge.kind)} input",
            f"score {edge.score:+.4g} ({sign})",
        ]
    )


def legend_line(
    width_key: str = "", estimates_metric: bool = True, kinds: Iterable[str] | None = None
) -> tuple[str, str]:
    """(one-line legend as HTML, the rest of the key as plain text for its hover).
    ``estimates_metric``: the scores estimate the change of the answer's metric (the method's
    trait); when not, the legend says what the width and the dashes are without saying that an
    edge carries the answer or works against it. ``kinds``: the inputs the edges drawn in colour
    feed (None: all five); only their colours are keyed (Explore's 7-edge IOI circuit keyed the
    key input's green, which none of its edges has)."""
    shown = set(KIND_COLOURS) if kinds is None else set(kinds)
    swatches = "".join(
        f'<span class="cv-item"><span class="cv-line" style="border-top:3px solid {colour}"></span>'
        f"{KIND_NAMES[kind]}</span>"
        for kind, colour in KIND_COLOURS.items()
        if kind in shown
    )
    width = _escape(width_key) if width_key else "|score|"
    sign = "; dashed: works against the answer" if estimates_metric else "; dashed: a negative score"
    feeds = f"edge colour = the input it feeds: {swatches} " if swatches else ""  # no edge: no colour
    line = f"{feeds}width: {width}" + ("" if width_key else sign)
    more = (
        "Bottom: the embeddings; one row per layer going up (its heads in order, then its MLP a "
        "little higher); top: the answer's logit. An edge's colour says which input of its target it "
        "feeds (query, key, value, MLP input, logits)."
    )
    if width_key:
        more += f" Width: {width_key}."
    elif not estimates_metric:
        more += (
            " Width: |score|, the method's own score of the edge, which does not estimate the change "
            "of the answer's metric when the edge is corrupted; dashed: a negative score. The circuit's "
            "NDF is what says whether its edges carry the answer."
        )
    else:
        more += (
            " Width: |score|, the estimated change of the answer's metric if the edge is corrupted. "
            "Dashed: a positive score (corrupting the edge raises the metric: it works against the "
            "answer), as in the graph over token positions; solid: negative (it carries the answer)."
        )
    return line, more


UNSEEN_NAMED = 12  # nodes named in the note on those left out with their edges (the rest counted)


def unseen_nodes_clause(spec: GraphSpec, all_edges, drawn_nodes: set[str], faded: bool) -> str:
    """'; 14 nodes of the circuit whose every edge is among them are not drawn (a14.h0, ...)': the
    circuit's nodes the drawing lacks because all their edges are left out (at budget 10,342,
    heads such as a14.h0 vanished with no word), in the model's order; '' when there are none."""
    unseen = {e.source for e in all_edges} | {e.target for e in all_edges}
    unseen = [name for name in spec.node_names if name in unseen - drawn_nodes]
    if not unseen:
        return ""
    named = ", ".join(unseen[:UNSEEN_NAMED]) + (
        f" and {len(unseen) - UNSEEN_NAMED:,} more" if len(unseen) > UNSEEN_NAMED else ""
    )
    count = f"{len(unseen):,} {'node' if len(unseen) == 1 else 'nodes'} of the circuit"
    how = "drawn grey, as if outside it" if faded else "not drawn"
    return f"; {count} whose every edge is among them {'is' if len(unseen) == 1 else 'are'} {how} ({named})"


def key_sentence(caption_key: str) -> str:
    """The sentence of a drawing's key on what is written under its names: ``caption_key`` says
    it itself ("under each name: ..."), with a capital (prefixing "Under a name: " to it read
    "Under a name: under each name: ...")."""
    sentence = caption_key.strip()
    return sentence[:1].upper() + sentence[1:] + ("" if sentence.endswith(".") else ".")


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
    words: bool = False,
    groups: Mapping[str, Sequence[str]] | None = None,
    estimates_metric: bool = True,
    neurons: Sequence[Mapping[str, object]] = (),
    grid: Sequence[float] | None = None,
    placed: Iterable[str] | None = None,
    file_notes: Sequence[str] = (),
) -> GraphDrawing:
    """The circuit ``mask`` [n_forward, n_backward] with ``scores``, drawn in the field's layered
    layout (``node_position``) as a ``VisGraph`` and its standalone page.

    ``highlight``: edge names drawn in colour while every other edge is greyed (overlaps,
    intersections). ``show_faded``: also draw the model's nodes outside the circuit, in grey.
    At most ``max_edges`` edges are drawn, the strongest; the page says how many were left out.
    ``layers``: the layer rows of the layout (default: the layers this circuit uses, or all
    layers with ``show_faded``); give several circuits the same list to draw them alike.
    ``placed``: the nodes the layout makes room for (``packed_columns``: as many head columns as
    the fullest row of them needs); default: the circuit's own nodes, or with ``layers`` given or
    ``show_faded`` every head at its index. Circuits drawn alike get the same ``placed`` too.
    ``captions``: a short text per node drawn under its name (what it does), and ``caption_key``
    the sentence saying what those captions are. ``others``: how the edges outside ``highlight``
    are drawn: "grey", or "colour" (their own colour, thin and translucent). ``width_key``: what
    width means when ``scores`` are not attribution scores (the consensus circuit's share of
    prompts). ``words``: node names in words ("layer 12, head 2"). ``groups``: named sets of
    nodes drawn as one node each (``render.groups``). ``estimates_metric``: the scores estimate
    the change of the answer's metric (``legend_line``). ``neurons``: MLP neurons kept as nodes
    (``{"layer", "neuron", "score"}``, a run with ``neurons`` on): each MLP of the circuit draws
    its own in its layer row, right of it, tied to it by a line as wide as |score|. ``grid``: the
    smallest (column width, row height) of the layout; circuits drawn side by side are given the
    largest of their ``GraphDrawing.grid`` (a circuit whose names carry no caption has shorter
    rows and narrower columns, and was drawn smaller beside one with captions). ``file_notes``:
    sentences the standalone page (a downloaded or written file, read without the page) needs
    and the app shows elsewhere, first among its notes (the task its NDF was measured on: the
    title gave "NDF 0.22" of a foil and a corrupted prompt the file never named). ``height_px``,
    ``layout_width`` and ``frame_width`` are kept for callers; the drawing fits any frame.
    """
    del height_px, layout_width, frame_width  # the drawing is fitted to its frame in the browser
    all_edges = circuit_edges(spec, scores, mask)
    drawn = all_edges[: max(0, int(max_edges))]
    left_out = len(all_edges) - len(drawn)
    notes = []
    in_circuit = {"input", "logits"} | {e.source for e in drawn} | {e.target for e in drawn}
    if left_out:
        notes.append(
            f"Drawing the {len(drawn):,} strongest of {len(all_edges):,} circuit edges; "
            f"{left_out:,} weaker ones are left out to keep the page responsive"
            + unseen_nodes_clause(spec, all_edges, in_circuit, show_faded)
            + "."
        )
    if not all_edges:
        notes.append("This circuit has no edges at this budget; raise the budget.")
    scale = max((abs(edge.score) for edge in drawn), default=1.0) or 1.0
    totals = node_scores(all_edges)
    counts = Counter(edge.source for edge in all_edges)  # what each total sums (the logit's: its edges in)
    counts["logits"] = sum(edge.target == "logits" for edge in all_edges)
    strongest = strongest_scores(all_edges)
    given_layers = layers is not None
    if layers is None:
        layers = list(range(spec.n_layers)) if show_faded else drawn_layers(spec, in_circuit)
    names = [n for n in spec.node_names if n in in_circuit or (show_faded and _in_layers(spec, n, layers))]
    if placed is None and not given_layers and not show_faded:
        placed = names  # the circuit's own layout: as many head columns as its fullest row needs
    columns = None if placed is None else packed_columns(spec, placed)

    written = canvas_words if len(layers) <= WORDS_ROWS else node_words  # a tall drawing: one line each

    def label_of(name: str) -> str:
        caption = (captions or {}).get(name) if name in in_circuit else None
        return canvas_caption_of(written(spec, name) if words else name, caption)

    node_labels = {name: label_of(name) for name in names}
    # every column as wide as the widest label drawn (no labels overlap); circuits drawn side by
    # side are given one ``grid``. Every column with captions was 18 characters wide (a caption's
    # most), where captions such as "+5.3" and "↓' Mary'" are 4 to 9: a small circuit's drawing
    # was twice as wide as its labels needed, and fitted at half their size
    widest_name = max(
        (
            len(line)
            for name in names
            for line in node_labels[name].split("\n")
            if name not in ("input", "logits")
        ),
        default=4,
    )
    last = f"a{spec.n_layers - 1}.h{spec.n_heads - 1}"
    longest = max(widest_name, *(len(line) for line in (written(spec, last) if words else last).split("\n")))
    if groups:  # a group is drawn at its lowest member's place, its name as wide as it draws
        from .groups import GROUP_ROOM

        named = [min(len(name), GROUP_ROOM) for name, members in groups.items() if set(members) & set(names)]
        longest = max([longest, *named])
    column_width = longest * FONT_SIZE * CHAR_WIDTH + 2 * NODE_MARGIN + COLUMN_GAP * FONT_SIZE
    lines = max((label.count("\n") + 1 for label in node_labels.values()), default=1)
    row_height = lines * FONT_SIZE * LINE_HEIGHT + 2 * NODE_MARGIN + ROW_GAP * FONT_SIZE
    if grid is not None:
        column_width, row_height = max(column_width, float(grid[0])), max(row_height, float(grid[1]))
    nodes = []
    for name in names:
        x, y = node_position(spec, name, layers, column_width, row_height, columns)
        active = name in in_circuit
        kind = "head" if _HEAD_NAME.match(name) else ("mlp" if name.startswith("m") else name)
        colour = NODE_COLOURS[kind] if active else FADED
        nodes.append(
            {
                "id": name,
                "label": node_labels[name],
                "title": _node_title(
                    spec,
                    name,
                    totals.get(name) if active else None,
                    (labels or {}).get(name),
                    counts[name],
                    estimates_metric,
                    (captions or {}).get(name) if active else None,
                    strongest.get(name),
                ),
                "x": x,
                "y": y,
                "shape": "box",
                "color": {"background": colour, "border": "#333333" if active else "#bbbbbb"},
                "font": {
                    "color": "#ffffff" if kind in ("input", "logits") and active else "#111111",
                    "size": FONT_SIZE,
                },
                "borderWidth": 1,
                "shapeProperties": {"borderRadius": 12 if kind == "head" else 3},
            }
        )
    curve_of = {"q": 0.08, "k": 0.14, "v": 0.2, "mlp": 0.0, "logits": 0.0}
    edges = []
    keyed: set[str] = set()  # the inputs fed by the edges drawn in colour (grey ones are not keyed)
    for edge in drawn:
        lit = highlight is None or edge.name in highlight
        coloured = lit or others == "colour"
        if coloured:
            keyed.add(edge.kind)
        colour = KIND_COLOURS.get(edge.kind, "#777777") if coloured else FADED
        width = 1 + 7 * abs(edge.score) / scale
        if highlight is not None:
            width = width + 1.5 if lit else (width * 0.5 if others == "colour" else width)
        roundness = curve_of.get(edge.kind, 0.0)
        edges.append(
            {
                "id": edge.name,
                "from": edge.source,
                "to": edge.target,
                "title": _edge_title(edge, estimates_metric),
                "color": {"color": colour, "opacity": 1.0 if lit else (0.35 if others == "colour" else 0.6)},
                "width": width,
                "dashes": dash_pattern(dashed(edge.score, estimates_metric), width),
                "smooth": {"type": "curvedCW", "roundness": roundness} if roundness else False,
                "arrows": {"to": {"enabled": True, "scaleFactor": 0.4}},
            }
        )
    if neurons:
        _add_neurons(nodes, edges, neurons, {n["id"]: n for n in nodes}, column_width)
    line, more = legend_line(width_key, estimates_metric, keyed)
    if neurons:
        line += "; dots: an MLP's top neurons"
        more += (
            " Dots right of an MLP: its neurons of largest |score| (orange: negative score, it carries "
            "the answer; green, its line dashed: it works against it), size and line width by |score|."
        )
    if captions and caption_key:
        line += "; under a name: what it does (see the key)"
        more += " " + key_sentence(caption_key)
    graph = VisGraph(nodes, edges, legend=line, legend_more=more, title=title, notes=notes)
    if groups:
        from .groups import grouped

        graph = grouped(graph, groups)
    if len(graph.edges) <= ROUTED_EDGES:  # edges bent around the circuit's nodes they do not join
        active = [node["id"] for node in graph.nodes if node["color"]["background"] != FADED]
        graph.routing = {"edges": graph.edges, "obstacles": active, "margin": column_width / 2}
        graph.edges = route_around(graph.nodes, graph.edges, active, margin=column_width / 2)
    graph.frame = curves_frame(graph)  # a curve beside the nodes is shown whole
    return GraphDrawing(
        # the file: also what it needs to be read alone (``file_notes``; the page says it elsewhere)
        html=standalone_page(replace(graph, notes=[*file_notes, *graph.notes])),
        height=frame_height(graph, 1000, 60 + 18 * len(notes)),
        nodes=names,
        edges=drawn,
        n_circuit_edges=len(all_edges),
        n_left_out=left_out,
        notes=notes,
        vis=graph,
        captions={name: text for name, text in (captions or {}).items() if name in in_circuit},
        estimates_metric=estimates_metric,
        grid=(column_width, row_height),
    )


def _in_layers(spec: GraphSpec, name: str, layers: list[int]) -> bool:
    return name in ("input", "logits") or spec.node_layer(name) in layers


NEURON_COLOURS = ("#009E73", "#D55E00")  # raises the metric's change, lowers it
NEURON_SPACING = 0.45  # of a column: room between two neurons of one MLP


def _add_neurons(nodes: list, edges: list, neurons, placed: Mapping[str, dict], column_width: float) -> None:
    """Each drawn MLP's kept neurons as small nodes in its row, right of it (``m3.n512``), each
    tied to its MLP by an undirected line; the strongest first, nearest the MLP."""
    by_layer: dict[int, list] = {}
    for neuron in neurons:
        by_layer.setdefault(int(neuron["layer"]), []).append(neuron)
    scale = max((abs(float(n["score"])) for n in neurons), default=1.0) or 1.0
    for layer, members in sorted(by_layer.items()):
        mlp = placed.get(f"m{layer}")
        if mlp is None or mlp["color"]["background"] == FADED:
            continue  # only the circuit's own MLPs carry their neurons
        members = sorted(members, key=lambda n: -abs(float(n["score"])))
        for rank, neuron in enumerate(members):
            name = f"m{layer}.n{int(neuron['neuron'])}"
            score = float(neuron["score"])
            nodes.append(
                {
                    "id": name,
                    "label": f"n{int(neuron['neuron'])}",
                    "title": _escape(
                        f"{name}: neuron {int(neuron['neuron'])} of layer {layer}'s MLP, score {score:+.4g}"
                    ),
                    "x": mlp["x"] + (0.9 + NEURON_SPACING * rank) * column_width,
                    "y": mlp["y"],
                    "shape": "dot",
                    "size": 6 + 8 * abs(score) / scale,
                    "color": {"background": NEURON_COLOURS[score < 0], "border": "#333333"},
                    "font": {"color": "#111111", "size": FONT_SIZE * 0.6},
                    "borderWidth": 1,
                }
            )
            edges.append(
                {
                    "id": f"{name}->m{layer}",
                    "from": name,
                    "to": f"m{layer}",
                    "title": _escape(f"neuron {name} of m{layer}: score {score:+.4g}"),
                    "color": {"color": KIND_COLOURS["mlp"], "opacity": 0.6},
                    "width": 1 + 3 * abs(score) / scale,
                    "dashes": dash_pattern(dashed(score), 1 + 3 * abs(score) / scale),
                    "smooth": False,
                    "arrows": {"to": {"enabled": False}},
                }
            )
