"""The Paraphrases page's downloads: the paraphrase table with each candidate's NDF at the budget
shown (CSV) and the edges its UpSet plot counts (JSON: each candidate's circuit edges, every
exclusive intersection with its size, which bars the plot draws). Both are built from the data the
page draws (``bon.table_rows``, the candidates' figures under the bar chart, the candidates' edge
sets under the UpSet), so a file's figures are the page's."""

from __future__ import annotations

import csv
import io
import json

import streamlit as st

from .. import render
from ..core.results import json_safe
from ..core.spreadsheet import safe_cell
from . import bon
from .downloads import circuit_json, file_name

FORMAT = "circuitviz shared edges 1"
# a text the spreadsheet would run as a formula is written with a leading "'" (core.spreadsheet);
# the JSON holds every text exactly
LEFT_OUT = "left out because"


def _ndf_column(budget: int) -> str:
    return f"NDF at budget {int(budget):,}"


def _edges_column(budget: int) -> str:
    return f"edges at budget {int(budget):,}"


def candidates_rows(result, scores: list[dict], budget: int) -> list[dict]:
    """The paraphrase table's rows, in its order and with its columns (``bon.table_rows``), then
    why a pair is not a candidate (the run's reason, as the sentences under the table quote it) and
    each candidate's figures at ``budget`` as the bar chart draws them (``scores``: the page's
    ``candidates_at``), blank for a pair left out."""
    by_name = {str(score["name"]): score for score in scores}
    rows = []
    for index, row in enumerate(bon.table_rows(result)):
        pair = result.details.pairs[index] if index < len(result.details.pairs) else {}
        reason = str(pair.get("reason") or "") if isinstance(pair, dict) and not row["candidate"] else ""
        score = by_name.get(row["pair"]) if row["candidate"] else None
        ndf = score.get("ndf") if score else None
        rows.append(
            {
                **row,
                LEFT_OUT: reason,
                _ndf_column(budget): "" if ndf is None else f"{float(ndf):.6g}",
                _edges_column(budget): "" if score is None else int(score["n_edges"]),
                "winner": bool(score and score.get("winner")),
            }
        )
    return rows


def candidates_csv(rows: list[dict]) -> str:
    """``candidates_rows`` as CSV: every text quoted where it needs to be (commas, quotes, line
    breaks stay inside their cell), a formula-like text written with a leading "'"."""
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({name: safe_cell(value) for name, value in row.items()})
    return buffer.getvalue()


def shared_edges_json(result, budget: int, sets: dict[str, set[str]], scores: list[dict]) -> dict:
    """The UpSet plot's data at ``budget``: each candidate's pair (its texts exactly), figures and
    circuit edges (``sets``, the ones the page draws), every exclusive intersection, largest first
    as the plot orders them, with its size and whether the plot draws its bar (it draws the first
    ``render.UPSET_BARS``), and the edges in every candidate."""
    names = bon.candidate_names(result)
    pairs = dict(zip(names, (result.details.pairs[k] for k in bon.candidate_pairs(result))))
    by_name = {str(score["name"]): score for score in scores}
    found = render.exclusive_intersections(sets)
    candidates = {}
    for name, edges in sets.items():
        pair = pairs.get(name) if isinstance(pairs.get(name), dict) else {}
        score = by_name.get(name, {})
        candidates[name] = {
            "clean": str(pair.get("clean", "")),
            "corrupted": str(pair.get("corrupted", "")),
            "ndf": score.get("ndf"),
            "winner": bool(score.get("winner")),
            "n_edges": len(edges),
            "edges": sorted(edges),
        }
    return json_safe(
        {
            "format": FORMAT,
            "model_id": str(result.model_id),
            "method": str(result.method),
            "task": result.task.to_dict(),
            "budget": int(budget),
            "candidates": candidates,
            "intersections": [
                {
                    "members": list(item.members),
                    "label": item.label,
                    "size": item.size,
                    "drawn": rank < render.UPSET_BARS,
                    "edges": sorted(item.edges),
                }
                for rank, item in enumerate(found)
            ],
            "bars_drawn": min(len(found), render.UPSET_BARS),
            "in_every_candidate": sorted(render.shared_by_all(sets)),
        }
    )


def paraphrase_downloads(result, budget: int, scores: list[dict], sets: dict[str, set[str]] | None) -> None:
    """The candidates (CSV) and, with two candidates' edge sets or more, the shared edges (JSON),
    at ``budget``; named as Explore's downloads are (``downloads.file_name``)."""
    row = st.container(horizontal=True, key="bon.downloads")
    row.download_button(
        "Candidates (CSV)",
        data=lambda: candidates_csv(candidates_rows(result, scores, budget)),
        file_name=file_name(result, "candidates", "csv", budget),
        mime="text/csv",
        key="bon.candidatescsv",
        on_click="ignore",  # no rerun: a rerun drops the other buttons' files (a quick second click got none)
        help=(
            "The paraphrase table (every pair, the ones left out with their reason) with each candidate's "
            f"NDF and edges at budget {int(budget):,}, as the chart draws them. A text beginning with "
            "=, +, -, @ is written with a leading ' so a spreadsheet does not run it as a formula"
        ),
    )
    row.download_button(  # the circuit drawn below, as Explore's: what `evaluate --circuit` reads
        "Circuit (JSON)",
        data=lambda: json.dumps(circuit_json(result, budget)),
        file_name=file_name(result, "circuit", "json", budget),
        mime="application/json",
        key="bon.circuitjson",
        on_click="ignore",
        help=(
            f"This {result.method} circuit at budget {int(budget):,} (the one drawn below) in the EAP-IG "
            "library's graph format, with its held-out transfer; readable by `circuitviz evaluate --circuit`"
        ),
    )
    if sets and len(sets) >= 2:
        row.download_button(
            "Shared edges (JSON)",
            data=lambda: json.dumps(shared_edges_json(result, budget, sets, scores), ensure_ascii=False),
            file_name=file_name(result, "shared-edges", "json", budget),
            mime="application/json",
            key="bon.sharedjson",
            on_click="ignore",
            help=(
                f"Each candidate's circuit edges at budget {int(budget):,} and every intersection of the "
                "UpSet plot (the edges in exactly those candidates) with its size, the drawn bars first"
            ),
        )
