"""Score matrices of every (paraphrase, corruption) pair, and the result store's copy of them.

Each pair is scored by the base method (EAP-IG by default) as if it were the task. A pair's
matrix is kept in the run's result store once per (model, dtype, graph, prompt pair, scorer and
its settings), kind "scores", and reused by every method and budget of the family; a run asks
only for the pairs never scored before. The base scorer scores the pairs as one batch
(``methods.bon.pair_scores``): EAP-IG's interpolation steps of pairs of equal token length
share forward and backward passes, and each pair's matrix equals what it computes for the pair
alone.

The checks of a listed pair (kind "pair-check", ``save_pair_checks``) are kept beside them: a pair
the checks left out is never scored, so a rerun of the list is priced without it
(``left_out_before``). A generated source's pairs (templates, an LLM) are kept too, per source
setting (kind "source-pairs", ``save_source_pairs``): a rerun of the same source is priced with
the scores its pairs have stored, and another source's run is not taken for it.
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


def pair_check_key(model, model_id: str, spec: GraphSpec, task: PromptTask, pair: PromptTask) -> str:
    """The store key of the checks of one listed ``pair`` of the prompt ``task`` (the model's
    answer on the prompt decides whether a pair's answer matches)."""
    return prompt_key("pair-check", model, model_id, spec, task, pair=pair.to_dict())


def save_pair_checks(model, model_id: str, spec: GraphSpec, task: PromptTask, pairs, store) -> None:
    """Whether each checked pair (``query.pairs.ParaphrasePair``) may be scored, without and with
    mismatched answers, kept in ``store`` (kind "pair-check") for the next estimate."""
    if store is None:
        return
    for pair in pairs:
        if not pair.checked:
            continue
        try:
            key = pair_check_key(model, model_id, spec, task, pair.task())
        except ValueError:
            continue
        usable = {"usable": pair.usable(False), "usable_mismatched": pair.usable(True)}
        if store.load_state(key, kind="pair-check") != usable:
            store.save_state(key, usable, kind="pair-check")


def left_out_before(
    model, model_id: str, spec: GraphSpec, task: PromptTask, pair: PromptTask, include_mismatched: bool, store
) -> bool:
    """Whether an earlier run's checks left ``pair`` out (``save_pair_checks``); False when no run
    checked it (it is priced as work to do)."""
    if store is None:
        return False
    checks = store.load_state(pair_check_key(model, model_id, spec, task, pair), kind="pair-check")
    if not isinstance(checks, dict):
        return False
    return checks.get("usable_mismatched" if include_mismatched else "usable") is False


# the settings that decide which pairs a generated source gives (and which of them are scored)
SOURCE_SETTINGS = ("paraphrase_source", "n_paraphrases", "seed", "llm_model", "include_mismatched")


def source_pairs_key(model, model_id: str, spec: GraphSpec, task: PromptTask, config) -> str:
    """The store key of the pairs a generated source gave for ``task`` with ``config``'s settings."""
    settings = {name: getattr(config, name, None) for name in SOURCE_SETTINGS}
    return prompt_key("source-pairs", model, model_id, spec, task, source=settings)


def save_source_pairs(model, model_id: str, spec: GraphSpec, task: PromptTask, config, pairs, store) -> None:
    """The paraphrase pairs (``PromptTask``s) a generated source gave and the run scored, kept in
    ``store`` (kind "source-pairs") for the next estimate of the same source (``stored_source_pairs``)."""
    if store is None:
        return
    key = source_pairs_key(model, model_id, spec, task, config)
    state = {"pairs": [pair.to_dict() for pair in pairs]}
    if store.load_state(key, kind="source-pairs") != state:
        store.save_state(key, state, kind="source-pairs")


def stored_source_pairs(
    model, model_id: str, spec: GraphSpec, task: PromptTask, config, store
) -> list[PromptTask] | None:
    """The pairs an earlier run of the same generated source scored (``save_source_pairs``), or
    None when no run of it kept them."""
    if store is None:
        return None
    state = store.load_state(source_pairs_key(model, model_id, spec, task, config), kind="source-pairs")
    if not isinstance(state, dict) or not isinstance(state.get("pairs"), list):
        return None
    try:
        return [PromptTask.from_dict(pair) for pair in state["pairs"]]
    except (KeyError, TypeError, ValueError):  # written by another version
        return None
