"""Explore: one prompt, one method; the circuit, its faithfulness curve and downloads."""

import streamlit as st

st.title("Explore a prompt's circuit")
st.caption(
    "Type a prompt, pick the answer the model gives and a wrong answer (foil), give a corrupted "
    "prompt, choose a method and run it: you get the sparse circuit of heads and MLPs that "
    "carries the answer, and how faithful it is at every edge budget."
)

# torch, plotly and the engine load after the title and caption are on screen (first paint)
from circuitviz.methods import available_methods  # noqa: E402
from circuitviz.ui import inputs, loaders, result_view, run, state  # noqa: E402

model_id = st.session_state.get("model")
device = st.session_state.get("device", "auto")
model = run.load_model_or_stop(model_id, device)
n_edges = inputs.graph_edge_total(model)

chosen = available_methods().get(st.session_state.get("method") or "eap-ig")
with st.container(border=True):
    task = inputs.task_inputs(model, model_id, need_corrupted=chosen.needs_corrupted if chosen else True)
with st.container(border=True):
    method, settings, budgets = inputs.method_inputs(n_edges)
ready = task is not None and settings is not None and budgets is not None
if ready:  # the estimated time and memory before the run; over a limit, the run is refused here
    from circuitviz.limits import check_run, estimate_request  # noqa: E402

    try:
        estimate = estimate_request(model, task, method, settings, n_budgets=len(budgets))
        check_run(estimate)
        st.caption(estimate.summary())
    except ValueError as error:
        st.error(str(error))
        ready = False
clicked = st.button(
    "Run", type="primary", disabled=not ready, help=None if ready else "fix the inputs above first"
)

result = st.session_state.get("explore.result")
if clicked or (ready and st.session_state.pop("explore.autorun", False)):
    result = run.run_with_status(model, model_id, task, method, settings, budgets) or result
elif result is None and ready and st.session_state.get("_view_from_url", False) is not False:
    # a shared or reloaded URL: show the stored result of exactly that request, never compute
    result = loaders.stored_result(model, model_id, task, method, settings, budgets)
    st.session_state["_view_from_url"] = False
st.session_state["explore.result"] = result


@st.fragment
def show_result(result, labels) -> None:
    """The result view; a slider move reruns only this part of the page."""
    result_view.result_view(result, labels=labels, key="explore", budget_key="budget", model=model)
    state.write_to_url(["budget"])


if result is not None:
    if ready and (result.task != task or result.method != method or result.model_id != model_id):
        st.info("The result below is for earlier inputs; press Run to compute the current ones.")
    st.divider()
    labels = loaders.node_labels(model, result.model_id, result.task) if result.model_id == model_id else None
    st.session_state["settings"] = result.config
    show_result(result, labels)
state.write_to_url()
