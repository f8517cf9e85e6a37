"""The exact evaluator against the frozen-scale linearisation it replaced, on the embedded Gemma.

For each of the yardstick's nine prompts (``bench_bon.PROMPTS``):
(a) every head's gap |L(graph without the head's out-edges) - L(the head patched at z)| with the
    exact evaluator and with the linearisation (Gemma's post-attention norm frozen at each run's
    scale, the evaluator before 2026-12), max and median over the 72 heads;
(b) EAP-IG's circuits at 0.5, 1, 2, 5 and 10 % of the edges: NDF and necessity with each
    evaluator (the yardstick's EAP-IG row, moved);
(c) the cost of (b)'s evaluation (NDF and necessity of the five budgets in one batched call), CPU
    time of this process with each evaluator, alternating, so the machine's load hits both alike.

The linearisation is obtained by switching the renormalisation off in this process only
(``SharedNormPatch`` adds nothing); nothing in the product can do that.

    .venv/bin/python benchmarks/bench_exact_norm.py --threads 1 [--prompts 9] [--ig-steps 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import contextmanager

import torch
from bench_bon import PROMPTS

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_average, load_timed
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.engine import renorm
from circuitviz.engine.patching import node_patched_metrics
from circuitviz.measure.evaluate import Evaluator, circuits_at_budgets, curves_of_tasks
from circuitviz.methods import get_method

FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.10)


@contextmanager
def linearised():
    """The evaluator as it was: no per-reader renormalisation (this process only)."""
    correction, call = renorm.SharedNormPatch.correction, renorm.SharedNormPatch.__call__
    renorm.SharedNormPatch.correction = lambda self, readers: None
    renorm.SharedNormPatch.__call__ = lambda self, *args: None
    try:
        yield
    finally:
        renorm.SharedNormPatch.correction, renorm.SharedNormPatch.__call__ = correction, call


def head_gaps(model, spec: GraphSpec, evaluator: Evaluator) -> torch.Tensor:
    """|L(without a head's out-edges) - L(head patched at z)| per head.  # [n_heads_total]"""
    heads = [
        n
        for layer in range(spec.n_layers)
        for n in range(spec.head_forward(layer).start, spec.head_forward(layer).stop)
    ]
    circuits = spec.edge_mask[None].repeat(len(heads), 1, 1)
    for row, head in enumerate(heads):
        circuits[row, head] = False
    return (evaluator.metrics(circuits) - node_patched_metrics(model, spec, evaluator.prepared, heads)).abs()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--ig-steps", type=int, default=20)
    parser.add_argument("--json", default=None)
    add_threads_argument(parser, default=1)
    args = parser.parse_args()
    apply_threads(args.threads)
    model, _ = load_timed()
    spec = GraphSpec.from_model(model)
    budgets = [round(f * spec.n_edges) for f in FRACTIONS]
    print(f"load average at start: {load_average()}")
    rows = []
    for kind, task in PROMPTS[: args.prompts]:
        evaluator = Evaluator(model, spec, prepare_task(model, task))
        exact_gaps = head_gaps(model, spec, evaluator)
        with linearised():
            frozen_gaps = head_gaps(model, spec, evaluator)
        method = get_method("eap-ig")
        scores = method.run_on(
            model, task, method.make_config({"ig_steps": args.ig_steps}), budgets=budgets
        ).scores
        circuits = circuits_at_budgets(spec, scores, budgets)[None]
        seconds = {"exact": [], "frozen": []}
        curves = {}
        for _ in range(2):
            for name in ("frozen", "exact"):
                start = time.process_time()
                if name == "frozen":
                    with linearised():
                        curves[name] = curves_of_tasks([evaluator], circuits, budgets)[0]
                else:
                    curves[name] = curves_of_tasks([evaluator], circuits, budgets)[0]
                seconds[name].append(time.process_time() - start)
        row = {
            "kind": kind,
            "prompt": task.clean,
            "gap_exact": {"max": float(exact_gaps.max()), "median": float(exact_gaps.median())},
            "gap_frozen": {"max": float(frozen_gaps.max()), "median": float(frozen_gaps.median())},
            "ndf": {name: [p.ndf for p in curve] for name, curve in curves.items()},
            "necessity": {name: [p.necessity for p in curve] for name, curve in curves.items()},
            "cpu_s": {name: min(values) for name, values in seconds.items()},
        }
        rows.append(row)
        print(
            f"{kind:16s} head gap max/median: exact {row['gap_exact']['max']:.1e}/{row['gap_exact']['median']:.1e}"
            f"  frozen {row['gap_frozen']['max']:.3f}/{row['gap_frozen']['median']:.3f}"
            f"  | EAP-IG NDF frozen {' '.join(f'{v:.3f}' for v in row['ndf']['frozen'])}"
            f" -> exact {' '.join(f'{v:.3f}' for v in row['ndf']['exact'])}"
            f"  | curve CPU s frozen {row['cpu_s']['frozen']:.2f} exact {row['cpu_s']['exact']:.2f}",
            flush=True,
        )
    print(f"\nbudgets {budgets} ({', '.join(f'{100 * f:g} %' for f in FRACTIONS)} of {spec.n_edges} edges)")
    for name in ("frozen", "exact"):
        ndf = [statistics.mean(r["ndf"][name][i] for r in rows) for i in range(len(budgets))]
        nec = [statistics.mean(r["necessity"][name][i] for r in rows) for i in range(len(budgets))]
        print(f"EAP-IG mean NDF ({name}):       {' '.join(f'{v:.3f}' for v in ndf)}")
        print(f"EAP-IG mean necessity ({name}): {' '.join(f'{v:.3f}' for v in nec)}")
    shifts = [abs(a - b) for r in rows for a, b in zip(r["ndf"]["exact"], r["ndf"]["frozen"])]
    print(
        f"|NDF exact - NDF frozen| over prompts and budgets: max {max(shifts):.3f}, mean {statistics.mean(shifts):.3f}"
    )
    worst = max(r["gap_exact"]["max"] for r in rows)
    print(f"worst head gap: exact {worst:.1e}, frozen {max(r['gap_frozen']['max'] for r in rows):.3f} logit")
    ratio = sum(r["cpu_s"]["exact"] for r in rows) / sum(r["cpu_s"]["frozen"] for r in rows)
    print(f"curve evaluation cost (CPU time, NDF + necessity, 5 budgets): exact / frozen = {ratio:.2f}x")
    print(f"load average at end: {load_average()}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
