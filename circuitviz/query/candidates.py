"""Best-of-N's candidates at any budget, from a stored result: their names, the figures the run
evaluated, their circuits rebuilt from the score matrices the run stored, and the winner.

A Best-of-N run evaluates its candidates at the budgets it ran (iBoN at its anchors only); at
another budget each candidate's circuit is its stored score matrix's top ``budget`` edges,
pruned as the run prunes them, never a new scoring pass. Evaluating them is one batched pass
(``api.bon_candidates`` composes it), and the winner is picked as the run picks it
(``pool.winner``). The command line, Python and the Paraphrases page read them here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..core.curves import Baseline, CurvePoint
from ..core.graph import prune, top_n
from ..core.tasks import PromptTask
from .pool import winner

# a pair's task -> its stored [n_forward, n_backward] float32 score matrix, or None
ScoresReader = Callable[[PromptTask], "torch.Tensor | None"]


def candidate_pairs(result) -> list[int]:
    """The pair index of each candidate (candidate 0 is the prompt itself)."""
    return [int(k) for k in result.details.candidates]


def candidate_names(result) -> list[str]:
    """'q' for the prompt itself, 'p<i>' for paraphrase pair i."""
    return ["q" if k == 0 or i == 0 else f"p{k}" for i, k in enumerate(candidate_pairs(result))]


def _budget_entry(result, budget: int) -> dict | None:
    for entry in result.details.per_budget:
        if int(entry.get("budget", -1)) == int(budget):
            return entry
    return None


def evaluated_candidates(result, budget: int) -> list[dict]:
    """[{name, ndf, n_edges, winner}] for the candidates the run evaluated at ``budget`` ([] if none)."""
    entry = _budget_entry(result, budget)
    if entry is None:
        return []
    names = candidate_names(result)
    best = int(entry.get("winner", -1))
    rows = []
    for index, point in enumerate(entry.get("candidates") or []):
        ndf = point.get("ndf")
        rows.append(
            {
                "name": names[index] if index < len(names) else f"candidate {index}",
                "ndf": math.nan if ndf is None else float(ndf),
                "n_edges": int(point.get("n_edges", 0)),
                "winner": index == best,
            }
        )
    return rows


def pair_task(pair: dict) -> PromptTask:
    """The task of one stored pair record."""
    return PromptTask(pair["clean"], pair["corrupted"], pair["answer"], tuple(pair["foils"]), pair["metric"])


def candidate_masks(result, budget: int, read_scores: ScoresReader | None) -> dict[str, torch.Tensor] | None:
    """{candidate: its circuit mask at ``budget``}: the candidate's top ``budget`` edges of its
    stored score matrix, pruned like the run prunes them.  # each [n_forward, n_backward] bool

    None when the run kept no scores (``read_scores`` None) or one is gone: then only the sizes
    the run recorded are known, and nothing is recomputed."""
    if read_scores is None:
        return None
    spec, pairs = result.graph, result.details.pairs
    masks = {}
    for name, k in zip(candidate_names(result), candidate_pairs(result)):
        scores = read_scores(pair_task(pairs[k]))
        if scores is None:
            return None
        masks[name] = prune(spec, top_n(spec, scores.float(), budget))
    return masks


def ranked_candidates(names: list[str], baseline: Baseline, points: list[CurvePoint]) -> list[dict]:
    """[{name, ndf, n_edges, winner}] of candidates evaluated now; the winner is the most
    faithful, as Best-of-N picks it."""
    if not points:
        return []
    best = winner(points, baseline)
    return [
        {"name": name, "ndf": point.ndf, "n_edges": point.n_edges, "winner": index == best}
        for index, (name, point) in enumerate(zip(names, points))
    ]


# ----- the sentences beside the candidates (a variant's circuit is a candidate's or built from them)
def winner_note(result, budget: int, point, scores: list[dict], at: int) -> str:
    """The sentence that puts the candidates' winner NDF and the result's NDF side by side."""
    winner = next((row for row in scores if row["winner"]), None)
    if winner is None or point is None:
        return ""
    draws_winner = not result.any_budget  # Best-of-N draws the winning candidate itself
    if draws_winner and at == budget:
        return (
            f"Best-of-N keeps the winner, {winner['name']} (NDF {winner['ndf']:.3f} at budget {at:,}): "
            f"its circuit is the one drawn below (NDF {point.ndf:.3f})."
        )
    if draws_winner:
        return (
            f"The candidates were evaluated at budget {at:,}, the nearest of the run's budgets; there the "
            f"winner is {winner['name']} (NDF {winner['ndf']:.3f})."
        )
    first = f"The winner among the candidates at budget {at:,}, {winner['name']}, reaches NDF {winner['ndf']:.3f}; "
    if at == budget and point.n_edges == winner["n_edges"] and abs(point.ndf - winner["ndf"]) < 5e-7:
        # iBoN keeps the winner's circuit at an anchor budget: "another circuit" was false there
        return first + (
            f"the {result.method} circuit drawn below has the same NDF and the same {point.n_edges:,} edges "
            "(at an anchor budget it can be the winner's own circuit)."
        )
    return first + (
        f"the {result.method} circuit drawn below at budget {budget:,} is another circuit, built from the "
        f"winners' edges at the anchor budgets, and its NDF is {point.ndf:.3f}."
    )


def highlight_in_circuit(
    edges: set[str], circuit_edges: set[str], result=None, members: tuple[str, ...] = ()
) -> tuple[set[str] | None, str]:
    """(the intersection's edges to light up, the sentence on how many are in the drawn circuit):
    an intersection none of whose edges is drawn lights nothing, rather than greying everything.
    Best-of-N draws one candidate (the winner), so its sentence says the intersection leaves the
    winner out; iBoN and BoN-CSM (a circuit at any budget) draw one built from the winners' edges."""
    inside = edges & circuit_edges
    method = result.method if result is not None else "variant's"
    if not inside:
        why = (
            "the circuit drawn is the winning candidate's, and this intersection holds edges of "
            f"{' & '.join(members) or 'other candidates'} only"
            if result is not None and not result.any_budget
            else f"the {method} circuit drawn is built from the winners' edges at the anchor budgets, not from these"
        )
        return (
            None,
            f"None of this intersection's {len(edges):,} edges is in the circuit drawn below ({why}).",
        )
    return (
        inside,
        f"{len(inside):,} of this intersection's {len(edges):,} edges are in the circuit drawn below.",
    )
