"""Paraphrases: the Best-of-N candidates of a prompt, which one won, and what they share."""

import streamlit as st

st.title("Paraphrases and Best-of-N")
st.caption(
    "Best-of-N scores the prompt and paraphrases of it, makes one candidate circuit from each, "
    "and keeps the candidate most faithful on the original prompt. Here: the paraphrases, each "
    "candidate's NDF, and the edges the candidates share."
)

from circuitviz.ui import inputs, loaders, state  # noqa: E402  (no torch: the prompt box paints at once)
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()  # (and the URL's values, before any widget is drawn)
loaders.model_future(model_id, device)  # the model starts loading now, in the background

with st.container(border=True):
    prompt = inputs.prompt_input()
    # torch, plotly and the engine load after the prompt box is on screen; the model in the background
    from circuitviz import render  # noqa: E402
    from circuitviz.limits import priced_with_stored_work  # noqa: E402
    from circuitviz.methods import available_methods, config_to_dict  # noqa: E402
    from circuitviz.ui import bon, result_view, run  # noqa: E402

    registered = available_methods()
    family = bon.registered_bon_methods(registered)
    if not family:
        st.info("The Best-of-N methods (bon, ibon, bon-csm) are not registered in this installation yet.")
        st.stop()
    model = run.load_model_or_stop(model_id, device)
    given = inputs.task_inputs(model, model_id, prompt)
n_edges = inputs.graph_edge_total(model)
with st.container(border=True):
    method, settings, budgets = inputs.method_inputs(
        n_edges,
        key="bon.method",
        methods={m: registered[m] for m in family},
        initial=bon.PAGE_DEFAULTS,
        budgets_key="bon.budgets",
        budgets_default=bon.page_budgets(n_edges),
        settings_key="bon.settings",
    )
    st.caption(
        "This page starts at 5 IG steps per pair, 6 budgets and the chosen variant alone, so 9 paraphrases "
        "take about a minute on a CPU; more steps score each pair more closely, and 'compare' adds the other "
        "variants' curves, each at a proportional cost."
    )
ready = given.task is not None and settings is not None and budgets is not None
request = None
if ready:  # priced without the work a sibling variant stored (iBoN after BoN finds its scores)
    plain = config_to_dict(settings)
    request, refused = run.request_line(
        model,
        model_id,
        given.task,
        method,
        settings,
        budgets,
        adjust=lambda found: priced_with_stored_work(
            found, model, model_id, given.task, method, plain, len(budgets), loaders.get_store()
        ),
    )
    ready = refused is None
clicked = run.run_button("Run Best-of-N", ready, key="bon.run")
state.write_to_url()  # before the run or a stop: the URL names this view from the start
result = state.result_for(method, model_id, prompt)
if ready and (clicked or run.running(request.key)):
    result = run.run_with_status(model, request) or result
elif ready and (result is None or result.task != given.task or result.config != request.settings):
    result = state.stored_result(request) or result
if result is None or not bon.is_query_circuits(result):
    st.stop()

st.subheader("Paraphrases")
edited = st.data_editor(
    bon.table_rows(result),
    hide_index=True,
    key="bon.pairs",
    disabled=bon.READ_ONLY_COLUMNS,
    width="stretch",
    column_config=bon.TABLE_WIDTHS,
)


def use_edited_pairs():
    lines = [f"{row['paraphrase']}\t{row['corrupted']}" for row in edited[1:] if row["paraphrase"].strip()]
    for name, value in (("paraphrase_source", "file"), ("paraphrases", "\n".join(lines))):
        st.session_state[f"bon.method.{method}.{name}"] = value


st.button("Use the edited paraphrases for the next run", on_click=use_edited_pairs, key="bon.use_pairs")
for note in result.details.notes:
    st.caption(note)

budget = result_view.budget_slider(result, "budget", any_budget=True)


@st.cache_data(show_spinner="Evaluating the candidates at this budget…", max_entries=64)
def _candidates_at(_model, _result, result_key: str, budget: int) -> list[dict]:
    return bon.candidates_at(_model, _result.model_id, _result, budget, loaders.get_store())


def candidates_at(model, result, budget: int) -> list[dict]:
    """Each candidate's NDF at ``budget`` (one batched pass where the run did not evaluate it)."""
    return _candidates_at(
        model, result, f"{result_view.result_id(result)} {loaders.model_key(model)}", int(budget)
    )


point = result_view.point_at(result, budget, model)
result_view.metrics_row(result, budget, point)
at = budget  # the candidates at the slider's budget: evaluated now where the run did not
scores = candidates_at(model, result, budget)
if scores:
    st.plotly_chart(render.candidate_figure(scores, at), key="bon.candidates")
    st.caption(bon.winner_note(result, budget, point, scores, at))

circuit_edges = set(result.graph.edge_names_of(result.circuit(budget)))
sets = bon.candidate_edge_sets(model, result.model_id, result, at, loaders.get_store())
highlight = None
if sets and len(sets) >= 2:
    st.subheader("Edges shared across candidate circuits")
    chosen = (st.session_state.get("bon.intersection") or "none").rsplit(" (", 1)[0]
    upset, shown = render.upset_figure(
        sets, selected=tuple(chosen.split(" & ")) if chosen != "none" else None
    )
    clicked = bon.clicked_intersection(
        st.plotly_chart(upset, key="bon.upset", on_select="rerun", selection_mode="points"), shown
    )
    named = {f"{item.label} ({item.size} edges)": item for item in shown}
    by_label = {item.label: name for name, item in named.items()}
    if clicked is not None and clicked != st.session_state.get("bon.intersection.clicked"):
        st.session_state["bon.intersection"] = by_label[clicked]  # a bar clicked: as if chosen below
    st.session_state["bon.intersection.clicked"] = clicked
    if st.session_state.get("bon.intersection") not in named:
        st.session_state["bon.intersection"] = "none"
    chosen = st.selectbox(
        "highlight the edges of one intersection in the graph (or click its bar above)",
        ["none", *named],
        key="bon.intersection",
    )
    if chosen != "none":
        item = named[chosen]
        highlight, sentence = bon.highlight_in_circuit(
            set(item.edges), circuit_edges, result.method, item.members
        )
        st.caption(sentence)
    st.caption(f"{len(render.shared_by_all(sets)):,} edges are in every candidate at {at:,} edges.")
elif (shared := bon.shared_entry(result, at)) is not None:
    st.caption(
        f"{shared['n_common']:,} edges are common to all candidates (their score matrices were not kept)."
    )
labels = loaders.node_labels(model, result.model_id, result.task)
drawing = result_view.graph_drawing(
    result, budget, labels=labels, highlight=highlight, ndf=point.ndf if point else None
)
result_view.show_graph(drawing)
curves = {name: points for name, points in result.details.curves.items() if name != result.method}
result_view.curve_chart(result, budget, key="bon.curve", extra_curves=curves, point=point)
state.write_to_url()
