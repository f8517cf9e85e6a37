"""Run a dataset of tasks x methods x budgets on an executor, into a folder, resumably.

The folder gets ``tasks.jsonl`` (the dataset as run), ``results.parquet`` (one row per task and
method, ``table.py``), ``consensus.parquet`` (each method's consensus circuit evaluated on every
prompt) and ``manifest.json`` (what was asked and what happened); every full result goes to the
one result store the batch is given, under ``request.Request``'s key, the key Explore and
``discover`` use. A rerun finds finished items in the store and skips them, so Ctrl-C (or a
crash) loses at most the groups in flight. A failing item is recorded with its one-sentence
reason and never stops the batch.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from .. import __version__
from ..core.tasks import DEFAULT_MAX_TOKENS
from ..core.text import clock_duration
from ..entry.request import Request
from ..methods import config_to_dict, get_method
from .atlas import CONSENSUS, MANIFEST, BatchTable, circuit_matrix, consensus_edges, mib_budgets
from .dataset import DatasetTask, write_tasks
from .mmlu import selection_lines
from .table import TableWriter, _write_atomic, failure_row, finish, latest_by_key, read_rows, result_row
from .work import MaskGroup, WorkGroup, worker_name

DEFAULT_BATCH_TASKS = 16
DEFAULT_TOP_EDGES = 100
DEFAULT_CONSENSUS = 0.5


@dataclass(frozen=True)
class MethodRun:
    """One method of the batch with its settings (plain values, checked by the method)."""

    name: str
    settings: dict = field(default_factory=dict)


@dataclass
class BatchRequest:
    """What to run. ``tasks`` or ``generate`` (family, n, seed) gives the dataset; ``budgets``
    is a list of edge counts or "mib" (MIB's ten fractions of the graph's edges). ``generate``
    with the family "mmlu" draws ``n`` valid questions of each of ``subjects``."""

    out: Path
    methods: list[MethodRun]
    budgets: list[int] | str
    tasks: list[DatasetTask] | None = None
    generate: tuple[str, int, int] | None = None
    subjects: tuple[str, ...] = ()  # MMLU's subjects, with generate=("mmlu", n per subject, seed)
    source: str = ""
    problems: list[str] = field(default_factory=list)
    max_tokens: int = DEFAULT_MAX_TOKENS
    batch_tasks: int = DEFAULT_BATCH_TASKS
    keep_edges: int | None = None
    top_edges: int = DEFAULT_TOP_EDGES
    consensus: float | None = DEFAULT_CONSENSUS
    command: str = ""


@dataclass
class BatchState:
    """Where a batch stands, for a progress display."""

    total: int = 0
    done: int = 0  # finished this run, ok or failed
    skipped: int = 0  # found finished in the store
    refused: int = 0  # could not start (the tokenizer refused the task): finished, not in the rate
    failed: int = 0
    in_flight: float = 0.0  # finished share of the groups running now, in items
    driver_seconds: float = 0.0  # spent storing results and writing rows (the driver's share)
    started: float = field(default_factory=time.perf_counter)
    phase: str = "discover"

    @property
    def remaining(self) -> float:
        return max(self.total - self.skipped - self.refused - self.done - self.in_flight, 0.0)

    @property
    def rate(self) -> float:
        """Items computed a second this run (found and refused ones left out)."""
        elapsed = time.perf_counter() - self.started
        return (self.done + self.in_flight) / elapsed if elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        return self.remaining / self.rate if self.rate > 0 else None


@dataclass
class BatchReport:
    """What a batch did: counts, wall time, where it wrote, whether it was interrupted."""

    out: Path
    items: int
    computed: int
    skipped: int
    failed: int
    seconds: float
    interrupted: bool
    executor: str
    workers: int
    manifest: dict


class ProgressBar:
    """A one-line progress bar on stderr: items, rate, ETA, found and failed counts."""

    def __init__(self, stream=None, width: int = 24, every: float = 0.5):
        self.stream = stream or sys.stderr
        self.width, self.every = width, every
        self.last = 0.0

    def line(self, state: BatchState) -> str:
        finished = state.skipped + state.refused + state.done + state.in_flight
        share = finished / state.total if state.total else 1.0
        filled = int(round(self.width * share))
        rate = state.rate
        rate_text = (
            f"{rate:.2f} items/s" if rate >= 0.1 else (f"{60 * rate:.1f} items/min" if rate else "-- items/s")
        )
        extra = [f"{state.skipped} from the store"] if state.skipped else []
        extra += [f"{state.failed} failed"] if state.failed else []
        note = f" ({', '.join(extra)})" if extra else ""
        return (
            f"{state.phase:<10} [{'#' * filled}{'.' * (self.width - filled)}] {int(finished)}/{state.total} "
            f"{rate_text}, ETA {clock_duration(state.eta)}, elapsed {clock_duration(time.perf_counter() - state.started)}{note}"
        )

    def __call__(self, state: BatchState) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        print("\r" + self.line(state), end="", file=self.stream, flush=True)

    def finish(self, state: BatchState) -> None:
        """The phase's last line, kept on screen."""
        print("\r" + self.line(state), file=self.stream, flush=True)


@dataclass
class _Item:
    number: int
    task_index: int
    method_index: int
    key: str


def _resolve_budgets(budgets, n_edges: int) -> list[int]:
    if isinstance(budgets, str):
        if budgets.strip().lower() != "mib":
            raise ValueError(f"Budgets {budgets!r} are neither edge counts nor 'mib'.")
        return mib_budgets(n_edges)
    chosen = sorted({int(b) for b in budgets})
    if not chosen:
        raise ValueError("No budgets given; write edge counts such as 50,100,200, or mib.")
    return chosen


def _method_configs(methods: list[MethodRun]) -> list[tuple[str, object, dict]]:
    """(name, config, config as plain values) of each method; a setting no method has is refused."""
    found = []
    for run in methods:
        method = get_method(run.name)
        config = method.make_config(run.settings)
        found.append((method.name, config, config_to_dict(config)))
    names = [(name, json.dumps(plain, sort_keys=True)) for name, _, plain in found]
    if len(set(names)) != len(names):
        raise ValueError("A method is asked for twice with the same settings; name each once.")
    return found


class _Run:
    """One batch run: its plan, its writer and its progress (``run_batch`` drives it)."""

    def __init__(self, request: BatchRequest, executor, store, progress, say):
        self.request, self.executor, self.store = request, executor, store
        self.progress, self.say = progress, say
        self.out = Path(request.out)
        self.state = BatchState()
        self.running = 0  # items in the group now running (its progress is a share of them)

    # ----- planning ------------------------------------------------------------------------------
    def plan(self) -> None:
        """Model, budgets, methods and tasks; one item (and store key) per task and method."""
        request, executor = self.request, self.executor
        self.info = executor.start()
        self.spec = self.info.spec
        self.budgets = _resolve_budgets(request.budgets, self.spec.n_edges)
        limit = request.keep_edges if request.keep_edges is not None else max(1, self.spec.n_edges // 10)
        self.keep = [b for b in self.budgets if b <= limit]
        self.methods = _method_configs(request.methods)
        self.selection: dict = {}
        if request.tasks is not None:
            self.tasks = list(request.tasks)
        elif request.generate is not None:
            family, n, seed = request.generate
            what = (
                f"{n} valid questions of each of {len(request.subjects)} MMLU subjects"
                if family == "mmlu"
                else ""
            )
            self.say(f"drawing {what or f'{n} {family} tasks'} on the model (seed {seed}) ...")
            found = executor.generate(family, int(n), int(seed), request.max_tokens, tuple(request.subjects))
            self.tasks, self.selection = list(found.tasks), dict(found.summary)
            request.problems = list(request.problems) + list(found.problems)
            self.say(f"generated {len(self.tasks)} {family} tasks (seed {seed})")
            for line in selection_lines(self.selection):
                self.say(line)
            for problem in found.problems:
                self.say(problem)
        else:
            raise ValueError("Give a dataset file or --generate FAMILY to run a batch on.")
        write_tasks(self.out / "tasks.jsonl", self.tasks)
        self.items = [
            _Item(number, task_index, method_index, self._key(task_index, method_index))
            for number, (task_index, method_index) in enumerate(
                (t, m) for t in range(len(self.tasks)) for m in range(len(self.methods))
            )
        ]
        self.keys = [item.key for item in self.items]
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(
                "Two tasks of the dataset are the same prompt, answer and foils; give each once."
            )
        self.state.total = len(self.items)
        self.shapes: list = [None] * len(self.tasks)
        self.writer = TableWriter(self.out)

    def _key(self, task_index: int, method_index: int) -> str:
        name, config, _ = self.methods[method_index]
        info, request = self.info, self.request
        task = self.tasks[task_index].task
        return Request.of(
            name,
            config,
            model_id=info.model_id,
            dtype=info.dtype,
            task=task,
            budgets=self.budgets,
            max_tokens=request.max_tokens,
            backend=info.backend,
        ).key

    def pending(self) -> list[_Item]:
        """Items not finished yet; finished ones found in the store get their row back if missing."""
        written = latest_by_key(read_rows(self.out, self.say), self.keys)
        statuses = zip(written.column("key").to_pylist(), written.column("status").to_pylist())
        finished = {key for key, status in statuses if status == "done"}
        pending = []
        for item in self.items:
            if self.store.path(item.key, "result").exists():
                if item.key in finished:
                    self.state.skipped += 1
                    continue
                result = self.store.get(item.key)
                if result is not None:
                    self._keep(item, result, "store")
                    self.state.skipped += 1
                    continue
            pending.append(item)
        if self.state.skipped:
            self.say(
                f"{self.state.skipped} of {len(self.items)} items are finished in the store; "
                f"computing the other {len(pending)}"
            )
        return pending

    def measure(self, task_indices) -> None:
        """Each task's (length, metric, foils, unchanged prefix), or why the tokenizer refuses it
        (on a worker)."""
        needed = sorted({i for i in task_indices if self.shapes[i] is None})
        shapes = self.executor.shapes([self.tasks[i] for i in needed], self.request.max_tokens)
        for task_index, shape in zip(needed, shapes):
            self.shapes[task_index] = shape

    def runnable(self, pending: list[_Item]) -> list[_Item]:
        """The items whose task fits the model; the others are recorded as failed now."""
        self.measure(item.task_index for item in pending)
        fit = []
        for item in pending:
            shape = self.shapes[item.task_index]
            if isinstance(shape, str):
                self._fail(item, shape, worker=worker_name())
                self.state.refused += 1
            else:
                fit.append(item)
        return fit

    # ----- rows -----------------------------------------------------------------------------------
    def _keep(self, item: _Item, result, worker: str, seconds: float | None = None) -> None:
        task = self.tasks[item.task_index]
        row = result_row(
            item.key, item.task_index, task, result, self.keep, self.request.top_edges,
            worker=worker, executor=self.executor.name,
        )  # fmt: skip
        if seconds is not None:
            row["seconds"] = seconds
        self.writer.add(row)

    def _fail(self, item: _Item, error: str, seconds: float | None = None, worker: str = "") -> None:
        name, _, plain = self.methods[item.method_index]
        task = self.tasks[item.task_index]
        where = f"line {task.line}: " if task.line else ""
        row = failure_row(
            item.key, item.task_index, task, name, plain, where + error,
            seconds=seconds, worker=worker, executor=self.executor.name,
        )  # fmt: skip
        self.writer.add(row)
        self.state.failed += 1

    # ----- running --------------------------------------------------------------------------------
    def on_outcomes(self, outcomes) -> None:
        """A group finished: store each result, write each row."""
        begin = time.perf_counter()
        for outcome in outcomes:
            item = self.by_number[outcome.item]
            if outcome.result is not None:
                self.store.put(item.key, outcome.result)
                self._keep(item, outcome.result, outcome.worker, outcome.seconds)
            else:
                self._fail(item, outcome.error or "failed", outcome.seconds, outcome.worker)
            self.state.done += 1
        self.state.in_flight = 0.0
        self.state.driver_seconds += time.perf_counter() - begin
        self.running = next(self.sizes, 0)
        _report(self.progress, self.state)

    def on_progress(self, fraction: float) -> None:
        self.state.in_flight = fraction * self.running
        _report(self.progress, self.state)

    def execute(self, items: list[_Item]) -> bool:
        """Run the items' groups; True when Ctrl-C stopped them (what finished is kept)."""
        self.by_number = {item.number: item for item in self.items}
        groups = _groups(items, self.shapes, self.methods, self.budgets, self.tasks, self.request)
        self.sizes = iter([len(group.items) for group in groups])
        self.running = next(self.sizes, 0)
        self.state.started = time.perf_counter()
        interrupted = False
        try:
            _report(self.progress, self.state)
            if groups:
                self.executor.run(groups, self.on_outcomes, self.on_progress)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.writer.flush()
        self.discovery_seconds = time.perf_counter() - self.state.started
        _report(self.progress, self.state, final=True)
        return interrupted

    def manifest(self, table: pa.Table, consensus: dict | None, interrupted: bool, seconds: float) -> dict:
        request, state = self.request, self.state
        statuses = table.column("status").to_pylist()
        manifest = {
            "circuitviz": __version__,
            "format": 1,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": request.command,
            "model": asdict(self.info),
            "n_edges": self.spec.n_edges,
            "executor": {"name": self.executor.name, "workers": self.executor.workers},
            "methods": [{"name": name, "config": plain} for name, _, plain in self.methods],
            "budgets": self.budgets,
            "kept_budgets": self.keep,
            "top_edges": request.top_edges,
            "max_tokens": request.max_tokens,
            "batch_tasks": request.batch_tasks,
            "dataset": {
                "source": request.source or (f"generated {request.generate}" if request.generate else ""),
                "n_tasks": len(self.tasks),
                "problems": list(request.problems),
                "selection": self.selection,
            },
            "counts": {
                "items": len(self.items),
                "computed": state.done,
                "refused": state.refused,
                "from_store": state.skipped,
                "failed": statuses.count("failed"),
                "done": statuses.count("done"),
            },
            "seconds": seconds,
            "discovery_seconds": self.discovery_seconds,
            "driver_seconds": state.driver_seconds,
            "interrupted": interrupted,
            "consensus": consensus,
            "store": str(getattr(self.store, "root", "")),
        }
        previous = self.out / MANIFEST
        if interrupted and previous.exists():  # keep what an earlier run found about the consensus
            manifest["consensus"] = _earlier_consensus(self.out) or None
        (self.out / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        return manifest


def _groups(pending: list[_Item], shapes: list, methods, budgets, tasks, request) -> list[WorkGroup]:
    """Pending items by (method, shape), cut into groups of at most ``batch_tasks`` tasks."""
    buckets: dict[tuple, list[_Item]] = {}
    for item in pending:
        buckets.setdefault((item.method_index, shapes[item.task_index]), []).append(item)
    groups = []
    size = max(1, int(request.batch_tasks))
    for (method_index, _), items in sorted(
        buckets.items(), key=lambda entry: (entry[0][0], str(entry[0][1]))
    ):
        name, _, plain = methods[method_index]
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            groups.append(
                WorkGroup(
                    method=name,
                    config=plain,
                    budgets=list(budgets),
                    items=[(item.number, tasks[item.task_index]) for item in chunk],
                    max_tokens=request.max_tokens,
                )
            )
    return groups


def run_batch(
    request: BatchRequest,
    executor,
    store,
    progress: Callable[[BatchState], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> BatchReport:
    """Run the batch (see the module's docstring). ``executor`` must not be started yet; the caller
    closes it. Ctrl-C ends the run cleanly: what finished is kept and the report says
    ``interrupted``."""
    begin = time.perf_counter()
    Path(request.out).mkdir(parents=True, exist_ok=True)
    run = _Run(request, executor, store, progress, log or (lambda text: None))
    run.plan()
    interrupted = run.execute(run.runnable(run.pending()))
    table = finish(run.out, run.keys)
    consensus = None
    if not interrupted and request.consensus:
        try:
            consensus = _consensus(run, table)
        except KeyboardInterrupt:
            interrupted = True
    manifest = run.manifest(table, consensus, interrupted, time.perf_counter() - begin)
    return BatchReport(
        out=run.out,
        items=len(run.items),
        computed=run.state.done,
        skipped=run.state.skipped,
        failed=manifest["counts"]["failed"],
        seconds=manifest["seconds"],
        interrupted=interrupted,
        executor=executor.name,
        workers=executor.workers,
        manifest=manifest,
    )


def _report(progress, state: BatchState, final: bool = False) -> None:
    """Hand the state to ``progress``; at a phase's end ``progress.finish`` too, when it has one."""
    if progress is None:
        return
    if final and hasattr(progress, "finish"):
        progress.finish(state)
    else:
        progress(state)


# ----- the consensus circuits, evaluated on every prompt ----------------------------------------
CONSENSUS_SCHEMA = pa.schema(
    [
        ("label", pa.string()),
        ("budget", pa.int32()),
        ("threshold", pa.float64()),
        ("n_edges", pa.int32()),
        ("task_index", pa.int32()),
        ("task_id", pa.string()),
        ("metric", pa.float64()),
        ("nfs", pa.float64()),
        ("ndf", pa.float64()),
        ("error", pa.string()),
    ]
)


def consensus_circuits(batch: BatchTable, threshold: float) -> dict[str, tuple[str, int, list[int]]]:
    """{name: (series label, budget, edge indices)}: each series' consensus at its kept budgets."""
    circuits = {}
    for label in batch.labels:
        if batch.rows(label).num_rows < 2:
            continue  # one prompt's consensus is its own circuit
        for budget in batch.kept_budgets(label):
            edges = consensus_edges(circuit_matrix(batch, label, budget), threshold)
            circuits[f"{label} @ {budget}"] = (label, int(budget), edges.tolist())
    return circuits


def _digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:24]


def _earlier_consensus(out: Path) -> dict:
    """What an earlier run of this folder recorded about its consensus evaluation ({} if none, or
    if its manifest does not read as one: the evaluation then runs again)."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    consensus = manifest.get("consensus") if isinstance(manifest, dict) else None
    return consensus if isinstance(consensus, dict) else {}


def _consensus(run: _Run, table: pa.Table) -> dict | None:
    """Each series' consensus circuit at every kept budget, evaluated on every prompt with a
    finished row (``consensus.parquet``); skipped when the same circuits on the same prompts were
    evaluated before."""
    out, executor, tasks, request, progress = run.out, run.executor, run.tasks, run.request, run.progress
    batch = BatchTable(
        table=table,
        manifest={"model": {"graph": run.spec.to_cfg_dict()}, "n_edges": run.spec.n_edges},
        folder=out,
    )
    circuits = consensus_circuits(batch, float(request.consensus))
    done = sorted(set(batch.rows().column("task_index").to_pylist()))
    run.measure(done)  # tasks finished in an earlier run have no shape yet
    shapes = run.shapes
    done = [i for i in done if not isinstance(shapes[i], str)]
    if not circuits or not done:
        return None
    digest = _digest({"circuits": circuits, "tasks": [tasks[i].task.to_dict() for i in done]})
    before = _earlier_consensus(out)
    if before.get("digest") == digest and (out / CONSENSUS).exists():
        return before
    begin = time.perf_counter()
    masks = {name: edges for name, (_, _, edges) in circuits.items()}
    by_shape: dict = {}
    for index in done:
        by_shape.setdefault(shapes[index], []).append(index)
    size = max(1, int(request.batch_tasks))
    groups = [
        MaskGroup(
            masks=masks,
            items=[(i, tasks[i]) for i in members[start : start + size]],
            max_tokens=request.max_tokens,
        )
        for _, members in sorted(by_shape.items(), key=lambda entry: str(entry[0]))
        for start in range(0, len(members), size)
    ]
    state = BatchState(total=len(done), phase="consensus")
    rows: list[dict] = []

    def on_found(found) -> None:
        for task_index, points, error in found:
            for name, (label, budget, edges) in circuits.items():
                point = None if points is None else points[list(masks).index(name)]
                rows.append(
                    {
                        "label": label,
                        "budget": budget,
                        "threshold": float(request.consensus),
                        "n_edges": len(edges),
                        "task_index": task_index,
                        "task_id": tasks[task_index].id,
                        "metric": None if point is None else point.metric,
                        "nfs": None if point is None else point.nfs,
                        "ndf": None if point is None else point.ndf,
                        "error": error,
                    }
                )
            state.done += 1
        if progress:
            progress(state)

    executor.evaluate(groups, on_found)
    _report(progress, state, final=True)
    _write_atomic(pa.Table.from_pylist(rows, schema=CONSENSUS_SCHEMA), out / CONSENSUS)
    return {
        "threshold": float(request.consensus),
        "digest": digest,
        "circuits": {name: len(edges) for name, (_, _, edges) in circuits.items()},
        "prompts": len(done),
        "seconds": time.perf_counter() - begin,
    }
