"""Explore: one prompt, one method; the circuit, its faithfulness curve and downloads."""

import streamlit as st

from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)

st.title("Explore a prompt's circuit")
st.caption(
    "Type a prompt, pick the answer the model gives and a wrong answer (foil), give a corrupted "
    "prompt (where the method needs one), choose a method and run it: you get the sparse circuit "
    "of heads and MLPs that carries the answer, and how faithful it is at every edge budget."
)

from circuitviz.ui import budget_box, inputs, link_choices, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.link_values import DEMO_WAITING, LINK_NOT_STORED  # noqa: E402
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()  # (and the URL's values, before any widget is drawn)
loaders.model_future(model_id, device)  # the model starts loading now, in the background

with st.container(border=True, key="controls-task"):  # hidden in demo mode (ui/demo.py)
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz.methods import available_methods  # noqa: E402
    from circuitviz.ui import panel, prefetch, result_view, run  # noqa: E402
    from circuitviz.ui.mmlu_picker import mmlu_picker  # noqa: E402

    model = run.load_model_or_stop(model_id, device)
    mmlu_picker(model, prompt, model_id)
    chosen = available_methods().get(state.coming_value("method"))  # as just picked below, not a run late
    given = inputs.task_inputs(model, model_id, prompt, method=chosen)
with st.container(border=True, key="controls-method"):
    units = budget_box.unit_total(model, given.n_tokens)  # what budgets count with positions ticked
    method, settings, budgets = inputs.method_inputs(budget_box.graph_edge_total(model), unit_total=units)
if given.task is not None:  # the graph's node captions depend on the prompt alone: computed meanwhile
    prefetch.node_labels_soon(model, model_id, given.task)
autorun = state.session.autorun  # a task opened from another page runs once, when it opens
del state.session.autorun
with st.container(key="controls-run"):
    shown = panel.run_panel(
        model, model_id, given.task, method, settings, budgets, autorun=autorun, prompt=prompt
    )


@st.fragment
def show_result(result, labels) -> None:
    """The result view; a slider move reruns only this part of the page."""
    result_view.result_view(result, labels=labels, key="explore", model=model)
    # the edge or the unit budget shown, and the view's toggles
    state.write_to_url(["budget", state.Session.units.key, *link_choices.EXPLORE_TOGGLES])


if shown.result is not None:
    st.divider()
    show_result(shown.result, loaders.node_labels(model, shown.result.model_id, shown.result.task))
elif state.session.demo == "1":  # a demo link before its circuit is drawn: the form, and why
    st.info(DEMO_WAITING)
elif state.session.budget_chosen == state.LINK and shown.request is not None:  # a view, not stored here
    st.info(LINK_NOT_STORED)
from circuitviz.ui.position_view import graph_file_opener  # noqa: E402

with st.container(key="controls-graph-file"):
    graph_file_opener("explore.graph_file")  # a Neuronpedia / circuit-tracer graph JSON, drawn
state.write_to_url()
