"""Where a learned mask is cut: thresholds other than its budget's top-N (opt-in settings of
paraphrase pruning; docs/faithfulness.md, "Where the mask is cut", session 46).

A budget N keeps the N edges of highest logit, and then every edge on no path from the input to
the logits is pruned (it changes nothing the circuit computes): on the nine prompts the pruned
circuits of budget 103 keep 63-102 edges (seed 1). Two ways to cut otherwise, both fitted and
chosen on the prompt and the fit share only:

- ``fill``: each learning step keeps the largest top-N whose pruned circuit has at most the
  budget's edges (``filled_counts``), so the circuit uses the budget it is measured by;
- ``git``: the same learning, then the kept step's logits are cut at several thresholds (pruned
  sizes from half the budget to the whole of it, and the learned circuit itself) and the cut kept
  is the one whose worse of sufficiency (the selection score of the learning: the worse of the
  prompt's NDF and the fit paraphrases' mean) and necessity (the model with the circuit's edges
  corrupted, the worse of the prompt's and the fit paraphrases' mean) is highest on the fit set:
  the kept set chosen so that the circuit reproduces the answer AND its removal removes it
  ("Global Information Thresholding").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import torch

from ..core.curves import ndf, necessity
from ..core.graph import GraphSpec, prune
from ..engine.metric import compatible_groups
from ..measure.evaluate import Evaluator, complements, metrics_of_tasks

CUTS = ("count", "fill", "git")
# the pruned sizes ``git`` cuts the kept step's logits at, as shares of the budget
GIT_SHARES = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# a cut replaces the learned circuit only when its score is higher by more than this
GIT_TIE = 1e-9


def top_n_circuits(spec: GraphSpec, logits: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    """The top-N circuit of ``logits`` [n_edges] for each N in ``counts`` (ties in edge order, as
    the learning's hard mask), unpruned. # [len(counts), n_forward, n_backward] bool"""
    device = logits.device
    graph = spec.tensors(device)
    order = torch.sort(logits.detach(), descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ranks[order] = torch.arange(order.numel(), device=device)
    wanted = torch.tensor([int(n) for n in counts], device=device)
    kept = ranks[None, :] < wanted[:, None]  # [k, n_edges]
    flat = torch.zeros(len(counts), spec.n_forward * spec.n_backward, dtype=torch.bool, device=device)
    flat[:, graph.flat_edge_index] = kept
    return flat.view(len(counts), spec.n_forward, spec.n_backward)


def pruned_size(spec: GraphSpec, logits: torch.Tensor, count: int) -> int:
    """Edges left in the top-``count`` circuit of ``logits`` once pruned."""
    return int(prune(spec, top_n_circuits(spec, logits, [count])).sum())


def filled_count(spec: GraphSpec, logits: torch.Tensor, target: int) -> int:
    """The largest N (at least ``target``, below every edge) whose top-N circuit of ``logits``
    [n_edges] keeps at most ``target`` edges once pruned (pruning a larger top-N keeps a superset,
    so the size grows with N and a bisection finds it)."""
    low, high = int(target), int(logits.numel()) - 1  # the top-target circuit always fits
    if high <= low:
        return low
    if pruned_size(spec, logits, high) <= target:
        return high
    while high - low > 1:  # pruned(low) <= target < pruned(high)
        middle = (low + high) // 2
        if pruned_size(spec, logits, middle) <= target:
            low = middle
        else:
            high = middle
    return low


def filled_counts(spec: GraphSpec, logits: torch.Tensor, targets: Sequence[int]) -> list[int]:
    """``filled_count`` of each row of ``logits`` [n_budgets, n_edges] for its budget."""
    return [filled_count(spec, row, int(t)) for row, t in zip(logits, targets)]


def _task_values(evaluators: Sequence[Evaluator], circuits: torch.Tensor) -> list[list[float]]:
    """The metric of every circuit [n, n_forward, n_backward] on every task, in padded passes.
    # [n_tasks][n]"""
    found: list[list[float]] = [[] for _ in evaluators]
    for group in compatible_groups([e.prepared for e in evaluators], same_length=False):
        chosen = [evaluators[i] for i in group]
        values = metrics_of_tasks(chosen, circuits[None].expand(len(group), -1, -1, -1), padded=True)
        for index, row in zip(group, values.tolist()):
            found[index] = [float(v) for v in row]
    return found


def _worse_of(values: Sequence[float]) -> float:
    """The worse of the prompt's (first) value and the others' mean (the prompt's alone)."""
    if len(values) == 1:
        return values[0]
    return min(values[0], statistics.fmean(values[1:]))


def git_cut(
    spec: GraphSpec, evaluators: Sequence[Evaluator], logits: torch.Tensor, learned: torch.Tensor, budget: int
) -> tuple[torch.Tensor, dict]:
    """The cut of ``logits`` [n_edges] (the kept step's) whose worse of sufficiency and necessity
    on ``evaluators`` (the prompt first, then the fit paraphrases; never the held-out share) is
    highest, among the learned circuit ``learned`` (pruned, first: it stays on a tie) and the
    largest top-N of each pruned size in ``GIT_SHARES`` of ``budget``.
    Returns (the pruned circuit, {"edges", "sufficiency", "necessity", "learned_score", "score"})."""
    counts = sorted({filled_count(spec, logits, max(1, round(share * budget))) for share in GIT_SHARES})
    cuts = prune(spec, top_n_circuits(spec, logits, counts))
    candidates = torch.cat([learned[None].bool(), cuts])  # [k, n_forward, n_backward]
    values = _task_values(evaluators, torch.cat([candidates, complements(spec, candidates)]))
    k = candidates.shape[0]
    best, record = 0, None
    for c in range(k):
        sufficiency = _worse_of([ndf(row[c], e.baseline) for e, row in zip(evaluators, values)])
        needed = [necessity(row[k + c], e.baseline) for e, row in zip(evaluators, values)]
        needed = [0.0 if v != v else v for v in needed]  # a task with no span counts as not needed
        score = min(sufficiency, _worse_of(needed))
        if record is None:
            record = {"learned_score": score}
        if c == 0 or score > record["score"] + GIT_TIE:
            best = c
            record.update(
                edges=int(candidates[c].sum()),
                sufficiency=sufficiency,
                necessity=_worse_of(needed),
                score=score,
            )
    return candidates[best], record
