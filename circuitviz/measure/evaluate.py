"""Faithfulness of circuits: patching evaluation batched over many circuits, and its scores.

A circuit C keeps some edges; every other edge carries its source's corrupted output. L(C(q)) is
the metric of that run, L(M(q)) and L(M(q')) the clean and corrupted runs. Many circuits (every
budget of a curve, every Best-of-N candidate) go through the model as one batch, chunked only to
bound memory.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from ..core.curves import Baseline, CurvePoint, ndf, necessity, nfs
from ..core.graph import GraphSpec, prune, top_n_at_budgets
from ..core.tasks import PreparedTask
from ..engine.capture import writers_residual_and_raw_heads
from ..engine.layer_start import CleanState, clean_state, rows_from_layer, start_layer
from ..engine.memory import evaluation_bytes_per_position
from ..engine.metric import batch_compatible, task_metric
from ..engine.patching import padded_to, patched_metrics
from ..engine.prefix import final_residual, shared_prefix
from ..models.adapter import adapter_of, model_device, model_dtype
from ..positions.graph import unit_mask
from .chunks import chunk_size, run_in_chunks

Progress = Callable[[str, float], None]


def complements(spec: GraphSpec, circuits: torch.Tensor) -> torch.Tensor:
    """Every edge (or (edge, position) unit) of the graph outside each circuit: evaluating it as a
    circuit patches exactly the circuit's own (what necessity measures).
    circuits [..., n_forward, n_backward(, pos)] bool."""
    return graph_members(spec, circuits, circuits.device) & ~circuits.bool()


def _point(budget, size, value, without, baseline: Baseline) -> CurvePoint:
    """A curve point from L(C(q)) and, when measured, L((M\\C)(q))."""
    return CurvePoint(
        budget=int(budget),
        n_edges=int(size),
        metric=float(value),
        nfs=nfs(float(value), baseline),
        ndf=ndf(float(value), baseline),
        necessity=math.nan if without is None else necessity(float(without), baseline),
        metric_without=math.nan if without is None else float(without),
    )


class Evaluator:
    """Evaluates circuits of one task on one model; the clean/corrupted runs are done once.

    Everything stays on the model's device: circuits are moved there, metrics come back there.
    ``runs``: the clean and corrupted runs when they were made elsewhere (``evaluators_of_tasks``
    runs a dataset's prompts together): (writers [2, pos, n_forward, d_model], metrics [2],
    final residuals at the last position [2, d_model], raw heads [2, pos, n_layers * n_heads,
    d_model] or None); without them the task runs as a batch of one (the same
    ``evaluators_of_tasks``). Raw heads (before a shared post-attention norm) exist only on models
    with such a norm; the corrupted run's let the patching renormalise each reader's mix. The clean final residual is kept for what else reads
    the clean run (the next-token distribution) so it never runs again.
    """

    def __init__(
        self,
        model,
        spec: GraphSpec,
        prepared: PreparedTask,
        chunk_size: int | None = None,
        runs: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None] | None = None,
        check: Callable[[], None] | None = None,
    ):
        self.model = model
        self.spec = spec
        self.prepared = prepared
        self.device = model_device(model)
        writers, metrics, residuals, raw = (
            runs if runs is not None else _runs_of_tasks(model, spec, [prepared], check)
        )
        self.clean_writers = writers[:1]  # [1, pos, n_forward, d_model]
        self.corrupted_writers = writers[1:]  # [1, pos, n_forward, d_model]
        self.corrupted_raw = raw[1:] if raw is not None else None  # [1, pos, n_layers * n_heads, d_model]
        self.clean_residual = residuals[:1]  # [1, d_model]: the clean run's final residual, last position
        clean, corrupted = metrics.tolist()
        self.baseline = Baseline(clean=float(clean), corrupted=float(corrupted))
        self._bytes_per_position = evaluation_bytes_per_position(spec, writers.element_size())
        self._fixed_chunk = chunk_size
        self._clean_states: dict[int, CleanState] = {}  # prefix -> the clean run rows start from

    @property
    def chunk_size(self) -> int:
        """How many circuits one patched pass carries (learnt on CUDA after the first pass)."""
        if self._fixed_chunk:
            return self._fixed_chunk
        return min(
            256, chunk_size(self.model, "evaluate", self.prepared.n_positions, self._bytes_per_position)
        )

    def metrics(
        self, circuits: torch.Tensor, progress: Progress | None = None, from_layer: bool = False
    ) -> torch.Tensor:
        """L(C(q)) for each circuit mask in circuits [n_circuits, n_forward, n_backward]: this task
        as a batch of one of ``metrics_of_tasks`` (``from_layer`` as there).
        # [n_circuits] on the model's device"""
        return metrics_of_tasks([self], circuits[None], progress, from_layer)[0]

    def clean_state(self, prefix: int) -> CleanState:
        """The clean run that rows started at a layer continue (``layer_start``), made once per
        prefix length."""
        if prefix not in self._clean_states:
            tokens = self.prepared.clean_tokens
            self._clean_states[prefix] = clean_state(self.model, self.spec, tokens, prefix)
        return self._clean_states[prefix]


# ----- one task or many: a batch of tasks of one prompt length (one task is a batch of one) ------
def _check_batch(tasks: Sequence[PreparedTask], same_length: bool = True) -> None:
    problem = batch_compatible(tasks, same_length)
    if problem is not None:
        raise ValueError(f"These tasks cannot be evaluated in one batch: {problem}.")


# ----- a prompt's plain run, shared by everything that reads it -----------------------------------
@dataclass(frozen=True)
class PromptRun:
    """One prompt's plain (unpatched) forward pass: every writer's output and the final residual.

    writers: [1, pos, n_forward, d_model]; residual: [1, d_model] after the last block at the last
    position; raw_heads: [1, pos, n_layers * n_heads, d_model] the heads before a shared
    post-attention norm, or None on models without one. An evaluator's clean and corrupted halves, the next-token distribution and the
    logit-lens labels all read it, so an interactive session passes each prompt through the model
    once, however many methods it runs on it.
    """

    writers: torch.Tensor
    residual: torch.Tensor
    raw_heads: torch.Tensor | None = None


_PROMPT_RUNS_KEPT = 8  # prompts kept per model: the clean and corrupted ones a session works on now
_PROMPT_RUNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {key: PromptRun}
_PROMPT_RUNS_GUARD = threading.Lock()


def _run_key(model, tokens: torch.Tensor) -> tuple:
    """A kept run's key: the model's device and dtype (a model moved or cast runs again) and the ids."""
    return (str(model_device(model)), str(model_dtype(model)), tuple(tokens[0].tolist()))


def kept_prompt_run(model, tokens: torch.Tensor) -> PromptRun | None:
    """The plain run of ``tokens`` [1, pos] made before on this model object, or None."""
    with _PROMPT_RUNS_GUARD:
        runs = _PROMPT_RUNS.get(model)
        key = _run_key(model, tokens)
        found = runs.get(key) if runs is not None else None
        if found is not None:
            runs.move_to_end(key)
        return found


def keep_prompt_run(model, tokens: torch.Tensor, run: PromptRun) -> None:
    """Remember a prompt's plain run (the last ``_PROMPT_RUNS_KEPT`` per model)."""
    with _PROMPT_RUNS_GUARD:
        runs = _PROMPT_RUNS.setdefault(model, OrderedDict())
        key = _run_key(model, tokens)
        runs[key] = run
        runs.move_to_end(key)
        while len(runs) > _PROMPT_RUNS_KEPT:
            runs.popitem(last=False)


def forget_prompt_runs(model) -> None:
    """Drop this model's kept prompt runs (after changing its weights in place, or to make the
    next reader run the pass itself)."""
    with _PROMPT_RUNS_GUARD:
        _PROMPT_RUNS.pop(model, None)


@torch.no_grad()
def prompt_run(model, spec: GraphSpec, tokens: torch.Tensor, check=None) -> PromptRun:
    """The plain run of ``tokens`` [1, pos]: the one made before on this model, else made now (and
    kept; ``check`` called before each block of it)."""
    found = kept_prompt_run(model, tokens)
    if found is None:
        writers, residual, raw = writers_residual_and_raw_heads(model, spec, tokens, check)
        found = PromptRun(writers, residual, raw)
        keep_prompt_run(model, tokens, found)
    return found


# ----- runs kept for a while: prompts checked against the model, then evaluated ------------------
# within ``keeping_runs``: {"runs": {row key: PromptRun}, "bytes": what they hold}
_KEPT_ROWS: ContextVar[dict | None] = ContextVar("kept_rows", default=None)
_KEPT_ROWS_BYTES = 1e9  # past this, a batch runs without capture and its rows run again when evaluated


@contextmanager
def keeping_runs() -> Iterator[None]:
    """Within it, ``last_residuals`` captures every writer of the prompts it runs and keeps each
    row's run, and every evaluator made within it (``_runs_of_tasks``) reads a prompt's kept run
    instead of running it again: paraphrases checked against the model and then evaluated pass
    through it once. A pass's rows do not mix, so an evaluator reads what its own pass would give
    to float rounding: the kernels may round a batch of another size differently (to the bit on
    the tiny test model; on the embedded Gemma's nine bench prompts, NDFs within 5e-6, and a
    learning that reads them may go another way at a near-tie: docs/faithfulness.md). What it
    reads depends only on the batches the checks ran, so a run repeats itself. The kept runs are
    dropped on leaving."""
    token = _KEPT_ROWS.set({"runs": {}, "bytes": 0})
    try:
        yield
    finally:
        _KEPT_ROWS.reset(token)


def _kept_rows(model, rows: Sequence[torch.Tensor]) -> list[PromptRun] | None:
    """The runs kept by ``keeping_runs`` of every row [1, pos] of ``rows``, or None when one is not."""
    kept = _KEPT_ROWS.get()
    if kept is None:
        return None
    found = [kept["runs"].get(_run_key(model, row)) for row in rows]
    return None if any(run is None for run in found) else found


@torch.no_grad()
def last_residuals(model, tokens: torch.Tensor) -> torch.Tensor:
    """The residual after the last block at the last position of each row of ``tokens`` [batch,
    pos] (a check's metric and top-1 token read it). A row run before is read: a prompt's plain
    run (``prompt_run``) or one kept by ``keeping_runs``; the others run now in one pass, within
    ``keeping_runs`` with every writer captured and kept for the evaluators.  # [batch, d_model]"""
    device = model_device(model)
    rows = [tokens[i : i + 1] for i in range(tokens.shape[0])]
    found: list[torch.Tensor | None] = []
    for row in rows:
        run = (_kept_rows(model, [row]) or [None])[0] or kept_prompt_run(model, row)
        found.append(None if run is None else run.residual.to(device))
    missing = [i for i, residual in enumerate(found) if residual is None]
    if missing:
        batch = torch.cat([rows[i] for i in missing]).to(device)  # [m, pos]
        kept = _KEPT_ROWS.get()
        spec = adapter_of(model).spec
        # a row's writers and (at most) its raw heads
        width = (spec.n_forward + spec.n_layers * spec.n_heads) * spec.d_model
        row_bytes = batch.shape[1] * width * torch.finfo(model_dtype(model)).bits // 8
        if kept is None or kept["bytes"] + len(missing) * row_bytes > _KEPT_ROWS_BYTES:
            residual = final_residual(model, batch, [])  # [m, d_model]
        else:
            writers, residual, raw = writers_residual_and_raw_heads(model, spec, batch)
            for j, i in enumerate(missing):
                run = PromptRun(
                    writers[j : j + 1], residual[j : j + 1], raw[j : j + 1] if raw is not None else None
                )
                kept["runs"][_run_key(model, rows[i])] = run
            kept["bytes"] += len(missing) * row_bytes
        for j, i in enumerate(missing):
            found[i] = residual[j : j + 1]
    return torch.cat(found)


def _runs_of_tasks(model, spec: GraphSpec, tasks: Sequence[PreparedTask], check=None):
    """The tasks' clean runs, then their corrupted ones: (writers [2g, pos, n_forward, d_model],
    metrics [2g], final residuals at the last position [2g, d_model], raw heads [2g, pos,
    n_layers * n_heads, d_model] or None).

    Within ``keeping_runs`` the prompts' kept runs are read when every one was kept. Otherwise a
    task alone runs its two prompts one at a time, each read when this model ran it before
    (``prompt_run``: the next tokens, the labels or another method's run of the prompt made it);
    several tasks run all their prompts in one batched pass. So what a task gives never depends
    on what ran before it (a pass of one row and a pass of two can differ in the last bits).
    ``check``: called before each block of a pass made here (``layer_checks``): a run's report,
    which raises once it is cancelled (these runs came before a method's first report: 2-9 s
    of a busy CPU on Gemma-3-270M, and Best-of-N's per pair group, in which Cancel was not heard)."""
    device = model_device(model)
    sequences = [t.clean_tokens for t in tasks] + [t.corrupted_tokens for t in tasks]
    runs = _kept_rows(model, sequences)
    if runs is None and len(tasks) == 1:
        runs = [prompt_run(model, spec, tokens, check) for tokens in sequences]
    if runs is not None:
        writers = torch.cat([run.writers.to(device) for run in runs])  # [2g, pos, fwd, d]
        residual = torch.cat([run.residual.to(device) for run in runs])  # [2g, d_model]
        raw = None
        if runs[0].raw_heads is not None:
            raw = torch.cat([run.raw_heads.to(device) for run in runs])
    else:
        writers, residual, raw = writers_residual_and_raw_heads(model, spec, torch.cat(sequences), check)
    owner = torch.arange(len(tasks), device=device).repeat(2)  # clean rows, then corrupted
    return writers, task_metric(model, tasks, owner)(residual), residual, raw


def evaluators_of_tasks(
    model,
    spec: GraphSpec,
    tasks: Sequence[PreparedTask],
    chunk_size: int | None = None,
    check: Callable[[], None] | None = None,
) -> list[Evaluator]:
    """An evaluator per task, their clean and corrupted runs made together in batched passes.

    ``tasks`` must share the prompt length, metric and foil count (``batch_compatible``); one
    task is a batch of one (``Evaluator(model, spec, task)``). ``check``: called before each
    block of those passes (``_runs_of_tasks``).
    """
    tasks = list(tasks)
    _check_batch(tasks)
    evaluators: list[Evaluator | None] = [None] * len(tasks)
    dtype_size = next(model.parameters()).element_size()

    def compute(rows: slice):
        return _runs_of_tasks(model, spec, tasks[rows], check)

    def commit(rows: slice, result) -> None:
        writers, metrics, residuals, raw = result  # [2g, pos, n_forward, d_model], [2g], [2g, d_model]
        size = rows.stop - rows.start
        for offset in range(size):
            pick = [offset, size + offset]  # this task's clean and corrupted rows
            evaluators[rows.start + offset] = Evaluator(
                model,
                spec,
                tasks[rows.start + offset],
                chunk_size,
                (writers[pick], metrics[pick], residuals[pick], raw[pick] if raw is not None else None),
            )

    run_in_chunks(
        model,
        "evaluate",
        len(tasks),
        2 * tasks[0].n_positions,
        evaluation_bytes_per_position(spec, dtype_size),
        compute,
        commit,
    )
    return evaluators


def evaluator_of_runs(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    writers: torch.Tensor,
    residual: torch.Tensor,
    raw: torch.Tensor | None = None,
) -> Evaluator:
    """An evaluator whose clean and corrupted runs a method made in a pass of its own (CircuitLasso
    observes both prompts among its texts): writers [2, pos, n_forward, d_model] (clean, then
    corrupted), final residuals at the last position [2, d_model], raw heads [2, pos, n_layers *
    n_heads, d_model] or None, as ``_runs_of_tasks`` gives them; the metrics are read off the
    residuals as it reads them. A row of a batched pass can differ from a one-row run in the last
    bits, and so can this evaluator's baseline and curve."""
    owner = torch.zeros(2, dtype=torch.long, device=residual.device)  # both rows are this task's
    metrics = task_metric(model, [prepared], owner)(residual)
    return Evaluator(model, spec, prepared, runs=(writers, metrics, residual, raw))


def _runs_by_task(rows: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """(task, circuit) rows cut into pieces a patched pass takes: consecutive tasks with the same
    number of rows each (``patched_metrics`` needs g equal runs of rows)."""
    per_task: list[list[tuple[int, int]]] = []
    for row in rows:
        if per_task and per_task[-1][0][0] == row[0]:
            per_task[-1].append(row)
        else:
            per_task.append([row])
    pieces: list[list[tuple[int, int]]] = []
    size = None
    for run in per_task:
        if pieces and len(run) == size:
            pieces[-1].extend(run)
        else:
            pieces.append(list(run))
            size = len(run)
    return pieces


def metrics_of_tasks(
    evaluators: Sequence[Evaluator],
    circuits: torch.Tensor,
    progress: Progress | None = None,
    from_layer: bool = False,
    padded: bool = False,
) -> torch.Tensor:
    """L(C(q)) of every (task, circuit) pair, in shared patched passes.

    circuits: [n_tasks, n_circuits, n_forward, n_backward] bool, row j evaluated on task j (one
    task: a batch of one), or position circuits [n_tasks, n_circuits, n_forward, n_backward, pos]
    (every unit outside a circuit patched at its own position). The tasks must share prompt length, metric and foil count. A circuit
    of every edge is its model: the clean run's metric, and a column of circuits whole for every
    task runs for none. Chunks hold as many (task, circuit) pairs as the device's memory takes,
    in tasks' order. ``from_layer``: each patched pass starts at the lowest block where one of
    its circuits removes an edge, from each task's clean run (``engine.layer_start``): the same
    metrics to float rounding, the blocks below run once instead of once per circuit (models
    whose adapter cannot start mid-model run whole passes). ``padded``: tasks of several prompt
    lengths share the passes, the shorter padded at the end and each row read at its own last
    position (edge circuits of whole passes only; the same metrics to float rounding, in fewer
    passes).  # [n_tasks, n_circuits]
    """
    evaluators = list(evaluators)
    first = evaluators[0]
    model, spec, device = first.model, first.spec, first.device
    tasks = [e.prepared for e in evaluators]
    _check_batch(tasks, same_length=not padded)
    if padded and (from_layer or circuits.dim() == 5):
        raise ValueError("padded passes take edge circuits of whole passes only")
    lengths = [t.n_positions for t in tasks]
    longest = max(lengths)
    ends = torch.tensor(lengths, device=device) - 1  # each task's last position  # [n_tasks]
    n_tasks, n_circuits = int(circuits.shape[0]), int(circuits.shape[1])
    edge_mask = graph_members(spec, circuits, device)  # edges, or (edge, position) units
    baseline = [e.baseline.clean for e in evaluators]
    clean = torch.tensor(baseline, device=device, dtype=first.clean_writers.dtype)  # [n_tasks]
    values = clean[:, None].repeat(1, n_circuits)  # [n_tasks, n_circuits]
    if n_circuits == 0:
        return values
    whole = whole_graph(spec, circuits.to(device))  # [n_tasks, n_circuits]
    # the circuits some task needs a run for, run for every task (equal runs of rows per task)
    columns = (~whole).any(0).nonzero()[:, 0].tolist()
    rows = [(t, c) for t in range(n_tasks) for c in columns]
    tokens_of = torch.cat([padded_to(t.clean_tokens, longest) for t in tasks]).to(device)  # [n_tasks, pos]
    # [n_tasks, pos, n_forward, d_model]
    corrupted_of = torch.cat([padded_to(e.corrupted_writers, longest) for e in evaluators])
    raw_of = None  # [n_tasks, pos, n_layers * n_heads, d_model]: heads before a shared post-norm
    if first.corrupted_raw is not None:
        raw_of = torch.cat([padded_to(e.corrupted_raw, longest) for e in evaluators])
    measured: list[torch.Tensor] = []
    starts_at_layer = adapter_of(model).starts_at_layer

    def compute(chunk: slice) -> torch.Tensor:
        """The metrics of rows ``chunk``, a patched pass per piece of equal runs per task. # [rows]"""
        found = []
        for piece in _runs_by_task(rows[chunk]):
            owners = sorted({t for t, _ in piece})
            owner = torch.tensor([owners.index(t) for t, _ in piece], device=device)  # [b]
            chosen = torch.stack([circuits[t, c] for t, c in piece]).to(device).bool()  # [b, fwd, bwd(, pos)]
            group = [tasks[t] for t in owners]
            prefix = shared_prefix(model, group)
            removed = edge_mask & ~chosen
            start = None
            layer = start_layer(spec, removed) if from_layer and starts_at_layer else 0
            if layer > 0:
                states = [evaluators[t].clean_state(prefix) for t in owners]
                start = rows_from_layer(model, states, owner, layer)
            found.append(
                patched_metrics(
                    model,
                    spec,
                    None,
                    corrupted_of[owners],
                    removed,
                    tokens_of[[owners[i] for i in owner.tolist()]],
                    task_metric(model, group, owner, same_length=not padded),
                    prefix,
                    raw_of[owners] if raw_of is not None else None,
                    start,
                    ends[[owners[i] for i in owner.tolist()]] if padded else None,
                    check,
                )
            )
        return torch.cat(found)

    done = [0.0]  # the share of the rows measured, reported again before each block of a pass
    check = (lambda: progress("evaluate", done[0])) if progress else None

    def commit(chunk: slice, result: torch.Tensor) -> None:
        measured.append(result)
        done[0] = min(1.0, chunk.stop / len(rows))
        if progress:
            progress("evaluate", done[0])

    run_in_chunks(
        model,
        "evaluate",
        len(rows),
        longest,
        first._bytes_per_position,
        compute,
        commit,
        max_chunk=first._fixed_chunk or 256,
    )
    if rows:
        index = torch.tensor(rows, device=device)  # [n_rows, 2]
        found = torch.cat(measured).to(values.dtype)  # [n_rows]
        kept_whole = whole[index[:, 0], index[:, 1]]  # a whole circuit keeps the clean metric
        values[index[:, 0], index[:, 1]] = torch.where(kept_whole, values[index[:, 0], index[:, 1]], found)
    return values


def curves_of_tasks(
    evaluators: Sequence[Evaluator],
    circuits: torch.Tensor,
    budgets: Sequence[int],
    progress: Progress | None = None,
    with_necessity: bool = True,
) -> list[list[CurvePoint]]:
    """Each task's faithfulness curve: a point per (budget, circuit) of its row, every pair in
    shared patched passes (``metrics_of_tasks``; one task is a batch of one).

    circuits: [n_tasks, n_circuits, n_forward, n_backward] bool, row j evaluated on task j;
    ``budgets`` names the circuits of a row. ``with_necessity``: each circuit's complement
    (every edge but the circuit's, so only the circuit's edges are corrupted) rides in the same
    passes; the complement of a whole circuit keeps no edge: the corrupted run, with no pass.
    """
    evaluators = list(evaluators)
    if not evaluators:
        return []
    n_asked = int(circuits.shape[1])
    circuits = circuits.bool()
    if with_necessity and n_asked:
        spec = evaluators[0].spec
        whole = whole_graph(spec, circuits)  # [n_tasks, n_asked]
        # a whole circuit's complement is asked as a whole circuit (no pass) and read as corrupted
        inside = whole.view(*whole.shape, *[1] * (circuits.dim() - 2))  # broadcast over edges (and positions)
        others = torch.where(inside, circuits, complements(spec, circuits))
        metrics = metrics_of_tasks(evaluators, torch.cat([circuits, others], dim=1), progress).tolist()
        whole = whole.tolist()
    else:
        metrics = metrics_of_tasks(evaluators, circuits, progress).tolist()  # [n_tasks, n_circuits]
    sizes = circuits.flatten(2).sum(2).tolist()  # [n_tasks, n_asked]
    curves = []
    for task, (evaluator, task_sizes, task_values) in enumerate(zip(evaluators, sizes, metrics)):
        removed: list = [None] * n_asked
        if with_necessity and n_asked:
            removed = [
                evaluator.baseline.corrupted if whole[task][index] else value
                for index, value in enumerate(task_values[n_asked:])
            ]
        curves.append(
            [
                _point(budget, size, value, without, evaluator.baseline)
                for budget, size, value, without in zip(budgets, task_sizes, task_values[:n_asked], removed)
            ]
        )
    return curves


def is_position_circuit(spec: GraphSpec, circuits: torch.Tensor) -> bool:
    """Whether ``circuits`` are position circuits [..., n_forward, n_backward, pos] rather than
    [..., n_forward, n_backward] (n_backward is never n_forward, so the shapes cannot be confused)."""
    return circuits.dim() >= 3 and circuits.shape[-2] != spec.n_forward


def graph_members(spec: GraphSpec, circuits: torch.Tensor, device) -> torch.Tensor:
    """What a circuit can keep: the graph's edges [n_forward, n_backward], or for position
    circuits its (edge, position) units [n_forward, n_backward, pos] (``positions.graph``)."""
    if is_position_circuit(spec, circuits):
        return unit_mask(spec, circuits.shape[-1], device)
    return spec.tensors(device).edge_mask


def whole_graph(spec: GraphSpec, circuits: torch.Tensor) -> torch.Tensor:
    """Whether each circuit keeps every edge (or every unit) of the graph (patching it changes
    nothing). circuits: [..., n_forward, n_backward(, pos)] bool. # [...] bool"""
    members = graph_members(spec, circuits, circuits.device)
    removed = members & ~circuits.bool()
    return ~removed.flatten(-members.dim()).any(-1)


def circuits_at_budgets(
    spec: GraphSpec, scores: torch.Tensor, budgets: Sequence[int], prune_dead: bool = True
) -> torch.Tensor:
    """Top-N circuits of one score matrix at every budget, from one sort, on the scores' device.

    scores: [..., n_forward, n_backward]. Returns [..., n_budgets, n_forward, n_backward] bool.
    """
    if not len(budgets):
        shape = (*scores.shape[:-2], 0, spec.n_forward, spec.n_backward)  # [..., 0, n_fwd, n_bwd]
        return torch.zeros(shape, dtype=torch.bool, device=scores.device)
    masks = top_n_at_budgets(spec, scores, budgets)
    return prune(spec, masks) if prune_dead else masks
