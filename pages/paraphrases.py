"""Paraphrases: the Best-of-N candidates of a prompt, which one won, and what they share."""

import plotly.graph_objects as go
import streamlit as st

from circuitviz import render
from circuitviz.methods import available_methods
from circuitviz.ui import bon, views

st.title("Paraphrases and Best-of-N")
st.caption(
    "Best-of-N scores the prompt and several paraphrases of it, turns each into a candidate "
    "circuit, and keeps the candidate most faithful on the original prompt. Here: the "
    "paraphrases, each candidate's NDF, and the edges the candidates share."
)

registered = available_methods()
family = bon.registered_bon_methods(registered)
if not family:
    st.info("The Best-of-N methods (bon, ibon, bon-csm) are not registered in this installation yet.")
    st.stop()

model_id = st.session_state.get("model")
model = views.load_model_or_stop(model_id, st.session_state.get("device", "auto"))
n_edges = views.graph_edge_total(model)
with st.container(border=True):
    task = views.task_inputs(model, model_id)
with st.container(border=True):
    method, settings, budgets = views.method_inputs(
        n_edges, key="bon.method", methods={m: registered[m] for m in family}
    )
ready = task is not None and settings is not None and budgets is not None
if st.button("Run Best-of-N", type="primary", disabled=not ready, key="bon.run"):
    st.session_state["bon.result"] = views.run_with_status(model, model_id, task, method, settings, budgets)

result = st.session_state.get("bon.result")
if result is None:
    st.stop()
rows = bon.paraphrase_rows(result)
st.subheader("Paraphrases")
if rows:
    st.data_editor(rows, hide_index=True, key="bon.paraphrases", disabled=["#", "model's answer", "used"])
    st.caption(
        "Edit a paraphrase or its corruption, then copy them into the method's settings and run again."
    )
else:
    st.caption("This result lists no paraphrases.")

budget = views.budget_slider(result, "bon.budget")
views.metrics_row(result, budget)
scores = bon.candidate_ndf(result, budget)
if scores:
    figure = go.Figure(
        go.Bar(
            x=[row["name"] for row in scores],
            y=[row["ndf"] for row in scores],
            marker_color=["#D55E00" if row["winner"] else "#0072B2" for row in scores],
            text=[("winner " if row["winner"] else "") + f"{row['ndf']:.2f}" for row in scores],
            textposition="outside",
        )
    )
    figure.update_layout(
        yaxis={"title": "NDF on the original prompt", "range": [0, 1.1]}, height=320, template="plotly_white"
    )
    st.plotly_chart(figure, key="bon.candidates")

sets = bon.candidate_edge_sets(result, budget)
highlight = None
if len(sets) >= 2:
    st.subheader("Edges shared across candidate circuits")
    chosen = st.session_state.get("bon.intersection")
    upset, shown = render.upset_figure(sets, selected=tuple(chosen.split(" & ")) if chosen else None)
    st.plotly_chart(upset, key="bon.upset")
    labels = [item.label for item in shown]
    chosen = st.selectbox(
        "highlight the edges of one intersection in the graph",
        [None, *labels],
        key="bon.intersection",
        format_func=lambda label: (
            "none" if label is None else f"{label} ({len(shown[labels.index(label)].edges)} edges)"
        ),
    )
    if chosen:
        highlight = set(shown[labels.index(chosen)].edges)
    st.caption(f"{len(render.shared_by_all(sets)):,} edges are in every candidate.")
views.show_graph(views.graph_drawing(result, budget, highlight=highlight))
views.curve_chart(result, budget, key="bon.curve")
