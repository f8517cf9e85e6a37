"""Benchmark of the Best-of-N family (query circuits) on the embedded Gemma-3-270M.

Part 1, timings (issue targets on a 2-core CPU): a 15-token prompt, p = 9 template paraphrases,
m = 20 IG steps, 10 budgets: the whole BoN curve from cold (no stored scores); an iBoN and a
BoN-CSM circuit for a new budget (target < 50 ms, no model pass); its NDF (target < 1 s, one
batched evaluation).

Part 2, faithfulness: NDF at 1%, 5% and 10% of the edges for single, average, BoN, iBoN and
BoN-CSM over prompts of different kinds (indirect object, factual recall, arithmetic, multiple
choice, gender bias). iBoN and BoN-CSM are built from BoN circuits at the anchors 0.5%, 2.5%, 7.5% and 15%,
so at 1/5/10% they interpolate rather than copy BoN. Printed as markdown tables.

    .venv/bin/python benchmarks/bench_bon.py                 # both parts, all prompts
    .venv/bin/python benchmarks/bench_bon.py --threads 1     # on a shared, busy CPU (see README)
    .venv/bin/python benchmarks/bench_bon.py --skip-timing --prompts 4

Score matrices go to a result store (default: a fresh temporary folder, so part 1 is cold);
``--store DIR`` reuses one across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_timed
from circuitviz.bench.prompts import YARDSTICK_PROMPTS
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.details.query import variant_circuit
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method
from circuitviz.methods.bon import QueryCircuitConfig
from circuitviz.query.families import EXAMPLE_TASKS
from circuitviz.query.variants import csm_circuit, csm_matrices, ibon_circuit
from circuitviz.services.store import ResultStore

TIMING_BUDGETS = [25, 50, 100, 200, 300, 500, 1000, 2000, 3000, 5000]
NEW_BUDGET = 1234
REPORT_FRACTIONS = (0.01, 0.05, 0.10)
ANCHOR_FRACTIONS = (0.005, 0.025, 0.075, 0.15)
VARIANTS = ("single", "average", "bon", "ibon", "bon-csm")
LABELS = {"single": "single", "average": "average", "bon": "BoN", "ibon": "iBoN", "bon-csm": "BoN-CSM"}

# the nine prompts (kind, task): the yardstick's, kept in the package (bench.prompts)
PROMPTS = YARDSTICK_PROMPTS


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def progress(phase: str, fraction: float) -> None:
    print(
        f"\r    {phase:<11} {100 * fraction:5.1f}%",
        end="\n" if fraction >= 1 else "",
        file=sys.stderr,
        flush=True,
    )


def median_ms(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def config(args, **values) -> QueryCircuitConfig:
    return QueryCircuitConfig(n_paraphrases=args.p, ig_steps=args.ig_steps, **values)


def part_timings(model, args, store: ResultStore) -> list[str]:
    task = EXAMPLE_TASKS["ioi"]
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, task)
    lines = [
        f"### Timings: {prepared.n_positions}-token prompt, p = {args.p}, m = {args.ig_steps}, "
        f"{len(TIMING_BUDGETS)} budgets, {torch.get_num_threads()} torch thread(s)",
        "",
        "| step | seconds | what |",
        "|---|---:|---|",
    ]
    log("part 1: the whole BoN curve from cold")
    start = time.perf_counter()
    bon = get_method("bon").run_on(
        model, task, config(args, compare=False), budgets=TIMING_BUDGETS, progress=progress, store=store
    )
    total = time.perf_counter() - start
    t, counts = bon.timings, bon.details.counts
    lines += [
        f"| whole BoN curve (cold) | {total:.1f} | everything below |",
        f"| clean/corrupted runs | {t['clean_corrupted_s']:.1f} | the Evaluator of q |",
        f"| paraphrases | {t['paraphrases_s']:.1f} | templates, each pair checked by a forward pass |",
        f"| scoring | {t['scoring_s']:.1f} | EAP-IG of {counts['scored_pairs']} pairs x {args.ig_steps} steps |",
        f"| candidate circuits | {t['selection_s']:.1f} | top-N and pruning |",
        f"| evaluation | {t['evaluation_s']:.1f} | {counts['circuits_evaluated']} circuits on q, batched |",
    ]
    log("part 1: all five variants from the stored scores")
    start = time.perf_counter()
    everything = get_method("bon").run_on(
        model, task, config(args, compare=True), budgets=TIMING_BUDGETS, progress=progress, store=store
    )
    lines.append(
        f"| all five variants, stored scores | {time.perf_counter() - start:.1f} | "
        f"{everything.details.counts['circuits_evaluated']} circuits evaluated, no scoring |"
    )

    log("part 1: a circuit for a new budget")
    extra = everything.details
    anchors = extra.anchor_budgets
    circuits = {a: spec.mask_from_edge_names(extra.bon_circuits[str(a)]) for a in anchors}
    scores = {a: _winner_scores(everything, a) for a in anchors}
    csm = csm_matrices(circuits, scores, spec)
    timing_ms = {
        "iBoN, tensors": median_ms(lambda: ibon_circuit(circuits, scores, NEW_BUDGET, spec), 30),
        "BoN-CSM, tensors": median_ms(lambda: csm_circuit(*csm, NEW_BUDGET, spec), 30),
        "iBoN, from the stored result": median_ms(
            lambda: variant_circuit(everything, NEW_BUDGET, "ibon"), 10
        ),
        "BoN-CSM, from the stored result": median_ms(
            lambda: variant_circuit(everything, NEW_BUDGET, "bon-csm"), 10
        ),
    }
    lines += [
        "",
        f"New budget {NEW_BUDGET} (between the anchors {anchors}):",
        "",
        "| step | ms |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {value:.1f} |" for name, value in timing_ms.items()]
    start = time.perf_counter()
    evaluator = Evaluator(model, spec, prepared)
    setup = 1000 * (time.perf_counter() - start)
    ibon = variant_circuit(everything, NEW_BUDGET, "ibon")
    csm_mask = variant_circuit(everything, NEW_BUDGET, "bon-csm")
    one = median_ms(lambda: evaluator.metrics(ibon[None]), 3)
    both = median_ms(lambda: evaluator.metrics(torch.stack([ibon, csm_mask])), 3)
    lines += [
        f"| NDF of one circuit (one batched evaluation) | {one:.0f} |",
        f"| NDF of the iBoN and BoN-CSM circuits together | {both:.0f} |",
        f"| (once per prompt: the Evaluator's clean/corrupted runs) | {setup:.0f} |",
    ]
    return lines


def _winner_scores(result, anchor: int) -> torch.Tensor:
    from circuitviz.query.variants import edge_matrix

    winner = result.details.anchor_winners[str(anchor)]
    return edge_matrix(result.graph, result.details.edge_scores["candidates"][str(winner)])


def part_table(model, args, store: ResultStore) -> list[str]:
    spec = GraphSpec.from_model(model)
    reports = [round(f * spec.n_edges) for f in REPORT_FRACTIONS]
    anchors = [round(f * spec.n_edges) for f in ANCHOR_FRACTIONS]
    budgets = sorted(set(reports) | set(anchors))
    rows = []
    chosen = PROMPTS[: args.prompts] if args.prompts else PROMPTS
    for number, (kind, task) in enumerate(chosen, start=1):
        log(f"part 2: prompt {number}/{len(chosen)} ({kind}): {task.clean[:50]!r}")
        start = time.perf_counter()
        result = get_method("bon").run_on(
            model,
            task,
            config(args, anchor_budgets=",".join(map(str, anchors))),
            budgets=budgets,
            progress=progress,
            store=store,
        )
        seconds = time.perf_counter() - start
        curves = {v: {p["budget"]: p["ndf"] for p in result.details.curves[v]} for v in VARIANTS}
        per_budget = {e["budget"]: e for e in result.details.per_budget}
        rows.append(
            {
                "kind": kind,
                "prompt": task.clean,
                "candidates": len(result.details.candidates),
                "baseline": result.baseline,
                "ndf": {b: {v: curves[v][b] for v in VARIANTS} for b in reports},
                "paraphrase_won": {b: per_budget[b]["winner"] != 0 for b in reports},
                "seconds": seconds,
            }
        )
        log(f"    {seconds:.0f} s; NDF at 5%: {rows[-1]['ndf'][reports[1]]}")
    lines = [
        f"### NDF at fixed budgets over {len(rows)} prompts (p = {args.p}, m = {args.ig_steps}; "
        f"anchors {', '.join(map(str, anchors))} edges)",
        "",
        "Mean NDF on the original prompt:",
        "",
        "| budget | " + " | ".join(LABELS[v] for v in VARIANTS) + " | BoN won by a paraphrase |",
        "|---|" + "---:|" * (len(VARIANTS) + 1),
    ]
    for fraction, budget in zip(REPORT_FRACTIONS, reports):
        means = [statistics.mean(r["ndf"][budget][v] for r in rows) for v in VARIANTS]
        won = sum(r["paraphrase_won"][budget] for r in rows)
        lines.append(
            f"| {budget} ({fraction:.0%}) | "
            + " | ".join(f"{m:.3f}" for m in means)
            + f" | {won}/{len(rows)} |"
        )
    for fraction, budget in zip(REPORT_FRACTIONS, reports):
        lines += [
            "",
            f"Per prompt at {budget} edges ({fraction:.0%}):",
            "",
            "| kind | prompt | L(M(q)) | L(M(q')) | candidates | "
            + " | ".join(LABELS[v] for v in VARIANTS)
            + " |",
            "|---|---|---:|---:|---:|" + "---:|" * len(VARIANTS),
        ]
        for r in rows:
            prompt = r["prompt"].replace("\n", " ").replace("|", "/")
            prompt = prompt if len(prompt) <= 48 else prompt[:45] + "..."
            cells = " | ".join(f"{r['ndf'][budget][v]:.3f}" for v in VARIANTS)
            lines.append(
                f"| {r['kind']} | {prompt} | {r['baseline'].clean:+.2f} | {r['baseline'].corrupted:+.2f} "
                f"| {r['candidates']} | {cells} |"
            )
    lines += ["", "Seconds per prompt: " + ", ".join(f"{r['seconds']:.0f}" for r in rows)]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_threads_argument(parser)
    parser.add_argument("--p", type=int, default=9, help="paraphrases per prompt")
    parser.add_argument("--ig-steps", type=int, default=20, help="EAP-IG steps")
    parser.add_argument(
        "--prompts", type=int, default=0, help="only the first N prompts of the table (0: all)"
    )
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--skip-table", action="store_true")
    parser.add_argument("--store", type=Path, default=None, help="result store folder (default: a fresh one)")
    args = parser.parse_args()
    apply_threads(args.threads)
    from circuitviz.models import EMBEDDED_MODEL

    model, seconds = load_timed(EMBEDDED_MODEL)
    log(f"loaded {EMBEDDED_MODEL} in {seconds:.1f} s")
    store = ResultStore(args.store or tempfile.mkdtemp(prefix="bench-bon-"))
    lines = [f"## Best-of-N benchmark ({EMBEDDED_MODEL}, {GraphSpec.from_model(model).n_edges} edges)", ""]
    if not args.skip_timing:
        lines += part_timings(model, args, store) + [""]
        print("\n".join(lines), flush=True)
        lines = []
    if not args.skip_table:
        lines += part_table(model, args, store)
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
