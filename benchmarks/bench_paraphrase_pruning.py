"""Paraphrase pruning's variants on the yardstick's nine prompts (embedded Gemma-3-270M, CPU).

For each prompt (``bench_bon.PROMPTS``) and variant, at one budget (default 103 edges, 1 % of the
graph): NDF on the prompt, the mean NDF on the held-out paraphrases (never used to fit, to pick a
step or to start the logits; the same split for every variant: it depends on the seed and the
valid paraphrases only), the nodes the circuit draws, and the seconds of the run (paraphrases,
warm start, learning and evaluation; the model loaded once). Variants:

    prompt-only   warm start from the prompt's EAP-IG, fitted on the prompt alone (Edge Pruning's
                  objective, with the held-out share measured)
    eap-ig        warm start from the prompt's EAP-IG, fitted on the prompt and the fit share
    average       warm start from the mean of the fit set's EAP-IG scores, same fit
    balanced      the same mean with the prompt weighing as much as the fit paraphrases together
    consensus     the geometric mean of the fit set's normalised EAP-IG scores, same fit
    bon           warm start per budget from the fit set's most faithful top-N (Best-of-N's pick)
    worst         average's warm start; each step's circuit kept by its lowest fit paraphrase's NDF
    worst-weighted  the same, the loss weighing each fit paraphrase by its error at the step before
    anchor10/30/50  average's, every step pulling the logits back 10/30/50 % of the way to the warm start
    draw50      average's, each step's loss on the prompt and a seeded half of the fit paraphrases
    anchor30-draw50  both
    pw25/pw35   average's, the prompt weighing 25/35 % of the loss (the fit paraphrases the rest;
                the default is 50 %)
    fill        average's, each step keeping the largest top-N whose pruned circuit has at most the
                budget's edges (the defaults' pruned circuits keep 65-96 of 103)
    git         fill's learning, then the kept step's mask cut where the worse of its sufficiency
                and necessity on the prompt and fit share is highest

Targets (issue 31): NDF >= 0.8 on the prompt AND mean held-out NDF >= 0.8 on 7 of the 9 prompts;
at most 40 nodes on 6 of 9; at most 10 s a prompt.

    .venv/bin/python benchmarks/bench_paraphrase_pruning.py --threads 1 [--variants eap-ig,bon] [--prompts 9]
    # some prompts only (indices into PROMPTS), other settings than the method's defaults
    .venv/bin/python benchmarks/bench_paraphrase_pruning.py --threads 1 --variants average --only 4,5,6 \
        --steps 8 --learning-rate 1.0 --n-paraphrases 6

``--wide N`` also measures each circuit on up to N template paraphrases its run never fitted to
(a steadier held-out figure than the run's own share of one to four).

Each line also gives the run's phases (paraphrases, warm-start scoring, learning, evaluation)
and the load average after it: on a shared machine, say the load beside every figure.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

from bench_bon import PROMPTS

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_average, load_timed
from circuitviz.entry.api import measure_transfer
from circuitviz.methods import get_method

VARIANTS = {  # the method's settings of each variant, over its defaults
    "prompt-only": {"warm_start": "eap-ig", "fit_paraphrases": False},
    "eap-ig": {"warm_start": "eap-ig"},
    "average": {"warm_start": "average"},
    "balanced": {"warm_start": "balanced"},
    "consensus": {"warm_start": "consensus"},
    "bon": {"warm_start": "bon"},
    "worst": {"warm_start": "average", "objective": "worst"},
    "worst-weighted": {"warm_start": "average", "objective": "worst-weighted"},
    "anchor10": {"warm_start": "average", "anchor": 0.1},
    "anchor30": {"warm_start": "average", "anchor": 0.3},
    "anchor50": {"warm_start": "average", "anchor": 0.5},
    "draw50": {"warm_start": "average", "draw": 0.5},
    "anchor30-draw50": {"warm_start": "average", "anchor": 0.3, "draw": 0.5},
    "pw25": {"warm_start": "average", "prompt_weight": 0.25},
    "pw35": {"warm_start": "average", "prompt_weight": 0.35},
    "reverse": {"warm_start": "average", "reverse": True},
    "fill": {"warm_start": "average", "cut": "fill"},
    "git": {"warm_start": "average", "cut": "git"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument(
        "--only", default=None, help="run these prompts only (indices into PROMPTS, comma separated)"
    )
    parser.add_argument("--budget", type=int, default=103)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--n-paraphrases", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--ig-steps", type=int, default=None)
    parser.add_argument("--held-out", type=float, default=None)
    parser.add_argument("--objective", default=None, help="mean, worst or worst-weighted")
    parser.add_argument("--anchor", type=float, default=None, help="overrides every variant's anchor")
    parser.add_argument("--draw", type=float, default=None, help="overrides every variant's draw")
    parser.add_argument(
        "--prompt-weight", type=float, default=None, help="overrides every variant's prompt weight"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="the paraphrases' order and the held-out split"
    )
    parser.add_argument("--warm-start", default=None, help="overrides every variant's warm start")
    parser.add_argument(
        "--wide",
        type=int,
        default=0,
        help="also measure each circuit on up to N template paraphrases its run never fitted to "
        "(entry.api.measure_transfer): a steadier held-out figure than the run's own share of 1-4",
    )
    parser.add_argument("--json", default=None)
    add_threads_argument(parser, default=1)
    args = parser.parse_args()
    apply_threads(args.threads)
    model, _ = load_timed()
    method = get_method("paraphrase-pruning")
    print(f"load average at start: {load_average()}; settings {vars(args)}", flush=True)
    rows = []
    for name in args.variants.split(","):
        settings = dict(VARIANTS[name])
        if args.steps is not None:
            settings["steps"] = args.steps
        for flag in (
            "n_paraphrases",
            "learning_rate",
            "ig_steps",
            "held_out",
            "objective",
            "anchor",
            "draw",
            "prompt_weight",
            "warm_start",
            "seed",
        ):
            if getattr(args, flag) is not None:
                settings[flag] = getattr(args, flag)
        chosen = [int(i) for i in args.only.split(",")] if args.only else range(args.prompts)
        for kind, task in [PROMPTS[i] for i in chosen]:
            start, cpu = time.perf_counter(), time.process_time()
            result = method.run_on(model, task, method.make_config(settings), budgets=[args.budget])
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            (row,) = result.details.budgets or [{}]
            held = result.details.held_out_ndf.get(str(args.budget), [])
            entry = {
                "variant": name,
                "kind": kind,
                "prompt": task.clean,
                "ndf": result.curve[0].ndf,
                "necessity": result.curve[0].necessity,
                "held_out_ndf": statistics.fmean(held) if held else math.nan,
                "n_held_out": len(held),
                "fit_ndf": row.get("fit_ndf", math.nan),
                "n_fit": len(result.details.fit),
                "nodes": row.get("nodes", 0),
                "edges": result.curve[0].n_edges,
                "warm": row.get("warm_ndf", math.nan),
                "seconds": seconds,
                "cpu_seconds": cpu,
                "best_step": row.get("best_step", 0),
                "steps": row.get("steps", 0),
                "timings": result.timings,
                "notes": result.details.notes,
                "fit": result.details.fit,
                "held_out": result.details.held_out,
                "held_out_each": held,
                "cut": row.get("cut"),  # cut git: the cut chosen, and the circuit before it
            }
            if args.wide:
                wide = measure_transfer(model, result, count=args.wide, budgets=[args.budget])
                values = wide["budgets"][str(args.budget)]["ndf"]
                entry["wide_ndf"] = statistics.fmean(values) if values else math.nan
                entry["n_wide"] = len(values)
                print(
                    f"{'':12s} {kind:16s} wide held-out {entry['wide_ndf']:.3f} (n={len(values)})", flush=True
                )
            rows.append(entry)
            if args.json:  # after every prompt: a run stopped part way keeps what it measured
                _write(args.json, rows)
            print(
                f"{name:12s} {kind:16s} NDF {entry['ndf']:.3f}  held-out {entry['held_out_ndf']:.3f} "
                f"(n={entry['n_held_out']}, fit n={entry['n_fit']} mean {entry['fit_ndf']:.3f})  "
                f"{entry['edges']} edges {entry['nodes']} nodes  {seconds:.1f} s wall {cpu:.1f} CPU s  "
                f"best step {entry['best_step']} of {entry['steps']}  (warm score {entry['warm']:.3f}; "
                f"{', '.join(f'{k} {v:.1f}' for k, v in result.timings.items())}; {load_average()})",
                flush=True,
            )
    print()
    for name in args.variants.split(","):
        mine = [r for r in rows if r["variant"] == name]
        both = sum(1 for r in mine if r["ndf"] >= 0.8 and r["held_out_ndf"] >= 0.8)
        small = sum(1 for r in mine if r["nodes"] <= 40)
        held = [r["held_out_ndf"] for r in mine if not math.isnan(r["held_out_ndf"])]
        if args.wide:
            wide = [r["wide_ndf"] for r in mine if not math.isnan(r["wide_ndf"])]
            passing = sum(1 for r in mine if r["ndf"] >= 0.8 and r["wide_ndf"] >= 0.8)
            print(
                f"{name:12s} on up to {args.wide} unfitted paraphrases: both >= 0.8 on {passing}/{len(mine)}, "
                f"mean {statistics.fmean(wide) if wide else math.nan:.3f}"
            )
        print(
            f"{name:12s} prompt NDF mean {statistics.fmean(r['ndf'] for r in mine):.3f}, held-out mean "
            f"{statistics.fmean(held) if held else math.nan:.3f}; both >= 0.8 on {both}/{len(mine)}; "
            f"<= 40 nodes on {small}/{len(mine)}; seconds median {statistics.median(r['seconds'] for r in mine):.1f} "
            f"max {max(r['seconds'] for r in mine):.1f}; CPU s median "
            f"{statistics.median(r['cpu_seconds'] for r in mine):.1f} max {max(r['cpu_seconds'] for r in mine):.1f}"
        )
    print(f"load average at end: {load_average()}")
    if args.json:
        _write(args.json, rows)


def _write(path: str, rows: list[dict]) -> None:
    with open(path, "w") as handle:
        json.dump(rows, handle, indent=1, default=str)


if __name__ == "__main__":
    main()
