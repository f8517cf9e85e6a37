"""The command line's faithfulness table (``python -m circuitviz discover`` and ``evaluate``)."""

from __future__ import annotations

import math

from ..core.curves import Baseline, CurvePoint, empty_budgets_note
from ..core.text import percent_text


def format_table(
    baseline: Baseline,
    curve: list[CurvePoint],
    total_edges: int,
    metric: str | None = None,
    reference: str = "corrupted",
    kept: str = "edges",
    labels: list[str] | None = None,
) -> str:
    """The faithfulness table: one row per circuit, the clean/corrupted metrics above (``kept``:
    what a budget counts, edges or (edge, position) units; ``labels``: what the budget column says
    of each row where it is not its budget, as `evaluate`'s first row, the file's in_graph circuit,
    which has none: it read "101" for the 101 edges of a circuit drawn at budget 103). With the
    task's ``metric``, a line under it when the clean-corrupted difference is below what the task check asks for (a run with
    --no-task-check: NDF 0.406 and necessity 0.858 were printed over a difference of -0.009)."""
    # NDF's 0: the corrupted prompt's metric, or what a run with none measured it on
    reference_line = "corrupted metric L(M(q'))" if reference == "corrupted" else f"{reference} metric"
    difference = difference_words(reference)
    complete = any(not math.isnan(point.completeness) for point in curve)  # measured when asked for
    lines = [
        f"clean metric L(M(q))      {baseline.clean:+.4f}",
        f"{reference_line:<25} {baseline.corrupted:+.4f}",
        f"{'budget':>8} {kept + ' kept':>10} {'% ' + kept:>8} {'L(C(q))':>10} {'NFS':>8} {'NDF':>6} "
        f"{'necessity':>9}" + (f" {'completeness':>12}" if complete else ""),
    ]
    for index, point in enumerate(curve):
        label = labels[index] if labels and index < len(labels) else str(point.budget)
        nfs = "nan" if math.isnan(point.nfs) else f"{point.nfs:.3f}"
        necessity = "-" if math.isnan(point.necessity) else f"{point.necessity:.3f}"
        completeness = "-" if math.isnan(point.completeness) else f"{point.completeness:.3f}"
        lines.append(
            f"{label:>8} {point.n_edges:>10} {percent_text(100 * point.n_edges / total_edges):>8} "
            f"{point.metric:>+10.4f} {nfs:>8} {point.ndf:>6.3f} {necessity:>9}"
            + (f" {completeness:>12}" if complete else "")
        )
    lines.append(f"necessity: 1 - removing only the circuit's {kept} removes the {difference}")
    if complete:
        lines.append(
            "completeness: 1 - how differently the circuit and the whole model respond when a random half "
            "of the circuit is removed from both (8 halves); 1: the model holds no route the circuit lacks; "
            f"0 also stands for any difference larger than the {difference} (clipped)"
        )
    weak = _weak_difference(baseline, metric, complete, difference)
    if weak:
        lines.append(weak)
    empty = empty_budgets_note(curve, kept)
    return "\n".join([*lines, empty] if empty else lines)


def difference_words(reference: str = "corrupted") -> str:
    """What NFS, NDF and necessity divide by, in words: the clean-corrupted difference, or, for a run
    without a corrupted prompt, the difference from what it measured NDF's 0 on (the neutral prompt):
    the necessity line said "the clean-corrupted difference" under a table whose second metric was
    the neutral prompt's (flow routes, CD-T)."""
    if reference == "corrupted":
        return "clean-corrupted difference"
    return f"difference between the clean and the {reference} metrics"


def _weak_difference(
    baseline: Baseline, metric: str | None, complete: bool = False, difference: str = ""
) -> str:
    """The line saying the figures divide by a difference too small (or reversed) to mean much;
    '' when it is as large as the task check asks for, or the metric is not known."""
    from ..measure.task_validity import MIN_GAP

    threshold = MIN_GAP.get(metric or "")
    gap = baseline.clean - baseline.corrupted
    if threshold is None or gap >= threshold:
        return ""
    how = "reversed: the corruption raises the metric" if gap < 0 else "too small"
    return (
        f"note: the {difference or difference_words()} is {gap:+.3g} ({how}; the task check asks for at least "
        f"{threshold:g}): NFS, NDF{', necessity and completeness' if complete else ' and necessity'} divide "
        "by it and mean little here."
    )
