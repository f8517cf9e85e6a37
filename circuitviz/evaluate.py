"""Faithfulness of circuits: patching evaluation batched over many circuits, and its scores.

A circuit C keeps some edges; every other edge carries its source's corrupted output. L(C(q)) is
the metric of that run, L(M(q)) and L(M(q')) the clean and corrupted runs. Many circuits (every
budget of a curve, every Best-of-N candidate) go through the model as one batch, chunked only to
bound memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from .chunks import chunk_size, run_in_chunks
from .engine.capture import clean_and_corrupted, writers_of_prompts
from .engine.memory import evaluation_bytes_per_position
from .engine.metric import batch_compatible, task_metric
from .engine.patching import patched_metrics
from .engine.prefix import shared_prefix
from .graph import GraphSpec, prune, top_n_at_budgets
from .models.adapter import model_device
from .tasks import PreparedTask

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class Baseline:
    """The clean and corrupted metrics a faithfulness score is measured against."""

    clean: float
    corrupted: float


@dataclass(frozen=True)
class CurvePoint:
    """One circuit's faithfulness: budget asked, edges kept after pruning, L(C(q)), NFS, NDF."""

    budget: int
    n_edges: int
    metric: float
    nfs: float
    ndf: float

    def to_dict(self) -> dict:
        return asdict(self)


def nfs(circuit: float, baseline: Baseline) -> float:
    """Normalised faithfulness score (L(C(q)) - L(M(q'))) / (L(M(q)) - L(M(q'))); unbounded."""
    span = baseline.clean - baseline.corrupted
    if span == 0:
        return math.nan
    return (circuit - baseline.corrupted) / span


def ndf(circuit: float, baseline: Baseline) -> float:
    """Normalised deviation faithfulness 1 - min(|(L(M(q)) - L(C(q))) / (L(M(q)) - L(M(q')))|, 1).

    In [0, 1]: 1 when the circuit reproduces the model, 0 when it deviates at least as much as
    the corruption does, whichever direction it deviates in.
    """
    span = baseline.clean - baseline.corrupted
    deviation = baseline.clean - circuit
    if span == 0:
        return 1.0 if deviation == 0 else 0.0
    return 1.0 - min(abs(deviation / span), 1.0)


def area_under_curve(fractions: Sequence[float], values: Sequence[float]) -> float:
    """Trapezoid area over the edge fractions covered, divided by their span (a mean height)."""
    points = sorted(zip(fractions, values))
    if len(points) < 2:
        return float(points[0][1]) if points else math.nan
    area = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(points, points[1:]))
    span = points[-1][0] - points[0][0]
    return area / span if span > 0 else float(points[0][1])


def cpr(curve: Sequence[CurvePoint], n_edges_total: int, score: str = "nfs") -> float:
    """MIB's circuit performance ratio: area under the faithfulness curve (edge fraction axis)."""
    return area_under_curve([p.n_edges / n_edges_total for p in curve], [getattr(p, score) for p in curve])


def cmd(curve: Sequence[CurvePoint], n_edges_total: int, score: str = "nfs") -> float:
    """MIB's circuit-model distance: area of |1 - faithfulness| over the edge fraction."""
    return area_under_curve(
        [p.n_edges / n_edges_total for p in curve], [abs(1 - getattr(p, score)) for p in curve]
    )


class Evaluator:
    """Evaluates circuits of one task on one model; the clean/corrupted runs are done once.

    Everything stays on the model's device: circuits are moved there, metrics come back there.
    ``runs``: the clean and corrupted runs when they were made elsewhere (``evaluators_of_tasks``
    runs a dataset's prompts together): (writers [2, pos, n_forward, d_model], metrics [2]).
    """

    def __init__(
        self,
        model,
        spec: GraphSpec,
        prepared: PreparedTask,
        chunk_size: int | None = None,
        runs: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        self.model = model
        self.spec = spec
        self.prepared = prepared
        self.device = model_device(model)
        writers, metrics = runs if runs is not None else clean_and_corrupted(model, spec, prepared)
        self.clean_writers = writers[:1]  # [1, pos, n_forward, d_model]
        self.corrupted_writers = writers[1:]  # [1, pos, n_forward, d_model]
        clean, corrupted = metrics.tolist()
        self.baseline = Baseline(clean=float(clean), corrupted=float(corrupted))
        self._bytes_per_position = evaluation_bytes_per_position(spec, writers.element_size())
        self._fixed_chunk = chunk_size

    @property
    def chunk_size(self) -> int:
        """How many circuits one patched pass carries (learnt on CUDA after the first pass)."""
        if self._fixed_chunk:
            return self._fixed_chunk
        return min(
            256, chunk_size(self.model, "evaluate", self.prepared.n_positions, self._bytes_per_position)
        )

    def metrics(self, circuits: torch.Tensor, progress: Progress | None = None) -> torch.Tensor:
        """L(C(q)) for each circuit mask in circuits [n_circuits, n_forward, n_backward].

        Returns [n_circuits] on the model's device.
        """
        edge_mask = self.spec.tensors(self.device).edge_mask
        prefix = shared_prefix(self.model, [self.prepared])
        results: list[torch.Tensor] = []
        total = circuits.shape[0]

        def compute(rows: slice) -> torch.Tensor:
            removed = edge_mask & ~circuits[rows].to(self.device).bool()
            return patched_metrics(
                self.model, self.spec, self.prepared, self.corrupted_writers, removed, prefix=prefix
            )

        def commit(rows: slice, values: torch.Tensor) -> None:
            results.append(values)
            if progress:
                progress("evaluate", min(1.0, rows.stop / total))

        run_in_chunks(
            self.model,
            "evaluate",
            total,
            self.prepared.n_positions,
            self._bytes_per_position,
            compute,
            commit,
            max_chunk=self._fixed_chunk or 256,
        )
        if not results:
            return torch.zeros(0, dtype=self.clean_writers.dtype, device=self.device)
        return torch.cat(results)

    def curve(
        self, circuits: torch.Tensor, budgets: Sequence[int], progress: Progress | None = None
    ) -> list[CurvePoint]:
        """A faithfulness point per (budget, circuit mask) pair, all circuits in batched runs
        (a circuit of every edge is the model itself: its metric is the clean run's, no run)."""
        whole = whole_graph(self.spec, circuits).tolist() if len(circuits) else []
        partial = [index for index, complete in enumerate(whole) if not complete]
        measured = iter(self.metrics(circuits[partial], progress).tolist() if partial else [])
        values = [self.baseline.clean if complete else next(measured) for complete in whole]
        sizes = circuits.flatten(1).sum(1).tolist() if len(circuits) else []
        return [
            CurvePoint(
                budget=int(budget),
                n_edges=int(size),
                metric=float(value),
                nfs=nfs(float(value), self.baseline),
                ndf=ndf(float(value), self.baseline),
            )
            for budget, size, value in zip(budgets, sizes, values)
        ]


# ----- several tasks at once (a dataset's prompts of one length) ------------------------------
def _check_batch(tasks: Sequence[PreparedTask]) -> None:
    problem = batch_compatible(tasks)
    if problem is not None:
        raise ValueError(f"These tasks cannot be evaluated in one batch: {problem}.")


def evaluators_of_tasks(model, spec: GraphSpec, tasks: Sequence[PreparedTask]) -> list[Evaluator]:
    """An evaluator per task, their clean and corrupted runs made together in batched passes.

    ``tasks`` must share the prompt length, metric and foil count (``batch_compatible``). Each
    evaluator holds what ``Evaluator(model, spec, task)`` would compute alone (tested).
    """
    tasks = list(tasks)
    _check_batch(tasks)
    evaluators: list[Evaluator | None] = [None] * len(tasks)
    positions = tasks[0].n_positions
    dtype_size = next(model.parameters()).element_size()

    def compute(rows: slice):
        group = tasks[rows]
        tokens = torch.cat([t.clean_tokens for t in group] + [t.corrupted_tokens for t in group])  # [2g, pos]
        owner = torch.arange(len(group), device=model_device(model)).repeat(2)  # clean rows, then corrupted
        return writers_of_prompts(model, spec, None, tokens, task_metric(model, group, owner))

    def commit(rows: slice, result) -> None:
        writers, metrics = result  # [2g, pos, n_forward, d_model], [2g]
        size = rows.stop - rows.start
        for offset in range(size):
            pick = [offset, size + offset]  # this task's clean and corrupted rows
            evaluators[rows.start + offset] = Evaluator(
                model, spec, tasks[rows.start + offset], runs=(writers[pick], metrics[pick])
            )

    run_in_chunks(
        model,
        "evaluate",
        len(tasks),
        2 * positions,
        evaluation_bytes_per_position(spec, dtype_size),
        compute,
        commit,
    )
    return evaluators


def curves_of_tasks(
    evaluators: Sequence[Evaluator],
    circuits: torch.Tensor,
    budgets: Sequence[int],
    progress: Progress | None = None,
) -> list[list[CurvePoint]]:
    """Each task's faithfulness curve, every (task, circuit) pair in shared patched passes.

    circuits: [n_tasks, n_circuits, n_forward, n_backward] bool, row j evaluated on task j;
    ``budgets`` names the circuits of a row. A task's points equal ``Evaluator.curve`` on it
    alone (tested). The tasks must share prompt length, metric and foil count; chunks hold whole
    tasks (every circuit of a task in one pass, beside its corrupted run).
    """
    evaluators = list(evaluators)
    if not evaluators:
        return []
    first = evaluators[0]
    model, spec, device = first.model, first.spec, first.device
    tasks = [e.prepared for e in evaluators]
    _check_batch(tasks)
    n_tasks, n_circuits = int(circuits.shape[0]), int(circuits.shape[1])
    edge_mask = spec.tensors(device).edge_mask
    values: list[torch.Tensor] = []

    def compute(rows: slice) -> torch.Tensor:
        """The circuits of tasks ``rows``, a task's circuits side by side (patched_metrics' groups);
        a circuit of every edge is its model: the clean run's metric, and no column of circuits
        that are all whole runs. # [g k]"""
        group = evaluators[rows]
        chosen = circuits[rows].to(device).bool()  # [g, k, n_forward, n_backward]
        whole = whole_graph(spec, chosen)  # [g, k]
        baselines = [e.baseline.clean for e in group]
        clean = torch.tensor(baselines, device=device, dtype=first.clean_writers.dtype)
        values = clean[:, None].repeat(1, n_circuits)  # [g, k]
        run = (~whole).any(0).nonzero()[:, 0]  # the circuits some task of the chunk needs a run for
        if len(run):
            owner = torch.arange(len(group), device=device).repeat_interleave(len(run))  # [g k']
            removed = edge_mask & ~chosen[:, run].reshape(-1, spec.n_forward, spec.n_backward)
            tokens = torch.cat([e.prepared.clean_tokens for e in group]).to(device)[owner]  # [g k', pos]
            corrupted = torch.cat([e.corrupted_writers for e in group])  # [g, pos, n_forward, d_model]
            metric = task_metric(model, tasks[rows], owner)
            prefix = shared_prefix(model, tasks[rows])
            measured = patched_metrics(model, spec, None, corrupted, removed, tokens, metric, prefix)
            values[:, run] = torch.where(whole[:, run], values[:, run], measured.view(len(group), len(run)))
        return values.flatten()

    def commit(rows: slice, result: torch.Tensor) -> None:
        values.append(result)
        if progress:
            progress("evaluate", min(1.0, rows.stop / n_tasks))

    per_position = evaluation_bytes_per_position(spec, first.clean_writers.element_size())
    run_in_chunks(
        model,
        "evaluate",
        n_tasks,
        n_circuits * tasks[0].n_positions,
        per_position,
        compute,
        commit,
        max(1, 256 // max(n_circuits, 1)),
    )
    metrics = torch.cat(values).view(n_tasks, n_circuits).tolist() if n_circuits else [[]] * n_tasks
    sizes = circuits.flatten(2).sum(2).tolist()  # [n_tasks, n_circuits]
    return [
        [
            CurvePoint(
                budget=int(budget),
                n_edges=int(size),
                metric=float(value),
                nfs=nfs(float(value), evaluator.baseline),
                ndf=ndf(float(value), evaluator.baseline),
            )
            for budget, size, value in zip(budgets, task_sizes, task_values)
        ]
        for evaluator, task_sizes, task_values in zip(evaluators, sizes, metrics)
    ]


def whole_graph(spec: GraphSpec, circuits: torch.Tensor) -> torch.Tensor:
    """Whether each circuit keeps every edge of the graph (patching it changes nothing).
    circuits: [..., n_forward, n_backward] bool. # [...] bool"""
    removed = spec.tensors(circuits.device).edge_mask & ~circuits.bool()
    return ~removed.flatten(-2).any(-1)


def circuits_at_budgets(
    spec: GraphSpec, scores: torch.Tensor, budgets: Sequence[int], prune_dead: bool = True
) -> torch.Tensor:
    """Top-N circuits of one score matrix at every budget, from one sort, on the scores' device.

    Returns [n_budgets, n_forward, n_backward] bool.
    """
    if not len(budgets):
        return torch.zeros(0, spec.n_forward, spec.n_backward, dtype=torch.bool, device=scores.device)
    masks = top_n_at_budgets(spec, scores, budgets)
    return prune(spec, masks) if prune_dead else masks
