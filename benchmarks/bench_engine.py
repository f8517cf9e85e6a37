"""Engine timings on the embedded model: load, clean/corrupted runs, scoring, evaluation, memory.

    .venv/bin/python benchmarks/bench_engine.py [--device cpu|cuda] [--repeats 3] [--ig-steps 20] [--threads N]

Prints the time per phase (median of the repeats) so the slow part is visible, and the peak
resident memory of the process. No assertions: figures go into the README and the issue note.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from circuitviz.evaluate import circuits_at_budgets  # noqa: E402
from circuitviz.graph import GraphSpec  # noqa: E402
from circuitviz.methods import RunContext, get_method  # noqa: E402
from circuitviz.models import EMBEDDED_MODEL, load_model  # noqa: E402
from circuitviz.tasks import PromptTask, prepare_task  # noqa: E402

TASK = PromptTask(
    clean="When Mary and John went to the store, John gave a drink to",
    corrupted="When Alice and Bob went to the store, Carl gave a drink to",
    answer=" Mary",
    foils=(" John",),
)
BUDGETS = [20, 50, 100, 200, 500, 1000, 2000, 3000, 5000, 8000]


def peak_rss_gb() -> float:
    """Peak resident set size of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def timed(function, *args):
    start = time.perf_counter()
    value = function(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--device", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ig-steps", type=int, default=20)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model, load_s = timed(lambda: load_model(args.model, device=args.device))
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, TASK)
    device = next(model.parameters()).device
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, torch threads {torch.get_num_threads()}"
    )
    print(f"model {args.model} on {device}: {spec.n_edges} edges; prompt {prepared.n_positions} tokens")
    print(f"load (warm disk cache): {load_s:.2f}s; peak RSS after load {peak_rss_gb():.2f} GB")

    ig = get_method("eap-ig")
    eap = get_method("eap")
    config = ig.make_config({"ig_steps": args.ig_steps})
    phases: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        ctx = RunContext(model, TASK)
        evaluator, seconds = timed(lambda ctx=ctx: ctx.evaluator)
        phases.setdefault("clean+corrupted runs", []).append(seconds)
        _, seconds = timed(eap.score, ctx, eap.default_config())
        phases.setdefault("EAP scoring", []).append(seconds)
        scores, seconds = timed(ig.score, ctx, config)
        phases.setdefault(f"EAP-IG scoring ({args.ig_steps} steps)", []).append(seconds)
        circuits, seconds = timed(circuits_at_budgets, spec, scores.float().cpu(), BUDGETS)
        phases.setdefault("selection (top-N + prune, 10 budgets)", []).append(seconds)
        curve, seconds = timed(evaluator.curve, circuits, BUDGETS)
        phases.setdefault("evaluation (10-budget curve, batched)", []).append(seconds)

    print(f"\nmedian of {args.repeats} repeats:")
    for phase, values in phases.items():
        print(f"  {phase:<42} {statistics.median(values):7.3f}s   (min {min(values):.3f}s)")
    total = sum(statistics.median(v) for k, v in phases.items() if not k.startswith("EAP scoring"))
    print(f"  {'EAP-IG discovery total (no load)':<42} {total:7.3f}s")
    print(f"peak RSS: {peak_rss_gb():.2f} GB")
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.2f} GB")
    print(f"\nclean {evaluator.baseline.clean:+.3f}, corrupted {evaluator.baseline.corrupted:+.3f}")
    for point in curve:
        print(
            f"  budget {point.budget:>5}: {point.n_edges:>5} edges, NDF {point.ndf:.3f}, NFS {point.nfs:+.3f}"
        )


if __name__ == "__main__":
    main()
