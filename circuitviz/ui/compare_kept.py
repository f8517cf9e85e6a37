"""Which of the kept results the Compare page can set side by side: those of this task that are
edge circuits. A result kept from Explore over token positions counts (edge, position) units, so
it is left out, and said to be, until the comparison runs the method over edges."""

from __future__ import annotations

from ..core.text import joined, markdown_sentence
from ..methods import available_methods
from . import state


def comparable(task):
    """Whether a kept result can stand in this comparison: of ``task`` and over edges (Compare
    draws, measures and overlaps edge circuits; a circuit over positions read 'NDF 0.119 with 18
    edges' for 18 units, its curve on the edge axis up to 100k, beside flow routes' edges)."""
    return lambda result: result.task == task and not result.positions


def over_positions(chosen: list[str], results: dict, model_id: str, task) -> list[str]:
    """The chosen methods with no result in the comparison whose kept result for ``task`` is over
    token positions (run so on Explore)."""
    if task is None:
        return []
    found = []
    for name in chosen:
        kept = state.result_for(name, model_id, task.clean)
        if name not in results and kept is not None and kept.task == task and kept.positions:
            found.append(name)
    return found


def over_positions_sentence(names: list[str]) -> str:
    """Why a method's result from Explore is not in the comparison ('' for none)."""
    if not names:
        return ""
    registered = available_methods()
    labels = [registered[n].label if n in registered else n for n in names]
    one = len(labels) == 1
    return markdown_sentence(
        f"The result{'' if one else 's'} of {joined(labels)} for this prompt {'is' if one else 'are'} "
        f"over token positions (as run on Explore): {'its' if one else 'their'} budgets count (edge, "
        "position) units, not edges, so the comparison below leaves "
        f"{'it' if one else 'them'} out; run the comparison to compute {'it' if one else 'them'} over edges."
    )
