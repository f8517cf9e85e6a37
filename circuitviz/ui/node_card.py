"""The clicked node's card beside the graph: what it is, its edges in and out by weight (a click
goes to the node at the other end), its logit lens, its SAE features with their top contexts,
and for a head ACC++'s signals at the answer position (which source token it attends to, which
upstream parts wrote the signal).

Everything shown comes from ``render.cards`` (pure); the SAE features and the ACC++ trace are
computed on request, once, through the app's caches and store. User text (tokens, labels) is
shown as plain text.
"""

from __future__ import annotations

import streamlit as st

from ..labels.sae_features import context_text
from ..methods import methods_with
from ..render.cards import acc_signals, component_of, node_card
from . import loaders, run, state
from .graph_view import show_graph


def _go_buttons(rows: list[dict], arrow: str, key: str) -> str | None:
    """One button per edge (the node at its other end, kind, score); the node clicked, or None."""
    chosen = None
    for index, row in enumerate(rows):
        text = f"{arrow} {row['node']} ({row['kind']})  {row['score']:+.3g}"
        if st.button(text, key=f"{key}.{index}", width="stretch", help=f"go to {row['node']}"):
            chosen = row["node"]
    return chosen


def card_view(node_id: str, drawing, labels=None, model=None, result=None, key: str = "card") -> str | None:
    """The card of ``node_id`` in ``drawing``; returns the node to go to when an edge is clicked.

    ``model`` and ``result`` (its task and model id): for the SAE features and ACC++'s signals.
    """
    card = node_card(node_id, drawing.edges, labels)
    if drawing.vis is not None:
        group = next((n for n in drawing.vis.nodes if n["id"] == node_id and n.get("members")), None)
        if group is not None:
            st.markdown(f"**group {group.get('group_name', node_id)}**")
            st.text("members: " + ", ".join(group["members"]))
            card["what"] = f"a group of {len(group['members'])} nodes"
    st.markdown(f"**{node_id}**")
    st.caption(card["what"])
    st.text(f"score in this circuit: {card['score']:+.4g}")
    chosen = None
    if card["incoming"]:
        st.markdown(f"**In** ({card['n_incoming']} edges, strongest first)")
        chosen = _go_buttons(card["incoming"], "←", f"{key}.in") or chosen
    if card["outgoing"]:
        st.markdown(f"**Out** ({card['n_outgoing']} edges, strongest first)")
        chosen = _go_buttons(card["outgoing"], "→", f"{key}.out") or chosen
    if card["promotes"] or card["suppresses"]:
        st.markdown("**Logit lens** (what its output pushes up / down at the last position)")
        st.text(
            "promotes:   " + ", ".join(repr(t) for t in card["promotes"][:6])
            + "\nsuppresses: " + ", ".join(repr(t) for t in card["suppresses"][:6])
        )  # fmt: skip
    component = component_of(node_id)
    if result is not None and component not in ("input", "logits", "emb", "logit"):
        if model is not None:
            _sae_features(model, result, component, key)
        if component.startswith("a"):
            position = (
                int(node_id.split("@")[1]) if "@" in node_id and node_id.split("@")[1].isdigit() else None
            )
            _acc_signals(model, result, component, key, position)
    return chosen


def _sae_features(model, result, component: str, key: str) -> None:
    if not st.toggle("SAE features of this node (slower)", key=f"{key}.sae"):
        return
    found, problem = loaders.sae_node_features(model, result.model_id, result.task.clean, (component,))
    if problem:
        st.caption(problem)
        return
    features = found.get(component) or []
    if not features:
        st.caption("No SAE feature is driven by this node on this prompt.")
    for item in features:
        st.text(f"{item['label']}  (at {item['token']!r}; share {item.get('share', 0):.3g})")
        for context in (item.get("contexts") or [])[:3]:
            st.caption(context_text(context))


def _acc_signals(model, result, component: str, key: str, position: int | None = None) -> None:
    """ACC++'s decisions of this head at ``position`` (default: the answer's), traced once (on request)
    by the registered method with a signals view (the registry's trait, not a name spelled here)."""
    traced = methods_with("has_signals_view")
    if not traced:
        return
    tracer = traced[0]
    acc = result if result.method == tracer else state.result_for(tracer, result.model_id, result.task.clean)
    if acc is None:
        if model is None:
            return
        if not st.button(
            "Why does this head attend there? (traces ACC++ on this prompt, one forward pass)",
            key=f"{key}.acc",
        ):
            return

        request = loaders.request_for(model, result.model_id, result.task, tracer, {}, [10, 100])
        acc = run.run_with_status(model, request)
        if acc is None:
            return
    found = acc_signals(acc.details, component)
    if not found:
        st.caption(
            f"ACC++ traced no attention decision of {component} at the answer position above its threshold."
        )
        return
    st.markdown("**Why it attends there** (ACC++ at the answer position)")
    for decision in found:
        st.text(
            f"attends {decision['source_token']!r} (position {decision['source']}) with weight {decision['weight']:.3f}"
        )
        for side in ("query", "key"):
            writers = ", ".join(f"{node} {value:+.3g}" for node, value in decision[side][:4])
            if writers:
                st.caption(f"{side} signal written by: {writers}")


def graph_with_card(drawing, key: str, labels=None, model=None, result=None) -> None:
    """A drawing whose clicked node's card opens beside it (the views without edits: a circuit
    over positions, an opened graph file)."""
    name = f"{key}.clicked"
    clicked = state.widget_value(name) or ""
    known = {str(node["id"]) for node in drawing.vis.nodes} if drawing.vis is not None else set()
    if clicked and clicked not in known:
        clicked = ""
    graph_column, card_column = st.columns([5, 2]) if clicked else (st.container(), None)
    with graph_column:
        click = show_graph(drawing, key=key, selected=[clicked] if clicked else [])
    if click is not None and click.get("kind") == "node" and click.get("id") in known:
        if not str(click["id"]).startswith(("token@", "layer@")):
            state.set_widget_value(name, click["id"])
            _rerun()
    if card_column is not None:
        with card_column:
            if st.button("close the card", key=f"{key}.close"):
                state.set_widget_value(name, "")
                _rerun()
            go = card_view(clicked, drawing, labels, model, result, key=f"{key}.card")
            if go:
                state.set_widget_value(name, go)
                _rerun()


def _rerun() -> None:
    try:
        st.rerun(scope="fragment")
    except st.errors.StreamlitAPIException:
        st.rerun()
