"""Paraphrases: the Best-of-N candidates of a prompt, which one won, and what they share."""

import streamlit as st

st.title("Paraphrases and Best-of-N")
st.caption(
    "Best-of-N scores the prompt and paraphrases of it, makes one candidate circuit from each, "
    "and keeps the candidate most faithful on the original prompt. Here: the paraphrases, each "
    "candidate's NDF, and the edges the candidates share."
)

# torch, plotly and the engine load after the title and caption are on screen (first paint)
import plotly.graph_objects as go  # noqa: E402

from circuitviz import render  # noqa: E402
from circuitviz.methods import available_methods  # noqa: E402
from circuitviz.ui import bon, inputs, loaders, result_view, run, state  # noqa: E402

registered = available_methods()
family = bon.registered_bon_methods(registered)
if not family:
    st.info("The Best-of-N methods (bon, ibon, bon-csm) are not registered in this installation yet.")
    st.stop()

model_id = st.session_state.get("model")
model = run.load_model_or_stop(model_id, st.session_state.get("device", "auto"))
with st.container(border=True):
    task = inputs.task_inputs(model, model_id)
with st.container(border=True):
    method, settings, budgets = inputs.method_inputs(
        inputs.graph_edge_total(model), key="bon.method", methods={m: registered[m] for m in family}
    )
ready = task is not None and settings is not None and budgets is not None
if st.button("Run Best-of-N", type="primary", disabled=not ready, key="bon.run"):
    st.session_state["bon.result"] = run.run_with_status(model, model_id, task, method, settings, budgets)
result = st.session_state.get("bon.result")
if result is None or not bon.is_query_circuits(result):
    st.stop()

st.subheader("Paraphrases")
rows = bon.paraphrase_rows(result)
edited = st.data_editor(
    rows,
    hide_index=True,
    key="bon.pairs",
    disabled=["pair", "source", "model's answer", "answer matches", "candidate"],
)


def use_edited_pairs():
    lines = [f"{row['paraphrase']}\t{row['corrupted']}" for row in edited[1:] if row["paraphrase"].strip()]
    for name, value in (("paraphrase_source", "file"), ("paraphrases", "\n".join(lines))):
        state.set_value(f"bon.method.{method}.{name}", value)
        st.session_state[f"bon.method.{method}.{name}"] = value


st.button("Use the edited paraphrases for the next run", on_click=use_edited_pairs, key="bon.use_pairs")
for note in result.details.notes:
    st.caption(note)

budget = result_view.budget_slider(result, "bon.budget", any_budget=True)
point = result_view.point_at(result, budget, model)
result_view.metrics_row(result, budget, point)
evaluated = [int(entry["budget"]) for entry in result.details.per_budget]
candidate_budget = budget if budget in evaluated else min(evaluated, key=lambda b: abs(b - budget))
if candidate_budget != budget:
    st.caption(
        f"Candidates were evaluated at {', '.join(map(str, evaluated))} edges; shown at {candidate_budget}."
    )
scores = bon.candidate_ndf(result, candidate_budget)
if scores:
    figure = go.Figure(
        go.Bar(
            x=[row["name"] for row in scores],
            y=[row["ndf"] for row in scores],
            marker_color=["#D55E00" if row["winner"] else "#0072B2" for row in scores],
            text=[("winner · " if row["winner"] else "") + f"{row['ndf']:.2f}" for row in scores],
            textposition="outside",
        )
    )
    figure.update_layout(
        title=f"each candidate's NDF on the original prompt at {candidate_budget:,} edges",
        yaxis={"title": "NDF", "range": [0, 1.15]},
        height=330,
        template="plotly_white",
    )
    st.plotly_chart(figure, key="bon.candidates")

sets = bon.candidate_edge_sets(model, result.model_id, result, candidate_budget, loaders.get_store())
highlight = None
if sets and len(sets) >= 2:
    st.subheader("Edges shared across candidate circuits")
    chosen = st.session_state.get("bon.intersection")
    upset, shown = render.upset_figure(sets, selected=tuple(chosen.split(" & ")) if chosen else None)
    st.plotly_chart(upset, key="bon.upset")
    labels = [item.label for item in shown]
    if chosen not in labels:
        st.session_state["bon.intersection"] = None
    chosen = st.selectbox(
        "highlight the edges of one intersection in the graph",
        [None, *labels],
        key="bon.intersection",
        format_func=lambda label: (
            "none" if label is None else f"{label} ({shown[labels.index(label)].size} edges)"
        ),
    )
    highlight = set(shown[labels.index(chosen)].edges) if chosen else None
    st.caption(
        f"{len(render.shared_by_all(sets)):,} edges are in every candidate at {candidate_budget:,} edges."
    )
elif (shared := bon.shared_entry(result, candidate_budget)) is not None:
    st.caption(
        f"{shared['n_common']:,} edges are common to all candidates (their score matrices were not kept)."
    )
result_view.show_graph(
    result_view.graph_drawing(result, budget, highlight=highlight, ndf=point.ndf if point else None)
)
curves = {name: points for name, points in result.details.curves.items() if name != result.method}
result_view.curve_chart(result, budget, key="bon.curve", extra_curves=curves, point=point)
