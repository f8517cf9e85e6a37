"""CD-T and neuron-level circuits on an embedded model: NDF and necessity at the yardstick's
budgets, and seconds per prompt, over the first prompts of the yardstick (``bench_bon.PROMPTS``).

For each method (a registered name, optionally with settings as name:key=value;key=value) and
prompt: the NDF and necessity of its circuits at 0.5, 1, 2, 5 and 10 % of the edges (the shared
evaluator; with ``neurons`` also the neuron circuits' curve, top k neurons per MLP), and the wall seconds of the whole run (scoring and the curve) and of its scoring
phase, with the load average beside them. Time it with no other benchmark running:

    .venv/bin/python benchmarks/bench_cdt_neurons.py --threads 1 \
        --prompts 2 --methods cd-t,eap-ig --model smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench_bon import PROMPTS  # the yardstick's nine prompts (a script beside this one)

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_average, load_timed
from circuitviz.core.graph import GraphSpec
from circuitviz.methods import get_method

FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.10)


def parse_method(text: str) -> tuple[str, dict]:
    """'eap:neurons=true;neuron_top_k=32' -> ('eap', {'neurons': 'true', 'neuron_top_k': '32'})."""
    name, _, rest = text.partition(":")
    settings = dict(item.split("=", 1) for item in rest.split(";") if "=" in item)
    return name.strip(), settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="cd-t", help="comma-separated methods (name:key=value;...)")
    parser.add_argument("--prompts", type=int, default=2, help="the first N prompts (0: all nine)")
    parser.add_argument("--model", default=None, help="model id (default: the embedded Gemma-3-270M)")
    parser.add_argument("--json", default=None, help="write the per-prompt figures here")
    add_threads_argument(parser, default=1)
    args = parser.parse_args()
    apply_threads(args.threads)
    model, _ = load_timed(args.model)
    spec = GraphSpec.from_model(model)
    budgets = [max(1, round(f * spec.n_edges)) for f in FRACTIONS]
    chosen = PROMPTS[: args.prompts] if args.prompts else PROMPTS
    rows = []
    for text in [m for m in args.methods.split(",") if m.strip()]:
        name, settings = parse_method(text)
        method = get_method(name)
        for kind, task in chosen:
            config = method.make_config(settings) if settings else None
            start = time.perf_counter()
            result = method.run_on(model, task, config, budgets=budgets)
            seconds = time.perf_counter() - start
            row = {
                "method": text,
                "prompt": kind,
                "clean": task.clean,
                "ndf": [round(p.ndf, 3) for p in result.curve],
                "necessity": [round(p.necessity, 3) for p in result.curve],
                "seconds": round(seconds, 2),
                "scoring_s": round(result.timings.get("scoring_s", float("nan")), 2),
                "load": load_average(),
            }
            if getattr(result.details, "kind", "") == "neurons":  # the neuron circuits' curve
                row["neuron_curve"] = [
                    {key: point[key] for key in ("k", "n_neurons", "ndf", "necessity")}
                    for point in result.details.curve
                ]
                print(
                    "    neurons: "
                    + ", ".join(
                        f"top {p['k']}/MLP NDF {p['ndf']:.3f} necessity {p['necessity']:.3f}"
                        for p in row["neuron_curve"]
                    ),
                    flush=True,
                )
            rows.append(row)
            print(
                f"{text:<28} {kind:<16} NDF {row['ndf']} necessity {row['necessity']} "
                f"{seconds:6.1f} s (scoring {row['scoring_s']} s) load {row['load']}",
                flush=True,
            )
    print(
        f"model {getattr(model.cfg, 'model_name', '')}, budgets {budgets} of {spec.n_edges} edges",
        file=sys.stderr,
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"budgets": budgets, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
