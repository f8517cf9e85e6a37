"""Signals: why each head of an ACC++ circuit attends where it does.

Shows the ACC++ result of this prompt, whichever page ran it (here, Explore or Compare): the
circuit on a token-by-layer grid, its attention decisions, and for one decision its signals
(upstream component, singular directions, rank, IG attribution) with the attention weight
falling as they are removed one by one; then the paper's knockout (found versus random signals).
"""

import streamlit as st

from circuitviz.core.text import markdown_sentence
from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)

st.title("Signals: why a head attends where it does")
st.caption(
    "ACC++ explains each attention decision of the circuit (a head at one token attending to that "
    "token or an earlier one) by the few signals that its query and key match on: each one singular "
    "direction of the head's query-key matrix along which an upstream component writes (a component's "
    "signals into one decision make a signal edge, of rank how many). Finding "
    "them needs one forward pass of the model (its IG steps integrate through each head's softmax "
    "alone) and no corrupted prompt; the knockout check and the faithfulness curve run more passes "
    "(given a corrupted prompt, the curve patches it in; without one, it knocks out the signals "
    "outside the circuit)."
)

from circuitviz.ui import budget_box, inputs, kept_results, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()
loaders.model_future(model_id, device)  # the model starts loading now, in the background
explained = state.session.signals_method  # the method this page explains, once the registry said

opened = (
    None if explained is None else kept_results.result_for(explained, model_id, state.session.prompt or "")
)
# a link naming a decision opens on that decision's view, its form folded, on the session's first
# run here (the method, and so its stored result, is known only once the engine has loaded)
linked = state.session.signals_decision is not None and not state.widget_value("signals.visited")
state.set_widget_value("signals.visited", True)
with st.expander("Run ACC++ on a prompt", expanded=opened is None and not linked):
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz.methods import get_method, methods_with  # noqa: E402
    from circuitviz.ui import forms, panel, run  # noqa: E402

    if not methods_with("has_signals_view"):
        st.info("No method with a signals view is registered in this installation.")
        st.stop()
    explained = state.session.signals_method = methods_with("has_signals_view")[0]
    method = get_method(explained)
    model = run.load_model_or_stop(model_id, device)
    given = inputs.task_inputs(model, model_id, prompt, method=method)
    kept = kept_results.result_for(explained, model_id, prompt)
    start = state.method_settings("signals.settings", explained) or (kept.config if kept is not None else {})
    values = forms.config_form(
        method, "signals", initial=start, link=state.link_settings_once("signals.settings", explained)
    )
    state.remember_settings("signals.settings", explained, values)
    config, problem = forms.build_config(method, values)
    if problem:
        st.error(markdown_sentence(problem))  # may quote the link's settings
    budgets = budget_box.default_budgets(budget_box.graph_edge_total(model))
    shown = panel.run_panel(
        model, model_id, given.task, explained, config, budgets, button=f"Run {method.label}", prompt=prompt
    )

if shown.result is None:
    if linked:  # a link's decision of a result not here (another machine's): unfold the form, Run in sight
        st.rerun()
    st.info(
        "Run ACC++ above, or choose ACC++ on the Explore or Compare page: its result for this prompt shows here."
    )
    st.stop()
from circuitviz.ui.signals_view import signals_view  # noqa: E402

signals_view(shown.result)
state.write_to_url()
