"""Scoring many tasks with one registered scorer: the methods that score edges, and the score
matrices of many prepared tasks in shared passes.

Best-of-N scores the prompt and its paraphrase pairs, the ensemble its members on the prompt and
its paraphrases, Edge Pruning warm-starts from a scorer: all three reach the scorer here, one
home below them (the registry and ``ScoringMethod.score_batch``), not through one another.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.graph import GraphSpec
from ..core.tasks import PreparedTask
from ..engine.score_checks import require_finite_scores
from ..measure.evaluate import Evaluator, evaluators_of_tasks
from ..models.adapter import model_dtype
from ..models.devices import model_working_memory_bytes
from .base import GRADIENT_SETUP_PASSES, Cost, Progress, RunContext, ScoringMethod
from .registry import available_methods


def scorer_names() -> list[str]:
    """The registered methods that score edges (what ``base_method`` may name)."""
    return sorted(name for name, method in available_methods().items() if isinstance(method, ScoringMethod))


# memory for the writer outputs of the pairs whose clean and corrupted runs are held at once (bytes)
_CAPTURE_BYTES = 1e9


def _capture_size(model, spec: GraphSpec, n_positions: int) -> int:
    """How many pairs' clean and corrupted writer outputs one group holds."""
    per_sequence = n_positions * spec.n_forward * spec.d_model * torch.finfo(model_dtype(model)).bits // 8
    budget = min(_CAPTURE_BYTES, model_working_memory_bytes(model) / 2)
    return max(1, int(budget // max(2 * per_sequence, 1)))


def pair_scores(
    model,
    spec: GraphSpec,
    pairs: list[PreparedTask],
    method: ScoringMethod,
    method_config,
    progress: Progress | None = None,
    evaluators: Sequence[Evaluator] | None = None,
) -> list[torch.Tensor]:
    """Score matrices of pairs with the base scorer's ``score_batch``: pairs of equal length in
    groups, each group's clean and corrupted runs made together and scored as one batch (EAP and
    EAP-IG share their gradient passes between the pairs; any other scorer goes pair by pair).
    ``evaluators``: the pairs' evaluators when the caller made them already (one per pair, in
    order); their clean and corrupted runs are read, not made again.

    Every pair must share the task's answer, foils and metric.  # each [n_forward, n_backward] float32
    """
    results: list[torch.Tensor | None] = [None] * len(pairs)
    by_length: dict[int, list[int]] = {}
    for index, pair in enumerate(pairs):
        by_length.setdefault(pair.n_positions, []).append(index)
    done = 0
    for positions, members in sorted(by_length.items()):
        capture = _capture_size(model, spec, positions)
        for start in range(0, len(members), capture):
            group = members[start : start + capture]

            def report(phase, fraction, done=done, size=len(group)):
                if progress:
                    progress(phase, (done + fraction * size) / len(pairs))

            contexts = [RunContext.of_prepared(model, pairs[i]) for i in group]
            # the group's clean and corrupted runs say before each block that its scoring is
            # under way: a Cancel is heard inside them (Best-of-N's were silent, 1-9 s a group)
            check = (lambda report=report: report("score", 0.0)) if progress else None
            made = (
                [evaluators[i] for i in group]
                if evaluators is not None
                else evaluators_of_tasks(model, spec, [pairs[i] for i in group], check=check)
            )
            for ctx, evaluator in zip(contexts, made):
                ctx._evaluator = evaluator
            for index, (matrix, _) in zip(group, method.score_batch(contexts, method_config, report)):
                results[index] = matrix
            done += len(group)
    for matrix in results:
        require_finite_scores(matrix, spec, method.name, model)
    return [(matrix.float() * spec.tensors(matrix.device).edge_mask).nan_to_num(0.0) for matrix in results]


def shares_gradient_passes(method) -> bool:
    """Whether ``method`` scores several tasks in shared gradient passes (EAP, EAP-IG, RelP write
    ``score_batch``); any other scorer goes task by task (``ScoringMethod.score_batch``)."""
    return isinstance(method, ScoringMethod) and type(method).score_batch is not ScoringMethod.score_batch


def tasks_scoring_cost(
    method, per_task: Cost, tasks: int, lengths: float
) -> tuple[float, int | tuple[int, ...]]:
    """(passes, ``Cost.gradient_rows``) of scoring ``tasks`` tasks with ``method`` through
    ``pair_scores``, each counted as ``per_task`` (the method's own cost of one task, no curve) and
    ``lengths`` the tasks' tokens in prompts' lengths.

    A scorer that shares its passes runs the tasks' rows (IG steps) as one batched gradient pass:
    one set-up, and ``limits.estimate_run`` adds one a chunk the device's memory cuts the rows
    into (a chunk holds 37 rows of the IOI prompt on Gemma-3-270M, 12 on SmolLM2-135M). Counted
    a set-up a task and no chunk, ten pairs of 20 steps were 4 set-ups over on Gemma and 7 short
    on SmolLM2, and more where a longer prompt or less memory cuts the rows finer. Any other
    scorer pays its set-up and chunks once a task."""
    tasks = max(int(tasks), 0)
    rows = per_task.gradient_rows if isinstance(per_task.gradient_rows, int) else 0
    if tasks == 0:
        return 0.0, 0
    if not rows or not shares_gradient_passes(method):
        return per_task.passes * lengths, (tuple([rows] * tasks) if rows else 0)
    setup = GRADIENT_SETUP_PASSES * lengths / tasks  # one set-up, over the tasks' mean length
    return (per_task.passes - GRADIENT_SETUP_PASSES) * lengths + setup, rows * tasks
