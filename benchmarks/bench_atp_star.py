"""AtP*'s claim on the embedded model: fewer false negatives than attribution patching.

Kramár et al. (2024) find that attribution patching (AtP: EAP's first-order estimate) misses
components whose patch matters (false negatives), through attention saturation (fixed by the QK
fix: the pattern recomputed exactly, linearised after the softmax) and through paths that cancel
in the gradient (GradDrop), and that AtP* finds the components that matter at a smaller cost of
verification. Here the truth is exact edge patching (the ``exact`` method: each edge corrupted
alone, the metric measured), and each estimate is read the way a user reads it, by rank of |score|:

- Spearman of |score| with |effect| over every edge;
- recall: the share of the K edges of largest |effect| (K = 1 % of the edges) among the
  estimate's top K;
- false negatives: of those K, how many the estimate ranks beyond 10 % of the edges (missed by a
  circuit ten times the size), split into the edges into a head's query or key (what the QK fix
  addresses) and the others;
- cost: how many edges, taken in the estimate's order, hold 90 % and all of the K (the paper's cost
  of verification).

    .venv/bin/python benchmarks/bench_atp_star.py --threads 1 [--only 2,8] [--json out.json]
    .venv/bin/python benchmarks/bench_atp_star.py --from-json a.json,b.json   # the table of saved runs

Exact patching costs one patched pass per edge: 120-810 CPU s a prompt of 5-15 tokens here.

Methods: ``eap`` (AtP), ``atp-star`` with only the QK fix (``grad_drop`` off: signed, an estimate of
the same patch), ``atp-star`` (both fixes: magnitudes), and ``eap-ig`` for reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from bench_bon import PROMPTS  # the yardstick's nine prompts (a script beside this one)

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_average, load_timed
from circuitviz.bench.yardstick import spearman
from circuitviz.core.graph import GraphSpec
from circuitviz.methods import get_method

VARIANTS = {
    "eap (AtP)": ("eap", {}),
    "atp-star, QK fix only": ("atp-star", {"grad_drop": False}),
    "atp-star": ("atp-star", {}),
    "eap-ig": ("eap-ig", {}),
}


def log(message: str) -> None:
    print(message, flush=True)


def order_of(values: torch.Tensor) -> torch.Tensor:
    """Each entry's place (0 = largest) when ``values`` are sorted in descending order.  # [n]"""
    order = torch.argsort(values, descending=True, stable=True)
    places = torch.empty_like(order)
    places[order] = torch.arange(len(order), device=order.device)
    return places


def figures(estimate: torch.Tensor, truth: torch.Tensor, is_qk: torch.Tensor, k: int) -> dict:
    """The claim's figures of one estimate against the exact effects (flat vectors over the
    graph's edges, float64 on the CPU)."""
    size, place = estimate.abs(), order_of(estimate.abs())
    top_true = torch.argsort(truth.abs(), descending=True, stable=True)[:k]
    places = place[top_true].sort().values  # where the estimate puts the true top K
    wide = 10 * k
    missed = place[top_true] >= wide
    return {
        "spearman_abs": spearman(size, truth.abs()),
        "recall_at_k": float((place[top_true] < k).double().mean()),
        "false_negatives": int(missed.sum()),
        "false_negatives_qk": int((missed & is_qk[top_true]).sum()),
        "false_negatives_other": int((missed & ~is_qk[top_true]).sum()),
        "true_top_qk": int(is_qk[top_true].sum()),
        "cost_90": int(places[int(0.9 * k + 0.999999) - 1]) + 1,
        "cost_all": int(places[-1]) + 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help="prompt indices into the nine, comma separated")
    parser.add_argument("--json", default=None, help="write the per-prompt figures here (after each)")
    parser.add_argument("--from-json", default=None, help="print the table of saved runs (comma separated)")
    add_threads_argument(parser, default=1)
    args = parser.parse_args()
    if args.from_json:
        saved = [json.loads(open(path).read()) for path in args.from_json.split(",")]
        rows = sorted((row for run in saved for row in run["rows"]), key=lambda row: row["index"])
        summarise(rows, saved[0]["k"], f"saved runs {args.from_json}")
        return
    apply_threads(args.threads)
    model, seconds = load_timed()
    spec = GraphSpec.from_model(model)
    k = max(1, round(0.01 * spec.n_edges))
    valid = spec.edge_mask.cpu()  # the graph's edges among [writer, reader]
    kinds = spec.backward_kind
    qk_readers = torch.tensor([kind in ("q", "k") for kind in kinds], device="cpu")
    is_qk = qk_readers.expand_as(valid)[valid]
    log(f"model loaded in {seconds:.1f} s; {spec.n_edges} edges, K = {k}; {load_average()}")
    chosen = [int(i) for i in args.only.split(",")] if args.only else range(len(PROMPTS))
    rows = []
    for index in chosen:
        kind, task = PROMPTS[index]
        start = time.process_time()
        truth = get_method("exact").run_on(model, task, {}, budgets=[k]).scores.double().cpu()[valid]
        row = {"index": index, "kind": kind, "prompt": task.clean, "exact_cpu_s": time.process_time() - start}
        log(f"{index} {kind}: exact patching {row['exact_cpu_s']:.0f} CPU s; {load_average()}")
        for label, (name, settings) in VARIANTS.items():
            start = time.process_time()
            result = get_method(name).run_on(model, task, settings, budgets=[k])
            estimate = result.scores.double().cpu()[valid]
            row[label] = {**figures(estimate, truth, is_qk, k), "cpu_s": time.process_time() - start}
            f = row[label]
            log(
                f"  {label:<24} Spearman |.| {f['spearman_abs']:.3f}  recall@{k} {f['recall_at_k']:.3f}  "
                f"false negatives {f['false_negatives']} (q/k {f['false_negatives_qk']} of "
                f"{f['true_top_qk']})  cost 90% {f['cost_90']}  all {f['cost_all']}  {f['cpu_s']:.1f} CPU s"
            )
        rows.append(row)
        if args.json:  # after every prompt: a long run stopped keeps what it measured
            with open(args.json, "w") as handle:
                json.dump({"k": k, "rows": rows}, handle, indent=1)
    summarise(rows, k, load_average())


def summarise(rows: list[dict], k: int, where: str) -> None:
    names = ", ".join(f"{row['kind']} ({row['index']})" for row in rows)
    log(f"\nmeans over {len(rows)} prompts ({names}; K = {k}; {where}):")
    log("| estimate | Spearman abs | recall@K | false negatives (q/k, other) | cost 90 % | cost all |")
    log("|---|---:|---:|---:|---:|---:|")
    for label in VARIANTS:

        def mean(key, label=label):
            return statistics.fmean(row[label][key] for row in rows)

        log(
            f"| {label} | {mean('spearman_abs'):.3f} | {mean('recall_at_k'):.3f} | "
            f"{mean('false_negatives'):.1f} ({mean('false_negatives_qk'):.1f}, "
            f"{mean('false_negatives_other'):.1f}) | {mean('cost_90'):.0f} | {mean('cost_all'):.0f} |"
        )
    log("| estimate | " + " | ".join(f"{row['kind']} ({row['index']})" for row in rows) + " |  (cost all)")
    for label in VARIANTS:
        log(f"| {label} | " + " | ".join(f"{row[label]['cost_all']:,}" for row in rows) + " |")


if __name__ == "__main__":
    main()
