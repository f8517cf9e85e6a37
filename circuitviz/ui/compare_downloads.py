"""The Compare page's downloads: the whole comparison at the budget shown as one JSON file (each
method's circuit in the format Explore downloads, the overlap table, the edges in every circuit
and, when measured, the held-out NDF and completeness), and every method's curve as one CSV."""

from __future__ import annotations

import json
from types import SimpleNamespace

import streamlit as st

from .. import render
from ..core.results import json_safe
from .downloads import circuit_json, file_name, slug

FORMAT = "circuitviz comparison 1"


def comparison_json(results: dict, shown, measured: dict | None = None) -> dict:
    """What the page shows at ``shown.budget`` (``compare.Comparison``), as plain data: the task and
    model once, then per method its circuit JSON (``downloads.circuit_json``: every edge's score,
    ``in_graph`` for the circuit at this budget, its curve and figures), the pairwise overlap, the
    edges in every circuit and, when the page measured them, the held-out NDF and completeness."""
    first = next(iter(results.values()))
    data = {
        "format": FORMAT,
        "model_id": first.model_id,
        "task": first.task.to_dict(),
        "budget": int(shown.budget),
        "methods": {name: circuit_json(result, shown.budget) for name, result in results.items()},
        "edges_in_circuit": {name: sorted(edges) for name, edges in shown.edge_sets.items()},
        "overlap": [json_safe(row) for row in shown.overlap],
        "in_every_circuit": sorted(shown.shared),
    }
    if measured is not None:
        data["held_out_and_completeness"] = {
            name: json_safe(
                {
                    "held_out_mean_ndf": found["held_out"],
                    "n_paraphrases": found["n"],
                    "paraphrases": list(found["texts"]),
                    "completeness": found["completeness"],
                    "note": found["note"],
                }
            )
            for name, found in measured.items()
        }
    return data


# the methods' part of a comparison's file name at most (the longest name then stays within
# ``downloads.NAME_LIMIT`` with its hash): cut at Explore's 24 characters, EAP, CD-T, Edge Pruning
# and EAP-IG were named "eap-vs-cd-t-vs-edge", and paraphrase pruning beside EAP-IG
# "paraphrase-pruning-vs", one method
METHODS_SLUG = 40


def comparison_name(results: dict, kind: str, ext: str, budget: int | None) -> str:
    """A download's name as Explore's are made (``downloads.file_name``), the methods joined where
    one method's name stands (their count, '4-methods', where the names are longer than
    ``METHODS_SLUG``: never some of them, cut), and a hash of every run compared."""
    first = next(iter(results.values()))
    methods = "-vs-".join(results)
    joined = SimpleNamespace(
        method=methods
        if len(slug(methods, 10 * METHODS_SLUG, keep=".")) <= METHODS_SLUG
        else f"{len(results)}-methods",
        model_id=first.model_id,
        task=first.task,
        config={name: getattr(result, "config", None) or {} for name, result in results.items()},
    )
    return file_name(joined, kind, ext, budget, method_limit=METHODS_SLUG)


def comparison_downloads(results: dict, shown, measured: dict | None = None) -> None:
    """The comparison (JSON, at the budget shown) and the curves of every method (CSV, all budgets)."""
    first = next(iter(results.values()))
    row = st.container(horizontal=True, key="compare.downloads")
    row.download_button(
        "Comparison (JSON)",
        data=lambda: json.dumps(comparison_json(results, shown, measured)),
        file_name=comparison_name(results, "comparison", "json", shown.budget),
        mime="application/json",
        key="compare.json",
        on_click="ignore",  # no rerun: a rerun drops the other buttons' files (a quick second click got none)
        help=(
            "Every method's circuit at this budget (each edge's score and whether it is in the circuit, "
            "its curve and figures, as Explore's circuit JSON), the overlap table and the edges in "
            "every circuit" + (", with the held-out NDF and completeness measured above" if measured else "")
        ),
    )
    row.download_button(
        "Curves (CSV)",  # every budget's point of every method: the name carries no budget
        data=render.curves_csv({name: result.curve for name, result in results.items()}, first.graph.n_edges),
        file_name=comparison_name(results, "curves", "csv", None),
        mime="text/csv",
        key="compare.curvescsv",
        on_click="ignore",
    )
