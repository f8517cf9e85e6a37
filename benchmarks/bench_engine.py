"""Engine timings on the embedded model: load, clean/corrupted runs, scoring, evaluation, memory.

    .venv/bin/python benchmarks/bench_engine.py [--device cpu|cuda] [--repeats 3] [--ig-steps 20] [--threads N]

Prints the time per phase (median of the repeats) so the slow part is visible, and the peak
resident memory of the process. No assertions: figures go into the README and the issue note.
"""

from __future__ import annotations

import argparse
import statistics

from circuitviz.bench.harness import (
    add_threads_argument,
    apply_threads,
    ioi_task,
    load_timed,
    machine_line,
    peak_memory_gib,
    peak_rss_gib,
    timed,
)
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.measure.evaluate import circuits_at_budgets, curves_of_tasks, forget_prompt_runs
from circuitviz.methods import RunContext, get_method
from circuitviz.models import EMBEDDED_MODEL
from circuitviz.positions.graph import units_at_budgets

TASK = ioi_task()
POSITION_SCORING = "positions: EAP-IG scoring, per unit"
POSITION_CURVE = "positions: evaluation (10-budget unit curve)"
BUDGETS = [20, 50, 100, 200, 500, 1000, 2000, 3000, 5000, 8000]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--device", default=None)
    parser.add_argument("--backend", choices=["bridge", "hooked"], default=None, help="default: load_model's")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ig-steps", type=int, default=20)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)

    model, load_s = load_timed(args.model, device=args.device, backend=args.backend)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, TASK)
    device = next(model.parameters()).device
    print(machine_line())
    print(
        f"model {args.model} ({type(model).__name__}) on {device}: {spec.n_edges} edges; prompt {prepared.n_positions} tokens"
    )
    print(f"load (warm disk cache): {load_s:.2f}s; peak RSS after load {peak_rss_gib():.2f} GiB")

    ig = get_method("eap-ig")
    eap = get_method("eap")
    config = ig.make_config({"ig_steps": args.ig_steps})
    phases: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        forget_prompt_runs(model)  # each repeat runs the clean prompt itself (as a fresh prompt does)
        ctx = RunContext(model, TASK)
        evaluator, seconds = timed(lambda ctx=ctx: ctx.evaluator, sync=device)
        phases.setdefault("clean+corrupted runs", []).append(seconds)
        _, seconds = timed(eap.score_batch, [ctx], eap.default_config(), sync=device)
        phases.setdefault("EAP scoring", []).append(seconds)
        ((scores, _),), seconds = timed(ig.score_batch, [ctx], config, sync=device)
        phases.setdefault(f"EAP-IG scoring ({args.ig_steps} steps)", []).append(seconds)
        circuits, seconds = timed(circuits_at_budgets, spec, scores.float().cpu(), BUDGETS, sync=device)
        phases.setdefault("selection (top-N + prune, 10 budgets)", []).append(seconds)
        _, seconds = timed(
            curves_of_tasks, [evaluator], circuits[None], BUDGETS, with_necessity=False, sync=device
        )
        phases.setdefault("evaluation (10-budget curve, NDF only)", []).append(seconds)
        (curve,), seconds = timed(curves_of_tasks, [evaluator], circuits[None], BUDGETS, sync=device)
        phases.setdefault("evaluation (10-budget curve, batched)", []).append(seconds)
        # the same over (edge, position) units: scores kept per position, each unit patched at its own
        units, seconds = timed(ig.score_positions, ctx, config, sync=device)
        phases.setdefault(POSITION_SCORING, []).append(seconds)
        unit_circuits, seconds = timed(units_at_budgets, spec, units.float(), BUDGETS, sync=device)
        phases.setdefault("positions: selection (units, 10 budgets)", []).append(seconds)
        _, seconds = timed(curves_of_tasks, [evaluator], unit_circuits[None], BUDGETS, sync=device)
        phases.setdefault(POSITION_CURVE, []).append(seconds)

    print(f"\nmedian of {args.repeats} repeats:")
    for phase, values in phases.items():
        print(f"  {phase:<42} {statistics.median(values):7.3f}s   (min {min(values):.3f}s)")
    alone, both = (
        statistics.median(phases[f"evaluation (10-budget curve, {kind})"]) for kind in ("NDF only", "batched")
    )
    print(
        f"  necessity beside NDF costs {both / alone:.2f}x the NDF-only evaluation (the complements in the same batch)"
    )
    agnostic = ("EAP scoring", "positions:")
    total = sum(
        statistics.median(v) for k, v in phases.items() if not k.startswith(agnostic) and "NDF only" not in k
    )
    print(f"  {'EAP-IG discovery total (no load)':<42} {total:7.3f}s")
    median = {k: statistics.median(v) for k, v in phases.items()}
    scoring = median[POSITION_SCORING] / median[f"EAP-IG scoring ({args.ig_steps} steps)"]
    evaluation = median[POSITION_CURVE] / median["evaluation (10-budget curve, batched)"]
    print(f"  positions / position-agnostic: scoring {scoring:.2f}x, faithfulness curve {evaluation:.2f}x")
    print(f"peak RSS: {peak_rss_gib():.2f} GiB")
    if device.type == "cuda":
        print(f"peak GPU memory: {peak_memory_gib(device):.2f} GiB")
    print(f"\nclean {evaluator.baseline.clean:+.3f}, corrupted {evaluator.baseline.corrupted:+.3f}")
    for point in curve:
        print(
            f"  budget {point.budget:>5}: {point.n_edges:>5} edges, NDF {point.ndf:.3f}, NFS {point.nfs:+.3f}, "
            f"necessity {point.necessity:.3f}"
        )


if __name__ == "__main__":
    main()
