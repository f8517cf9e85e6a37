"""Compare: two to four methods on one prompt and budget, side by side in one layout."""

import streamlit as st

st.title("Compare methods")
st.caption(
    "The same prompt and budget through two to four methods: graphs side by side in the same "
    "layout (the edges only that method found are in colour), their NDF curves in one chart, "
    "and how much the circuits overlap."
)

from circuitviz.ui import inputs, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()  # (and the URL's values, before any widget is drawn)
loaders.model_future(model_id, device)  # the model starts loading now, in the background

with st.container(border=True):
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz.methods import available_methods  # noqa: E402
    from circuitviz.ui import compare, run  # noqa: E402

    model = run.load_model_or_stop(model_id, device)
    given = inputs.task_inputs(model, model_id, prompt)

registered = available_methods()
names = sorted(registered)
default = [n for n in ("eap", "eap-ig") if n in names] or names[:2]
chosen = st.multiselect(
    "methods (2 to 4; each with the Explore page's settings where they apply, else its defaults)",
    names,
    default=[n for n in st.session_state.get("compare.chosen", default) if n in names],
    max_selections=4,
    key="compare.methods",
    format_func=lambda n: registered[n].label,
)
st.session_state["compare.chosen"] = chosen
if not st.session_state.get("budgets"):
    st.session_state["budgets"] = inputs.budgets_text(inputs.default_budgets(inputs.graph_edge_total(model)))
from circuitviz.api import parse_budgets  # noqa: E402

budgets = parse_budgets(st.session_state["budgets"])
if len(chosen) < 2:
    st.error("Choose at least two methods to compare.")
ready = given.task is not None and 2 <= len(chosen) <= 4
if run.run_button("Run the comparison", ready, key="compare.run"):
    for name in chosen:
        settings = inputs.shared_settings(registered[name], st.session_state.get("settings") or {})
        request, refused = run.request_line(model, model_id, given.task, name, settings, budgets)
        if refused is None:
            run.run_with_status(model, request)

kept = {name: state.result_for(name, model_id, prompt) for name in chosen}
kept = {n: r for n, r in kept.items() if r is not None and (given.task is None or r.task == given.task)}
results = {name: result for name, result in kept.items() if result is not None}
if len(results) >= 2 and compare.common_budgets(results):
    compare.comparison_view(results)
elif results:
    st.info("Fewer than two of the chosen methods have a result for this prompt; run the comparison.")
state.write_to_url()
