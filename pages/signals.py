"""Signals: why each head of an ACC++ circuit attends where it does.

Shows the ACC++ result of this prompt, whichever page ran it (here, Explore or Compare): the
circuit on a token-by-layer grid, its attention decisions, and for one decision its signals
(upstream component, singular directions, rank, IG attribution) with the attention weight
falling as they are removed one by one; then the paper's knockout (found versus random signals).
"""

import streamlit as st

st.title("Signals: why a head attends where it does")
st.caption(
    "ACC++ explains each attention decision of the circuit (a head at one token attending to an "
    "earlier token) by the few low-rank signals that its query and key match on: which upstream "
    "component wrote them, along which singular direction of the head's query-key matrix. It "
    "needs one forward pass and no corrupted prompt."
)

from circuitviz.ui import inputs, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()
loaders.model_future(model_id, device)  # the model starts loading now, in the background

with st.expander(
    "Run ACC++ on a prompt",
    expanded=state.result_for("acc++", model_id, st.session_state.get("prompt") or "") is None,
):
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz.acc.tables import decision_label, decision_rows, knockout_rows, signal_rows  # noqa: E402
    from circuitviz.methods import get_method  # noqa: E402
    from circuitviz.ui import forms, run  # noqa: E402

    model = run.load_model_or_stop(model_id, device)
    given = inputs.task_inputs(model, model_id, prompt, need_corrupted=False)
    result = state.result_for("acc++", model_id, prompt)
    method = get_method("acc++")
    start = state.method_settings("signals.settings", "acc++") or (
        result.config if result is not None else {}
    )
    values = forms.config_form(method, "signals", initial=start)
    state.remember_settings("signals.settings", "acc++", values)
    config, problem = forms.build_config(method, values)
    if problem:
        st.error(problem)
    budgets = inputs.default_budgets(inputs.graph_edge_total(model))
    ready = given.task is not None and not problem
    request = run.request_line(model, model_id, given.task, "acc++", config, budgets)[0] if ready else None
    clicked = run.run_button("Run ACC++", ready and request is not None)
    state.write_to_url()  # before the run or a stop: a reload comes back to this view
    if request is not None and (clicked or run.running(request.key)):
        result = run.run_with_status(model, request) or result
    elif request is not None and result is None:
        result = state.stored_result(request)

if result is None:
    st.info(
        "Run ACC++ above, or choose ACC++ on the Explore or Compare page: its result for this prompt shows here."
    )
    st.stop()

from circuitviz.render.acc_graph import position_graph_html, removal_figure  # noqa: E402
from circuitviz.ui import result_view  # noqa: E402
from circuitviz.ui.node_card import graph_with_card  # noqa: E402

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
left, right = st.columns([3, 2])
with left:
    st.markdown("**Its signals**")
    st.dataframe(signal_rows(details, chosen), hide_index=True, width="stretch")
with right:
    st.markdown("**Attention weight as the signals are removed**")
    st.plotly_chart(removal_figure(decisions[chosen]), key="signals.removal")

st.subheader("The circuit, by token and layer")
title = f"{result.model_id} · ACC++ (k = {result.config.get('k')}) · decision #{chosen} highlighted"
graph_with_card(
    position_graph_html(details, title=title, highlight_decision=chosen), "signals.graph", None, model, result
)

st.subheader("Knockout: the signals found versus as many random ones")
st.caption(
    "Each signal's clean value is subtracted from the query or keys of its head and the model "
    "runs on; the paper's check that the signals found carry the attention and the answer."
)
st.dataframe(knockout_rows(details), hide_index=True, width="stretch")
st.caption(
    "metric: the answer's metric after the removal; mean traced attention: the attention weight of the "
    "traced decisions; residual cosine and norm ratio: how close the final residual stays to the clean run's."
)
state.write_to_url()
