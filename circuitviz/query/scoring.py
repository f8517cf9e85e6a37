"""Score matrices of every (paraphrase, corruption) pair, and the result store's copy of them.

Each pair is scored by the base method (EAP-IG by default) as if it were the task. A pair's
matrix is kept in the run's result store once per (model, dtype, graph, prompt pair, scorer and
its settings), kind "scores", and reused by every method and budget of the family; a run asks
only for the pairs never scored before. The base scorer scores the pairs as one batch
(``methods.bon.pair_scores``): EAP-IG's interpolation steps of pairs of equal token length
share forward and backward passes, and each pair's matrix equals what it computes for the pair
alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec
from ..core.tasks import PromptTask, prepare_task
from ..measure.evaluate import Progress
from ..models.adapter import model_device
from ..services.store import ResultStore
from .pool import prompt_key


@dataclass(frozen=True)
class PairScorer:
    """The base method every pair is scored with.

    method: the registered scoring method (its ``name`` keys the store); config: its settings
    (they key the store too); score: (model, spec, prepared pairs, progress) -> one
    [n_forward, n_backward] float32 matrix per pair, zero off the edge mask.
    """

    method: object
    config: object
    score: Callable[..., list[torch.Tensor]]


def score_key(model, model_id: str, spec: GraphSpec, task: PromptTask, method, method_config) -> str:
    """The store key of one pair's score matrix: model, dtype, graph, prompt pair, scorer."""
    scorer_config = {  # as methods.base.config_to_dict: a setting marked omit_default is left out at its default
        item.name: getattr(method_config, item.name)
        for item in dataclasses.fields(method_config)
        if not (item.metadata.get("omit_default") and getattr(method_config, item.name) == item.default)
    }
    return prompt_key("scores", model, model_id, spec, task, scorer=method.name, scorer_config=scorer_config)


def stored_pair_scores(
    model,
    model_id: str,
    spec: GraphSpec,
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
        computed = scorer.score(model, spec, prepared_pairs, progress)
        for index, matrix in zip(missing, computed):
            scores[index] = matrix
            if store is not None:
                store.save_state(
                    keys[index], {"scores": matrix.cpu(), "task": tasks[index].to_dict()}, kind="scores"
                )
    elif progress:
        progress("score", 1.0)
    return [s for s in scores], len(tasks) - len(missing)
