"""The circuit drawing inside the page: a custom component (Streamlit components v2, inline, no
iframe) around ``render.vis``'s drawing, so a click on a node or an edge reaches Python.

The component draws the ``VisGraph`` with vis-network (its script read from the installed pyvis
package and sent with the component; nothing loads from the internet), fits it to its frame on
first paint and on every resize (the frame's height follows from its width and the drawing's
aspect ratio), and reports a click as a trigger value ``clicked``: ``{"kind": "node" | "edge" |
"close", "id": ..., "pin": bool}`` (``pin``: Ctrl/Cmd/Shift was held, the field's habit for pinning
a node into a subgraph). The node picked in Python is passed back as ``selected`` and drawn selected.

With ``cards`` (``render.cards.card_data``: every node's and edge's card as plain text, sent with
the drawing) a click opens the card beside the graph at once, in the browser, without waiting
for Python: the round trip a click causes (the trigger, the rerun, the card's widgets) used to
be most of the time from a click to its card. The card's edges are buttons that go to the node at
their other end, and "close the card" closes it; both report a click as above, so Python keeps
the view (the URL) and what needs it (an edit, the SAE features, ACC++'s trace) shows under the
graph. ``opened`` is Python's view of the open card (``"edge:<id>"`` for an edge): a card opened
from a link, or closed from Python, follows it; a click not yet answered by Python wins.
All text in a card is set as text, never parsed as markup.

Each drawing's root element carries ``data-cv-graph`` (its key) and, for tests, the network as
``element.cvNetwork`` (its node boxes are read with ``getBoundingBox``).
"""

from __future__ import annotations

import functools
import hashlib
import json

import streamlit as st

from ..render.vis import DRAW_SCRIPT, OPTIONS, legend_block, vis_script
from . import state as ui_state

# the card stands beside the graph while the frame is wide enough for both, and under it below
# ``CARD_BELOW_PX`` (at 1,000 px the card beside it left the graph 300 px and its labels 4-5 px)
CARD_BELOW_PX = 760
_CSS = """
.cv-root { width: 100%; font-family: inherit; container-type: inline-size; }
.cv-root .cv-legend { font-size: 13px; padding: 2px 4px; color: #222; line-height: 1.6; }
.cv-root .cv-title { font-weight: 600; padding: 2px 4px 0 4px; font-size: 13px; }
.cv-root .cv-note { color: #8a4b00; padding: 0 4px; font-size: 13px; }
.cv-root .cv-item { display: inline-flex; align-items: center; margin-right: 10px; white-space: nowrap; }
.cv-root .cv-line { display: inline-block; width: 22px; margin-right: 4px; }
.cv-root .cv-more { cursor: help; color: #0068c9; border-bottom: 1px dotted #0068c9; }
.cv-root .cv-zoom { float: right; }
.cv-root .cv-zoom button { font-size: 13px; min-width: 28px; margin-left: 3px; cursor: pointer;
  background: #fff; border: 1px solid #ccc; border-radius: 4px; }
.cv-root .cv-canvas { width: 100%; border: 1px solid #e6e6e6; box-sizing: border-box; position: relative; }
.cv-root .cv-body { display: flex; gap: 10px; align-items: flex-start; }
.cv-root .cv-body .cv-canvas { flex: 1 1 auto; min-width: 0; }
.cv-root .cv-card { flex: 0 0 28%; min-width: 230px; max-width: 420px; font-size: 14px; line-height: 1.4;
  overflow-y: auto; box-sizing: border-box; padding: 0 2px; }
.cv-root .cv-card strong { display: block; font-size: 15px; margin-top: 4px; }
.cv-root .cv-card .cv-what { color: #555; font-size: 13px; }
.cv-root .cv-card .cv-head { font-weight: 600; margin-top: 8px; }
.cv-root .cv-card pre { white-space: pre-wrap; font-size: 12.5px; margin: 2px 0; font-family: inherit; }
.cv-root .cv-card button { display: block; width: 100%; text-align: left; font-size: 13px; margin: 2px 0;
  padding: 3px 6px; cursor: pointer; background: #fff; border: 1px solid #d6d6d8; border-radius: 6px;
  font-family: ui-monospace, monospace; white-space: pre; overflow: hidden; text-overflow: ellipsis; }
.cv-root .cv-card button:hover { border-color: #ff4b4b; color: #ff4b4b; }
.cv-root .cv-card button.cv-close { font-family: inherit; text-align: center; margin-bottom: 4px; }
@container (max-width: CARD_BELOW_PX) {
  .cv-root .cv-body { flex-direction: column; align-items: stretch; }
  .cv-root .cv-body .cv-canvas { flex: 0 0 auto; }
  .cv-root .cv-card { flex: 0 0 auto; width: 100%; max-width: none; min-width: 0; }
}
.cv-root .cv-card button.cv-more-rows { font-family: inherit; color: #0068c9; border-style: dashed; }
div.vis-tooltip { position: absolute; white-space: normal; max-width: 420px; font-size: 13px; line-height: 1.35;
  background: #fffff0; border: 1px solid #888; border-radius: 3px; padding: 5px; z-index: 1000;
  pointer-events: none; font-family: inherit; color: #111; }
""".replace("CARD_BELOW_PX", f"{CARD_BELOW_PX}px")

_JS = r"""
function cvCard(root, id) {
  // the card of node ``id`` (or "edge:<id>") in the panel beside the graph; "" hides it
  const panel = root.cvPanel;
  const cards = root.cvData.cards || {nodes: {}, edges: {}};
  const isEdge = id.startsWith("edge:");
  const card = isEdge ? (cards.edges[id.slice(5)] || {title: "edge " + id.slice(5), lines: []}) : cards.nodes[id];
  const text = JSON.stringify([id, card || null]);
  if (root.cvCardText === text) return;
  root.cvCardText = text;
  panel.textContent = "";
  if (!id || !card) { panel.style.display = "none"; return; }
  const add = (tag, cls, words) => {
    const element = document.createElement(tag);
    if (cls) element.className = cls;
    element.textContent = words;
    panel.appendChild(element);
    return element;
  };
  add("button", "cv-close", "close the card").onclick = () => cvOpen(root, "", true);
  if (isEdge) {
    add("strong", "", card.title);
    for (const line of card.lines) add("div", "cv-what", line);
  } else {
    if (card.group) add("strong", "", card.group);
    if (card.members) add("pre", "", card.members);
    add("strong", "", card.title);
    add("div", "cv-what", card.what);
    add("div", "", card.score);
    if (card.caption) add("div", "cv-what", card.caption);
    const row = ([node, words]) => {
      const go = document.createElement("button");
      go.textContent = words;
      go.title = "go to " + node;
      go.onclick = () => cvOpen(root, node, true);
      return go;
    };
    for (const side of [card.in, card.out]) {
      if (!side.rows.length) continue;
      add("div", "cv-head", side.head);
      const shown = side.shown || side.rows.length;
      for (const edge of side.rows.slice(0, shown)) panel.appendChild(row(edge));
      if (side.rows.length > shown) {  // the weaker edges, one click away (never cut silently)
        const more = add("button", "cv-more-rows", side.more);
        more.onclick = () => {
          for (const edge of side.rows.slice(shown)) panel.insertBefore(row(edge), more);
          more.remove();
        };
      }
      if (side.unlisted) add("div", "cv-what", side.unlisted);
    }
    if (card.lens) {
      add("div", "cv-head", "Logit lens (what its output pushes up / down at the last position)");
      add("pre", "", card.lens);
    }
  }
  panel.style.display = "block";
}

function cvOpen(root, id, local) {
  // show the card of ``id`` at once; a click (``local``) is also reported to Python, which keeps
  // the view; until Python answers it, its rerun does not move the card back
  const cards = root.cvData.cards;
  if (!cards) return false;
  if (id && !id.startsWith("edge:") && !cards.nodes[id]) return false;
  cvCard(root, id);
  root.cvShown = id;
  if (local && id) {  // a card opened under the graph (a narrow frame) and out of sight: into view
    const panel = root.cvPanel.getBoundingClientRect();
    const canvas = root.querySelector(".cv-canvas").getBoundingClientRect();
    if (panel.top >= canvas.bottom - 1 && panel.top > window.innerHeight - 60) {
      root.cvPanel.scrollIntoView({block: "nearest", behavior: "smooth"});
    }
  }
  if (local) {
    root.cvPending.push([id, Date.now()]);
    root.cvNetwork.selectNodes(id && !id.startsWith("edge:") && root.cvNetwork.body.nodes[id] ? [id] : [], false);
    const edge = id.startsWith("edge:");
    const click = {kind: id ? (edge ? "edge" : "node") : "close", id: edge ? id.slice(5) : id, pin: false};
    // told to Python after the card is painted: the rerun it causes (its messages, the page's
    // update) would otherwise hold the paint back on a busy machine
    requestAnimationFrame(() => setTimeout(() => root.cvTrigger("clicked", click), 0));
  }
  return true;
}

export default function (component) {
  const { data, setTriggerValue } = component;
  if (data.vis && typeof vis === "undefined") {
    // vis-network, sent once a session (not with every rerun: it is 470 kB); run at the page's top level
    (0, eval)(data.vis);
  }
  if (typeof vis !== "undefined") return cvRender(component);
  // not here yet: another drawing of this run may carry it (only the first drawing of a run does,
  // and the page may run this one first); wait for it, asking Python once if it does not come
  // (the rerun that answers sends it with one drawing: every waiting drawing then draws)
  let waited = 0;
  const timer = setInterval(() => {
    waited += 50;
    if (typeof vis !== "undefined") { clearInterval(timer); cvRender(component); return; }
    if (waited === 2000) setTriggerValue("need_vis", true);
    if (waited >= 120000) clearInterval(timer);
  }, 50);
}

function cvRender(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector(".cv-root");
  if (!root) {
    root = document.createElement("div");
    root.className = "cv-root";
    parentElement.appendChild(root);
    root.cvPending = [];
    root.cvShown = "";
  }
  root.cvTrigger = setTriggerValue;
  root.cvData = data;
  const drawing = JSON.stringify([data.nodes, data.edges, data.legend, data.title, data.notes]);
  const rebuilt = root.cvDrawing !== drawing;
  if (rebuilt) {
    if (root.cvNetwork) {
      window.removeEventListener("resize", root.cvNetwork.cvOnResize);  // its frame follows no window now
      root.cvNetwork.destroy();
    }
    root.innerHTML = "";
    const head = document.createElement("div");
    head.innerHTML = data.head;  // built by circuitviz from escaped text
    const zoom = document.createElement("span");
    zoom.className = "cv-zoom";
    for (const [text, tip, act] of [["+", "zoom in", 1.25], ["\u2212", "zoom out", 0.8], ["fit", "fit the graph to the frame", 0]]) {
      const button = document.createElement("button");
      button.textContent = text; button.title = tip;
      button.onclick = () => { const n = root.cvNetwork; if (!n) return; if (act) { n.moveTo({scale: n.getScale() * act}); cvHintUpdate(n, root.cvData); } else { cvFit(n, root.cvData); } };
      zoom.appendChild(button);
    }
    const size = document.createElement("button");  // "full size": shown where the window holds the frame
    size.style.display = "none";
    size.onclick = () => { if (root.cvNetwork) cvToggleFull(root.cvNetwork, root.cvData); };
    zoom.appendChild(size);
    root.appendChild(zoom);
    root.appendChild(head);
    const body = document.createElement("div");
    body.className = "cv-body";
    const canvas = document.createElement("div");
    canvas.className = "cv-canvas";
    const panel = document.createElement("div");
    panel.className = "cv-card";
    panel.style.display = "none";
    body.appendChild(canvas);
    body.appendChild(panel);
    root.appendChild(body);
    root.cvPanel = panel;
    root.cvCardText = null;
    // the card first, so that the graph is fitted to the width the card leaves it
    const opening = root.cvPending.length ? root.cvShown : (data.opened || "");
    if (data.cards && opening) { cvCard(root, opening); root.cvShown = opening; }
    const hint = document.createElement("div");
    hint.className = "cv-note";
    hint.style.display = "none";
    hint.textContent = data.small_hint || "";
    root.insertBefore(hint, body);
    const network = cvDraw(canvas, data, data.options);
    network.cvHint = hint;
    network.cvSizeButton = size;
    network.on("click", (event) => {
      const pin = !!(event.event && event.event.srcEvent &&
        (event.event.srcEvent.ctrlKey || event.event.srcEvent.metaKey || event.event.srcEvent.shiftKey));
      // the element under the pointer (not vis-network's selection, which a Ctrl-click toggles)
      const at = event.pointer && event.pointer.DOM;
      const node = at ? network.getNodeAt(at) : undefined;
      const edge = node === undefined && at ? network.getEdgeAt(at) : undefined;
      if (!pin && node !== undefined && cvOpen(root, String(node), true)) return;
      if (!pin && node === undefined && edge !== undefined && cvOpen(root, "edge:" + String(edge), true)) return;
      if (node !== undefined) {
        root.cvTrigger("clicked", {kind: "node", id: String(node), pin: pin});
      } else if (edge !== undefined) {
        root.cvTrigger("clicked", {kind: "edge", id: String(edge), pin: pin});
      }
    });
    root.cvNetwork = network;
    root.cvDrawing = drawing;
  }
  root.dataset.cvGraph = data.key;
  const network = root.cvNetwork;
  // Python's answer to the clicks made here: drop them up to the one it now shows (and any
  // older than 5 s); while a later click is unanswered, the card and selection stay as they are
  const opened = data.opened || "";
  const now = Date.now();
  root.cvPending = root.cvPending.filter(([, at]) => now - at < 5000);
  const answered = root.cvPending.findIndex(([id]) => id === opened);
  if (answered >= 0) root.cvPending = root.cvPending.slice(answered + 1);
  if (root.cvPending.length) return;
  if (data.cards) { cvCard(root, opened); root.cvShown = opened; }
  const selected = (data.selected || []).filter((id) => network.body.nodes[id]);
  network.selectNodes(selected, false);
}
"""


@functools.lru_cache(maxsize=1)
def _component():
    """The component, registered once per process. Its script is ours alone: a component's
    script goes with every rerun's message, so vis-network (470 kB) goes in its data once a
    session instead (``_VIS_SENT``), which cut a click's rerun from 500 kB to the drawing's data."""
    js = DRAW_SCRIPT + "\n" + _JS
    return st.components.v2.component("circuitviz.core.graph", css=_CSS, js=js, isolate_styles=False)


_VIS_SENT = "graph_view.vis_sent"  # this session's page has vis-network (a new page: a new session)


def _vis_needed() -> None:
    """The page asked for vis-network (it lacks it): the next drawing sends it again."""
    ui_state.forget_widget_value(_VIS_SENT)


def drawing_key(drawing) -> str:
    """A stable key for a drawing's component: its title and nodes' ids (a budget move keeps it)."""
    ids = drawing.vis.title + "|" + ",".join(sorted(str(node["id"]) for node in drawing.vis.nodes))
    return "graph." + hashlib.sha1(ids.encode("utf-8")).hexdigest()[:12]


def _click_of(value) -> dict | None:
    """The click a component's value holds ({"kind", "id", "pin"}), or None."""
    clicked = getattr(value, "clicked", None)
    if isinstance(clicked, str):
        try:
            clicked = json.loads(clicked)
        except json.JSONDecodeError:
            clicked = None
    return clicked if isinstance(clicked, dict) else None


def show_graph(
    drawing,
    key: str | None = None,
    selected: list[str] | None = None,
    on_click=None,
    cards: dict | None = None,
    opened: str = "",
    max_label_px: float | None = None,
) -> dict | None:
    """Draw ``drawing`` (a ``render.GraphDrawing``) in the page; returns the click of this run
    ({"kind", "id", "pin"}) or None. ``on_click(click)``: called with a click before the script
    reruns (a callback), so the rerun the click causes already shows what it opened. ``cards``
    (``render.cards.card_data``) and ``opened`` (the node whose card is open, ``"edge:<id>"``
    for an edge, "" for none): the cards the browser shows on a click (see the module).
    ``max_label_px``: the largest label the fit may draw (``render.vis.MAX_LABEL_PX`` if None)."""
    if drawing.vis is None:  # a drawing made elsewhere (no data): its page, in a frame
        st.iframe(drawing.html, height=drawing.height)
        return None
    key = key or drawing_key(drawing)
    data = drawing.vis.to_data(max_label_px) if max_label_px else drawing.vis.to_data()
    data.update(
        head=legend_block(drawing.vis, cards=cards is not None),
        options=OPTIONS,
        key=key,
        selected=[str(node) for node in (selected or [])],
    )
    if cards is not None:
        data.update(cards=cards, opened=opened or "")
    if not ui_state.widget_value(_VIS_SENT):
        data["vis"] = vis_script()
        ui_state.set_widget_value(_VIS_SENT, True)

    def changed() -> None:
        found = _click_of(ui_state.widget_value(key))
        if found is not None and on_click is not None:
            on_click(found)

    return _click_of(
        _component()(data=data, key=key, on_clicked_change=changed, on_need_vis_change=_vis_needed)
    )
