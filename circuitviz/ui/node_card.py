"""The clicked node's card: beside the graph, what it is, its edges in and out by weight (a
click goes to the node at the other end) and its logit lens, drawn by the browser from the cards
sent with the drawing (``render.cards.card_data``, ``graph_view``); under the graph, its SAE
features with their top contexts and for a head ACC++'s signals at its position (the answer's, or
the clicked node's on a drawing over positions): which source token it attends to, which upstream
parts wrote the signal.

Everything shown comes from ``render.cards`` (pure); the SAE features and the ACC++ trace are
computed on request, once, through the app's caches and store. User text (tokens, labels) is
shown as plain text.
"""

from __future__ import annotations

import streamlit as st

from ..core.scripts import readable
from ..core.text import markdown_text
from ..methods import methods_with
from ..render.cards import acc_signals, card_data, component_of
from ..render.tables import context_html
from . import budget_box, kept_results, loaders, run, state
from .graph_view import show_graph
from .steer import share_percent


def drawing_cards(drawing, edges=None, labels=None) -> dict | None:
    """Every node's and edge's card of ``drawing`` (``render.cards.card_data``), sent with it so a
    click shows its card at once; ``edges``: the drawing's edges with groups merged (default: its
    own). None for a drawing made elsewhere (no data)."""
    if drawing.vis is None:
        return None
    return card_data(
        drawing.vis.nodes,
        drawing.edges if edges is None else edges,
        labels,
        captions=getattr(drawing, "captions", None),
        estimates_metric=getattr(drawing, "estimates_metric", True),
        partial=bool(drawing.n_left_out),
        noun="link" if getattr(drawing.vis, "kind", "") == "positions" else "edge",  # over positions: links
    )


def card_extras(node_id: str, model=None, result=None, key: str = "card") -> None:
    """Under the graph, what the open card's node needs the model or the store for: its SAE
    features (on request) and, for a head, ACC++'s signals (traced once on request, stored).
    ``model`` and ``result`` (its task and model id) are needed for either."""
    component = component_of(node_id)
    if result is None or component in ("input", "logits", "emb", "logit") or node_id.startswith("group:"):
        return
    if model is not None:
        _sae_features(model, result, component, key)
    if component.startswith("a"):
        position = int(node_id.split("@")[1]) if "@" in node_id and node_id.split("@")[1].isdigit() else None
        _acc_signals(model, result, component, key, position)


def _sae_features(model, result, component: str, key: str) -> None:
    if not st.toggle(f"SAE features of {component} (slower)", key=f"{key}.sae"):
        return
    found, problem = loaders.sae_node_features(model, result.model_id, result.task.clean, (component,))
    if problem:
        st.caption(problem)
        return
    features = found.get(component) or []
    if not features:
        st.caption("No SAE feature is driven by this node on this prompt.")
    for item in features:
        st.text(feature_line(item))
        for context in (item.get("contexts") or [])[:3]:
            st.caption(context_caption(context), unsafe_allow_html=True)


def feature_line(item: dict) -> str:
    """A feature under a node's card: its label, the token where the node drives it most, and the
    node's part of its activation in percent, as Steer's table gives it (it read "share 4.2e+03",
    the raw share in the SAE's units summed over positions: an audit)."""
    part = share_percent(item)
    said = f"this node's part of its activation {part:.1f} %" if part is not None else "not active here"
    return f"{item['label']}  (at {item['token']!r}; {said})"


def context_caption(context: dict) -> str:
    """A feature's top context under a node's card: corpus text, escaped as the Steer page's (it
    was written into markdown as it stood, so the embedded SAE's "Martin Amis, _Money_" showed
    'Money' in italics with its underscores gone, and '*** DO YOU' bold; its target marked)."""
    return context_html(context)


def _acc_signals(model, result, component: str, key: str, position: int | None = None) -> None:
    """ACC++'s decisions of this head at ``position`` (default: the answer's), traced once (on request)
    by the registered method with a signals view (the registry's trait, not a name spelled here)."""
    traced = methods_with("has_signals_view")
    if not traced:
        return
    tracer = traced[0]
    acc = (
        result
        if result.method == tracer
        else kept_results.result_for(tracer, result.model_id, result.task.clean)
    )
    if acc is None:
        if model is None:
            return
        if not st.button(
            f"Why does {component} attend there? (traces ACC++ on this prompt, one forward pass)",
            key=f"{key}.acc",
        ):
            return

        # the Signals page's own request (its default settings and budgets): traced with budgets 10
        # and 100, the Signals page showed this run under "The result below is for earlier inputs"
        budgets = budget_box.default_budgets(budget_box.graph_edge_total(model))
        request = loaders.request_for(model, result.model_id, result.task, tracer, {}, budgets)
        acc = run.run_with_status(model, request)
        if acc is None:
            return
    # the clicked node's own position: a12.h2@6's card showed a12.h2@9's decision (weight 0.762 and
    # m11@9's query signal, where a12.h2 at ' in' attends ' Wall' with 0.770, its query from m11@6)
    found = acc_signals(acc.details, component, position)
    where = acc_position_words(acc.details, position)
    if not found:
        st.caption(f"ACC++ traced no attention decision of {component} {where} above its threshold.")
        return
    st.markdown(f"**Why it attends there** ({component}, ACC++ {markdown_text(where)})")
    for decision in found:
        st.text(
            readable(f"attends {decision['source_token']!r}")
            + f" (position {decision['source']}) with weight {decision['weight']:.3f}"
        )
        for side in ("query", "key"):
            writers = ", ".join(f"{node} {value:+.3g}" for node, value in decision[side][:4])
            if writers:
                st.caption(f"{side} signal written by: {writers}")


def acc_position_words(details, position: int | None) -> str:
    """Where a head's decisions on its card are: "at the answer position", or at another token
    ("at ' in' (position 6)") for a node of a drawing over positions."""
    tokens = list(getattr(details, "tokens", []) or [])
    if position is None or position == len(tokens) - 1:
        return "at the answer position"
    token = f"{readable(repr(tokens[position]))} " if 0 <= position < len(tokens) else ""
    return f"at {token}(position {position})"


def graph_with_card(drawing, key: str, labels=None, model=None, result=None) -> None:
    """A drawing whose clicked node's card opens beside it (the views without edits: a circuit
    over positions, an opened graph file), and under it the node's SAE features and ACC++ signals."""
    name = f"{key}.clicked"
    clicked = state.widget_value(name) or ""
    cards = drawing_cards(drawing, labels=labels)
    known = set(cards["nodes"]) | {f"edge:{edge}" for edge in cards["edges"]} if cards else set()
    if clicked and clicked not in known:
        clicked = ""

    def opened(click: dict) -> None:  # before the rerun the click causes
        kind, found = click.get("kind"), str(click.get("id") or "")
        found = f"edge:{found}" if kind == "edge" else ("" if kind == "close" else found)
        if not click.get("pin") and (not found or found in known):
            state.set_widget_value(name, found)

    show_graph(
        drawing,
        key=key,
        selected=[clicked] if clicked else [],
        on_click=opened,
        cards=cards,
        opened=clicked,
    )
    if clicked:
        card_extras(clicked, model, result, key=f"{key}.card")
