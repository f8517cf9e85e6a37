"""Signals: why each head of an ACC++ circuit attends where it does.

Shows the ACC++ result of this session (run here, or picked on the Explore page): the circuit
on a token-by-layer grid, its attention decisions, and for one decision its signals (upstream
component, singular directions, rank, IG attribution) with the attention weight falling as
they are removed one by one; then the paper's knockout (found versus random signals).
"""

import streamlit as st

st.title("Signals: why a head attends where it does")
st.caption(
    "ACC++ explains each attention decision of the circuit (a head at one token attending to an "
    "earlier token) by the few low-rank signals that its query and key match on: which upstream "
    "component wrote them, along which singular direction of the head's query-key matrix. It "
    "needs one forward pass and no corrupted prompt."
)

# torch, plotly and the engine load after the title and caption are on screen (first paint)
from circuitviz.acc.tables import (  # noqa: E402
    decision_label,
    decision_rows,
    is_acc_result,
    knockout_rows,
    signal_rows,
)
from circuitviz.ui import forms, inputs, result_view, run, state  # noqa: E402

model_id = st.session_state.get("model")
device = st.session_state.get("device", "auto")
result = st.session_state.get("signals.result")
explore_result = st.session_state.get("explore.result")
if result is None and is_acc_result(explore_result):
    result = explore_result

with st.expander("Run ACC++ on a prompt", expanded=result is None):
    from circuitviz.methods import get_method
    from circuitviz.tasks import PromptTask

    method = get_method("acc++")
    prompt = state.bound(st.text_area, "Prompt", "prompt", default=result_view.EXAMPLE_PROMPT, height=80)
    columns = st.columns(3)
    with columns[0]:
        answer = state.bound(
            st.text_input, "Answer token (with its leading space)", "answer", default=" Mary"
        )
    with columns[1]:
        foil = state.bound(st.text_input, "Foil token (optional)", "foil", default=" John")
    with columns[2]:
        corrupted = state.bound(
            st.text_input, "Corrupted prompt (optional, for the patching curve)", "corrupted", default=""
        )
    values = forms.config_form(method, "signals", initial=(result.config if result is not None else None))
    problem = forms.check_config(method, values)
    if problem:
        st.error(problem)
    if st.button("Run ACC++", type="primary", disabled=bool(problem) or not prompt.strip()):
        model = run.load_model_or_stop(model_id, device)
        task = PromptTask(
            clean=prompt,
            corrupted=corrupted,
            answer=answer,
            foils=(foil,) if foil else (),
            metric="logit_diff" if foil else "logprob",
        )
        budgets = inputs.default_budgets(inputs.graph_edge_total(model))
        result = run.run_with_status(model, model_id, task, "acc++", values, budgets) or result
        st.session_state["signals.result"] = result

if result is None or not is_acc_result(result):
    st.info("Run ACC++ above, or choose ACC++ on the Explore page: its result shows here.")
    st.stop()

details = result.details  # ACCDetails
result_view.task_caption(result)
summary = details.summary
cells = st.columns(4)
cells[0].metric("nodes (component at a position)", summary["n_nodes"])
cells[1].metric("edges (signals grouped)", summary["n_edges"])
cells[2].metric("attention decisions", summary["n_decisions"])
cells[3].metric("signal edges of rank 1", f"{100 * summary['rank1_fraction']:.0f}%")
if details.limits.get("max_decisions_reached"):
    st.warning(
        f"Tracing stopped at {details.limits['max_decisions']} decisions with "
        f"{details.limits['decisions_left']} left; raise max decisions to trace them."
    )

decisions = details.decisions
if not decisions:
    st.info("No attention decision of the answer's components reached the threshold tau = k/d; lower k.")
    st.stop()

st.subheader("Attention decisions")
st.dataframe(decision_rows(details), hide_index=True, width="stretch")
chosen = st.selectbox(
    "Decision",
    options=[d["index"] for d in decisions],
    format_func=lambda index: decision_label(decisions[index]),
    key="signals.decision",
)
decision = decisions[chosen]

from circuitviz.render.acc_graph import position_graph_html, removal_figure  # noqa: E402

left, right = st.columns([3, 2])
with left:
    st.markdown("**Its signals**")
    st.dataframe(signal_rows(details, chosen), hide_index=True, width="stretch")
with right:
    st.markdown("**Attention weight as the signals are removed**")
    st.plotly_chart(removal_figure(decision), key="signals.removal")

st.subheader("The circuit, by token and layer")
drawing = position_graph_html(
    details,
    title=f"{result.model_id} · ACC++ (k = {result.config.get('k')}) · decision #{chosen} highlighted",
    highlight_decision=chosen,
)
result_view.show_graph(drawing)

st.subheader("Knockout: the signals found versus as many random ones")
st.caption(
    "Each signal's clean value is subtracted from the query or keys of its head and the model "
    "runs on; the paper's check that the signals found carry the attention and the answer."
)
st.dataframe(knockout_rows(details), hide_index=True, width="stretch")
faithfulness = details.faithfulness
if faithfulness.get("note"):
    st.caption(faithfulness["note"])
