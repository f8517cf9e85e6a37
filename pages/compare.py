"""Compare: two to four methods on one prompt and budget, side by side in one layout."""

import streamlit as st

from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)

st.title("Compare methods")
st.caption(
    "The same prompt and budget through two to four methods: graphs side by side in the same "
    "layout (the edges only that method found drawn bold, the shared ones thin), their NDF curves "
    "in one chart, and how much the circuits overlap."
)

from circuitviz.ui import budget_box, inputs, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()  # (and the URL's values, before any widget is drawn)
loaders.model_future(model_id, device)  # the model starts loading now, in the background

with st.container(border=True):
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz.methods import available_methods  # noqa: E402
    from circuitviz.ui import compare, compare_kept, compare_plan, panel, run  # noqa: E402

    model = run.load_model_or_stop(model_id, device)
    given = inputs.task_inputs(model, model_id, prompt)

registered = available_methods()
chosen = compare.method_choice(registered)
if compare.form_corruption_line(chosen):  # some need none: why the box above is needed here
    st.caption(compare.form_corruption_line(chosen))
n_edges = budget_box.graph_edge_total(model)
budgets = compare.shared_budgets(n_edges)
if len(chosen) < 2:
    st.error("Choose at least two methods to compare.")
ready = given.task is not None and 2 <= len(chosen) <= 4 and budgets is not None
requests = compare.requests(model, model_id, given.task, chosen, budgets) if ready else {}
requests = compare_plan.plan_line(model, requests)  # the wait, said before Run; a refused one left out
usable = compare_kept.comparable(given.task)  # of this task, an edge circuit
kept = panel.run_many(
    model, model_id, requests, button="Run the comparison", key="compare.run", usable=usable
)
results = {n: r for n, r in kept.items() if r is not None and usable(r)}
positions = compare_kept.over_positions(chosen, results, model_id, given.task)
if positions:  # a result kept from Explore over token positions: left out, and said to be
    st.info(compare_kept.over_positions_sentence(positions))
failed = compare_kept.failed(chosen, results, requests)  # its run ended in an error: not "yet"
for name, error in failed.items():
    st.warning(compare_kept.failed_sentence(name, error))
awaiting = compare_kept.awaiting_run(chosen, requests, positions, failed)
missing = compare.not_run_sentence(awaiting, results)
if len(results) >= 2 and compare.common_budgets(results):
    if missing:
        st.info(missing)
    labels = loaders.node_labels(model, model_id, given.task)
    compare.comparison_view(results, labels=labels, model=model)
elif results:
    st.info(compare_kept.fewer_than_two_sentence([n for n in awaiting if n not in results]))
state.write_to_url()
