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
chosen_before = st.session_state.get("compare.chosen")
chosen = st.multiselect(
    "methods (2 to 4; each with the Explore page's settings where they apply, else its defaults)",
    names,
    default=[n for n in (default if chosen_before is None else chosen_before) if n in names],
    max_selections=4,
    key="compare.methods",
    format_func=lambda n: registered[n].label,
)
st.session_state["compare.chosen"] = chosen
n_edges = inputs.graph_edge_total(model)
if not st.session_state.get("budgets"):
    st.session_state["budgets"] = inputs.budgets_text(inputs.default_budgets(n_edges))
budget_problems = inputs.budget_check(st.session_state["budgets"], n_edges)[0]
for problem in budget_problems:
    st.error(f"{problem} (the budgets are set on the Explore page)")
from circuitviz.api import parse_budgets  # noqa: E402
from circuitviz.request import Request  # noqa: E402

budgets = None if budget_problems else parse_budgets(st.session_state["budgets"])
if len(chosen) < 2:
    st.error("Choose at least two methods to compare.")
ready = given.task is not None and 2 <= len(chosen) <= 4 and budgets is not None
# each method's request (not priced yet: each is priced just before it runs, by the runs before it)
requests = {}
for name in chosen if ready else ():
    settings = inputs.shared_settings(registered[name], state.method_settings("settings", name))
    requests[name] = Request.for_model(model, given.task, name, settings, budgets, model_id)
clicked = run.run_button("Run the comparison", ready, key="compare.run")
state.write_to_url()  # before the runs: a reload while they go on comes back to them
kept = {}
for name, request in requests.items():
    found = state.result_for(name, model_id, prompt)
    if found is None or found.task != given.task or found.config != request.settings:
        found = state.stored_result(request) or found
    kept[name] = found
if ready and (clicked or any(run.running(request.key) for request in requests.values())):
    for (
        name,
        request,
    ) in requests.items():  # each estimate, then its run (or the run under way, after a reload)
        done = kept.get(name) is not None and kept[name].config == request.settings
        if done and not clicked:
            continue
        priced, refused = run.request_line(model, model_id, given.task, name, request.settings, budgets)
        if refused is None:
            kept[name] = run.run_with_status(model, priced) or kept.get(name)

results = {n: r for n, r in kept.items() if r is not None and r.task == given.task}
if len(results) >= 2 and compare.common_budgets(results):
    labels = loaders.node_labels(model, model_id, given.task)
    compare.comparison_view(results, labels=labels, model=model)
elif results:
    st.info("Fewer than two of the chosen methods have a result for this prompt; run the comparison.")
state.write_to_url()
