"""Explore: one prompt, one method; the circuit, its faithfulness curve and downloads."""

import streamlit as st

st.title("Explore a prompt's circuit")
st.caption(
    "Type a prompt, pick the answer the model gives and a wrong answer (foil), give a corrupted "
    "prompt, choose a method and run it: you get the sparse circuit of heads and MLPs that "
    "carries the answer, and how faithful it is at every edge budget."
)

from circuitviz.ui import inputs, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()  # (and the URL's values, before any widget is drawn)
loaders.model_future(model_id, device)  # the model starts loading now, in the background

with st.container(border=True):
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz.methods import available_methods  # noqa: E402
    from circuitviz.ui import prefetch, result_view, run  # noqa: E402

    model = run.load_model_or_stop(model_id, device)
    from circuitviz.ui.mmlu_picker import mmlu_picker  # noqa: E402

    mmlu_picker(model)
    chosen = available_methods().get(st.session_state.get("method") or "eap-ig")
    given = inputs.task_inputs(
        model, model_id, prompt, need_corrupted=chosen.needs_corrupted if chosen else True
    )
with st.container(border=True):
    method, settings, budgets = inputs.method_inputs(inputs.graph_edge_total(model))
ready = given.task is not None and settings is not None and budgets is not None
request = None  # the one request of this page: settings parsed, key computed, priced and checked once
if ready:  # the estimated time and memory before the run; over a limit, the run is refused here
    request, refused = run.request_line(model, model_id, given.task, method, settings, budgets)
    ready = refused is None
if (
    given.task is not None
):  # the graph's node captions depend on the prompt alone: computed while the user looks
    prefetch.node_labels_soon(model, model_id, given.task)
clicked = run.run_button("Run", ready)
state.write_to_url()  # before the run: a reload while it goes on comes back to it

result = state.result_for(method, model_id, prompt)
if ready and (clicked or run.running(request.key) or st.session_state.pop("explore.autorun", False)):
    result = run.run_with_status(model, request) or result
elif ready and (result is None or result.task != given.task or result.config != request.settings):
    # a shared or reloaded URL, or inputs run before: the stored result of exactly this request
    result = state.stored_result(request) or result


@st.fragment
def show_result(result, labels) -> None:
    """The result view; a slider move reruns only this part of the page."""
    result_view.result_view(result, labels=labels, key="explore", model=model)
    state.write_to_url(["budget"])


if result is not None:
    if ready and (result.task != given.task or result.method != method or result.config != request.settings):
        st.info("The result below is for earlier inputs; press Run to compute the current ones.")
    st.divider()
    labels = loaders.node_labels(model, result.model_id, result.task)
    show_result(result, labels)
from circuitviz.ui.position_view import graph_file_opener  # noqa: E402

graph_file_opener("explore.graph_file")  # a Neuronpedia / circuit-tracer graph JSON, drawn
state.write_to_url()
