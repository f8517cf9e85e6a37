"""Each series' consensus circuit at every kept budget, evaluated on every prompt with a finished
row into ``consensus.parquet`` (``run_batch`` calls ``evaluate_consensus`` after discovery)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pyarrow as pa

from .atlas import CONSENSUS, MANIFEST, BatchTable, circuit_matrix, consensus_edges
from .progress import BatchState, report
from .table import _write_atomic
from .work import MaskGroup

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


def earlier_consensus(out: Path) -> dict:
    """What an earlier run of this folder recorded about its consensus evaluation ({} if none, or
    if its manifest does not read as one: the evaluation then runs again)."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    consensus = manifest.get("consensus") if isinstance(manifest, dict) else None
    return consensus if isinstance(consensus, dict) else {}


def evaluate_consensus(run, table: pa.Table) -> dict | None:
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
    before = earlier_consensus(out)
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
    state = BatchState(total=len(done), phase="consensus", resumed=run.state.resumed)
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
    report(progress, state, final=True)
    _write_atomic(pa.Table.from_pylist(rows, schema=CONSENSUS_SCHEMA), out / CONSENSUS)
    return {
        "threshold": float(request.consensus),
        "digest": digest,
        "circuits": {name: len(edges) for name, (_, _, edges) in circuits.items()},
        "prompts": len(done),
        "seconds": time.perf_counter() - begin,
    }
