"""Faithfulness figures as plain values: a baseline, a curve point, and the scores read off them.

NFS, NDF and necessity of one circuit against the clean and corrupted runs' metrics, and MIB's
CPR and CMD (areas under a curve over the edge fraction). Pure arithmetic on floats: a stored
result carries these and reads them back without the evaluator (``evaluate.py``, which measures
them by patching) or the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .text import joined


@dataclass(frozen=True)
class Baseline:
    """The clean and corrupted metrics a faithfulness score is measured against."""

    clean: float
    corrupted: float


@dataclass(frozen=True)
class CurvePoint:
    """One circuit's faithfulness: budget asked, edges kept after pruning, L(C(q)), NFS, NDF;
    and its necessity with L((M\\C)(q)), the model with only the circuit's edges corrupted
    (NaN where not measured: a curve stored before necessity existed, or one asked without it);
    and its completeness (``measure.completeness``; NaN until asked for: it costs 16 patched runs)."""

    budget: int
    n_edges: int
    metric: float
    nfs: float
    ndf: float
    necessity: float = math.nan
    metric_without: float = math.nan
    completeness: float = math.nan

    def to_dict(self) -> dict:
        return asdict(self)


def nfs(circuit: float, baseline: Baseline) -> float:
    """Normalised faithfulness score (L(C(q)) - L(M(q'))) / (L(M(q)) - L(M(q'))); unbounded."""
    span = baseline.clean - baseline.corrupted
    if span == 0:
        return math.nan
    return (circuit - baseline.corrupted) / span


def ndf(circuit: float, baseline: Baseline) -> float:
    """Normalised deviation faithfulness 1 - min(|(L(M(q)) - L(C(q))) / (L(M(q)) - L(M(q')))|, 1).

    In [0, 1]: 1 when the circuit reproduces the model, 0 when it deviates at least as much as
    the corruption does, whichever direction it deviates in.
    """
    span = baseline.clean - baseline.corrupted
    deviation = baseline.clean - circuit
    if span == 0:
        return 1.0 if deviation == 0 else 0.0
    return 1.0 - min(abs(deviation / span), 1.0)


def necessity(without: float, baseline: Baseline) -> float:
    """Necessity min(|L(M(q)) - L((M\\C)(q))| / |L(M(q)) - L(M(q'))|, 1), normalised like NDF.

    ``without``: the metric of the full model with only the circuit's edges patched to the
    corrupted run. 1 when removing the circuit removes the whole clean-corrupted difference
    or more (an overshoot is capped at 1, as NDF's deviation is),
    0 when removing it changes nothing; NaN when the clean and corrupted runs agree.
    """
    span = baseline.clean - baseline.corrupted
    if span == 0:
        return math.nan
    return min(abs((baseline.clean - without) / span), 1.0)


def area_under_curve(fractions: Sequence[float], values: Sequence[float]) -> float:
    """Trapezoid area over the edge fractions covered, divided by their span (a mean height)."""
    points = sorted(zip(fractions, values))
    if len(points) < 2:
        return float(points[0][1]) if points else math.nan
    area = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(points, points[1:]))
    span = points[-1][0] - points[0][0]
    return area / span if span > 0 else float(points[0][1])


def cpr(curve: Sequence[CurvePoint], n_edges_total: int, score: str = "nfs") -> float:
    """MIB's circuit performance ratio: area under the faithfulness curve (edge fraction axis)."""
    return area_under_curve([p.n_edges / n_edges_total for p in curve], [getattr(p, score) for p in curve])


def cmd(curve: Sequence[CurvePoint], n_edges_total: int, score: str = "nfs") -> float:
    """MIB's circuit-model distance: area of |1 - faithfulness| over the edge fraction."""
    return area_under_curve(
        [p.n_edges / n_edges_total for p in curve], [abs(1 - getattr(p, score)) for p in curve]
    )


def empty_budgets_note(curve: Sequence[CurvePoint], kept: str = "edges") -> str | None:
    """One sentence when budgets above 0 kept nothing once the edges on no input-to-logits path
    were pruned (their NDF of 0 is an empty circuit's, not a measured failure); None otherwise."""
    empty = [p.budget for p in curve if p.budget > 0 and p.n_edges == 0]
    if not empty:
        return None
    shown = joined([f"{b:,}" for b in empty])  # "20, 50" read as a list cut short (Compare, an audit)
    first = min((p.budget for p in curve if p.n_edges > 0 and p.budget > max(empty)), default=None)
    after = (
        f"; the first budget that keeps a path is {first:,}"
        if first is not None
        else "; no budget measured keeps one"
    )
    return (
        f"At budget{'s' if len(empty) > 1 else ''} {shown} the method's top-ranked {kept} hold no path from the "
        "input to the logits, "
        f"so pruning leaves an empty circuit there (NDF 0){after}."
    )
