"""Run a dataset of tasks x methods x budgets on an executor, into a folder, resumably.

The folder gets ``tasks.jsonl`` (the dataset as run), ``results.parquet`` (one row per task and
method, ``table.py``), ``consensus.parquet`` (each method's consensus circuit evaluated on every
prompt) and ``manifest.json`` (what was asked and what happened); every full result goes to the
one result store the batch is given, under ``api.request_key_of``'s key, the key Explore and
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
from ..api import request_key_of
from ..methods import config_to_dict, get_method
from ..tasks import DEFAULT_MAX_TOKENS
from . import atlas
from .dataset import DatasetTask, write_tasks
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
    is a list of edge counts or "mib" (MIB's ten fractions of the graph's edges)."""

    out: Path
    methods: list[MethodRun]
    budgets: list[int] | str
    tasks: list[DatasetTask] | None = None
    generate: tuple[str, int, int] | None = None
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


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--"
    seconds = int(round(seconds))
    return (
        f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
        if seconds >= 3600
        else f"{seconds // 60}m{seconds % 60:02d}s"
    )


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
            f"{rate_text}, ETA {_duration(state.eta)}, elapsed {_duration(time.perf_counter() - state.started)}{note}"
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
        return atlas.mib_budgets(n_edges)
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
    say = log or (lambda text: None)
    begin = time.perf_counter()
    out = Path(request.out)
    out.mkdir(parents=True, exist_ok=True)
    info = executor.start()
    spec = info.spec
    budgets = _resolve_budgets(request.budgets, spec.n_edges)
    keep_limit = request.keep_edges if request.keep_edges is not None else max(1, spec.n_edges // 10)
    keep = [b for b in budgets if b <= keep_limit]
    methods = _method_configs(request.methods)
    if request.tasks is not None:
        tasks = list(request.tasks)
    elif request.generate is not None:
        family, n, seed = request.generate
        tasks = executor.generate(family, int(n), int(seed), request.max_tokens)
        say(f"generated {len(tasks)} {family} tasks (seed {seed})")
    else:
        raise ValueError("Give a dataset file or --generate FAMILY to run a batch on.")
    write_tasks(out / "tasks.jsonl", tasks)

    items: list[_Item] = []
    for task_index, item in enumerate(tasks):
        for method_index, (name, config, _) in enumerate(methods):
            key = request_key_of(
                info.model_id, info.dtype, item.task, name, config, budgets, request.max_tokens
            )
            items.append(_Item(len(items), task_index, method_index, key))
    keys = [item.key for item in items]
    if len(set(keys)) != len(keys):
        raise ValueError("Two tasks of the dataset are the same prompt, answer and foils; give each once.")
    state = BatchState(total=len(items))
    written = latest_by_key(read_rows(out), keys)
    finished_rows = {
        key
        for key, status in zip(written.column("key").to_pylist(), written.column("status").to_pylist())
        if status == "done"
    }
    writer = TableWriter(out)
    extra = {"executor": executor.name}

    def keep_row(
        item: _Item, result, worker: str, seconds: float | None = None, batch_tasks: int = 1
    ) -> None:
        row = result_row(
            item.key, item.task_index, tasks[item.task_index], result, keep, request.top_edges,
            worker=worker, **extra,
        )  # fmt: skip
        if seconds is not None:
            row["seconds"] = seconds
        writer.add(row)

    pending: list[_Item] = []
    for item in items:
        if store.path(item.key, "result").exists():
            if item.key in finished_rows:
                state.skipped += 1
                continue
            result = store.get(item.key)
            if result is not None:
                keep_row(item, result, "store")
                state.skipped += 1
                continue
        pending.append(item)
    if state.skipped:
        say(
            f"{state.skipped} of {len(items)} items are finished in the store; computing the other {len(pending)}"
        )

    shapes: list = [None] * len(tasks)
    needed = sorted({item.task_index for item in pending})
    for task_index, shape in zip(needed, executor.shapes([tasks[i] for i in needed], request.max_tokens)):
        shapes[task_index] = shape
    runnable = []
    for item in pending:
        shape = shapes[item.task_index]
        if isinstance(shape, str):
            name, _, plain = methods[item.method_index]
            task = tasks[item.task_index]
            where = f"line {task.line}: " if task.line else ""
            writer.add(
                failure_row(
                    item.key, item.task_index, task, name, plain, where + shape, worker=worker_name(), **extra
                )
            )
            state.refused += 1
            state.failed += 1
        else:
            runnable.append(item)
    by_number = {item.number: item for item in items}
    groups = _groups(runnable, shapes, methods, budgets, tasks, request)
    running = {"size": 0}

    def on_outcomes(outcomes) -> None:
        begin_driver = time.perf_counter()
        for outcome in outcomes:
            item = by_number[outcome.item]
            if outcome.result is not None:
                store.put(item.key, outcome.result)
                keep_row(item, outcome.result, outcome.worker, outcome.seconds, outcome.batch_tasks)
            else:
                name, _, plain = methods[item.method_index]
                task = tasks[item.task_index]
                where = f"line {task.line}: " if task.line else ""
                writer.add(
                    failure_row(
                        item.key,
                        item.task_index,
                        task,
                        name,
                        plain,
                        where + (outcome.error or "failed"),
                        seconds=outcome.seconds,
                        worker=outcome.worker,
                        **extra,
                    )  # fmt: skip
                )
                state.failed += 1
            state.done += 1
        state.in_flight = 0.0
        state.driver_seconds += time.perf_counter() - begin_driver
        if progress:
            progress(state)

    def on_progress(fraction: float) -> None:
        state.in_flight = fraction * running["size"]
        if progress:
            progress(state)

    interrupted = False
    state.started = time.perf_counter()
    try:
        if progress:
            progress(state)
        if groups:
            sizes = iter(len(group.items) for group in groups)

            def advance(outcomes):
                on_outcomes(outcomes)
                running["size"] = next(sizes, 0)

            running["size"] = next(sizes, 0)
            executor.run(groups, advance, on_progress)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        writer.flush()
    discovery_seconds = time.perf_counter() - state.started
    _report(progress, state, final=True)
    table = finish(out, keys)
    consensus = None
    if not interrupted and request.consensus:
        try:
            consensus = _consensus(out, executor, tasks, shapes, table, spec, request, progress)
        except KeyboardInterrupt:
            interrupted = True
    manifest = {
        "circuitviz": __version__,
        "format": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": request.command,
        "model": asdict(info),
        "n_edges": spec.n_edges,
        "executor": {"name": executor.name, "workers": executor.workers},
        "methods": [{"name": name, "config": plain} for name, _, plain in methods],
        "budgets": budgets,
        "kept_budgets": keep,
        "top_edges": request.top_edges,
        "max_tokens": request.max_tokens,
        "batch_tasks": request.batch_tasks,
        "dataset": {
            "source": request.source or (f"generated {request.generate}" if request.generate else ""),
            "n_tasks": len(tasks),
            "problems": list(request.problems),
        },
        "counts": {
            "items": len(items),
            "computed": state.done,
            "refused": state.refused,
            "from_store": state.skipped,
            "failed": int(sum(1 for status in table.column("status").to_pylist() if status == "failed")),
            "done": int(sum(1 for status in table.column("status").to_pylist() if status == "done")),
        },
        "seconds": time.perf_counter() - begin,
        "discovery_seconds": discovery_seconds,
        "driver_seconds": state.driver_seconds,
        "interrupted": interrupted,
        "consensus": consensus,
        "store": str(getattr(store, "root", "")),
    }
    previous = out / atlas.MANIFEST
    if interrupted and previous.exists():  # keep what an earlier run found about the consensus
        try:
            manifest["consensus"] = json.loads(previous.read_text(encoding="utf-8")).get("consensus")
        except (OSError, ValueError):
            pass
    (out / atlas.MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return BatchReport(
        out=out,
        items=len(items),
        computed=state.done,
        skipped=state.skipped,
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


def consensus_circuits(batch: atlas.BatchTable, threshold: float) -> dict[str, tuple[str, int, list[int]]]:
    """{name: (series label, budget, edge indices)}: each series' consensus at its kept budgets."""
    circuits = {}
    for label in batch.labels:
        if batch.rows(label).num_rows < 2:
            continue  # one prompt's consensus is its own circuit
        for budget in batch.kept_budgets(label):
            edges = atlas.consensus_edges(atlas.circuit_matrix(batch, label, budget), threshold)
            circuits[f"{label} @ {budget}"] = (label, int(budget), edges.tolist())
    return circuits


def _consensus(out: Path, executor, tasks, shapes, table: pa.Table, spec, request, progress) -> dict | None:
    """Each series' consensus circuit at every kept budget, evaluated on every prompt with a
    finished row (``consensus.parquet``); skipped when the same circuits on the same prompts were
    evaluated before."""
    batch = atlas.BatchTable(
        table=table, manifest={"model": {"graph": spec.to_cfg_dict()}, "n_edges": spec.n_edges}, folder=out
    )
    circuits = consensus_circuits(batch, float(request.consensus))
    done = sorted(set(batch.rows().column("task_index").to_pylist()))
    unknown = [i for i in done if shapes[i] is None]  # finished in an earlier run
    for index, shape in zip(unknown, executor.shapes([tasks[i] for i in unknown], request.max_tokens)):
        shapes[index] = shape
    done = [i for i in done if not isinstance(shapes[i], str)]
    if not circuits or not done:
        return None
    digest = hashlib.sha256(
        json.dumps(
            {"circuits": circuits, "tasks": [tasks[i].task.to_dict() for i in done]}, sort_keys=True
        ).encode()
    ).hexdigest()[:24]
    previous = out / atlas.MANIFEST
    if previous.exists() and (out / atlas.CONSENSUS).exists():
        try:
            before = json.loads(previous.read_text(encoding="utf-8")).get("consensus") or {}
        except (OSError, ValueError):
            before = {}
        if before.get("digest") == digest:
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
    _write_atomic(pa.Table.from_pylist(rows, schema=CONSENSUS_SCHEMA), out / atlas.CONSENSUS)
    return {
        "threshold": float(request.consensus),
        "digest": digest,
        "circuits": {name: len(edges) for name, (_, _, edges) in circuits.items()},
        "prompts": len(done),
        "seconds": time.perf_counter() - begin,
    }
