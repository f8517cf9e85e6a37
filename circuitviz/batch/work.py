"""The work a batch hands to an executor, and the functions that do it on a loaded model.

Executors differ only in where these functions run (this process, or Ray workers that each load
the model once); the work and its results are plain, picklable values, so both give the same
results. A group is several tasks of one prompt length, metric and foil count under one method
and config: ``Method.run_batch`` runs them in shared passes. When a group fails, its tasks run one
by one, so one bad task is recorded with its reason and never takes its neighbours with it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.curves import CurvePoint
from ..core.graph import GraphSpec
from ..core.results import CircuitResult
from ..core.tasks import DEFAULT_MAX_TOKENS, prepare_task
from ..engine.prefix import unchanged_prefix
from ..entry.request import Request
from ..entry.spaces import missing_spaces
from ..measure.evaluate import curves_of_tasks, evaluators_of_tasks
from ..measure.task_validity import gap_problem
from ..methods import RunContext, get_method
from ..models import check_model_name, load_model
from ..models.adapter import adapter_of, backend_of, model_device, model_dtype
from ..models.catalog import looks_like_path
from .dataset import Dataset, DatasetError, DatasetTask
from .generate import generated_dataset
from .mmlu_tasks import mmlu_tasks

Progress = Callable[[float], None]  # fraction of the current piece of work done
MAX_REASON = 300


@dataclass(frozen=True)
class ModelSource:
    """How an executor (or each Ray worker) gets the model: ``models.load_model(model_id, device,
    dtype, backend)``, or ``factory()`` when given (a picklable callable: tests' tiny models)."""

    model_id: str
    device: str | None = None
    dtype: str | None = None
    factory: Callable[[], Any] | None = None
    backend: str | None = None  # "hooked" or "bridge"; None: load_model's choice

    def load(self):
        if self.factory is not None:
            return self.factory()
        return load_model(self.model_id, device=self.device, dtype=self.dtype, backend=self.backend)

    def check(self, here: bool = True) -> None:
        """ModelLoadError for a ``model_id`` the load would refuse by its name alone, before the
        batch says "loading <model> ..." (``models.check_model_name``). ``here`` False: Ray's
        workers load it, maybe on other machines, so a path is theirs to find."""
        if self.factory is None and (here or not looks_like_path(self.model_id.strip())):
            check_model_name(self.model_id)


@dataclass(frozen=True)
class ModelInfo:
    """What the driver needs to know of the model the workers hold (keys and the table)."""

    model_id: str
    dtype: str
    device: str
    graph: dict  # GraphSpec.to_cfg_dict()
    backend: str = "hooked"  # models.adapter.backend_of: part of the bridge's store keys

    @property
    def spec(self) -> GraphSpec:
        return GraphSpec.from_cfg_dict(self.graph)


def model_info(model, model_id: str) -> ModelInfo:
    spec = adapter_of(model).spec
    device = str(next(model.parameters()).device)
    return ModelInfo(
        model_id=model_id,
        dtype=str(model_dtype(model)),
        device=device,
        graph=spec.to_cfg_dict(),
        backend=backend_of(model),
    )


def reason(error: BaseException) -> str:
    """An error as the one sentence a table row keeps: a user's error as it is worded, anything
    else with its type, both cut to ``MAX_REASON`` characters."""
    text = " ".join(str(error).split())
    if not isinstance(error, ValueError):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def worker_name() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


# ----- planning: which tasks may share passes ---------------------------------------------------
def task_shapes(model, tasks: list[DatasetTask], max_tokens: int = DEFAULT_MAX_TOKENS) -> list:
    """Each task's (shape, its answer and foils without their leading space:
    ``entry.spaces.missing_spaces``, its answer's chance: ``answer_chances``), or the sentence why
    it cannot run. The shape is (prompt length, metric, foil count, unchanged prefix): tasks of one shape share passes; sharing the prefix too
    (the positions before the corruption, which a pass runs once: ``activations.shared_prefix``)
    keeps a group from running the positions one task skips for the sake of another."""
    shapes: list = []
    for item in tasks:
        try:
            prepared = prepare_task(model, item.task, max_tokens, need_corrupted=False)
            prefix = unchanged_prefix(prepared)
            shape = (prepared.n_positions, item.task.metric, len(prepared.foil_ids), prefix)
            shapes.append((shape, missing_spaces(model, item.task)))
        except ValueError as error:
            shapes.append(reason(error))
    fits = [i for i, shape in enumerate(shapes) if not isinstance(shape, str)]
    for i, chance in zip(fits, answer_chances(model, [tasks[i].task for i in fits])):
        shapes[i] = (*shapes[i], chance)
    return shapes


CHANCE_ROWS = 16  # prompts per pass of ``answer_chances``


@torch.no_grad()
def answer_chances(model, tasks: list) -> list[tuple[float, str, float] | None]:
    """``proposals.answer_chance`` of each task (the answer's probability after the clean prompt,
    the top token, its probability; None when the answer is not one token), in passes of
    ``CHANCE_ROWS`` prompts padded at the end to one length (causal attention: the padding
    changes nothing a prompt's last position holds). One prompt at a time took 0.15 s each on
    SmolLM2-135M (one CPU thread), most of the tokenize step; 20 prompts in one pass 0.85 s."""
    from ..core.tasks import TaskError, single_token_id
    from ..engine.metric import logits_from_residual
    from ..engine.prefix import final_residual

    found: list[tuple[float, str, float] | None] = [None] * len(tasks)
    wanted = []
    for index, task in enumerate(tasks):
        try:
            wanted.append((index, single_token_id(model, task.answer, "answer")))
        except TaskError:
            continue
    device = model_device(model)
    adapter = adapter_of(model)
    for start in range(0, len(wanted), CHANCE_ROWS):
        piece = wanted[start : start + CHANCE_ROWS]
        rows = [adapter.to_tokens(tasks[index].clean)[0].to(device) for index, _ in piece]
        width = max(len(row) for row in rows)
        tokens = torch.stack(
            [torch.cat([row, row.new_full((width - len(row),), int(row[-1]))]) for row in rows]
        )
        last = torch.tensor([len(row) - 1 for row in rows], device=device)
        residual = final_residual(model, tokens, [], last=last)  # [rows, d_model]
        probabilities = torch.softmax(
            logits_from_residual(model, residual).float(), dim=-1
        )  # [rows, d_vocab]
        tops = probabilities.argmax(dim=-1).tolist()
        names = [adapter.decode([top]) for top in tops]  # as the logit lens names a token
        for row, ((index, answer_id), top, name) in enumerate(zip(piece, tops, names)):
            # the answer's own token at the top is named as the answer is written: on a word-level
            # tokenizer ' Mary' is the token 'Mary', and the two texts read as two tokens
            name = tasks[index].answer if top == answer_id else name
            found[index] = (float(probabilities[row, answer_id]), name, float(probabilities[row, top]))
    return found


# ----- discovery --------------------------------------------------------------------------------
@dataclass
class WorkGroup:
    """Tasks of one shape under one method and config: (item number, task) each."""

    method: str
    config: dict
    budgets: list[int]
    items: list[tuple[int, DatasetTask]]
    max_tokens: int = DEFAULT_MAX_TOKENS


@dataclass
class Outcome:
    """One item's result, or the sentence why it has none; ``seconds``: its share of the group's
    wall time; ``worker``: host and process that ran it."""

    item: int
    result: CircuitResult | None
    error: str | None
    seconds: float
    worker: str
    batch_tasks: int = 1


def _one_by_one(method, contexts, config, budgets) -> list[tuple[CircuitResult | None, str | None]]:
    found = []
    for ctx in contexts:
        try:
            found.append((method.run(ctx, config, budgets), None))
        except Exception as error:  # a task's failure is its row's reason, never the batch's end
            found.append((None, reason(error)))
    return found


def _meaningful(model, contexts, items, outcomes, worker) -> tuple[list, list]:
    """The contexts whose corruption clearly lowers the metric (``task_validity``), each with its
    evaluator made (the group's clean and corrupted runs, batched; ``run_many`` reuses them); the
    others leave with their reason as their outcome."""
    ready, kept, unchecked = [], [], []
    for ctx, item in zip(contexts, items):
        if not ctx.task.corrupted:  # a method that needs none (ACC++): no gap to check
            unchecked.append((ctx, item))
            continue
        try:
            ctx.prepared(True)
        except ValueError as error:
            outcomes.append(Outcome(item, None, reason(error), 0.0, worker))
            continue
        ready.append(ctx)
        kept.append(item)
    passing = [ctx for ctx, _ in unchecked]
    passing_items = [item for _, item in unchecked]
    if not ready:
        return passing, passing_items
    spec = adapter_of(model).spec
    for ctx, evaluator in zip(ready, evaluators_of_tasks(model, spec, [c.prepared(True) for c in ready])):
        ctx._evaluator = evaluator
    for ctx, item in zip(ready, kept):
        problem = gap_problem(ctx.task, ctx.evaluator.baseline.clean, ctx.evaluator.baseline.corrupted)
        if problem:
            outcomes.append(Outcome(item, None, problem, 0.0, worker))
        else:
            passing.append(ctx)
            passing_items.append(item)
    return passing, passing_items


def run_group(
    model, model_id: str, group: WorkGroup, store=None, progress: Progress | None = None
) -> list[Outcome]:
    """Run a group's method on its tasks (shared passes where the method has them)."""
    start = time.perf_counter()
    worker = worker_name()
    method = get_method(group.method)
    config = method.make_config(group.config)
    budgets = sorted({int(b) for b in group.budgets})
    contexts, items, outcomes = [], [], []
    for item, dataset_task in group.items:
        ctx = RunContext(model, dataset_task.task, model_id, store, None, group.max_tokens)
        try:
            ctx.prepared(method.needs_corrupted)
        except ValueError as error:
            outcomes.append(Outcome(item, None, reason(error), 0.0, worker))
            continue
        contexts.append(ctx)
        items.append(item)
    contexts, items = _meaningful(model, contexts, items, outcomes, worker)
    if contexts:
        try:  # what a single request would be refused for, the batch refuses too (limits.py)
            Request.for_model(
                model, contexts[0].task, method.name, config, budgets, model_id, group.max_tokens
            ).priced(model).check()
        except ValueError as error:
            found = [(None, reason(error))] * len(contexts)
        else:
            try:
                results = method.run_batch(
                    contexts, config, budgets, (lambda _, part: progress(part)) if progress else None
                )
                found = [(result, None) for result in results]
            except Exception:  # noqa: BLE001  (a failing task: find it by running them one by one)
                fresh = [RunContext(model, c.task, model_id, store, None, group.max_tokens) for c in contexts]
                found = _one_by_one(method, fresh, config, budgets)
        share = (time.perf_counter() - start) / max(len(group.items), 1)
        for item, (result, error) in zip(items, found):
            outcomes.append(Outcome(item, result, error, share, worker, len(contexts)))
    return sorted(outcomes, key=lambda outcome: outcome.item)


# ----- consensus circuits on every task ---------------------------------------------------------
@dataclass
class MaskGroup:
    """Circuits (edge index lists, one per label) to evaluate on tasks of one shape."""

    masks: dict[str, list[int]]  # label -> edge indices (GraphSpec.edge_index order)
    items: list[tuple[int, DatasetTask]]
    max_tokens: int = DEFAULT_MAX_TOKENS
    labels: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.labels = list(self.masks)


def masks_tensor(spec: GraphSpec, masks: dict[str, list[int]], device) -> torch.Tensor:
    """Membership of each circuit.  # [n_circuits, n_forward, n_backward] bool"""
    forward, backward = spec.tensors(device).edge_index
    circuits = torch.zeros(len(masks), spec.n_forward, spec.n_backward, dtype=torch.bool, device=device)
    for row, edges in enumerate(masks.values()):
        index = torch.as_tensor(edges, dtype=torch.long, device=device)
        circuits[row, forward[index], backward[index]] = True
    return circuits


def evaluate_group(model, group: MaskGroup) -> list[tuple[int, list[CurvePoint] | None, str | None]]:
    """Every circuit of the group on every task of it: (item, a point per circuit, or the reason)."""
    spec = adapter_of(model).spec
    device = next(model.parameters()).device
    prepared, items, found = [], [], []
    for item, dataset_task in group.items:
        try:
            prepared.append(prepare_task(model, dataset_task.task, group.max_tokens))
            items.append(item)
        except ValueError as error:
            found.append((item, None, reason(error)))
    if prepared:
        circuits = masks_tensor(spec, group.masks, device)
        evaluators = evaluators_of_tasks(model, spec, prepared)
        stacked = circuits[None].expand(len(prepared), -1, -1, -1)
        budgets = [len(edges) for edges in group.masks.values()]
        for item, evaluator, points in zip(items, evaluators, curves_of_tasks(evaluators, stacked, budgets)):
            problem = gap_problem(
                evaluator.prepared.task, evaluator.baseline.clean, evaluator.baseline.corrupted
            )
            found.append((item, None, problem) if problem else (item, points, None))
    return sorted(found, key=lambda entry: entry[0])


def generate(model, family: str, n: int, seed: int, max_tokens: int, subjects=()) -> Dataset:
    """Tasks made on the model: a template family's (``generated_dataset``: n that pass the validity check), or MMLU's questions of
    ``subjects`` (``mmlu_tasks``: n valid tasks per subject, the selection in ``summary``)."""
    if family == "mmlu":
        if not subjects:
            raise DatasetError("MMLU needs subjects; name them, e.g. --subjects marketing,astronomy, or all.")
        return mmlu_tasks(model, list(subjects), n, seed, max_tokens)
    if subjects:
        raise DatasetError(f"Subjects are for MMLU only; the {family} family has none.")
    return generated_dataset(model, family, n, seed, max_tokens)
