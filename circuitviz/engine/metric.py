"""Metric objects: what a task measures at the last position, for one task or a batch of many.

A metric maps the final residual at the last position to one number per row. ``LogitDifference``
is logit(answer) - mean(logit(foils)); ``LogProbability`` and ``Probability`` read the answer's
log-probability or probability under the full softmax. Tasks name their metric (``PromptTask.
metric``, one of ``tasks.METRICS``); ``metric_named`` turns the name into its object, and
``task_metric`` binds it to the tasks of a batch (one task is a batch of one).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from ..core.tasks import METRICS
from ..models.adapter import adapter_of

if TYPE_CHECKING:
    from ..core.tasks import PreparedTask

RowsMetric = Callable[[torch.Tensor], torch.Tensor]  # final residual [batch, d_model] -> [batch]


@dataclass(frozen=True)
class Metric(ABC):
    """One way of scoring the answer; subclasses say how."""

    name: ClassVar[str]
    label: ClassVar[str]
    needs_foils: ClassVar[bool] = False

    @abstractmethod
    def of_residual(self, adapter, residual: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The metric of each row. residual: [batch, d_model]; ids: the answer then the foils,
        [1 + n_foils] for every row alike or [batch, 1 + n_foils] for each row its own. Returns
        [batch]."""


@dataclass(frozen=True)
class LogitDifference(Metric):
    name: ClassVar[str] = "logit_diff"
    label: ClassVar[str] = "logit difference"
    needs_foils: ClassVar[bool] = True

    def of_residual(self, adapter, residual, ids):
        logits = adapter.unembed(residual, ids)  # [batch, 1 + n_foils]
        return logits[:, 0] - logits[:, 1:].mean(-1)


@dataclass(frozen=True)
class LogProbability(Metric):
    name: ClassVar[str] = "logprob"
    label: ClassVar[str] = "log-probability of the answer"

    def of_residual(self, adapter, residual, ids):
        logprob = torch.log_softmax(adapter.unembed(residual).float(), dim=-1)  # [batch, d_vocab]
        if ids.dim() == 1:
            return logprob[:, ids[0]]
        return logprob.gather(1, ids[:, :1])[:, 0]


@dataclass(frozen=True)
class Probability(LogProbability):
    name: ClassVar[str] = "prob"
    label: ClassVar[str] = "probability of the answer"

    def of_residual(self, adapter, residual, ids):
        return super().of_residual(adapter, residual, ids).exp()


_METRICS: dict[str, Metric] = {m.name: m for m in (LogitDifference(), LogProbability(), Probability())}
assert tuple(_METRICS) == METRICS, "tasks.METRICS and the metric objects must name the same metrics"


def metric_named(name: str) -> Metric:
    """The metric object of a task's metric name (one sentence when there is none)."""
    try:
        return _METRICS[name]
    except KeyError:
        raise ValueError(f"Unknown metric {name!r}; choose one of {', '.join(METRICS)}.") from None


def _batch_key(task: PreparedTask, same_length: bool) -> tuple:
    return (task.n_positions if same_length else None, task.task.metric, len(task.foil_ids))


def batch_compatible(tasks: Sequence[PreparedTask], same_length: bool = True) -> str | None:
    """Why these tasks cannot share a batched pass, or None when they can.

    A batch of several tasks needs one prompt length (its sequences are stacked), one metric and
    one number of foils (each row's metric is then the same formula with its own token ids).
    ``same_length`` False: prompts of other lengths may share it, padded at the end to the longest
    (``patching.masked_residual``; each row's metric read at its own last position).
    """
    if not tasks:
        return "no tasks were given"
    first = tasks[0]
    for task in tasks[1:]:
        if _batch_key(task, same_length) != _batch_key(first, same_length):
            return (
                "tasks of one batch must share the prompt length, the metric and the number of foils "
                f"({first.n_positions} tokens, {first.task.metric}, {len(first.foil_ids)} foils first; "
                f"then {task.n_positions} tokens, {task.task.metric}, {len(task.foil_ids)} foils)"
            )
    return None


def compatible_groups(tasks: Sequence[PreparedTask], same_length: bool = True) -> list[list[int]]:
    """The tasks' indices in groups that can share a batched pass (``batch_compatible``: one
    prompt length, unless ``same_length`` is False, one metric and one number of foils), each
    group in the tasks' order, groups in the order of their first task."""
    groups: dict[tuple, list[int]] = {}
    for index, task in enumerate(tasks):
        groups.setdefault(_batch_key(task, same_length), []).append(index)
    return list(groups.values())


def task_metric(
    model, tasks: Sequence[PreparedTask], owner: torch.Tensor | None = None, same_length: bool = True
) -> RowsMetric:
    """The metric of a batch whose row b belongs to ``tasks[owner[b]]``, each row scored with its
    own task's answer and foils. ``owner`` None: every row is ``tasks[0]``'s (one task's batch).

    ``tasks`` must pass ``batch_compatible`` (with ``same_length``: a padded batch's residual is
    each row's own last position's). Returns residual [batch, d_model] -> [batch].
    """
    problem = batch_compatible(tasks, same_length)
    if problem is not None:
        raise ValueError(f"These tasks cannot run in one batch: {problem}.")
    adapter = adapter_of(model)
    metric = metric_named(tasks[0].task.metric)
    ids = torch.tensor([(t.answer_id, *t.foil_ids) for t in tasks], device="cpu")  # [n, 1 + f]

    def rows(residual: torch.Tensor) -> torch.Tensor:
        per_task = ids.to(residual.device)
        # [batch, 1 + f], or one task's [1 + f] for every row (the cheaper unembedding)
        chosen = per_task[owner.to(residual.device)] if owner is not None else per_task[0]
        return metric.of_residual(adapter, residual, chosen)

    return rows


def metric_from_residual(model, prepared: PreparedTask, residual: torch.Tensor) -> torch.Tensor:
    """One task's metric of every row of ``residual`` [batch, d_model].  # [batch]"""
    return task_metric(model, [prepared])(residual)


def logits_from_residual(model, residual: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
    """Logits from the final residual at one position (``ModelAdapter.unembed``).
    residual: [batch, d_model] -> [batch, k] for ``ids`` [k] or [batch, k], else [batch, d_vocab]."""
    return adapter_of(model).unembed(residual, ids)
