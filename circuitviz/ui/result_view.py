"""One result on screen: what was run, the metrics, the graph at a budget, the curve and the edges."""

from __future__ import annotations

import json

import streamlit as st

from .. import render
from . import loaders
from .downloads import downloads

MAX_DRAWN_EDGES = 1500


def result_id(result) -> str:
    from ..store import content_key

    return content_key(
        model=result.model_id,
        task=result.task.to_dict(),
        method=result.method,
        config=result.config,
        budgets=result.budgets,
    )


def metrics_row(result, budget: int, point=None) -> None:
    point = point or result.point(budget)
    columns = st.columns(5)
    columns[0].metric("clean L(M(q))", f"{result.baseline.clean:+.3f}", help="metric of the clean prompt")
    columns[1].metric(
        "corrupted L(M(q'))", f"{result.baseline.corrupted:+.3f}", help="metric of the corrupted prompt"
    )
    if point is not None:
        share = 100 * point.n_edges / result.graph.n_edges
        columns[2].metric("NDF", f"{point.ndf:.3f}", help="1 = the circuit reproduces the model")
        columns[3].metric("NFS", f"{point.nfs:.3f}", help="the older normalised faithfulness score")
        columns[4].metric(
            "edges kept",
            f"{point.n_edges:,} ({share:.2f}%)",
            help=f"after pruning edges on no input-to-logits path; the graph has {result.graph.n_edges:,}",
        )


@st.cache_data(show_spinner=False, max_entries=64)
def _drawing(
    _result,
    result_key: str,
    budget: int,
    _labels,
    labels_key: str,
    faded: bool,
    highlight_key: str,
    _highlight,
    ndf,
):
    return render.result_graph_html(
        _result,
        budget,
        labels=_labels,
        max_edges=MAX_DRAWN_EDGES,
        show_faded=faded,
        highlight=_highlight,
        mask=_result.circuit(budget),
        ndf=ndf,
    )


def graph_drawing(
    result,
    budget: int,
    labels=None,
    faded: bool = False,
    highlight=None,
    layers=None,
    title=None,
    ndf=None,
    narrow=False,
):
    """The drawn graph (cached per result, budget and options, so slider moves are quick)."""
    if layers is not None or title is not None:
        options = {"layers": layers} if layers is not None else {}
        if title is not None:
            options["title"] = title
        if narrow:
            options["layout_width"] = 500
        return render.result_graph_html(
            result,
            budget,
            labels=labels,
            max_edges=MAX_DRAWN_EDGES,
            show_faded=faded,
            highlight=highlight,
            mask=result.circuit(budget),
            **options,
        )
    highlight_key = ",".join(sorted(highlight)) if highlight is not None else ""
    return _drawing(
        result,
        result_id(result),
        int(budget),
        labels,
        str(bool(labels)),
        faded,
        highlight_key,
        highlight,
        ndf,
    )


@st.cache_data(show_spinner=False, max_entries=256)
def _evaluated_point(_model, _result, result_key: str, budget: int):
    """Faithfulness of an iBoN/BoN-CSM circuit at a budget the run did not evaluate (one batched
    patched pass; no scoring)."""
    return _result.point(budget, _model)


def point_at(result, budget: int, model=None):
    """The curve point at ``budget``: stored, or evaluated once for an any-budget variant."""
    point = result.point(budget)
    if point is None and model is not None and result.any_budget:
        point = _evaluated_point(model, result, result_id(result), int(budget))
    return point


def show_graph(drawing) -> None:
    st.iframe(drawing.html, height=drawing.height)
    for note in drawing.notes:
        st.caption(note)


def budget_slider(result, key: str, any_budget: bool = False) -> int:
    """A slider over the budgets the result was evaluated at (their NDF is known exactly), or,
    for iBoN/BoN-CSM with ``any_budget``, over every budget in their range (no scoring pass)."""
    options = sorted(result.budgets)
    if not options:
        return 0
    current = st.session_state.get(key)
    if any_budget and result.any_budget:
        low, high = options[0], options[-1]
        if not isinstance(current, int) or not low <= current <= high:
            st.session_state[key] = min(options, key=lambda b: abs(b - 200))
        st.slider(
            f"edge budget (any value: {result.method} builds the circuit from the Best-of-N circuits, no scoring pass)",
            min_value=low,
            max_value=high,
            step=1,
            key=key,
        )
        return int(st.session_state[key])
    if current not in options:
        current = min(options, key=lambda b: abs(b - 200))
        st.session_state[key] = current
    st.select_slider(
        "edge budget (moving it redraws the graph and the marker; no new run)",
        options=options,
        key=key,
        format_func=lambda b: f"{b:,}",
    )
    return int(st.session_state[key])


def curve_chart(result, budget: int, key: str, extra_curves=None, point=None) -> None:
    point = point or result.point(budget)
    curves = {result.method: result.curve, **(extra_curves or {})}
    figure = render.curve_figure(
        curves, result.graph.n_edges, current_budget=budget, marker_value=point.ndf if point else None
    )
    st.plotly_chart(
        figure,
        key=key,
        config={
            "displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": "ndf-curve", "scale": 2},
        },
    )


def edges_table(result, budget: int, limit: int = 50) -> None:
    circuit = result.circuit(budget)
    rows = render.edge_rows(result.graph, result.scores, circuit, limit=limit)
    total = int(circuit.sum())
    st.caption(
        f"The {min(limit, total)} strongest of the circuit's {total:,} edges (all of them in the CSV)."
    )
    st.dataframe(
        rows,
        hide_index=True,
        column_config={"score": st.column_config.NumberColumn(format="%.4g")},
        height=min(420, 38 + 35 * max(1, len(rows))),
    )


def task_caption(result) -> None:
    """What was run, as plain text (prompts are user text: never rendered as markdown or HTML)."""
    task = result.task
    foils = ", ".join(repr(f) for f in task.foils)
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
    st.text(
        f"prompt     {task.clean!r} -> answer {task.answer!r} vs {foils}\n"
        f"corrupted  {task.corrupted!r}\n"
        f"method     {result.method} {json.dumps(result.config)} on {result.model_id} ({result.device}); {timings}"
    )


def with_sae_labels(model, result, budget: int, labels):
    """``labels`` with each drawn node's top SAE features added (or one sentence why not)."""
    edges = render.circuit_edges(result.graph, result.scores, result.circuit(budget))
    nodes = sorted({node for edge in edges for node in (edge.source, edge.target)} - {"logits"})
    found, problem = loaders.sae_node_labels(model, result.model_id, result.task.clean, tuple(nodes))
    if problem:
        st.caption(problem)
        return labels
    merged = {name: dict(values) for name, values in (labels or {}).items()}
    for node, features in found.items():
        merged.setdefault(node, {})["SAE features"] = features
    return merged


def result_view(result, labels=None, key: str = "result", budget_key: str | None = None, model=None) -> int:
    """Everything about one result; returns the budget shown. With ``model``, iBoN/BoN-CSM results
    take any budget (their NDF then costs one batched evaluation, no scoring)."""
    task_caption(result)
    budget = budget_slider(result, budget_key or f"{key}.budget", any_budget=model is not None)
    point = point_at(result, budget, model)
    metrics_row(result, budget, point)
    columns = st.columns(2)
    faded = columns[0].toggle("show the nodes outside the circuit (grey)", key=f"{key}.faded")
    if model is not None and columns[1].toggle(
        "SAE feature labels in the hovers (slower)",
        key=f"{key}.sae",
        help="the embedded SAEs' features each node drives",
    ):
        labels = with_sae_labels(model, result, budget, labels)
    drawing = graph_drawing(result, budget, labels=labels, faded=faded, ndf=point.ndf if point else None)
    show_graph(drawing)
    curve_chart(result, budget, key=f"{key}.curve", point=point)
    edges_table(result, budget)
    downloads(result, budget, drawing, key=f"{key}.download", point=point)
    return budget


EXAMPLE_PROMPT = "When Mary and John went to the store, John gave a drink to"
EXAMPLE_CORRUPTED = "When Alice and Bob went to the store, Carl gave a drink to"


def demo_budget(result) -> int:
    """The budget a demo opens at: a readable graph that is as faithful as possible."""
    return render.readable_budget(result.curve)


def graph_edge_total_from_cfg(entry: dict) -> str:
    """The edge count of a gallery entry's graph, formatted (its budgets end with the full graph)."""
    budgets = entry.get("budgets") or []
    return f"{max(budgets):,}" if budgets else "?"
