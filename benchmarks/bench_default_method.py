"""Which method the app starts with: faithful, readable circuits within about ten seconds on the CPU.

For each candidate method and each of the nine yardstick prompts (``bench_bon.PROMPTS``) on the
embedded Gemma-3-270M, one run as the app makes it (its default budgets, no result store):

- seconds: wall-clock and this process's CPU time (one torch thread, so CPU time is what a quiet
  machine's wall clock would be, less the time other processes' caches cost it);
- where the first view opens (``render.opening_view``): its edges, nodes and NDF, and whether it
  is faithful and readable (NDF >= 0.8 with at most 200 edges);
- the smallest of its budgets whose circuit reaches NDF 0.8 (any size).

Time it with no other benchmark running, and say the load:

    env OMP_NUM_THREADS=1 .venv/bin/python \\
        benchmarks/bench_default_method.py --threads 1 --methods eap,eap-ig,edge-pruning
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench_bon import PROMPTS  # the yardstick's nine prompts (a script beside this one)

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_timed
from circuitviz.core.graph import GraphSpec
from circuitviz.entry.api import discover
from circuitviz.entry.budgets import default_budgets  # the Explore page's and discover's defaults
from circuitviz.render import opening_view


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_threads_argument(parser)
    parser.add_argument("--methods", default="eap,eap-ig,edge-pruning")
    parser.add_argument("--prompts", type=int, default=0, help="only the first N prompts (0: all nine)")
    parser.add_argument("--budgets", default="", help="comma separated (default: the app's)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    apply_threads(args.threads)
    from circuitviz.models import EMBEDDED_MODEL

    model, _ = load_timed(EMBEDDED_MODEL, device="cpu")
    spec = GraphSpec.from_model(model)
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()] or default_budgets(spec.n_edges)
    chosen = PROMPTS[: args.prompts] if args.prompts else PROMPTS
    rows = []
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        for kind, task in chosen:
            load = os.getloadavg()[0]
            wall, cpu = time.perf_counter(), time.process_time()
            result, _ = discover(model, task, method, {}, budgets=budgets, model_id=EMBEDDED_MODEL)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            view = opening_view(result.curve)
            point = result.point(view.budget)
            first = next((p for p in sorted(result.curve, key=lambda p: p.budget) if p.ndf >= 0.8), None)
            row = {
                "method": method,
                "kind": kind,
                "prompt": task.clean,
                "wall_s": wall,
                "cpu_s": cpu,
                "load": load,
                "open_edges": point.n_edges,
                "open_nodes": len(spec.node_names_of(result.circuit(view.budget))),
                "open_ndf": point.ndf,
                "faithful_readable": view.faithful,
                "first_faithful_edges": first.n_edges if first else None,
            }
            rows.append(row)
            print(
                f"{method:14s} {kind:16s} wall {wall:6.1f} s cpu {cpu:6.1f} s (load {load:4.1f}); opens at "
                f"{point.n_edges} edges / {row['open_nodes']} nodes, NDF {point.ndf:.2f}"
                f"{' (faithful)' if view.faithful else ''}; first NDF 0.8 at {row['first_faithful_edges']} edges",
                file=sys.stderr,
                flush=True,
            )
            if args.json:
                args.json.write_text(json.dumps({"budgets": budgets, "rows": rows}, indent=1))
    print(
        "| method | prompts | faithful and readable (NDF >= 0.8, <= 200 edges) | median nodes there | "
        "median CPU s | max CPU s | median wall s | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        good = [r for r in mine if r["faithful_readable"]]
        nodes = statistics.median(r["open_nodes"] for r in good) if good else "-"
        loads = [r["load"] for r in mine]
        print(
            f"| {method} | {len(mine)} | {len(good)} | {nodes} | {statistics.median(r['cpu_s'] for r in mine):.1f} | "
            f"{max(r['cpu_s'] for r in mine):.1f} | {statistics.median(r['wall_s'] for r in mine):.1f} | "
            f"{min(loads):.1f}-{max(loads):.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
