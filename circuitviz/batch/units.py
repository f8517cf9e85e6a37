"""What a batch series' budgets count: the graph's edges or, for a method over token positions,
(edge, position) units. A prompt's units grow with its length (``positions.graph.n_units``), so a
budget's share of them differs from prompt to prompt; the atlas's areas over positions are over
the mean of those shares, each of the prompt's own unit total, never over the model's edges (a
5,000-unit budget is 48 % of Gemma-3-270M's 10,342 edges but 3 % of a 16-token prompt's 164,107
units)."""

from __future__ import annotations

import json

import numpy
import pyarrow as pa


def over_positions(batch, label: str) -> bool:
    """Whether a series ran over token positions: its budgets and sizes count (edge, position) units."""
    configs = batch.rows(label).column("config").to_pylist()[:1]
    if not configs or not configs[0]:
        return False
    plain = json.loads(configs[0]) if isinstance(configs[0], str) else dict(configs[0])
    return bool(plain.get("positions"))


def counts(batch, label: str) -> str:
    """What the series' budgets and 'kept' figures count, as a plural noun: 'edges' or 'units'."""
    return "units" if over_positions(batch, label) else "edges"


def unit_totals(batch, rows: pa.Table) -> numpy.ndarray:
    """Each row's prompt's (edge, position) units, the BOS token counted as the runs count it.  # [rows]"""
    # here, not at the top: the positions package loads torch, which the atlas's pages load late
    from ..positions.graph import n_units

    tokens = rows.column("n_tokens").to_pylist()
    return numpy.array([n_units(batch.spec, int(n or 0)) for n in tokens], dtype=float)


def budget_fractions(batch, label: str, rows: pa.Table, budgets: list[int]) -> list[float]:
    """Each budget as a share of what it counts: of the graph's edges, or over token positions the
    mean over ``rows`` of its share of each prompt's own units (a budget over a prompt's units
    keeps its whole graph: a share of 1)."""
    if not over_positions(batch, label) or rows.num_rows == 0:
        return [b / batch.n_edges for b in budgets]
    totals = unit_totals(batch, rows)
    return [float(numpy.minimum(b / totals, 1.0).mean()) for b in budgets]
