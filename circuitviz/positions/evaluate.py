"""Faithfulness of position circuits: each (edge, position) unit patched at its own position.

A position circuit keeps units (u, v, p); every other unit carries u's corrupted output at p into
v's input at p. A reader's input at position p becomes

    x[p] + sum_u w[u, v, p] (corrupted_u[p] - current_u[p])

with w = 1 for a removed unit: the position-agnostic patch with the weight given per position.
Every circuit of a curve goes through the model as one batch, chunked to the device's memory as
the evaluator's own runs are, from the clean and corrupted runs the evaluator already holds; the
leading positions where the clean and corrupted prompts agree run once (``shared_prefix``), since
no unit there changes anything. A circuit that keeps every unit is the model itself (its point is
the clean metric, no run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..activations import shared_prefix
from ..chunks import run_in_chunks
from ..evaluate import CurvePoint, Evaluator, ndf, nfs
from .graph import unit_mask
from .patching import patched_position_metrics

Progress = Callable[[str, float], None]


def whole_position_graph(circuits: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
    """Whether each circuit keeps every unit.  circuits: [..., n_forward, n_backward, pos]  # [...] bool"""
    return ~(units & ~circuits.bool()).flatten(-3).any(-1)


def position_metrics(
    evaluator: Evaluator, circuits: torch.Tensor, progress: Progress | None = None
) -> torch.Tensor:
    """L(C(q)) of each position circuit.  circuits: [n, n_forward, n_backward, pos]  # [n]"""
    model, spec, prepared = evaluator.model, evaluator.spec, evaluator.prepared
    n_positions = prepared.n_positions
    units = unit_mask(spec, n_positions, evaluator.device)
    prefix = shared_prefix(model, [prepared])
    results: list[torch.Tensor] = []
    total = circuits.shape[0]

    def compute(rows: slice) -> torch.Tensor:
        removed = units & ~circuits[rows].to(evaluator.device).bool()  # [b, fwd, bwd, pos]
        return patched_position_metrics(
            model, spec, prepared, evaluator.corrupted_writers, removed, prefix=prefix
        )

    def commit(rows: slice, values: torch.Tensor) -> None:
        results.append(values)
        if progress:
            progress("evaluate", min(1.0, rows.stop / total))

    run_in_chunks(
        model,
        "evaluate",
        total,
        n_positions,
        evaluator._bytes_per_position * 1.5,  # the per-position weights and one difference block more
        compute,
        commit,
        max_chunk=64,
    )
    if not results:
        return torch.zeros(0, dtype=evaluator.clean_writers.dtype, device=evaluator.device)
    return torch.cat(results)


def position_curve(
    evaluator: Evaluator, circuits: torch.Tensor, budgets: Sequence[int], progress: Progress | None = None
) -> list[CurvePoint]:
    """A faithfulness point per (budget, position circuit); ``n_edges`` counts the kept units."""
    if not len(circuits):
        return []
    units = unit_mask(evaluator.spec, circuits.shape[-1], circuits.device)
    whole = whole_position_graph(circuits, units).tolist()
    partial = [index for index, complete in enumerate(whole) if not complete]
    measured = iter(position_metrics(evaluator, circuits[partial], progress).tolist() if partial else [])
    values = [evaluator.baseline.clean if complete else next(measured) for complete in whole]
    sizes = (circuits.bool() & units).flatten(1).sum(1).tolist()
    return [
        CurvePoint(
            budget=int(budget),
            n_edges=int(size),
            metric=float(value),
            nfs=nfs(float(value), evaluator.baseline),
            ndf=ndf(float(value), evaluator.baseline),
        )
        for budget, size, value in zip(budgets, sizes, values)
    ]
