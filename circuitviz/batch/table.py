"""The batch's results table: one row per (task, method), written as Parquet.

A row holds the task, the method and its config, the clean and corrupted metrics, the
faithfulness curve, CPR and CMD, the strongest edges with their scores, each kept circuit as
sparse edge indices, timings, the device and worker, and the error when the item failed. Edge
indices count the graph's edges in ``GraphSpec.edge_names`` order (the manifest holds the graph).

Circuits are kept for budgets up to ``keep_edges`` (default: 10 % of the graph's edges): as the
union of their edges (``circuit_edges``) and, per edge, a bit mask of the kept budgets whose
circuit holds it (``circuit_bits``: bit i for ``circuit_budgets[i]``), so nested and non-nested
circuits alike cost one index and one mask per edge. Larger circuits stay in the result store.

While a batch runs, rows are appended to ``parts/`` in small Parquet files (each written whole,
then renamed), so an interrupted batch keeps what it finished; ``finish`` merges them into
``results.parquet``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.curves import cmd, cpr
from ..core.results import CircuitResult
from ..core.text import first_sentence
from .dataset import DatasetTask

TABLE = "results.parquet"
PARTS = "parts"
MAX_KEPT_BUDGETS = 63  # one bit each in an int64 mask

SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("task_index", pa.int32()),
        ("task_id", pa.string()),
        ("family", pa.string()),
        ("line", pa.int32()),
        ("clean", pa.string()),
        ("corrupted", pa.string()),
        ("answer", pa.string()),
        ("foils", pa.list_(pa.string())),
        ("metric", pa.string()),
        ("n_tokens", pa.int32()),
        ("method", pa.string()),
        ("config", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("clean_metric", pa.float64()),
        ("corrupted_metric", pa.float64()),
        ("budgets", pa.list_(pa.int32())),
        ("edges_kept", pa.list_(pa.int32())),
        ("metric_values", pa.list_(pa.float64())),
        ("nfs", pa.list_(pa.float64())),
        ("ndf", pa.list_(pa.float64())),
        ("necessity", pa.list_(pa.float64())),
        ("cpr_nfs", pa.float64()),
        ("cmd_nfs", pa.float64()),
        ("cpr_ndf", pa.float64()),
        ("cmd_ndf", pa.float64()),
        ("top_edges", pa.list_(pa.int32())),
        ("top_scores", pa.list_(pa.float32())),
        ("circuit_budgets", pa.list_(pa.int32())),
        ("circuit_edges", pa.list_(pa.int32())),
        ("circuit_bits", pa.list_(pa.int64())),
        ("seconds", pa.float64()),
        ("timings", pa.string()),
        ("batch_tasks", pa.int32()),
        ("device", pa.string()),
        ("worker", pa.string()),
        ("executor", pa.string()),
    ]
)


def _number(value) -> float | None:
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def _base_row(key: str, index: int, item: DatasetTask, method: str, config: dict) -> dict:
    task = item.task
    row = {name: None for name in SCHEMA.names}
    row.update(
        key=key,
        task_index=index,
        task_id=item.id,
        family=item.family,
        line=item.line,
        clean=task.clean,
        corrupted=task.corrupted,
        answer=task.answer,
        foils=list(task.foils),
        metric=task.metric,
        method=method,
        config=json.dumps(config, sort_keys=True),
    )
    return row


def failure_row(
    key: str, index: int, item: DatasetTask, method: str, config: dict, error: str, **extra
) -> dict:
    row = _base_row(key, index, item, method, config)
    row.update(status="failed", error=error, **extra)
    return row


def kept_circuits(result: CircuitResult, keep: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(kept budgets, edges in any kept circuit, each edge's bit mask of kept budgets)."""
    spec = result.graph
    forward, backward = spec.edge_index
    budgets = [b for b in sorted(keep) if b in set(result.budgets)][:MAX_KEPT_BUDGETS]
    bits = numpy.zeros(spec.n_edges, dtype=numpy.int64)
    for position, budget in enumerate(budgets):
        member = result.circuit(budget)[forward, backward].numpy()  # [n_edges] bool
        bits[member] |= numpy.int64(1) << position
    edges = numpy.flatnonzero(bits)
    return budgets, edges.tolist(), bits[edges].tolist()


def top_edges(result: CircuitResult, count: int) -> tuple[list[int], list[float]]:
    """The ``count`` edges of largest |score|, strongest first (ties in graph order)."""
    forward, backward = result.graph.edge_index
    values = result.scores[forward, backward].float().numpy()
    order = numpy.argsort(-numpy.abs(values), kind="stable")[: max(0, count)]
    return order.tolist(), values[order].tolist()


def result_row(
    key: str,
    index: int,
    item: DatasetTask,
    result: CircuitResult,
    keep: list[int],
    top: int,
    asked: list[int] | None = None,
    **extra,
) -> dict:
    """The table row of a finished item; ``asked``: the batch's budgets, the only ones a row holds
    (ACC++ adds its whole circuit's, one per prompt: 144 edges on one, 1,313 on the next, and the
    second row was then called damaged and left out of every figure)."""
    row = _base_row(key, index, item, result.method, result.config)
    curve = sorted(result.curve, key=lambda p: p.budget)
    if asked is not None:
        curve = [point for point in curve if point.budget in set(asked)]
    total = result.graph.n_edges
    summary = {
        f"{area}_{kind}": way(curve, total, kind)
        for area, way in (("cpr", cpr), ("cmd", cmd))
        for kind in ("nfs", "ndf")
    }
    budgets, edges, bits = kept_circuits(result, keep)
    strongest, scores = top_edges(result, top)
    timings = {k: v for k, v in result.timings.items() if k != "batch_tasks"}
    row.update(
        status="done",
        n_tokens=len(result.tokens.get("clean", [])),
        clean_metric=result.baseline.clean,
        corrupted_metric=result.baseline.corrupted,
        budgets=[p.budget for p in curve],
        edges_kept=[p.n_edges for p in curve],
        metric_values=[_number(p.metric) for p in curve],
        nfs=[_number(p.nfs) for p in curve],
        ndf=[_number(p.ndf) for p in curve],
        necessity=[_number(p.necessity) for p in curve],
        cpr_nfs=_number(summary["cpr_nfs"]),
        cmd_nfs=_number(summary["cmd_nfs"]),
        cpr_ndf=_number(summary["cpr_ndf"]),
        cmd_ndf=_number(summary["cmd_ndf"]),
        top_edges=strongest,
        top_scores=scores,
        circuit_budgets=budgets,
        circuit_edges=edges,
        circuit_bits=bits,
        timings=json.dumps(timings, sort_keys=True),
        batch_tasks=int(result.timings.get("batch_tasks", 1)),
        device=result.device,
    )
    row.update(extra)
    return row


def rows_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _write_atomic(table: pa.Table, path: Path) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, temporary, compression="zstd")
    os.replace(temporary, path)


FLUSH_ENV = "CIRCUITVIZ_BATCH_FLUSH_S"  # seconds between flushes (the Dataset page's runs: 5)


class TableWriter:
    """Rows of a running batch: buffered, flushed to ``parts/`` as small Parquet files, every
    ``flush_rows`` rows or ``flush_seconds`` (default ``$CIRCUITVIZ_BATCH_FLUSH_S``, else 30 s)."""

    def __init__(self, folder: Path, flush_rows: int = 64, flush_seconds: float | None = None):
        self.folder = Path(folder)
        self.parts = self.folder / PARTS
        self.buffer: list[dict] = []
        if flush_seconds is None:
            try:
                flush_seconds = max(0.0, float(os.environ.get(FLUSH_ENV) or 30.0))
            except ValueError:
                flush_seconds = 30.0
        self.flush_rows, self.flush_seconds = flush_rows, flush_seconds
        self.last_flush = time.monotonic()
        self.count = 0

    def add(self, row: dict) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.flush_rows or time.monotonic() - self.last_flush > self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        self.parts.mkdir(parents=True, exist_ok=True)
        self.count += 1
        name = f"part-{time.time_ns()}-{os.getpid()}-{self.count:05d}.parquet"
        _write_atomic(rows_table(self.buffer), self.parts / name)
        self.buffer = []


# columns added after tables were first written: a table without them reads with them empty
OPTIONAL_COLUMNS = ("necessity",)


def with_optional_columns(table: pa.Table) -> pa.Table:
    """``table`` with every missing ``OPTIONAL_COLUMNS`` column added as nulls, in SCHEMA's order."""
    for name in OPTIONAL_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(SCHEMA.field(name), pa.nulls(table.num_rows, SCHEMA.field(name).type))
    return table.select([name for name in SCHEMA.names if name in table.column_names])


def _read(path: Path) -> pa.Table:
    return with_optional_columns(pq.read_table(path)).cast(SCHEMA)


def read_rows(folder: Path, on_damaged: Callable[[str], None] | None = None) -> pa.Table:
    """Every row written in ``folder`` (the merged table, then any parts), later rows last. A
    file that does not read as rows of this table (cut short, emptied, another file's bytes) is
    set aside under a ``.damaged`` name, never overwritten, and ``on_damaged`` is told in one
    line; its rows are then missing, so the runner reads them from the result store or computes
    them again."""
    folder = Path(folder)
    paths = [folder / TABLE] if (folder / TABLE).exists() else []
    if (folder / PARTS).is_dir():
        paths += sorted((folder / PARTS).glob("part-*.parquet"))
    tables = []
    for path in paths:
        try:
            tables.append(_read(path))
        except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as error:
            aside = _set_aside(path)
            if on_damaged is not None:
                on_damaged(
                    f"{path.relative_to(folder)} did not read ({first_sentence(error)}); "
                    f"{f'set aside as {aside.name}' if aside else 'left where it is'}, its rows are "
                    "read from the result store or computed again"
                )
    if not tables:
        return SCHEMA.empty_table()
    return pa.concat_tables(tables)


def _set_aside(path: Path) -> Path | None:
    """``path`` renamed to a free ``<name>.damaged[-N]`` beside it; None when it cannot be."""
    for number in range(100):
        aside = path.with_name(f"{path.name}.damaged{f'-{number}' if number else ''}")
        if not aside.exists():
            try:
                path.rename(aside)
            except OSError:
                return None
            return aside
    return None


def latest_by_key(table: pa.Table, keys: list[str] | None = None) -> pa.Table:
    """The last row of each key (of ``keys`` only, when given), ordered by task then method."""
    if table.num_rows == 0:
        return table
    key_column = table.column("key").to_pylist()
    last: dict[str, int] = {}
    for position, key in enumerate(key_column):
        last[key] = position
    wanted = set(keys) if keys is not None else None
    picked = [position for key, position in last.items() if wanted is None or key in wanted]
    table = table.take(pa.array(sorted(picked), type=pa.int64()))
    return table.sort_by([("task_index", "ascending"), ("method", "ascending"), ("config", "ascending")])


def finish(folder: Path, keys: list[str]) -> pa.Table:
    """Merge everything written into ``results.parquet`` (this batch's items only) and drop the parts."""
    folder = Path(folder)
    table = latest_by_key(read_rows(folder), keys)
    _write_atomic(table, folder / TABLE)
    parts = folder / PARTS
    if parts.exists():
        for part in parts.glob("part-*.parquet"):
            part.unlink(missing_ok=True)
        try:
            parts.rmdir()
        except OSError:
            pass
    return table
