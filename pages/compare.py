"""Compare: two to four methods on one prompt and budget, side by side in one layout."""

import streamlit as st

st.title("Compare methods")
st.caption(
    "The same prompt and budget through two to four methods: graphs side by side in the same "
    "layout (the edges only that method found are in colour), their NDF curves in one chart, "
    "and how much the circuits overlap."
)

# torch, plotly and the engine load after the title and caption are on screen (first paint)
from circuitviz import render  # noqa: E402
from circuitviz.methods import available_methods  # noqa: E402
from circuitviz.ui import inputs, loaders, result_view, run  # noqa: E402

model_id = st.session_state.get("model")
model = run.load_model_or_stop(model_id, st.session_state.get("device", "auto"))
n_edges = inputs.graph_edge_total(model)
with st.container(border=True):
    task = inputs.task_inputs(model, model_id)

registered = available_methods()
names = sorted(registered)
default = [n for n in ("eap", "eap-ig") if n in names] or names[:2]
chosen = st.multiselect(
    "methods (2 to 4; each with the Explore page's settings where they apply, else its defaults)",
    names,
    default=st.session_state.get("compare.chosen", default),
    max_selections=4,
    key="compare.methods",
    format_func=lambda n: registered[n].label,
)
st.session_state["compare.chosen"] = chosen
budgets = inputs.default_budgets(n_edges) if not st.session_state.get("budgets") else None
if budgets is None:
    from circuitviz.api import parse_budgets

    budgets = parse_budgets(st.session_state["budgets"])
ready = task is not None and 2 <= len(chosen) <= 4
if st.button("Run the comparison", type="primary", disabled=not ready, key="compare.run"):
    results = {}
    for name in chosen:
        settings = inputs.shared_settings(registered[name], st.session_state.get("settings") or {})
        result = run.run_with_status(model, model_id, task, name, settings, budgets)
        if result is not None:
            results[name] = result
    st.session_state["compare.results"] = results

results = st.session_state.get("compare.results") or {}
if len(results) >= 2:
    first = next(iter(results.values()))
    options = sorted(set.intersection(*(set(r.budgets) for r in results.values())))
    if st.session_state.get("compare.budget") not in options:
        st.session_state["compare.budget"] = min(options, key=lambda b: abs(b - 200))
    budget = st.select_slider(
        "edge budget", options=options, key="compare.budget", format_func=lambda b: f"{b:,}"
    )
    edge_sets = {name: set(r.graph.edge_names_of(r.circuit(budget))) for name, r in results.items()}
    only = render.unique_edges(edge_sets)
    drawn_nodes = {node for r in results.values() for node in render.circuit_edges_nodes(r, budget)}
    layers = render.drawn_layers(first.graph, drawn_nodes)

    columns = st.columns(len(results))
    for column, (name, result) in zip(columns, results.items()):
        with column:
            point = result.point(budget)
            st.subheader(result.method)
            st.metric("NDF", f"{point.ndf:.3f}")
            st.caption(
                f"{point.n_edges:,} edges, {len(only[name]):,} of them found by no other method (in colour)"
            )
            result_view.show_graph(
                result_view.graph_drawing(
                    result,
                    budget,
                    highlight=only[name],
                    layers=layers,
                    title=f"{name}: unique edges in colour",
                    narrow=True,
                )
            )
    st.plotly_chart(
        render.curve_figure(
            {n: r.curve for n, r in results.items()}, first.graph.n_edges, current_budget=budget
        ),
        key="compare.curve",
    )
    st.markdown("**Overlap at this budget**")
    st.dataframe(
        render.overlap_rows(edge_sets),
        hide_index=True,
        column_config={"Jaccard": st.column_config.NumberColumn(format="%.3f")},
    )
    shared = render.shared_by_all(edge_sets)
    st.caption(f"{len(shared):,} edges are in every circuit.")
elif results:
    st.info("Fewer than two methods finished; fix the error above and run again.")
else:
    loaders.get_store()  # warm the store so the first run starts at once
