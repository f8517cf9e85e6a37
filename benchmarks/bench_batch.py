"""Batch discovery and the circuit atlas: the figures of docs/datasets.md.

    python benchmarks/bench_batch.py [--part local|single|ray|atlas|gpu|all] [--n 100] [--threads 1]

- single: the one-prompt path (``Method.run_on``) on a few of the same prompts, per prompt.
- local: 100 generated IOI prompts on the embedded model, EAP-IG 20 steps, MIB's 10 budgets,
  the local executor (tasks of one length in shared passes), into a fresh store; wall time.
- ray: the same 100 prompts on a local Ray with 2 single-CPU workers; wall time, its ratio to
  the local run, each worker's throughput, the driver's time per item, and how far the two
  runs' results are apart.
- atlas: an atlas of 10,000 planted results (circuitviz.batch.planted; the table, not the
  store, is what the atlas reads): wall time and peak memory of reading it and computing the
  bands, MIB scores, consensus, stability, clusters and the map.
- gpu: prompts per second on the Gemma-3-270M shape with random weights, where a GPU exists.

Prints figures, asserts nothing. Run with OMP_NUM_THREADS set to the threads you give; say what
else ran on the machine. Run from the checkout with circuitviz installed (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from circuitviz.bench.harness import (
    add_threads_argument,
    apply_threads,
    load_timed,
    machine_line,
    peak_rss_gib,
)

FAMILY, SEED, STEPS = "ioi", 0, 20


def _tasks(n: int):
    from circuitviz.batch import generate_tasks

    model, _ = load_timed(device="cpu")
    return model, generate_tasks(model, FAMILY, n, SEED)


def part_single(args) -> None:
    from circuitviz.methods import get_method

    model, tasks = _tasks(args.n)
    method = get_method("eap-ig")
    config = method.make_config({"ig_steps": STEPS})
    from circuitviz.batch.atlas import mib_budgets
    from circuitviz.core.graph import GraphSpec

    budgets = mib_budgets(GraphSpec.from_model(model).n_edges)
    method.run_on(model, tasks[0].task, config, budgets)  # warm-up
    count = min(args.single, len(tasks))
    start = time.perf_counter()
    for item in tasks[1 : 1 + count]:
        method.run_on(model, item.task, config, budgets)
    per = (time.perf_counter() - start) / count
    print(
        f"single  one-prompt path (run_on): {per:.2f} s a prompt over {count} prompts -> {per * args.n:.0f} s for {args.n} ({machine_line()})"
    )


def _batch(args, executor: str, folder: Path, store: Path, ray_options=None):
    from circuitviz.batch import run
    from circuitviz.services.store import ResultStore

    return run(
        folder,
        generate=(FAMILY, args.n, SEED),
        methods=["eap-ig"],
        settings={"ig_steps": STEPS},
        budgets="mib",
        executor=executor,
        store=ResultStore(store, max_bytes=None),
        consensus=None if args.no_consensus else 0.5,
        batch_tasks=args.batch_tasks,
        ray_options=ray_options,
    )


def part_local(args, root: Path) -> dict:
    start = time.perf_counter()
    report = _batch(args, "local", root / "local", root / "store-local")
    wall = time.perf_counter() - start
    manifest = report.manifest
    discovery = manifest["discovery_seconds"]
    print(
        f"local   {report.items} prompts: discovery {discovery:.0f} s ({discovery / report.items:.2f} s a prompt), "
        f"whole command {wall:.0f} s (model load, generation, consensus {((manifest.get('consensus') or {}).get('seconds') or 0):.0f} s); "
        f"{report.failed} failed; driver {1000 * manifest['driver_seconds'] / max(report.items, 1):.0f} ms an item "
        f"({machine_line()})"
    )
    return {"wall": manifest["seconds"], "discovery": discovery}


def _earlier_local(root: Path) -> dict | None:
    """The local run kept in ``root`` by an earlier ``--part local --keep root``, if any."""
    manifest = root / "local" / "manifest.json"
    if not manifest.exists():
        return None
    data = json.loads(manifest.read_text())
    return {"wall": data["seconds"], "discovery": data["discovery_seconds"]}


def part_ray(args, root: Path, local: dict | None) -> None:
    import pyarrow.parquet as pq

    options = {"workers": args.ray_workers, "cpus_per_worker": 1, "local_cpus": max(2, args.ray_workers)}
    report = _batch(args, "ray", root / "ray", root / "store-ray", options)
    manifest = report.manifest
    wall = manifest["seconds"]  # as the local run's: executor start (Ray, workers loading) to the end
    rows = pq.read_table(root / "ray" / "results.parquet").to_pylist()
    per_worker: dict[str, list[float]] = {}
    for row in rows:
        per_worker.setdefault(row["worker"], []).append(row["seconds"] or 0.0)
    throughput = ", ".join(f"{len(v) / sum(v):.2f}" for v in per_worker.values() if sum(v))
    print(
        f"ray     {report.items} prompts on {report.workers} workers x 1 CPU: discovery {manifest['discovery_seconds']:.0f} s, "
        f"whole command {wall:.0f} s; each worker's prompts a second while busy: {throughput}; "
        f"driver {1000 * manifest['driver_seconds'] / max(report.items, 1):.0f} ms an item"
    )
    if local is not None:
        print(
            f"ray/local wall time (whole command): {wall / local['wall']:.2f}x; discovery: {manifest['discovery_seconds'] / local['discovery']:.2f}x"
        )
        theirs = {r["key"]: r for r in pq.read_table(root / "local" / "results.parquet").to_pylist()}
        gaps, same = [], 0
        for row in rows:
            other = theirs.get(row["key"])
            if other is None or row["status"] != "done":
                continue
            gaps += [abs(a - b) for a, b in zip(row["ndf"], other["ndf"])]
            same += (row["circuit_edges"], row["circuit_bits"]) == (
                other["circuit_edges"],
                other["circuit_bits"],
            )
        print(
            f"ray vs local: largest NDF gap {max(gaps, default=0):.2e}; kept circuits identical for {same}/{len(rows)} prompts"
        )


def part_plant(args) -> None:
    """Write a planted table of ``--atlas-prompts`` results into ``--folder`` (its own process)."""
    from circuitviz.batch import atlas
    from circuitviz.batch.planted import planted_batch
    from circuitviz.batch.table import TABLE, _write_atomic

    sizes = tuple(int(args.atlas_prompts * share) for share in (0.4, 0.3, 0.2, 0.1))
    planted = planted_batch(sizes=sizes, seed=0)
    _write_atomic(planted.batch.table, args.folder / TABLE)
    (args.folder / atlas.MANIFEST).write_text(json.dumps(planted.batch.manifest))


def part_atlas(args) -> None:
    from circuitviz.batch import atlas
    from circuitviz.batch.table import TABLE

    folder = Path(tempfile.mkdtemp(prefix="atlas-bench-"))
    try:
        command = [sys.executable, __file__, "--part", "plant", "--folder", str(folder)]
        subprocess.run([*command, "--atlas-prompts", str(args.atlas_prompts)], check=True)
        table_mb = (folder / TABLE).stat().st_size / 1e6
        before = peak_rss_gib()
        start = time.perf_counter()
        batch = atlas.BatchTable.load(folder)
        label = batch.labels[0]
        timings = {"read": time.perf_counter() - start}
        mark = time.perf_counter()
        atlas.curve_bands(batch, label)
        atlas.mib_scores(batch, label)
        timings["bands and MIB"] = time.perf_counter() - mark
        for budget in (103, 1034):
            mark = time.perf_counter()
            matrix = atlas.circuit_matrix(batch, label, budget)
            atlas.consensus_edges(matrix, 0.5)
            atlas.edge_stability(matrix, 0.5)
            found = atlas.cluster_prompts(matrix)
            atlas.circuit_map(matrix)
            timings[f"budget {budget}"] = time.perf_counter() - mark
        total = time.perf_counter() - start
        print(
            f"atlas   {batch.rows(label).num_rows:,} results ({table_mb:.0f} MB table): {total:.1f} s in all "
            f"({', '.join(f'{k} {v:.1f} s' for k, v in timings.items())}; each budget: matrix, consensus, "
            f"stability, clusters k=2..6 (found {found.k}, planted 4), map); peak memory {peak_rss_gib():.2f} GiB "
            f"(the process before reading: {before:.2f} GiB)"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def part_gpu(args) -> None:
    if not torch.cuda.is_available():
        print("gpu     no GPU in this session: the GPU line is printed where one exists")
        return
    from circuitviz.bench.toy_models import random_model
    from circuitviz.core.tasks import PromptTask
    from circuitviz.methods import RunContext, get_method

    model = random_model("gemma-3-270m", device="cuda")
    names = ["Mary", "John", "Alice", "Bob", "Carl", "Tom", "Anna"]
    tasks = [
        PromptTask(f"When {a} and {b} went to the {p} , {b} gave a {o} to", f"When Alice and Bob went to the {p} , Carl gave a {o} to", f" {a}", (f" {b}",))
        for a in names for b in names if a != b for p in ("store", "park") for o in ("drink", "ball")
    ][: args.n]  # fmt: skip
    method = get_method("eap-ig")
    config = method.make_config({"ig_steps": STEPS})
    from circuitviz.batch.atlas import mib_budgets
    from circuitviz.core.graph import GraphSpec

    budgets = mib_budgets(GraphSpec.from_model(model).n_edges)
    for size in (1, 16, 64):
        group = tasks[:size]
        method.run_batch(
            [RunContext(model, t) for t in group], config, budgets
        )  # warm-up (learns chunk sizes)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for offset in range(0, len(tasks) - len(tasks) % size, size):
            method.run_batch([RunContext(model, t) for t in tasks[offset : offset + size]], config, budgets)
        torch.cuda.synchronize()
        done = len(tasks) - len(tasks) % size
        print(
            f"gpu     {torch.cuda.get_device_name()}: {done / (time.perf_counter() - start):.1f} prompts/s with {size} prompts a batch (Gemma-3-270M shape, random weights, {len(tasks[0].clean.split())} words)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--part", default="all", choices=["all", "single", "local", "ray", "atlas", "gpu", "plant"]
    )
    parser.add_argument("--folder", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--single", type=int, default=5, help="prompts timed on the one-prompt path")
    parser.add_argument("--batch-tasks", type=int, default=16)
    parser.add_argument("--ray-workers", type=int, default=2, help="single-CPU Ray workers")
    parser.add_argument("--atlas-prompts", type=int, default=10_000)
    add_threads_argument(parser)
    parser.add_argument("--no-consensus", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="keep the batch folders here")
    args = parser.parse_args()
    apply_threads(args.threads)
    if args.part == "plant":
        part_plant(args)
        return
    print(f"bench_batch: {' '.join(sys.argv[1:])}; {machine_line()}")
    root = args.keep or Path(tempfile.mkdtemp(prefix="batch-bench-"))
    try:
        local = None
        if args.part in ("all", "single"):
            part_single(args)
        if args.part in ("all", "local"):
            local = part_local(args, root)
        if args.part in ("all", "ray"):
            part_ray(args, root, local if local is not None else _earlier_local(root))
        if args.part in ("all", "atlas"):
            # its own process, so its peak memory is its own
            if args.part == "all":
                subprocess.run(
                    [sys.executable, __file__, "--part", "atlas", "--atlas-prompts", str(args.atlas_prompts)],
                    check=False,
                )
            else:
                part_atlas(args)
        if args.part in ("all", "gpu"):
            part_gpu(args)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
