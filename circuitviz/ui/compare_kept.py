"""Which of the kept results the Compare page can set side by side: those of this task that are
edge circuits. A result kept from Explore over token positions counts (edge, position) units, so
it is left out, and said to be, until the comparison runs the method over edges; a method whose
run failed is left out and said to have failed, not to be waiting for a run."""

from __future__ import annotations

from ..core.text import first_sentence, joined, markdown_sentence
from ..methods import available_methods
from . import kept_results, run


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
        kept = kept_results.result_for(name, model_id, task.clean)
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


def failed(chosen: list[str], results: dict, requests: dict) -> dict:
    """{method: the error its last run of this request ended in}, for the chosen methods with no
    result in the comparison."""
    found = {}
    for name in chosen:
        request = requests.get(name)
        error = run.failed(request.key) if request is not None and name not in results else None
        if error is not None:
            found[name] = error
    return found


def failed_sentence(name: str, error: BaseException) -> str:
    """Why a method is not in the comparison after its run failed, and the way out: the page said
    'Best-of-N has no result for this prompt yet ... run the comparison to add it', under the error
    that running it again repeats (no template family for the prompt; an audit, 2026-12-06)."""
    method = available_methods().get(name)
    label = method.label if method is not None else name
    return markdown_sentence(
        f"{label} could not run on this prompt ({first_sentence(error, 300).rstrip('.')}), so the "
        "comparison below leaves it out and running the comparison again fails the same way: change "
        "its settings on the Explore page, or take it out of the box above."
    )


def awaiting_run(chosen: list[str], requests: dict, positions: list[str], failed: dict) -> list[str]:
    """The chosen methods that running the comparison would add: not those left out for a reason
    said elsewhere (a result over positions, a failed run, settings refused with an error: under
    "Edge Pruning (learned masks): steps must be between 0 and 10000, not -5. ... it is left out of
    this comparison until they are fixed there." the page also said it "has no result for this
    prompt yet ... run the comparison to add it")."""
    return [n for n in chosen if n not in positions and n not in failed and (not requests or n in requests)]


def fewer_than_two_sentence(waiting: list[str]) -> str:
    """Under one method's result alone: run the comparison where a chosen method awaits its run,
    else choose another (EAP beside a Best-of-N that failed read '... run the comparison.', which
    fails again)."""
    way_out = "run the comparison" if waiting else "choose another method in the box above"
    return f"Fewer than two of the chosen methods have a result for this prompt; {way_out}."
