"""Where a first view of a curve opens, and why, in one sentence; where a curve falls or stops
growing as the budget grows. Plain points in (``CurvePoint`` or dicts), sentences out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .curves import _value

READABLE_EDGES = 200  # the largest circuit a first view opens at: a graph one can still read
# an NDF under this reads 0.00: such a circuit deviates from the model as much as the corruption
# does, and calling one of several such circuits "the most faithful" said nothing true of use
NONE_FAITHFUL = 0.005
# what a curve's NDF 0 was measured on (``details.base.reference_name``), as "deviating ... as much
# as X does" says it: a run with no corrupted prompt said "the corruption" of its neutral prompt
ZERO_DEVIATES = {
    "corrupted": "the corruption",
    "neutral prompt": "the neutral prompt",
    "signals knocked out": "knocking its signals out",
}


@dataclass(frozen=True)
class OpeningView:
    """The budget a first view opens at, and why (the sentence a page shows under the slider).

    faithful: whether the circuit opened at reaches the NDF asked for (when not, a page offers the
    method that learns a small circuit instead)."""

    budget: int
    reason: str
    faithful: bool = False


def edges_at(point) -> str:
    """'83 edges (budget 100)', or '100 edges' where the budget kept as many: a budget is the top
    edges by score, and edges on no input-to-logits path are then pruned."""
    budget, kept = int(_value(point, "budget")), int(_value(point, "n_edges"))
    return f"{kept:,} edges" + ("" if kept == budget else f" (budget {budget:,})")


def opening_view(
    curve: Sequence,
    max_edges: int = READABLE_EDGES,
    good_ndf: float = 0.8,
    larger_at: str = "on the slider and the curve",
    reference: str = "corrupted",
) -> OpeningView:
    """Where a first view of a curve's circuits opens: the smallest budget whose circuit reaches
    ``good_ndf`` with at most ``max_edges`` edges kept; when none does, the most faithful circuit
    of at most ``max_edges`` edges (the smaller on a tie), or the smallest of them when each has NDF
    0.00 (it said "the most faithful ... (NDF 0.00)"), else the smallest budget. The sentence
    says which, with the figures it read off the curve, and where the larger budgets are shown
    (``larger_at``: the app's slider and curve; the command line's table). ``reference``: what NDF's
    0 was measured on (``details.base.reference_name``), named where no circuit is faithful."""
    points = [p for p in sorted(curve, key=lambda p: _value(p, "budget")) if not math.isnan(_value(p, "ndf"))]
    if not points:
        points = sorted(curve, key=lambda p: _value(p, "budget"))
        budget = int(_value(points[0], "budget")) if points else 0
        return OpeningView(budget, "No circuit of this curve has an NDF; opened at the smallest budget.")
    readable = [p for p in points if 0 < _value(p, "n_edges") <= max_edges]
    good = [p for p in readable if _value(p, "ndf") >= good_ndf]
    if good:
        first = good[0]
        return OpeningView(
            int(_value(first, "budget")),
            f"Opened at {edges_at(first)}, the smallest budget whose circuit reaches NDF {good_ndf} "
            f"(NDF {_value(first, 'ndf'):.2f}).",
            faithful=True,
        )
    faithful = [p for p in points if _value(p, "ndf") >= good_ndf]
    largest = int(max(_value(p, "n_edges") for p in points))
    where = (
        f"the smallest that does keeps {int(_value(faithful[0], 'n_edges')):,} edges, too many to read"
        if faithful
        else f"none of the budgets run does, up to {largest:,} edges"  # larger ones were not run
    )
    if not readable:
        drawn = [p for p in points if _value(p, "n_edges") > 0]
        small = [p for p in points if _value(p, "n_edges") == 0 and _value(p, "budget") > 0]
        if drawn and small:  # every readable budget pruned to nothing: open where a circuit is drawn
            first = drawn[0]
            return OpeningView(
                int(_value(first, "budget")),
                f"No circuit of at most {max_edges} edges reaches NDF {good_ndf} ({where}); the budgets up "
                f"to {int(_value(small[-1], 'budget')):,} keep no edge (their top edges hold no path from "
                f"the input to the logits), so it opened at {edges_at(first)}, the smallest budget whose "
                f"circuit has edges (NDF {_value(first, 'ndf'):.2f}).",
            )
        budget = int(_value(points[0], "budget"))
        return OpeningView(
            budget,
            f"No circuit of at most {max_edges} edges reaches NDF {good_ndf} ({where}); "
            f"opened at the smallest budget, {budget:,}.",
        )
    best = max(readable, key=lambda p: (_value(p, "ndf"), -_value(p, "budget")))
    if _value(best, "ndf") < NONE_FAITHFUL:  # every readable circuit at NDF 0.00: none is "the most faithful"
        first = readable[0]
        each = "at each of them" if len(readable) > 1 else "there"
        return OpeningView(
            int(_value(first, "budget")),
            f"No circuit of at most {max_edges} edges reaches NDF {good_ndf} ({where}), and none of them is "
            f"faithful at all: NDF is 0.00 {each}, deviating from the model about as much as "
            f"{ZERO_DEVIATES.get(reference, 'the ' + reference)} does, or more; opened at {edges_at(first)}, the smallest (NDF "
            f"{_value(first, 'ndf'):.2f}). Larger budgets are {larger_at}.",
        )
    stop = growth_stop(points)
    larger = (
        f"Larger budgets add nothing: the circuit stops growing at {stop[0]:,} edges (every budget from "
        f"{stop[1]:,} to {stop[2]:,} keeps {stop[0]:,})."
        if stop is not None and stop[0] == int(_value(best, "n_edges"))
        else f"Larger budgets are {larger_at}."
    )
    return OpeningView(
        int(_value(best, "budget")),
        f"No circuit of at most {max_edges} edges reaches NDF {good_ndf} ({where}); opened at "
        f"{edges_at(best)}, the most faithful circuit of at most {max_edges} edges (NDF "
        f"{_value(best, 'ndf'):.2f}). {larger}",
    )


def growth_stop(curve: Sequence, total: int | None = None) -> tuple[int, int, int, float, float] | None:
    """(edges kept, first budget, last budget, lowest NDF, highest NDF) when the circuit stops
    growing: the largest budgets (two or more, up to the largest run) all keep the same number of
    edges, fewer than the largest budget asks for (ACC++ kept 196 edges at every budget from 196
    to 10,342); None otherwise (an empty circuit has its own sentence, ``empty_budgets_note``, and
    a circuit of all the graph's ``total`` edges is whole, not stopped)."""
    points = [
        p for p in sorted(curve, key=lambda p: _value(p, "budget")) if not math.isnan(_value(p, "n_edges"))
    ]
    if len(points) < 2:
        return None
    kept = int(_value(points[-1], "n_edges"))
    if kept <= 0 or kept >= int(_value(points[-1], "budget")) or (total is not None and kept >= total):
        return None
    tail = []
    for point in reversed(points):
        if int(_value(point, "n_edges")) != kept:
            break
        tail.append(point)
    if len(tail) < 2:
        return None
    values = [_value(p, "ndf") for p in tail if not math.isnan(_value(p, "ndf"))]
    low, high = (min(values), max(values)) if values else (math.nan, math.nan)
    return kept, int(_value(tail[-1], "budget")), int(_value(tail[0], "budget")), low, high


def growth_stop_sentence(
    curve: Sequence, whose: str = "The method's", total: int | None = None
) -> str | None:
    """One sentence when the circuit stops growing (``growth_stop``): the edges it keeps, the
    budgets that keep them and their NDF; None otherwise."""
    stop = growth_stop(curve, total)
    if stop is None:
        return None
    kept, first, last, low, high = stop
    if math.isnan(low):
        ndf = ""
    elif f"{low:.2f}" == f"{high:.2f}":
        ndf = f" (NDF {low:.2f} at each)"
    else:
        ndf = f" (NDF {low:.2f} to {high:.2f})"
    return (
        f"{whose} circuit stops growing at {kept:,} edges: every budget from {first:,} to {last:,} keeps "
        f"{kept:,} edges{ndf}, so larger budgets add nothing."
    )


def readable_budget(curve: Sequence, max_edges: int = READABLE_EDGES, good_ndf: float = 0.8) -> int:
    """The budget of ``opening_view``: a first view that is faithful and readable, else the most
    faithful readable one."""
    return opening_view(curve, max_edges, good_ndf).budget


def curve_dips(curve: Sequence, min_drop: float = 0.1) -> list[tuple[int, float, int, float]]:
    """Where a curve falls as the budget grows: (smaller budget, its NDF, larger budget, its
    lower NDF) for each point at least ``min_drop`` below the best NDF of any smaller budget."""
    points = sorted(curve, key=lambda p: _value(p, "budget"))
    dips = []
    best = None
    for point in points:
        value = _value(point, "ndf")
        if math.isnan(value):
            continue
        if best is not None and value <= _value(best, "ndf") - min_drop:
            dips.append(
                (int(_value(best, "budget")), _value(best, "ndf"), int(_value(point, "budget")), value)
            )
        if best is None or value > _value(best, "ndf"):
            best = point
    return dips
