"""The circuit drawing inside the page: a custom component (Streamlit components v2, inline, no
iframe) around ``render.vis``'s drawing, so a click on a node or an edge reaches Python.

The component draws the ``VisGraph`` with vis-network (its script read from the installed pyvis
package and sent with the component; nothing loads from the internet), fits it to its frame on
first paint and on every resize (the frame's height follows from its width and the drawing's
aspect ratio), and reports a click as a trigger value ``clicked``: ``{"kind": "node" | "edge",
"id": ..., "pin": bool}`` (``pin``: Ctrl/Cmd/Shift was held, the field's habit for pinning a node
into a subgraph). The node picked in Python is passed back as ``selected`` and drawn selected.

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

_CSS = """
.cv-root { width: 100%; font-family: inherit; }
.cv-root .cv-legend { font-size: 13px; padding: 2px 4px; color: #222; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.cv-root .cv-title { font-weight: 600; padding: 2px 4px 0 4px; font-size: 13px; }
.cv-root .cv-note { color: #8a4b00; padding: 0 4px; font-size: 13px; }
.cv-root .cv-item { display: inline-flex; align-items: center; margin-right: 10px; }
.cv-root .cv-line { display: inline-block; width: 22px; margin-right: 4px; }
.cv-root .cv-more { cursor: help; color: #0068c9; border-bottom: 1px dotted #0068c9; }
.cv-root .cv-zoom { float: right; }
.cv-root .cv-zoom button { font-size: 13px; min-width: 28px; margin-left: 3px; cursor: pointer;
  background: #fff; border: 1px solid #ccc; border-radius: 4px; }
.cv-root .cv-canvas { width: 100%; border: 1px solid #e6e6e6; box-sizing: border-box; position: relative; }
div.vis-tooltip { position: absolute; white-space: normal; max-width: 420px; font-size: 13px; line-height: 1.35;
  background: #fffff0; border: 1px solid #888; border-radius: 3px; padding: 5px; z-index: 1000;
  pointer-events: none; font-family: inherit; color: #111; }
"""

_JS = r"""
export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector(".cv-root");
  if (!root) {
    root = document.createElement("div");
    root.className = "cv-root";
    parentElement.appendChild(root);
  }
  const drawing = JSON.stringify([data.nodes, data.edges, data.legend, data.title, data.notes]);
  if (root.cvDrawing !== drawing) {
    if (root.cvNetwork) { root.cvNetwork.destroy(); }
    root.innerHTML = "";
    const head = document.createElement("div");
    head.innerHTML = data.head;  // built by circuitviz from escaped text
    const zoom = document.createElement("span");
    zoom.className = "cv-zoom";
    for (const [text, tip, act] of [["+", "zoom in", 1.25], ["\u2212", "zoom out", 0.8], ["fit", "fit the graph to the frame", 0]]) {
      const button = document.createElement("button");
      button.textContent = text; button.title = tip;
      button.onclick = () => { const n = root.cvNetwork; if (!n) return; if (act) { n.moveTo({scale: n.getScale() * act}); } else { n.fit(); } };
      zoom.appendChild(button);
    }
    root.appendChild(zoom);
    root.appendChild(head);
    const canvas = document.createElement("div");
    canvas.className = "cv-canvas";
    root.appendChild(canvas);
    const network = cvDraw(canvas, data, data.options);
    network.on("click", (event) => {
      const pin = !!(event.event && event.event.srcEvent &&
        (event.event.srcEvent.ctrlKey || event.event.srcEvent.metaKey || event.event.srcEvent.shiftKey));
      // the element under the pointer (not vis-network's selection, which a Ctrl-click toggles)
      const at = event.pointer && event.pointer.DOM;
      const node = at ? network.getNodeAt(at) : undefined;
      const edge = node === undefined && at ? network.getEdgeAt(at) : undefined;
      if (node !== undefined) {
        setTriggerValue("clicked", {kind: "node", id: String(node), pin: pin});
      } else if (edge !== undefined) {
        setTriggerValue("clicked", {kind: "edge", id: String(edge), pin: pin});
      }
    });
    root.cvNetwork = network;
    root.cvDrawing = drawing;
  }
  root.dataset.cvGraph = data.key;
  const network = root.cvNetwork;
  const selected = (data.selected || []).filter((id) => network.body.nodes[id]);
  network.selectNodes(selected, false);
}
"""


@functools.lru_cache(maxsize=1)
def _component():
    """The component, registered once per process (its script: vis-network, then ours)."""
    js = vis_script() + "\n" + DRAW_SCRIPT + "\n" + _JS
    return st.components.v2.component("circuitviz.core.graph", css=_CSS, js=js, isolate_styles=False)


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
    drawing, key: str | None = None, selected: list[str] | None = None, on_click=None
) -> dict | None:
    """Draw ``drawing`` (a ``render.GraphDrawing``) in the page; returns the click of this run
    ({"kind", "id", "pin"}) or None. ``on_click(click)``: called with a click before the script
    reruns (a callback), so the rerun the click causes already shows what it opened."""
    if drawing.vis is None:  # a drawing made elsewhere (no data): its page, in a frame
        st.iframe(drawing.html, height=drawing.height)
        return None
    key = key or drawing_key(drawing)
    data = drawing.vis.to_data()
    data.update(
        head=legend_block(drawing.vis),
        options=OPTIONS,
        key=key,
        selected=[str(node) for node in (selected or [])],
    )

    def changed() -> None:
        found = _click_of(ui_state.widget_value(key))
        if found is not None and on_click is not None:
            on_click(found)

    return _click_of(_component()(data=data, key=key, on_clicked_change=changed))
