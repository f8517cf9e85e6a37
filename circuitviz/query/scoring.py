"""Score matrices of every (paraphrase, corruption) pair, and the result store's copy of them.

Each pair is scored by the base method (EAP-IG by default) as if it were the task. A pair's
matrix is kept in the run's result store once per (model, dtype, graph, prompt pair, scorer and
its settings), kind "scores", and reused by every method and budget of the family; a run asks
only for the pairs never scored before. EAP-IG on the inputs is batched across pairs of equal
token length (``batched_ig_scores``): their interpolation steps share forward and backward
passes, and each pair's matrix equals what the scorer computes for it alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..engine.capture import writers_of_prompts
from ..engine.scores import batched_gradient_scores
from ..evaluate import Progress
from ..graph import GraphSpec
from ..models.adapter import model_device, model_dtype
from ..models.devices import working_memory_bytes
from ..store import ResultStore
from ..tasks import PreparedTask, PromptTask, prepare_task
from .pool import prompt_key

# memory for the writer outputs of paraphrases captured in one batch (bytes)
_CAPTURE_BYTES = 1e9


@dataclass(frozen=True)
class PairScorer:
    """The base method every pair is scored with.

    method: the registered scoring method (its ``name`` keys the store); config: its settings
    (they key the store too); score: (model, spec, prepared task, prepared pairs, progress) ->
    one [n_forward, n_backward] float32 matrix per pair, zero off the edge mask.
    """

    method: object
    config: object
    score: Callable[..., list[torch.Tensor]]


def score_key(model, model_id: str, spec: GraphSpec, task: PromptTask, method, method_config) -> str:
    """The store key of one pair's score matrix: model, dtype, graph, prompt pair, scorer."""
    scorer_config = dataclasses.asdict(method_config)
    return prompt_key("scores", model, model_id, spec, task, scorer=method.name, scorer_config=scorer_config)


def batched_ig_scores(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    pairs: list[PreparedTask],
    steps: int,
    progress: Progress | None = None,
) -> list[torch.Tensor]:
    """EAP-IG (inputs) scores of many pairs of equal token length, their steps in shared batches.

    Computes exactly what the registered ``eap-ig`` computes for each pair alone (tested): the
    gradient at k/m of the way from the corrupted to the clean embedding, k = 1..m, averaged,
    times the corrupted-minus-clean writer outputs. A batch holds the steps of several pairs;
    their gradients are summed per pair and contracted with each pair's differences in one
    batched product per layer.  # each [n_forward, n_backward], on the model's device
    """
    dtype, device = model_dtype(model), model_device(model)
    positions = pairs[0].n_positions
    per_sequence = positions * spec.n_forward * spec.d_model * torch.finfo(dtype).bits // 8
    capture = max(1, int(min(_CAPTURE_BYTES, working_memory_bytes(device) / 2) // max(2 * per_sequence, 1)))
    scores: list[torch.Tensor] = []
    done = 0
    for start in range(0, len(pairs), capture):
        group = pairs[start : start + capture]
        tokens = torch.cat([p.clean_tokens for p in group] + [p.corrupted_tokens for p in group])
        writers, _ = writers_of_prompts(model, spec, prepared, tokens)  # [2g, pos, n_fwd, d]
        clean, corrupted = writers[: len(group)], writers[len(group) :]

        def report(phase, fraction, done=done, size=len(group) * steps):
            if progress:
                progress(phase, (done + fraction * size) / (len(pairs) * steps))

        # each pair scored with its own answer and foils: the task's, as every pair keeps them
        scores += list(batched_gradient_scores(model, spec, group, clean, corrupted, steps, report))
        done += len(group) * steps
    return scores


def stored_pair_scores(
    model,
    model_id: str,
    spec: GraphSpec,
    prepared: PreparedTask,
    tasks: list[PromptTask],
    scorer: PairScorer,
    store: ResultStore | None,
    progress: Progress | None,
    max_tokens: int,
) -> tuple[list[torch.Tensor], int]:
    """Score matrices of the pairs, from the store when computed before. Returns (scores, how
    many came from the store); new ones are stored (kind "scores")."""
    keys = [score_key(model, model_id, spec, task, scorer.method, scorer.config) for task in tasks]
    scores: list[torch.Tensor | None] = [None] * len(tasks)
    if store is not None:
        for index, key in enumerate(keys):
            state = store.load_state(key, kind="scores")
            matrix = state.get("scores") if isinstance(state, dict) else None
            if isinstance(matrix, torch.Tensor) and tuple(matrix.shape) == (spec.n_forward, spec.n_backward):
                scores[index] = matrix.float().to(model_device(model))
    missing = [i for i, matrix in enumerate(scores) if matrix is None]
    if missing:
        prepared_pairs = [prepare_task(model, tasks[i], max_tokens=max_tokens) for i in missing]
        computed = scorer.score(model, spec, prepared, prepared_pairs, progress)
        for index, matrix in zip(missing, computed):
            scores[index] = matrix
            if store is not None:
                store.save_state(
                    keys[index], {"scores": matrix.cpu(), "task": tasks[index].to_dict()}, kind="scores"
                )
    elif progress:
        progress("score", 1.0)
    return [s for s in scores], len(tasks) - len(missing)
