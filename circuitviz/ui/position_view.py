"""A circuit over token positions on screen: the attribution graph at a budget of units, why the
view opened there, its strongest paths in words, the curve, and the Neuronpedia download; and
opening a Neuronpedia / circuit-tracer graph file to draw it.

Called from the result view when a result is position-resolved (``result.positions``), and from
the Explore page for the file opener; everything drawn comes from ``render.attribution_graph``.
"""

from __future__ import annotations

import json
import math

import streamlit as st

from .. import render
from ..core.keys import process_key
from ..core.text import markdown_sentence, markdown_text, method_settings, score_text
from ..export.neuronpedia import (
    GraphFileError,
    export_problem,
    read_neuronpedia_bytes,
    task_ids,
    to_neuronpedia,
)
from ..positions.graph import n_units
from ..positions.present import READABLE_NDF, readable_position_budget, result_attribution_graph
from ..render import task_note
from ..render.attribution_graph import attribution_graph_html
from ..render.curve_notes import dip_note_of_units
from ..render.explain import explain_position_circuit
from . import state
from .caveats import caveats
from .downloads import file_name
from .node_card import graph_with_card
from .result_figures import METRIC_HELP

NECESSITY_HELP = METRIC_HELP["necessity"].replace("edges", "units")  # the units of this circuit

MAX_UPLOAD_MB = 20  # a graph file's limit, the uploader's (Streamlit's MB: 2**20 bytes)
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 2**20


@st.cache_data(show_spinner=False, max_entries=64)
def _graph_page(_result, result_key: str, budget: int, _labels, labels_key: str, reason: str):
    graph = result_attribution_graph(_result, budget, _labels)
    # why the view opened here is said above the frame, not in the downloaded file (no slider there);
    # the file names the task its NDF was measured on (the page shows it above the figures)
    notes = [reason] if reason else None
    return graph, attribution_graph_html(graph, view_notes=notes, file_notes=[task_note(_result.task)])


def position_budget(result, key: str) -> tuple[int, str]:
    """The unit budget: a new result opens at the readable budget (``positions.present``), and
    the sentence why is returned while it is shown. Units are not edges, so the position view
    keeps its own budget beside the pages' edge budget."""
    options = sorted(result.budgets)
    chosen = readable_position_budget(result)
    slider_key = f"{key}.units"  # Session.units for the page's own view: in the URL as 'units'
    if state.widget_value(f"{slider_key}.result") != _result_key(result):
        # a session's first result keeps the unit budget its link named (a shared view opened at the
        # readable budget whatever budget it was shared at); every later result opens readable
        linked = (
            state.widget_value(slider_key) if state.widget_value(f"{slider_key}.result") is None else None
        )
        state.set_widget_value(f"{slider_key}.result", _result_key(result))
        state.set_widget_value(slider_key, linked if linked in options else chosen.budget)
        missed = isinstance(linked, int) and linked not in options  # said, not dropped unsaid
        state.set_widget_value(f"{slider_key}.missed", linked if missed else None)
    label = (  # a budget asks for units; fewer are kept after pruning (the 'units kept' card)
        "unit budget: the (edge, position) units of largest |score|, before pruning (moving it redraws "
        "the graph; no new run)"
    )
    budget = int(st.select_slider(label, options=options, key=slider_key, format_func=lambda b: f"{b:,}"))
    missed = state.widget_value(f"{slider_key}.missed")
    if missed is not None and budget == chosen.budget:
        runs = ", ".join(f"{b:,}" for b in options)
        return (
            budget,
            f"The link's unit budget {missed:,} is not one this run evaluated ({runs}). {chosen.reason}",
        )
    if budget == chosen.budget and chosen.offer is not None:  # the faithful circuit, one click away
        point = result.point(chosen.offer)
        st.button(
            f"Open at {chosen.offer:,} units (NDF {point.ndf:.2f})",
            key=f"{slider_key}.offer",
            on_click=state.set_widget_value,
            args=(slider_key, chosen.offer),
            help=f"The smallest budget of this run whose circuit reaches NDF {READABLE_NDF} (else its most "
            "faithful): more nodes than a readable drawing holds; zoom in with + and drag.",
        )
    return budget, (chosen.reason if budget == chosen.budget else "")


def _result_key(result) -> str:
    """A cache key for a result's drawings: what produced it and a fingerprint of its scores."""
    fingerprint = float(result.position_scores.double().abs().sum())
    return process_key(model=result.model_id, task=result.task.to_dict(), method=result.method,
                       config=result.config, budgets=result.budgets, scores=fingerprint)  # fmt: skip


def _what_was_run(result) -> None:
    """What was run, as plain text (prompts are user text: never markdown or HTML)."""
    task = result.task
    foils = f" vs {', '.join(repr(f) for f in task.foils)}" if task.foils else f" ({task.metric})"
    st.text(
        f"prompt     {task.clean!r} -> answer {task.answer!r}{foils}\n"
        f"corrupted  {repr(task.corrupted) if task.corrupted else '(none given)'}\n"
        f"method     {method_settings(result.method, result.config)} on {result.model_id} ({result.device})"
    )


def _curve(result, budget: int, total: int, key: str, point) -> None:
    """NDF against the unit budget, the current budget marked (the hover gives the units kept:
    until 2026-12-06 the axis was titled "units kept" over the budgets, 100 where 89 were kept)."""
    figure = render.curve_figure(
        {result.method: result.curve}, total, current_budget=budget, marker_value=point.ndf if point else None
    )
    figure.update_layout(xaxis_title="unit budget (log scale)")
    for trace in figure.data:  # the budgets count units here, not edges
        if trace.hovertemplate:
            trace.hovertemplate = trace.hovertemplate.replace(" edges<br>", " units<br>")
    st.plotly_chart(figure, key=key, config={"displaylogo": False, "scrollZoom": False})
    note = dip_note_of_units(result.curve)
    if note:
        st.caption(note)


def neuronpedia_text(graph, ids: dict) -> str:
    """The "Neuronpedia graph JSON" download: with ``ids`` (``task_ids``), node ids name the tokens'
    and the answer's ids, as ``discover --neuronpedia`` writes them."""
    return json.dumps(to_neuronpedia(graph, **ids))


def position_result_view(
    result, labels=None, key: str = "result", budget_key: str = "budget", model=None
) -> int:
    """Everything about one position-resolved result; returns the budget shown (``model``: the
    Neuronpedia download's token ids)."""
    _what_was_run(result)
    budget, reason = position_budget(result, budget_key)
    point = result.point(budget)
    total = n_units(result.graph, len(result.tokens.get("clean", [])))
    if point is not None:  # the edge view's figures, in rows of three (necessity and NFS were left out)
        kept = (
            f"(edge, position) units of the circuit after pruning those on no input-to-logits path "
            f"(the budget asked for {budget:,}), of {total:,} in the graph"
        )
        figures = [
            ("clean L(M(q))", f"{result.baseline.clean:+.3f}", METRIC_HELP["clean L(M(q))"]),
            ("corrupted L(M(q'))", f"{result.baseline.corrupted:+.3f}", METRIC_HELP["corrupted L(M(q'))"]),
            ("NDF", score_text(point.ndf), METRIC_HELP["NDF"]),
            (
                "necessity",
                "-" if math.isnan(point.necessity) else score_text(point.necessity),
                NECESSITY_HELP,
            ),
            ("NFS", score_text(point.nfs), METRIC_HELP["NFS"]),
            ("units kept", f"{point.n_edges:,}", kept),
        ]
        for start in range(0, len(figures), 3):
            for column, (label, value, help_text) in zip(st.columns(3), figures[start : start + 3]):
                column.metric(label, value, help=help_text)
        for caveat in caveats(result, point):
            st.caption(caveat)
    labels_key = json.dumps(labels, sort_keys=True, default=str) if labels else ""
    graph, drawing = _graph_page(result, _result_key(result), budget, labels, labels_key, reason)
    graph_with_card(drawing, f"{key}.graph")
    with st.expander("Explain this circuit: its strongest paths to the answer, in words"):
        for sentence in explain_position_circuit(graph) or ["The circuit has no path at this budget."]:
            st.text(sentence)
    _curve(result, budget, total, f"{key}.curve", point)
    ids = task_ids(model, result.task) if model is not None else {}  # the tokenizer's, not a run
    # a row that wraps, as the edge view's downloads: in three equal columns at 1,000 px the first
    # button read "Neuronpedia graph J…"
    row = st.container(horizontal=True, key=f"{key}.position_downloads")
    unwritable = export_problem(graph)  # a NaN would download as a file Neuronpedia cannot open
    row.download_button(
        "Neuronpedia graph JSON",
        data=b"" if unwritable else lambda: neuronpedia_text(graph, ids),
        file_name=file_name(result, "neuronpedia-graph", "json", budget),
        mime="application/json",
        key=f"{key}.neuronpedia",
        on_click="ignore",  # no rerun: a rerun drops the other buttons' files (a quick second click got none)
        disabled=bool(unwritable),
        help=unwritable,
    )
    row.download_button(
        "Graph (HTML)",
        data=drawing.html,
        file_name=file_name(result, "position-graph", "html", budget),
        mime="text/html",
        key=f"{key}.html",
        on_click="ignore",
    )
    row.download_button(  # the curve over unit budgets (the view had no figures to take away)
        "Curve (CSV)",
        data=lambda: render.curves_csv({result.method: result.curve}, total, kept="units"),
        file_name=file_name(result, "position-curve", "csv"),
        mime="text/csv",
        key=f"{key}.curve_csv",
        on_click="ignore",
    )
    if unwritable:
        st.caption(f"{unwritable[:-1]}; the graph's HTML and its curve still download.")
    return budget


def graph_file_opener(key: str = "graph_file") -> None:
    """Open a Neuronpedia / circuit-tracer graph JSON (or one this app wrote) and draw it."""
    with st.expander("Open an attribution graph file (Neuronpedia or circuit-tracer JSON)"):
        # the widget's own limit: it said Streamlit's 200 MB and took a 58 MB file whole before the
        # page refused it; now the browser refuses it in the widget's sentence
        upload = st.file_uploader("graph JSON", type=["json"], key=key, max_upload_size=MAX_UPLOAD_MB)
        if upload is None:
            return
        if upload.size > MAX_UPLOAD_BYTES:
            st.error(
                f"The file is {upload.size:,} bytes; give a graph file under {MAX_UPLOAD_BYTES:,} bytes."
            )
            return
        try:
            graph = read_neuronpedia_bytes(upload.getvalue(), upload.name)
        except GraphFileError as error:
            st.error(markdown_sentence(str(error)))  # names the file: its name is the user's text
            return
        st.caption(
            markdown_text(f"{len(graph.nodes):,} nodes and {len(graph.links):,} links from {upload.name}.")
        )
        drawing = attribution_graph_html(graph)
        graph_with_card(drawing, f"{key}.graph")
