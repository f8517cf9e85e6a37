"""The one circuit drawing as plain data, and the standalone page that draws it with vis-network.

Every circuit view (the layered graph of heads and MLPs, the graph over token positions, ACC++'s
signals, a consensus, an SAE-feature circuit) builds a ``VisGraph``: nodes with FIXED computed
coordinates (no physics) in layout units, edges, a one-line legend and the rest of the key for
its hover. The app draws it inside the page with a custom component (``ui.graph_view``); the
downloads and ``discover --html`` get ``standalone_page``, which inlines vis-network's script read
from the installed pyvis package (nothing loads from the internet).

The drawing is fitted to its frame: the frame's height follows from its width and the layout's
aspect ratio (``frame_height``), and vis-network's ``fit`` runs after the first draw and again
whenever the frame is resized, so nothing is clipped at any width; the fit never zooms a label past
``MAX_LABEL_PX`` (a small circuit is drawn at the page's type size, centred, not blown up). Layouts leave room for each
node's label box (``label_box``), so no two nodes overlap at any zoom.

Node and edge titles are HTML built here from escaped text; labels are canvas text (never HTML);
the JSON inside the page's script has ``</`` broken so no text can close the script.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

CHAR_WIDTH = 0.62  # of the font size: a generous average glyph width for vis-network's sans-serif
LINE_HEIGHT = 1.25  # of the font size
NODE_MARGIN = 6  # vis-network's label margin inside a box, layout units
MIN_FRAME_HEIGHT = 260
MAX_FRAME_HEIGHT = 900
# a tall drawing's frame grows past MAX_FRAME_HEIGHT until its labels are drawn at
# READABLE_LABEL_PX, up to TALLEST_FRAME (the page scrolls past it): SmolLM2-135M's 167-edge
# circuit with captions (30 layer rows of two-line labels) was fitted at 7.9 px at every width
READABLE_LABEL_PX = 12
TALLEST_FRAME = 1600
FIT_SHARE = 0.95  # of the frame a shared box is fitted to (``cvFit``)
# the largest a label is drawn by the fit, px: a small circuit's fit zoomed its labels to 21-23 px
# (node fonts are 22 layout units), boxes and type far larger than the page's own 16 px text
MAX_LABEL_PX = 16
# below this a fitted label is hard to read (the graph over positions: eleven tokens and rows of
# 25 nodes in the 538 px a 1,000 px window leaves, 5.6 px; SmolLM2-135M's 30 layers, a frame at its
# greatest height: 4.0 px at 1,000 px and 7.2 px at 1,500 and 2,000): the frame then says how to
# read it (zoom in and drag, or widen the window); it still opens whole, nothing out of view.
# Gemma-3-270M's layered graph fits at 10.9 px at 1,000 px and 15.6 px wider: no line.
SMALL_LABEL_PX = 9
# vis-network leaves out a label drawn under this many px (its ``scaling.label.drawThreshold``, 5,
# less 1): the line says how many it left out
LABEL_DRAWN_PX = 4
# the line's figures, filled in by the page as it fits the drawing (``cvHintText``): {px} the
# labels' size ("6.4", or "4.0 to 6.4" where they differ), {hidden} "; 12 of 49 are too small to
# be drawn" where vis-network leaves some out. Until 2026-12-06 the line said "small" with no
# figure, and SmolLM2-135M's circuit with names in words was drawn at 6.4 px at 1,000 px
SMALL_HINT = (
    "The labels are drawn at {px} px at this width{hidden}: hover a node for its name, zoom in with + "
    "and drag to move around, or widen the window."
)
# a frame at its greatest height (a tall drawing: ACC++'s 30 layers of SmolLM2-135M) is fitted to
# its height, so a wider window does not enlarge it: at 1,500 and 2,000 px the line said "widen"
SMALL_HINT_TALL = (
    "The labels are drawn at {px} px in this frame, as tall as the page lets it be{hidden}: hover a "
    "node for its name, or zoom in with + and drag to move around."
)
# a frame is no taller than the window less its key and buttons above it and WINDOW_MARGIN px (the
# app's bar over the page's top), so the whole drawing, the embeddings and the answer's logit, is
# in sight at once with its key: SmolLM2-135M's 167-edge circuit with captions drew a 1,464 px
# frame, taller than a 1,200 px window. "full size" gives it the height its labels want
# (``VisGraph.max_height``: the page then scrolls past it)
WINDOW_MARGIN = 60
# a frame held to the window's height that draws its labels under this many px opens at its full
# height instead (the page scrolls past it; "fit the window" holds it): held, SmolLM2-135M's
# 167-edge circuit with captions (30 rows of two-line labels) was drawn at 7.8, 8.5 and 8.9 px at
# 1,000, 1,500 and 2,000 px, and Compare's two at 7.3 to 7.7 px (Chromium, 1,200 px high window)
HELD_LABEL_PX = 11
# a frame narrower than the width that draws its labels at HELD_LABEL_PX (``VisGraph.readable_width``)
# is drawn that wide, up to SCROLL_WIDTH px, and scrolls sideways under its key: in a 1,000 px window
# (652 px of page) Compare's three SmolLM2-135M circuits in one layout were fitted at 10.0 px and
# the IOI prompt over its 15 token positions at 6.8 px (Chromium, 2026-12-07); nothing is cut off
SCROLL_WIDTH = 1400
# a frame whose own width draws its labels at NEAR_LABEL_PX or more is left that wide, not widened
# to HELD_LABEL_PX: at a 1,500 px window the IOI prompt over its positions (SmolLM2-135M) scrolled
# about 20 px sideways, its scroll line shown, to raise its labels from 10.8 to 11.0 px, a scroll
# no reader wants for 0.2 px. Under it the frame is widened to the full HELD_LABEL_PX, as before
NEAR_LABEL_PX = 10.5
SCROLL_HINT = (
    "The drawing is wider than the page, so that its labels are readable: scroll sideways to see all of it."
)
SMALL_HINT_WINDOW = (
    "The labels are drawn at {px} px in this frame, held to the window's height{hidden}: press "
    '"full size" for a taller frame (the page scrolls past it), hover a node for its name, or zoom '
    "in with + and drag to move around."
)


def hint_text(template: str, sizes: list[float]) -> str:
    """The line above a frame of labels drawn at ``sizes`` px, as the page writes it
    (``cvHintText``)."""
    low, high = min(sizes), max(sizes)
    px = f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f} to {high:.1f}"
    hidden = sum(size < LABEL_DRAWN_PX for size in sizes)
    words = f"; {hidden} of {len(sizes)} are too small to be drawn" if hidden else ""
    return template.replace("{px}", px).replace("{hidden}", words)


@dataclass
class VisGraph:
    """A drawing: vis-network nodes and edges (plain dicts) at fixed places, and its key."""

    nodes: list[dict]
    edges: list[dict]
    legend: str = ""  # one line, HTML built from escaped text
    legend_more: str = ""  # the rest of the key, plain text, shown on hover
    title: str = ""  # plain text
    notes: list[str] = field(default_factory=list)  # plain text, shown under the legend
    kind: str = "layered"  # layered | positions | features
    # a box (left, top, right, bottom; layout units) shown whole besides the nodes: drawings side
    # by side given one box (the union of theirs) fit alike, so a node sits at one place in each
    frame: tuple[float, float, float, float] | None = None
    # how ``edges`` were bent around the nodes (``render.routing``): {"edges": as laid out before,
    # "obstacles": the node ids they keep clear of, "margin": layout units beside the nodes};
    # drawings side by side are bent alike from these (``routing.drawn_alike``). Not drawn.
    routing: dict | None = None

    def bounds(self) -> tuple[float, float, float, float]:
        """(min x, min y, max x, max y) of every node's label box and of ``frame``, layout units."""
        boxes = [node_box(node) for node in self.nodes] or [(0.0, 0.0, 1.0, 1.0)]
        return union_box(boxes + ([self.frame] if self.frame is not None else []))

    def aspect(self) -> float:
        """Height over width of the drawing's bounding box."""
        left, top, right, bottom = self.bounds()
        return max(bottom - top, 1.0) / max(right - left, 1.0)

    def max_scale(self, max_label_px: float = MAX_LABEL_PX) -> float:
        """The largest zoom the fit may use: no label drawn larger than ``max_label_px``."""
        fonts = [float(node.get("font", {}).get("size", 14)) for node in self.nodes] or [14.0]
        return max_label_px / max(fonts)

    def widest(self, max_label_px: float = MAX_LABEL_PX) -> float:
        """The drawing's width in px at its largest zoom (a frame wider than this leaves margins)."""
        left, _, right, _ = self.bounds()
        return max(right - left, 1.0) * self.max_scale(max_label_px)

    def max_height(self) -> int:
        """The tallest this drawing's frame may be, px: ``MAX_FRAME_HEIGHT``, or for a drawing
        whose labels that height draws under ``READABLE_LABEL_PX``, the height that draws them
        at that size, up to ``TALLEST_FRAME``."""
        _, top, _, bottom = self.bounds()
        readable = (bottom - top) * self.max_scale(READABLE_LABEL_PX) / FIT_SHARE + 30
        return int(min(TALLEST_FRAME, max(MAX_FRAME_HEIGHT, math.ceil(readable))))

    def readable_width(self, label_px: float = HELD_LABEL_PX) -> float:
        """The frame width (px) at which the fit draws this drawing's labels at ``label_px``, or at
        the size its greatest frame's height allows where that is smaller (a wider frame would not
        enlarge them): Compare's columns are no narrower (``ui.compare.column_px``)."""
        left, top, right, bottom = self.bounds()
        fonts = [float(node.get("font", {}).get("size", 14)) for node in self.nodes] or [14.0]
        tallest = (self.max_height() - 30) * FIT_SHARE / max(bottom - top, 1.0) * max(fonts)
        scale = min(label_px, tallest) / max(fonts)
        return max(right - left, 1.0) * scale / FIT_SHARE + 2

    def to_data(self, max_label_px: float = MAX_LABEL_PX) -> dict:
        """What the component and the page read: JSON-able (``max_label_px``: the largest label
        the fit may draw; demo mode's audience reads from further away)."""
        return {
            "nodes": [selection_colours(node) for node in self.nodes],
            "edges": self.edges,
            "legend": self.legend,
            "legend_more": self.legend_more,
            "title": self.title,
            "notes": self.notes,
            "aspect": self.aspect(),
            "max_scale": self.max_scale(max_label_px),
            "widest": self.widest(max_label_px),
            "small_scale": self.max_scale(SMALL_LABEL_PX),
            "small_hint": SMALL_HINT,
            "small_hint_tall": SMALL_HINT_TALL,
            "small_hint_window": SMALL_HINT_WINDOW,
            "box": list(self.bounds()) if self.frame is not None else None,
            "min_height": MIN_FRAME_HEIGHT,
            "max_height": self.max_height(),
            "min_width": min(SCROLL_WIDTH, math.ceil(self.readable_width())),
            "scroll_width": SCROLL_WIDTH,
            "scroll_hint": SCROLL_HINT,
        }


# a selected (clicked or pinned) or hovered node: vis-network's default fill is pale blue
# (#D2E5FF), and a white label on it (the embeddings', the logits') read 1.3:1; a box with a light
# label turns dark blue instead, one with a dark label pale blue, each with a blue border
SELECTED_DARK = "#1f4e8c"
SELECTED_LIGHT = "#d2e5ff"
SELECTED_BORDER = "#0b5cad"


def luminance(colour: str) -> float:
    """The relative luminance (WCAG) of a '#rrggbb' colour."""
    value = colour.lstrip("#")
    channels = [int(value[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    """The contrast ratio (WCAG, 1 to 21) of two '#rrggbb' colours."""
    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def selection_colours(node: dict) -> dict:
    """``node`` with the fills it takes when selected or hovered: dark blue under a light label,
    pale blue under a dark one (a node that sets its own, or has no fill, as it is)."""
    colour = node.get("color")
    if not isinstance(colour, dict) or "background" not in colour or "highlight" in colour:
        return node
    label = str((node.get("font") or {}).get("color") or "#343434")  # vis-network's default label
    light = re.fullmatch(r"#[0-9a-fA-F]{6}", label) is not None and luminance(label) > 0.5
    fill = SELECTED_DARK if light else SELECTED_LIGHT
    chosen = {"background": fill, "border": SELECTED_BORDER}
    return {**node, "color": {**colour, "highlight": chosen, "hover": chosen}}


def framed_alike(graphs: list[VisGraph]) -> list[VisGraph]:
    """Copies of ``graphs`` (drawn in one layout, side by side) fitted to one box, the union of
    theirs: a node sits at the same place in each frame, and a small circuit is not zoomed
    larger than the others (``routing.drawn_alike`` also bends an edge of several of them alike)."""
    if not graphs:
        return []
    box = union_box([graph.bounds() for graph in graphs])
    return [dataclasses.replace(graph, frame=box) for graph in graphs]


def union_box(boxes: list) -> tuple[float, float, float, float]:
    """The smallest (left, top, right, bottom) holding every box of ``boxes`` (at least one)."""
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def escape(text: object) -> str:
    """HTML-escape, and break the word 'href' (no raw link can be smuggled into a hover)."""
    return html.escape(str(text), quote=True).replace("href", "&#104;ref")


def label_box(label: str, font: float, shape: str = "box") -> tuple[float, float]:
    """(width, height) of a node's box in layout units for ``label`` at ``font`` (an upper
    estimate of what vis-network draws: the longest line, the lines, the margin)."""
    lines = str(label).split("\n") or [""]
    width = max(len(line) for line in lines) * font * CHAR_WIDTH + 2 * NODE_MARGIN
    height = len(lines) * font * LINE_HEIGHT + 2 * NODE_MARGIN
    if shape in ("dot", "square", "diamond"):  # the label sits under a shape of ``size``
        return max(width - 2 * NODE_MARGIN, 0.0), height
    return width, height


def node_box(node: dict) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a node's box in layout units (its label's box; a dot-like
    shape with its label under it)."""
    font = float(node.get("font", {}).get("size", 14))
    shape = node.get("shape", "box")
    width, height = label_box(node.get("label", ""), font, shape)
    x, y = float(node["x"]), float(node["y"])
    if shape in ("dot", "square", "diamond"):
        size = float(node.get("size", 10))
        width = max(width, 2 * size)
        return x - width / 2, y - size, x + width / 2, y + size + height
    # a label inside its node: vis-network widens it to its ``widthConstraint``/``heightConstraint``
    # minimum (the margins outside it), and draws a circle as wide as it is tall
    width = max(width, _minimum(node.get("widthConstraint")) + 2 * NODE_MARGIN)
    height = max(height, _minimum(node.get("heightConstraint")) + 2 * NODE_MARGIN)
    if shape == "circle":
        width = height = max(width, height)
    return x - width / 2, y - height / 2, x + width / 2, y + height / 2


def _minimum(constraint) -> float:
    """A node's width or height constraint's minimum (layout units; 0 for none)."""
    if isinstance(constraint, dict):
        return float(constraint.get("minimum", 0.0) or 0.0)
    number = isinstance(constraint, (int, float)) and not isinstance(constraint, bool)
    return float(constraint) if number else 0.0


def overlapping(nodes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of nodes whose boxes overlap (the layouts promise none)."""
    boxes = [(node["id"], node_box(node)) for node in nodes if node.get("shape") != "text"]
    found = []
    for i, (a, (l1, t1, r1, b1)) in enumerate(boxes):
        for b, (l2, t2, r2, b2) in boxes[i + 1 :]:
            if l1 < r2 and l2 < r1 and t1 < b2 and t2 < b1:
                found.append((a, b))
    return found


def frame_height(graph: VisGraph, width: float, chrome: int = 0) -> int:
    """The frame height (px) that shows ``graph`` at ``width`` px, within bounds (no taller than
    the drawing at its largest zoom needs)."""
    drawn = min(width, graph.widest())
    return int(min(graph.max_height(), max(MIN_FRAME_HEIGHT, graph.aspect() * drawn + 30))) + chrome


@functools.lru_cache(maxsize=1)
def vis_script() -> str:
    """vis-network's script, read once from the installed pyvis package."""
    import pyvis

    path = Path(pyvis.__file__).parent / "lib" / "vis-9.1.2" / "vis-network.min.js"
    return path.read_text(encoding="utf-8")


def script_json(value) -> str:
    """JSON safe inside a <script> and inert as markup: every '<' and '>' written as a JSON escape."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")


OPTIONS = {
    "physics": {"enabled": False},
    "layout": {"improvedLayout": False},
    "interaction": {
        "hover": True,
        "tooltipDelay": 80,
        "zoomView": False,
        "dragNodes": False,
        "multiselect": False,
    },
    "edges": {"selectionWidth": 2, "hoverWidth": 1.5},
    "nodes": {"margin": NODE_MARGIN, "scaling": {"label": {"enabled": False}}},
}

# shared by the page and the component: titles to elements, the frame's height from its width,
# fit after the first draw and on every resize
DRAW_SCRIPT = (
    f"var WINDOW_MARGIN = {WINDOW_MARGIN};\n"
    + f"var HELD_LABEL_PX = {HELD_LABEL_PX};\n"
    + f"var NEAR_LABEL_PX = {NEAR_LABEL_PX};\n"
    + f"var LABEL_DRAWN_PX = {LABEL_DRAWN_PX};\n"
    + r"""
function cvTitles(items) {
  return items.map(function (item) {
    if (typeof item.title === "string") {
      var box = document.createElement("div");
      box.innerHTML = item.title;  // built by circuitviz from escaped text
      return Object.assign({}, item, {title: box});
    }
    return item;
  });
}
function cvRoom(container) {  // the most of the window a frame takes with its key above it: seen whole
  var root = (container && container.closest && container.closest(".cv-root")) || document.body;
  var above = container ? container.getBoundingClientRect().top - root.getBoundingClientRect().top : 0;
  return Math.max(0, (window.innerHeight || 0) - WINDOW_MARGIN - Math.max(0, above));
}
function cvFullHeight(data, width) {  // the height the drawing wants (its labels readable)
  var drawn = data.widest ? Math.min(width, data.widest) : width;
  return Math.min(data.max_height, Math.max(data.min_height, data.aspect * drawn + 30));
}
function cvHeight(data, width, full, container) {  // no taller than the window unless ``full`` is asked for
  var wanted = cvFullHeight(data, width), room = cvRoom(container);
  return !full && room >= data.min_height && wanted > room ? room : wanted;
}
function cvFit(network, data) {
  if (data.box) {  // a box shared with the drawings beside this one: fitted whole, centred
    var frame = network.body.container, b = data.box;
    var scale = 0.95 * Math.min(frame.clientWidth / Math.max(b[2] - b[0], 1),
                                frame.clientHeight / Math.max(b[3] - b[1], 1));
    network.moveTo({position: {x: (b[0] + b[2]) / 2, y: (b[1] + b[3]) / 2}, scale: scale});
  } else {
    network.fit();
  }
  if (data.max_scale && network.getScale() > data.max_scale) { network.moveTo({scale: data.max_scale}); }
  cvHintUpdate(network, data);
}
function cvHintUpdate(network, data) {  // labels too small to read: the frame says how to read them
  if (network.cvHint) {
    var small = data.small_scale && network.getScale() < data.small_scale;
    network.cvHint.style.display = small ? "" : "none";
    // a frame at its greatest height is fitted to its height: widening the window does not help;
    // one held to the window's height grows with "full size"
    var frame = network.body.container, height = parseFloat(frame.style.height) || frame.clientHeight;
    var held = !network.cvTall && height < cvFullHeight(data, frame.clientWidth) - 1;
    var tall = height >= data.max_height;
    var box = frame.parentElement, wide = box && frame.offsetWidth > box.clientWidth + 1;
    if (!small && wide && data.scroll_hint) {  // the frame scrolls sideways: say so
      network.cvHint.style.display = "";
      network.cvHint.textContent = data.scroll_hint;
    }
    if (small && data.small_hint_tall) {
      var template = held ? data.small_hint_window : (tall ? data.small_hint_tall : data.small_hint);
      network.cvHint.textContent = cvHintText(network, template);
    } else if (small) {
      network.cvHint.textContent = cvHintText(network, data.small_hint);
    }
  }
}
function cvLabelSizes(network) {  // each label's size on screen, px
  var scale = network.getScale(), sizes = [];
  network.body.data.nodes.forEach(function (node) {
    if (node.label) sizes.push(((node.font && node.font.size) || 14) * scale);
  });
  return sizes;
}
function cvHintText(network, template) {  // the line's figures: the labels' px, those left out
  var sizes = cvLabelSizes(network);
  if (!sizes.length) return template.replace("{px}", "?").replace("{hidden}", "");
  var low = Math.min.apply(null, sizes), high = Math.max.apply(null, sizes);
  var px = low.toFixed(1) === high.toFixed(1) ? low.toFixed(1) : low.toFixed(1) + " to " + high.toFixed(1);
  var hidden = sizes.filter(function (size) { return size < LABEL_DRAWN_PX; }).length;
  var words = hidden ? "; " + hidden + " of " + sizes.length + " are too small to be drawn" : "";
  return template.replace("{px}", px).replace("{hidden}", words);
}
function cvMinWidth(container, data) {  // the frame's least width: "" (its box's) or ``min_width``
  // its box's width is kept where it draws the labels at NEAR_LABEL_PX or more (they grow with the
  // frame's width less 2 px, as ``VisGraph.readable_width`` says): no sideways scroll for a near miss
  var box = container.parentElement, room = box ? box.clientWidth : 0;
  if (!data.min_width || (room && (room - 2) * HELD_LABEL_PX >= (data.min_width - 2) * NEAR_LABEL_PX)) {
    return "";
  }
  return data.min_width + "px";
}
function cvSize(network, data) {  // the frame's height for its width (and the window's), refitted
  var container = network.body.container;
  var base = cvMinWidth(container, data);  // decided anew: the window may have grown or shrunk
  container.style.minWidth = base;
  var width = container.clientWidth || 800;
  var full = cvFullHeight(data, width), room = cvRoom(container);
  // cvFull: the user's choice (null: none yet); cvTall: the frame is at its full height now. With
  // no choice the frame is held to the window unless that draws its labels under HELD_LABEL_PX
  network.cvTall = network.cvFull === true;
  var widened = 0;  // the labels' size when the frame was widened for them (0: not widened)
  for (var pass = 0; pass < 5; pass++) {  // again if the fit showed or hid the line above
    var height = cvHeight(data, width, network.cvTall, container);
    container.style.height = height + "px";
    network.setSize(width + "px", height + "px");
    network.redraw();
    cvFit(network, data);
    var sizes = cvLabelSizes(network), least = sizes.length ? Math.min.apply(null, sizes) : 0;
    if (network.cvFull === null && !network.cvTall && height < full - 1 && sizes.length &&
        least < HELD_LABEL_PX) {
      network.cvTall = true;  // held, its labels too small to read: at its full height
      continue;
    }
    // vis-network's own fit (no shared box) keeps more margin than ``min_width`` allows for: the
    // frame once wider by the labels' shortfall, up to ``scroll_width``; back if that did not help
    // (a frame at its greatest height is fitted to its height). A frame at its box's width is
    // widened only for labels under NEAR_LABEL_PX; one that scrolls already, for any shortfall
    var floor = base ? HELD_LABEL_PX - 0.05 : NEAR_LABEL_PX;
    var wider = Math.min(data.scroll_width || 0, Math.ceil(width * HELD_LABEL_PX / (least || 1)) + 2);
    var back = widened > 0 && least <= widened * 1.01;
    if (back || (data.min_width && !widened && least && least < floor && wider > width + 1)) {
      container.style.minWidth = back ? base : wider + "px";
      widened = back ? -1 : least;
      width = container.clientWidth || wider;
      full = cvFullHeight(data, width);
      continue;
    }
    if (Math.abs(cvRoom(container) - room) < 2) break;
    room = cvRoom(container);
  }
  var button = network.cvSizeButton;  // only where the drawing is taller than the window
  if (button) {
    button.style.display = full > room && room >= data.min_height ? "" : "none";
    button.textContent = network.cvTall ? "fit the window" : "full size";
    button.title = network.cvTall
      ? "hold the frame to the window's height: the whole drawing in sight"
      : "the frame at its full height (" + Math.round(full) + " px, taller than the window): larger labels, the page scrolls";
  }
}
function cvToggleFull(network, data) {
  network.cvFull = !network.cvTall;
  cvSize(network, data);
}
function cvDraw(container, data, options) {
  if (data.min_width && container.parentElement) {  // readable labels: wider, the frame's box scrolls
    container.style.minWidth = cvMinWidth(container, data);
    container.parentElement.style.overflowX = "auto";
    // and never up and down: overflow-x alone makes the box a vertical scroller too, and a box a
    // pixel shorter than its frame took the wheel that scrolls the page (2026-12-07)
    container.parentElement.style.overflowY = "hidden";
  }
  var width = container.clientWidth || 800;
  var height = cvHeight(data, width, false, container);
  container.style.height = height + "px";
  var network = new vis.Network(
    container,
    {nodes: new vis.DataSet(cvTitles(data.nodes)), edges: new vis.DataSet(cvTitles(data.edges))},
    options
  );
  network.cvFull = null;  // the user's choice of height: none yet
  network.cvTall = false;
  network.once("afterDrawing", function () { cvSize(network, data); });
  network.on("zoom", function () { cvHintUpdate(network, data); });
  if (typeof ResizeObserver !== "undefined") {
    // the box too: a frame held wider than its box keeps its width while the box grows or shrinks
    var box = container.parentElement, last = width, lastBox = box ? box.clientWidth : 0;
    var observer = new ResizeObserver(function () {
      var now = container.clientWidth, nowBox = box ? box.clientWidth : 0;
      if (!container.isConnected) { observer.disconnect(); return; }  // the page drew another
      if (!now || (box && !nowBox)) return;  // hidden (a closed tab, a page switch): nothing to fit
      if ((now && Math.abs(now - last) > 2) || Math.abs(nowBox - lastBox) > 2) {
        last = now;
        lastBox = nowBox;
        cvSize(network, data);
        last = container.clientWidth;
      }
    });
    observer.observe(container);
    if (box) observer.observe(box);
  }
  var height = window.innerHeight;
  network.cvOnResize = function () {  // a window of another height: the frame follows
    if (!container.isConnected) { window.removeEventListener("resize", network.cvOnResize); return; }
    if (Math.abs(window.innerHeight - height) > 2) {
      height = window.innerHeight;
      cvSize(network, data);
    }
  };
  window.addEventListener("resize", network.cvOnResize);
  return network;
}
"""
)

_PAGE_STYLE = """
body { margin: 0; font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
.cv-legend { font-size: 13px; padding: 4px 8px; color: #222; line-height: 1.6; }
.cv-title { font-weight: 600; padding: 4px 8px 0 8px; font-size: 13px; }
.cv-note { color: #8a4b00; padding: 0 8px; font-size: 13px; }
.cv-item { display: inline-flex; align-items: center; margin-right: 10px; white-space: nowrap; }
.cv-line { display: inline-block; width: 22px; margin-right: 4px; }
.cv-more { cursor: help; color: #0068c9; border-bottom: 1px dotted #0068c9; }
.cv-zoom { float: right; }
.cv-zoom button { font-size: 13px; min-width: 28px; margin-left: 3px; cursor: pointer; }
#mynetwork { width: 100%; border: 1px solid #e6e6e6; box-sizing: border-box; }
div.vis-tooltip { white-space: normal; max-width: 420px; font-size: 13px; line-height: 1.35; }
"""


# said by the key only of a frame whose click opens a card (the app's, ``ui.graph_view`` with cards):
# the downloaded pages said it of a click that does nothing there
CARD_SENTENCE = "Click a node for its card."


def legend_block(graph: VisGraph, cards: bool = False) -> str:
    """The title, the one-line legend ("the key" on hover holds the rest) and the notes, as HTML;
    ``cards``: a click on a node opens its card (the key says so)."""
    key = f"{graph.legend_more} {CARD_SENTENCE}".strip() if cards else graph.legend_more
    more = f'<span class="cv-more" title="{escape(key)}">the key (hover)</span> ' if key else ""
    title = f'<div class="cv-title">{escape(graph.title)}</div>' if graph.title else ""
    notes = "".join(f'<div class="cv-note">{escape(note)}</div>' for note in graph.notes)
    return f'{title}<div class="cv-legend">{more}{graph.legend}</div>{notes}'


def standalone_page(graph: VisGraph) -> str:
    """One HTML page that draws ``graph`` (every script inline; fitted to the window's width)."""
    controls = (
        '<span class="cv-zoom"><button onclick="cvZoom(1.25)" title="zoom in">+</button>'
        '<button onclick="cvZoom(0.8)" title="zoom out">&minus;</button>'
        '<button onclick="cvFit(network, data)" title="fit the graph to the frame">fit</button>'
        '<button id="cv-size" style="display:none" onclick="cvToggleFull(network, data)">full size</button></span>'
    )
    data = graph.to_data()
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<style>{_PAGE_STYLE}</style>"
        f"<script>{vis_script()}</script></head><body>"
        f"{controls}{legend_block(graph)}<div class='cv-note' id='cv-hint' style='display:none'>{escape(SMALL_HINT)}</div>"
        "<div id='mynetwork'></div>"
        "<script>\n"
        f"nodes = new vis.DataSet({script_json(data.pop('nodes'))});\n"
        f"edges = new vis.DataSet({script_json(data.pop('edges'))});\n"
        f"var data = Object.assign({script_json(data)}, {{nodes: nodes.get(), edges: edges.get()}});\n"
        f"var options = {script_json(OPTIONS)};\n"
        f"{DRAW_SCRIPT}\n"
        "var network = cvDraw(document.getElementById('mynetwork'), data, options);\n"
        "network.cvHint = document.getElementById('cv-hint');\n"
        "network.cvSizeButton = document.getElementById('cv-size');\n"
        "function cvZoom(factor) { network.moveTo({scale: network.getScale() * factor}); cvHintUpdate(network, data); }\n"
        "</script></body></html>"
    )
