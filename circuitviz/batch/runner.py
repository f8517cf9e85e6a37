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

import json
import numbers
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from .. import __version__
from ..core import keys
from ..core.tasks import DEFAULT_MAX_TOKENS
from ..core.text import counted, given, shown
from ..entry.budgets import MAX_BUDGET, checked_edge_count, mib_over_units, over_graph_note
from ..entry.request import Request, budget_tuple
from ..measure.task_validity import gap_check_enabled
from ..methods import method_traits
from ..query.proposals import barely_predicts
from .atlas import MANIFEST, MIB_FRACTIONS, mib_budgets
from .consensus_run import earlier_consensus, evaluate_consensus
from .dataset import DatasetTask, write_tasks
from .mmlu import selection_lines
from .progress import BatchState, ProgressBar, report
from .resumed import Found, earlier_engine, explain, note_made
from .reuse import REQUEST, asked, method_configs, read_json, reuse_problem, write_request
from .spaces import space_lines
from .table import TableWriter, failure_row, finish, latest_by_key, read_rows, result_row
from .unlikely import unlikely_line, unlikely_record
from .work import WorkGroup, worker_name

__all__ = ["BatchReport", "BatchRequest", "BatchState", "MethodRun", "ProgressBar", "run_batch"]

DEFAULT_BATCH_TASKS = 16
DEFAULT_TOP_EDGES = 100
DEFAULT_CONSENSUS = 0.5
CHECK_PIECE = 32  # tasks a worker tokenizes between two updates of the progress line


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
class BatchReport:
    """What a batch did: counts, wall time, where it wrote, whether it was interrupted (``stage``:
    where: "load" before the tasks were planned, when nothing was written and ``manifest`` is
    empty; "tokenize" or "discover" after). ``failed``: the rows that did not finish, those the
    tokenizer refused before running included (the manifest counts the two apart)."""

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
    stage: str = ""


@dataclass
class _Item:
    number: int
    task_index: int
    method_index: int
    key: str


def checked_budgets(budgets, methods=(), typed: bool = True) -> None:
    """``BatchRequest.budgets`` before the model loads: "mib" or whole numbers from 0 to
    ``MAX_BUDGET`` (results.parquet's int32: 99,999,999,999 ran every method and then failed
    writing the table); ValueError in one sentence otherwise. "mib" is refused where a method of
    ``methods`` runs over token positions: its fractions of the edges were used as unit budgets,
    about 7 % of the IOI prompt's units at most, and a prompt's units depend on its length;
    ``typed``: False where "mib" is the command line's default, not the user's word."""
    over = [name for name, _, plain in method_configs(methods) if plain.get("positions")]
    if isinstance(budgets, str):
        if budgets.strip().lower() != "mib":
            raise ValueError(f"Budgets {shown(budgets, 40)} are neither edge counts nor 'mib'.")
        if over:
            raise ValueError(mib_over_units(list(dict.fromkeys(over)), default=not typed))
        return
    chosen = budget_tuple(budgets)
    if not chosen:
        raise ValueError("No budgets given; write edge counts such as 50,100,200, or mib.")
    if chosen[-1] > MAX_BUDGET:
        counted, graph = ("(edge, position) units", "prompt's") if over else ("edges", "model's")
        raise ValueError(
            f"Budget {chosen[-1]:,} is more {counted} than any {graph} graph holds (the largest budget "
            f"taken is {MAX_BUDGET:,}); a budget at or over the graph's {counted.split()[-1][:-1]} count "
            "keeps the whole graph."
        )


def _resolve_budgets(budgets, n_edges: int) -> tuple[list[int], str | None]:
    """(the budgets as edge counts of this graph, a line on what was done to them or None): MIB's
    fractions that fall on one edge count here, or budgets over the graph's edges."""
    if isinstance(budgets, str):
        chosen = mib_budgets(n_edges)
        if len(chosen) == len(MIB_FRACTIONS):
            return chosen, None
        return chosen, (
            f"mib's {len(MIB_FRACTIONS)} fractions of the edges (0.1 % to 100 %) are "
            f"{len(chosen)} distinct budgets on this graph of {n_edges:,} edges: "
            f"{', '.join(map(str, chosen))}."
        )
    chosen = list(budget_tuple(budgets))
    return chosen, over_graph_note(chosen, n_edges)


def _kept_units_line(limit: int, n_edges: int, left: list[int]) -> str:
    """What the default ``keep_edges`` keeps over token positions: the same count, as units (a
    circuit of N units holds at most N edges, so the table stays the size it is over edges; a
    prompt's unit total depends on its length, and the kept budgets are one list for the atlas and
    the consensus), and the budgets it leaves out, which ``--keep-edges`` takes back."""
    if len(left) > 2:
        budgets = f"the {len(left)} budgets from {left[0]:,} to {left[-1]:,}"
    else:
        budgets = ("budget " if len(left) == 1 else "budgets ") + " and ".join(f"{b:,}" for b in left)
    return (
        f"Over token positions the table keeps circuits up to {limit:,} units (--keep-edges' default, "
        f"10 % of the model's {n_edges:,} edges: it bounds the table as over edges), so {budgets} "
        f"{'has a curve' if len(left) == 1 else 'have curves'} but no kept circuit or consensus; "
        f"--keep-edges {left[-1]} keeps {'it' if len(left) == 1 else 'them'}."
    )


class _Run:
    """One batch run: its plan, its writer and its progress (``run_batch`` drives it)."""

    def __init__(self, request: BatchRequest, executor, store, progress, say):
        self.request, self.executor, self.store = request, executor, store
        self.progress, self.say = progress, say
        self.out = Path(request.out)
        self.state = BatchState()
        self.running = 0  # items in the group now running (its progress is a share of them)
        self.discovery_seconds = 0.0
        self.load_seconds: float | None = None
        self.stage = "load"
        self.lineage: dict[str, str] = {}  # item key: its key without the engine
        self.earlier: str | None = None  # the engine the folder's rows were made by, if recorded

    # ----- planning ------------------------------------------------------------------------------
    def plan(self) -> None:
        """Model, budgets, methods and tasks; one item (and store key) per task and method."""
        request, executor = self.request, self.executor
        source = getattr(executor, "source", None)
        if source is not None and getattr(executor, "model", None) is None:  # said: ~10 s passed unsaid
            source.check(here=executor.name == "local")  # a mistyped name: no load line before its error
            where = " on each Ray worker" if executor.name == "ray" else ""
            self.say(f"loading {source.model_id}{where} ...")
        loads, loading = getattr(executor, "model", None) is None, time.perf_counter()
        self.info = executor.start()  # the model's load (on every Ray worker): timed, part of the batch
        self.load_seconds = time.perf_counter() - loading if loads else None  # None: it came loaded
        self.spec = self.info.spec
        self.budgets, note = _resolve_budgets(request.budgets, self.spec.n_edges)
        limit = request.keep_edges if request.keep_edges is not None else max(1, self.spec.n_edges // 10)
        self.keep = [b for b in self.budgets if b <= limit]
        self.methods = method_configs(request.methods)
        over_positions = [bool(plain.get("positions")) for _, _, plain in self.methods]
        left = [b for b in self.budgets if b > limit]
        if request.keep_edges is None and any(over_positions) and left:
            self.say(_kept_units_line(limit, self.spec.n_edges, left))
        if note and (isinstance(request.budgets, str) or not any(over_positions)):
            self.say(note)
        elif note and not all(over_positions):  # over token positions, a budget counts units, not edges
            self.say(f"{note[:-1]} (in the series over edges).")
        if note:  # ACC++ keeps no edge it did not trace: said once per such method
            for name in dict.fromkeys(name for name, _, _ in self.methods):
                traits = method_traits(name)
                if traits.over_graph_keeps:
                    self.say(f"Under {traits.label} such a budget keeps {traits.over_graph_keeps}.")
        self.selection: dict = {}
        if request.tasks is not None:
            self.tasks = list(request.tasks)
        elif request.generate is not None:
            family, n, seed = request.generate
            # in the number each takes: the Dataset page shows this line while it draws ('drawing 1
            # valid questions of each of 1 MMLU subjects')
            subjects = list(request.subjects)
            what = counted(int(n), f"{family} task")
            if family == "mmlu":
                what = counted(int(n), "valid MMLU question") + (
                    f" of {subjects[0]}" if len(subjects) == 1 else f" of each of {len(subjects)} subjects"
                )
            self.say(f"drawing {what} on the model (seed {seed}) ...")
            found = executor.generate(family, int(n), int(seed), request.max_tokens, tuple(request.subjects))
            self.tasks, self.selection = list(found.tasks), dict(found.summary)
            request.problems = list(request.problems) + list(found.problems)
            self.say(f"generated {counted(len(self.tasks), f'{family} task')} (seed {seed})")
            for line in selection_lines(self.selection):
                self.say(line)
            for problem in found.problems:
                self.say(problem)
        else:
            raise ValueError("Give a dataset file or --generate FAMILY to run a batch on.")
        self.keys = [  # each task's key under the first method: equal keys are equal tasks
            self._key(task_index, 0) if self.methods else "" for task_index in range(len(self.tasks))
        ]
        _refuse_repeats(self.tasks, self.keys)
        self.out.mkdir(parents=True, exist_ok=True)
        write_tasks(self.out / "tasks.jsonl", self.tasks)
        self.items = [
            _Item(number, task_index, method_index, self._key(task_index, method_index))
            for number, (task_index, method_index) in enumerate(
                (t, m) for t in range(len(self.tasks)) for m in range(len(self.methods))
            )
        ]
        self.keys = [item.key for item in self.items]
        self.state.total = len(self.items)
        self.shapes: list = [None] * len(self.tasks)
        self.missing: dict[int, tuple] = {}  # task index: (role, token) without its leading space
        self.unlikely: dict[int, tuple] = {}  # task index: (answer's chance, top token, its chance)
        self.writer = TableWriter(self.out)

    def _key(self, task_index: int, method_index: int) -> str:
        """The item's store key (its ``lineage_key`` kept in ``lineage``: ``resumed``)."""
        name, config, _ = self.methods[method_index]
        info, request = self.info, self.request
        asked = Request.of(
            name, config, model_id=info.model_id, dtype=info.dtype, task=self.tasks[task_index].task,
            budgets=self.budgets, max_tokens=request.max_tokens, backend=info.backend,
        )  # fmt: skip
        self.lineage[asked.key] = keys.lineage_key(**asked.key_parts)
        return asked.key

    def pending(self) -> list[_Item]:
        """Items not finished yet; finished ones found in the store get their row back if missing.
        What was stored before, reused or computed again and why, is said in one sentence."""
        rows = latest_by_key(read_rows(self.out, self.say))
        statuses = dict(zip(rows.column("key").to_pylist(), rows.column("status").to_pylist()))
        found, pending = Found(items=len(self.items)), []
        for item in self.items:
            if self.store.path(item.key, "result").exists():
                if statuses.get(item.key) == "done":
                    found.reused_rows += 1
                    continue
                result = self.store.get(item.key)
                if result is not None:
                    self._keep(item, result, "store")
                    found.from_store += 1
                    continue
            pending.append(item)
        done = {key for key, status in statuses.items() if status == "done"}
        failed = {key for key, status in statuses.items() if status == "failed"}
        explain(found, pending, self.methods, done, failed, rows, self.store, self.lineage, self.earlier)
        self.state.skipped = found.reused
        self.state.resumed = found.sentence() or ""
        if self.state.resumed:
            self.say(self.state.resumed)
        return pending

    def measure(self, task_indices) -> None:
        """Each task's (length, metric, foils, unchanged prefix), or why the tokenizer refuses it
        (on a worker), in pieces, each an update of a progress line (a large dataset's check was silent)."""
        needed = sorted({i for i in task_indices if self.shapes[i] is None})
        if not needed:
            return
        state = BatchState(total=len(needed), phase="tokenize", unit="tasks", resumed=self.state.resumed)
        step = CHECK_PIECE * (getattr(self.executor, "workers", 1) or 1)  # a piece for each Ray worker
        report(self.progress, state)
        for start in range(0, len(needed), step):
            piece = needed[start : start + step]
            found = self.executor.shapes([self.tasks[i] for i in piece], self.request.max_tokens)
            for task_index, entry in zip(piece, found):
                if isinstance(entry, str):  # the sentence why it cannot run
                    self.shapes[task_index] = entry
                else:
                    self.shapes[task_index], missing, chance = entry
                    if missing:
                        self.missing[task_index] = missing
                    if chance is not None and barely_predicts(
                        self.tasks[task_index].task.answer, *chance[:2]
                    ):
                        self.unlikely[task_index] = chance
            state.done += len(piece)
            report(self.progress, state)
        report(self.progress, state, final=True)

    def runnable(self, pending: list[_Item]) -> list[_Item]:
        """The items whose task fits the model; the others are recorded as failed now. Answers and
        foils without the leading space their word takes are said, one line per role."""
        indices = {item.task_index for item in pending}
        self.measure(indices)
        for line in space_lines(self.tasks, {i: found for i, found in self.missing.items() if i in indices}):
            self.say(line)
        line = unlikely_line(
            self.tasks, {i: found for i, found in self.unlikely.items() if i in indices}, len(indices)
        )
        if line:
            self.say(line)
        fit = []
        for item in pending:
            shape = self.shapes[item.task_index]
            if isinstance(shape, str):
                self._fail(item, shape, worker=worker_name(), refused=True)
            else:
                fit.append(item)
        return fit

    # ----- rows -----------------------------------------------------------------------------------
    def _keep(self, item: _Item, result, worker: str, seconds: float | None = None) -> None:
        task = self.tasks[item.task_index]
        row = result_row(
            item.key, item.task_index, task, result, self.keep, self.request.top_edges, self.budgets,
            worker=worker, executor=self.executor.name,
        )  # fmt: skip
        if seconds is not None:
            row["seconds"] = seconds
        self.writer.add(row)

    def _fail(
        self, item: _Item, error: str, seconds: float | None = None, worker: str = "", refused: bool = False
    ) -> None:
        """A failed row; ``refused``: the task could not start (counted apart from the failed)."""
        name, _, plain = self.methods[item.method_index]
        task = self.tasks[item.task_index]
        where = f"line {task.line}: " if task.line else ""
        row = failure_row(
            item.key, item.task_index, task, name, plain, where + error,
            seconds=seconds, worker=worker, executor=self.executor.name,
        )  # fmt: skip
        self.writer.add(row)
        if refused:
            self.state.refused += 1
        else:
            self.state.failed += 1

    # ----- running --------------------------------------------------------------------------------
    def on_outcomes(self, outcomes) -> None:
        """A group finished: store each result, write each row."""
        begin, made = time.perf_counter(), []
        for outcome in outcomes:
            item = self.by_number[outcome.item]
            if outcome.result is not None:
                self.store.put(item.key, outcome.result)
                made.append(self.lineage[item.key])
                self._keep(item, outcome.result, outcome.worker, outcome.seconds)
            else:
                self._fail(item, outcome.error or "failed", outcome.seconds, outcome.worker)
            self.state.done += 1
        note_made(self.store, made)  # a later engine's resume says these were made by this one
        self.state.in_flight = 0.0
        self.state.driver_seconds += time.perf_counter() - begin
        self.running = next(self.sizes, 0)
        report(self.progress, self.state)

    def on_progress(self, fraction: float) -> None:
        self.state.in_flight = fraction * self.running
        report(self.progress, self.state)

    def execute(self, items: list[_Item]) -> bool:
        """Run the items' groups; True when Ctrl-C stopped them (what finished is kept)."""
        self.by_number = {item.number: item for item in self.items}
        groups = _groups(items, self.shapes, self.methods, self.budgets, self.tasks, self.request)
        self.sizes = iter([len(group.items) for group in groups])
        self.running = next(self.sizes, 0)
        self.state.started = time.perf_counter()
        interrupted = False
        try:
            report(self.progress, self.state)
            if groups:
                self.executor.run(groups, self.on_outcomes, self.on_progress)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.writer.flush()
        self.discovery_seconds = time.perf_counter() - self.state.started
        report(self.progress, self.state, final=True)
        return interrupted

    def manifest(self, table: pa.Table, consensus: dict | None, interrupted: bool, seconds: float) -> dict:
        request, state = self.request, self.state
        statuses = table.column("status").to_pylist()
        manifest = {
            "circuitviz": __version__,
            "engine": keys.engine_digest(),
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
            # run with the validity check off (--no-task-check): the atlas keeps every task it ran
            "task_check": gap_check_enabled(),
            "dataset": {
                "source": request.source or (f"generated {request.generate}" if request.generate else ""),
                "n_tasks": len(self.tasks),
                "problems": list(request.problems),
                "selection": self.selection,
                "unlikely_answers": unlikely_record(
                    self.tasks,
                    self.unlikely,
                    {i for i, shape in enumerate(self.shapes) if shape is not None},
                    self.out / MANIFEST,
                ),
            },
            "counts": {  # each row once: done + failed + refused (+ not run when interrupted) = items
                "items": len(self.items),
                "done": statuses.count("done"),
                "failed": statuses.count("failed") - state.refused,
                "refused": state.refused,
                "computed": state.done,
                "from_store": state.skipped,
            },
            "resumed": state.resumed or None,  # what was stored before and why it is computed again
            "seconds": seconds,
            "load_seconds": self.load_seconds,
            "discovery_seconds": self.discovery_seconds,
            "driver_seconds": state.driver_seconds,
            "interrupted": interrupted,
            "consensus": consensus,
            "store": str(getattr(self.store, "root", "")),
        }
        previous = self.out / MANIFEST
        if interrupted and previous.exists():  # keep what an earlier run found about the consensus
            manifest["consensus"] = earlier_consensus(self.out) or None
        (self.out / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        return manifest


def _checked_options(request: BatchRequest) -> None:
    """The Python API's other numeric fields, by the command line's rules, before anything loads:
    ``batch_tasks=0`` ran groups of one unsaid, ``max_tokens=0`` refused every prompt as too long,
    and ``consensus=1.5`` failed only after the whole batch had run."""
    for name, unit in (("max_tokens", "tokens"), ("batch_tasks", "tasks")):
        value = getattr(request, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a whole number of {unit}, 1 or more, not {given(value)}.")
    if request.generate is not None and request.generate[0] != "mmlu":  # 10^30 tasks: before the load
        from .generate import check_family  # the executor draws the tasks: loaded here, not at the top

        check_family(request.generate[0], request.generate[1])
    share = request.consensus
    if share is None or (isinstance(share, numbers.Real) and not isinstance(share, bool) and share == 0):
        return
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0 < share <= 1:
        raise ValueError(
            f"consensus must be a share above 0 and at most 1 (0 or None for no consensus), not {given(share)}."
        )


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
    checked_budgets(request.budgets, request.methods)
    checked_edge_count("keep_edges", request.keep_edges)  # the command line's --keep-edges rule
    checked_edge_count("top_edges", request.top_edges, least=0)  # and its --top-edges rule
    _checked_options(request)
    record = asked(request, getattr(executor, "source", None))
    problem = reuse_problem(request.out, record, request.tasks)
    if problem:
        raise ValueError(problem)
    run = _Run(request, executor, store, progress, log or (lambda text: None))
    try:
        run.plan()  # loads the model, and draws the tasks when they are generated
    except KeyboardInterrupt:  # nothing was written: the folder is as it was
        return BatchReport(Path(request.out), 0, 0, 0, 0, time.perf_counter() - begin, True,
                           executor.name, executor.workers, {}, stage="load")  # fmt: skip
    run.earlier = earlier_engine(read_json(run.out / REQUEST), read_json(run.out / MANIFEST))
    write_request(run.out, record)
    interrupted = False
    try:
        run.stage = "tokenize"
        fit = run.runnable(run.pending())
        run.stage = "discover"
        interrupted = run.execute(fit)
    except KeyboardInterrupt:  # while the tasks were measured: the refused ones are kept
        interrupted = True
        run.writer.flush()
    table = finish(run.out, run.keys)
    consensus = None
    if not interrupted and request.consensus:
        try:
            consensus = evaluate_consensus(run, table)
        except KeyboardInterrupt:
            interrupted, run.stage = True, "consensus"
    manifest = run.manifest(table, consensus, interrupted, time.perf_counter() - begin)
    return BatchReport(
        out=run.out,
        items=len(run.items),
        computed=run.state.done,
        skipped=run.state.skipped,
        failed=manifest["counts"]["failed"] + manifest["counts"]["refused"],
        seconds=manifest["seconds"],
        interrupted=interrupted,
        executor=executor.name,
        workers=executor.workers,
        manifest=manifest,
        stage=run.stage,
    )


def _refuse_repeats(tasks: list[DatasetTask], keys: list[str]) -> None:
    """Tasks given twice (the same prompt, corruption, answer, foils and metric) in one sentence
    naming them; a dataset file's repeats are left out when it is read (``dataset.py``)."""
    first: dict[str, int] = {}
    repeats = []
    for index, key in enumerate(keys):
        if key in first:
            repeats.append((first[key], index))
        else:
            first[key] = index
    if not repeats:
        return

    def where(index: int) -> str:
        item = tasks[index]
        return f"line {item.line}" if item.line else f"task {index + 1:,} ({shown(item.id)})"

    named = "; ".join(f"{where(b)} repeats {where(a)}" for a, b in repeats[:3])
    more = f"; and {len(repeats) - 3:,} more" if len(repeats) > 3 else ""
    raise ValueError(
        f"{len(repeats):,} tasks repeat another's prompt, corruption, answer and foils ({named}{more}); "
        "give each task once."
    )
