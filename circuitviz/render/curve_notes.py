"""The sentences under a result's curve (Explore, Compare, and under discover's table on the
command line, where a falling curve went unexplained until 2026-12-06): a curve flat at 0, budgets pruning
empties, a circuit that stops growing, and a dip as the budget grows with its cause, said per
method: top edges by score (an edge that works against the answer can come in), a family whose
circuits are not nested by budget (its details say why: Best-of-N's winner differs by budget),
or circuits the result shows are not nested.
"""

from __future__ import annotations

from .. import render
from ..core.curves import empty_budgets_note
from ..core.text import possessive
from ..methods.registry import method_traits


def curve_notes(result) -> list[str]:
    """Sentences on what the curve shows that a reader would not expect: a dip as the budget
    grows, circuits that patching cannot make faithful, where the view opened. A circuit over token
    positions counts (edge, position) units, and its sentences say so (discover printed the empty
    budgets twice, once in units and once in edges, and its dip in edges)."""
    notes = []
    if result.curve and max(point.ndf for point in result.curve) < 0.05:
        expected = method_traits(result.method).flat_curve_sentence(point.ndf for point in result.curve)
        if expected:
            notes.append(expected)
        else:  # 'NDF is 0' was said over a table showing 0.031: the highest is named
            notes.append(
                f"NDF is near 0 at every budget (at most {max(point.ndf for point in result.curve):.2f}): "
                "no circuit of this method reproduces the model under patching on this prompt; try more "
                "budgets, another method, or a corrupted prompt that changes less."
            )
    units = getattr(result, "positions", False)  # (edge, position) units, not edges
    empty = empty_budgets_note(result.curve, kept="units" if units else "edges")
    if empty and max(point.ndf for point in result.curve) >= 0.05:  # else the flat-curve note says it
        notes.append(empty)
    if units:
        dip = dip_note_of_units(result.curve)
        return [*notes, dip] if dip else notes
    traits = method_traits(result.method)
    graph = getattr(result, "graph", None)
    total = graph.n_edges if graph is not None else None
    stop = render.growth_stop_sentence(result.curve, whose=f"{traits.label}'s", total=total)
    if stop:
        notes.append(stop)
    dips = render.curve_dips(result.curve)
    if dips:
        low, low_ndf, high, high_ndf = max(dips, key=lambda dip: dip[1] - dip[3])
        notes.append(dip_note(result, low, low_ndf, high, high_ndf))
    return notes


def dip_note(result, low: int, low_ndf: float, high: int, high_ndf: float) -> str:
    """Why NDF at budget ``high`` is below NDF at the smaller budget ``low``, true of the method:
    its family's own reason when its details give one (a Best-of-N winner per budget), else, when
    the result's circuits show the smaller one is not inside the larger, that; else the edges
    added by score (those whose score says they work against the answer, where scores estimate it)."""
    at = {point.budget: point for point in result.curve}  # a budget's edges kept, after pruning
    dip = (
        f"The curve is not monotone: at {render.edges_at(at[high])} NDF is {high_ndf:.2f}, "
        f"below {low_ndf:.2f} at {render.edges_at(at[low])}. "
    )
    left_out = _left_out(result, low, high)
    details = getattr(result, "details", None)
    nested = None if left_out is None else left_out == 0
    family = details.dip_reason(result, low, high, nested) if details is not None else None
    if family:
        return f"{dip}{family}."
    if left_out:
        return (
            f"{dip}The circuit at budget {high:,} is not the one at budget {low:,} with edges added: it "
            f"leaves out {left_out:,} of that circuit's {int(at[low].n_edges):,} edges, so a larger budget "
            "need not be more faithful."
        )
    traits = method_traits(result.method)
    if traits.scores_estimate_metric:
        why = _against_sentence(result)
    else:  # its scores say nothing of an edge's effect on the answer: no edge is said to work against it
        why = (
            f"Edges are added by {possessive(traits.label)} own score, which does not estimate an edge's effect on "
            "the answer's metric, so a larger circuit can take in edges that lower its NDF"
        )
    return dip + why + "; pruning edges on no input-to-logits path also changes which edges a budget keeps."


def _left_out(result, low: int, high: int) -> int | None:
    """How many edges of the circuit the run chose at ``low`` the one at ``high`` lacks (0: nested),
    or None when the result does not hold both circuits."""
    circuits = getattr(result, "circuits", None)
    if not isinstance(circuits, dict) or low not in circuits or high not in circuits:
        return None
    return int((circuits[low].bool() & ~circuits[high].bool()).sum())


AGAINST_SHARE = 0.01  # an edge counted as working against the answer: its score over 1 % of the gap


def _against_sentence(result) -> str:
    """Why a curve of estimating scores can dip: the edges whose score says they work against the
    answer, counted only where that score is at least 1 % of the clean-to-corrupted change (counting
    every positive score gave 5,068 of 10,342 edges on the default prompt, median 0.0014 against a
    gap of 4.3: noise said as opposition)."""
    baseline = getattr(result, "baseline", None)
    gap = abs(float(baseline.clean) - float(baseline.corrupted)) if baseline is not None else 0.0
    floor = AGAINST_SHARE * gap
    against = int((result.scores > floor).sum())
    what = (
        f"a score above {floor:.2g}, 1% of the clean-to-corrupted change" if gap > 0 else "a positive score"
    )
    if against == 0:
        return (
            "Edges are added by |score|, an estimate of each edge's effect alone, so a larger circuit "
            "can take in edges whose effects together differ from the sum of their scores"
        )
    return (
        f"Edges are added by |score| whatever their sign, and by the scores' estimate {against:,} "
        f"{'edge works' if against == 1 else 'edges work'} against the answer ({what}: corrupting one "
        "would raise the metric; dashed in the graph), so a larger circuit can take in edges that "
        "cancel others"
    )


def dip_note_of_units(curve) -> str | None:
    """Where NDF falls as the unit budget grows, and why it can (Explore's edge view says it too;
    the positions view said nothing of the Louvre's NDF 0.55 at budget 20 falling to 0.37 at 50)."""
    dips = render.curve_dips(curve)
    if not dips:
        return None
    low, low_ndf, high, high_ndf = max(dips, key=lambda dip: dip[1] - dip[3])
    kept = {int(point.budget): int(point.n_edges) for point in curve}

    def units(budget: int) -> str:
        return f"{kept[budget]:,} units" + ("" if kept[budget] == budget else f" (budget {budget:,})")

    return (
        f"The curve is not monotone: at {units(high)} NDF is {high_ndf:.2f}, below {low_ndf:.2f} at "
        f"{units(low)}. A budget keeps the units of largest |score| whatever their sign, so a larger one "
        "can take in units that work against the answer; pruning the units on no input-to-logits path "
        "also changes which units a budget keeps."
    )
