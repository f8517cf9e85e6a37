"""Paraphrases: the Best-of-N candidates of a prompt, which one won, and what they share."""

import streamlit as st

from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)

st.title("Paraphrases and Best-of-N")
st.caption(
    "Best-of-N scores the prompt and p paraphrases of it (p: the form's “n paraphrases”, or the "
    "pairs listed when their source is a file), makes one candidate circuit from each (N = p + 1 "
    "candidates), and keeps the candidate most faithful on the original prompt. Here: the "
    "paraphrases, each candidate's NDF, and the edges the candidates share."
)

from circuitviz.ui import budget_box, inputs, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()  # (and the URL's values, before any widget is drawn)
loaders.model_future(model_id, device)  # the model starts loading now, in the background

with st.container(border=True):
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz.methods import available_methods  # noqa: E402
    from circuitviz.ui import bon, panel, paraphrase_view, run  # noqa: E402

    registered = available_methods()
    family = bon.registered_bon_methods(registered)
    if not family:
        st.info("The Best-of-N methods are not registered in this installation.")
        st.stop()
    model = run.load_model_or_stop(model_id, device)
    given = inputs.task_inputs(model, model_id, prompt)
n_edges = budget_box.graph_edge_total(model)
with st.container(border=True):
    method, settings, budgets = inputs.method_inputs(
        n_edges,
        key="bon.method",
        methods={m: registered[m] for m in family},
        initial=bon.PAGE_DEFAULTS,
        budgets_key="bon.budgets",
        budgets_default=bon.page_budgets,
        settings_key=paraphrase_view.SETTINGS_KEY,
    )
    st.caption(bon.page_defaults_note(n_edges, settings))
    settings = paraphrase_view.checked_source(given.task, settings)  # no family, no API key: said now


shown = panel.run_panel(
    model, model_id, given.task, method, settings, budgets, button="Run Best-of-N", key="bon.run",
    prompt=prompt,
)  # fmt: skip
if shown.result is None or not bon.is_query_circuits(shown.result):
    st.stop()
st.subheader("Paraphrases")
paraphrase_view.pairs_table(shown.result, method)
paraphrase_view.candidates_view(model, shown.result)
state.write_to_url()
