"""ACC++ on the embedded model: phase times, circuit size, knockout check, comparison with EAP-IG.

    .venv/bin/python benchmarks/bench_acc.py [--device cpu|cuda] [--prompts 10] [--k 2.0]

1. The SVD of every head: computed (fresh cache folder), read back from disk, from memory.
2. One trace of the IOI prompt with its phase times (forward, candidates, IG, greedy,
   tracing, knockout), nodes and edges, and the paper's knockout (found vs random signals).
3. EAP-IG on the same prompt (with the corrupted prompt): which heads both circuits hold.
4. Nodes and edges per traced prompt over IOI examples (mean and standard error), next to
   the paper's GPT-2 small table.

No assertions; figures go into the README. Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch

from circuitviz.acc import svd as acc_svd
from circuitviz.bench.harness import ioi_task, load_timed, machine_line
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask
from circuitviz.methods import get_method
from circuitviz.models import EMBEDDED_MODEL

IOI = ioi_task()
TEMPLATES = [
    "When {A} and {B} went to the store, {B} gave a drink to",
    "When {A} and {B} went to the park, {B} gave a ball to",
    "Then, {A} and {B} had a long argument, and afterwards {B} said to",
    "After {A} and {B} went to the market, {B} handed a book to",
    "While {A} and {B} were working at the office, {B} gave a letter to",
]
NAMES = ["Mary", "John", "Tom", "Anna", "James", "Sarah", "David", "Emma", "Paul", "Laura", "Mark", "Kate"]
PAPER = "paper, GPT-2 small IOI: ACC 205 +- 2 nodes / 639 +- 9 edges; ACC++ 85 +- 1 nodes / 154 +- 3 edges"


def single_token(model, text: str) -> bool:
    return model.to_tokens(text, prepend_bos=False).shape[1] == 1


def ioi_prompts(model, count: int, seed: int = 0) -> list[PromptTask]:
    """IOI prompts whose names are single tokens for this model (ABB order: answer is A)."""
    rng = random.Random(seed)
    names = [n for n in NAMES if single_token(model, " " + n)]
    prompts = []
    while len(prompts) < count:
        a, b = rng.sample(names, 2)
        template = TEMPLATES[len(prompts) % len(TEMPLATES)]
        prompts.append(
            PromptTask(clean=template.format(A=a, B=b), corrupted="", answer=" " + a, foils=(" " + b,))
        )
    return prompts


def heads_of(spec: GraphSpec, mask: torch.Tensor) -> set[str]:
    """Heads with an in-circuit edge (into or out of them)."""
    names = set()
    for name in spec.edge_names_of(mask):
        source, target = name.split("->")
        for node in (source, target.split("<")[0]):
            if node.startswith("a"):
                names.add(node)
    return names


def mean_se(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f}" if values else "n/a"
    return f"{statistics.mean(values):.1f} +- {statistics.stdev(values) / len(values) ** 0.5:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--device", default=None)
    parser.add_argument("--prompts", type=int, default=10, help="IOI prompts for the size table")
    parser.add_argument("--k", type=float, default=2.0)
    args = parser.parse_args()
    print(machine_line())

    model, seconds = load_timed(args.model, device=args.device)
    print(f"model {args.model} loaded in {seconds:.1f}s on {next(model.parameters()).device}")

    with tempfile.TemporaryDirectory() as folder:
        acc_svd._MEMORY.clear()
        first = acc_svd.load_svd(model, directory=folder)
        acc_svd._MEMORY.clear()
        disk = acc_svd.load_svd(model, directory=folder)
        memory = acc_svd.load_svd(model, directory=folder)
        size = sum(f.stat().st_size for f in Path(folder).iterdir())
    print(
        f"SVD of {model.cfg.n_layers * model.cfg.n_heads} heads: computed {first.seconds:.2f}s, "
        f"from disk {disk.seconds:.2f}s, from memory {memory.seconds:.2f}s; cache file {size / 1e6:.1f} MB"
    )

    method = get_method("acc++")
    config = method.make_config({"k": args.k})
    result = method.run_on(model, IOI, config, budgets=(50, 100, 200, 500))
    timings = result.timings
    print("\nIOI prompt (15 tokens): " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
    summary = result.details.summary
    print(
        f"circuit: {summary['n_nodes']} nodes, {summary['n_edges']} edges "
        f"({summary['n_signal_edges']} signal edges, {summary['n_signals']} signals, "
        f"{100 * summary['rank1_fraction']:.0f}% rank 1), {summary['n_decisions']} decisions, "
        f"max decomposition error {summary['max_decomposition_error']:.1e}"
    )
    knockout = result.details.faithfulness["knockout"]
    found, rand = knockout["found"], knockout["random"]
    print(
        f"knockout of {knockout['n_signals']} found signals: logit diff {knockout['clean']['metric']:+.3f} -> "
        f"{found['metric']:+.3f}, traced weights {knockout['clean']['mean_weight']:.3f} -> {found['mean_weight']:.3f}, "
        f"residual cosine {found['cosine']:.3f}, norm ratio {found['norm_ratio']:.3f}"
    )
    print(
        f"knockout of as many random signals ({knockout['n_random_draws']} draws): logit diff "
        f"{rand['metric']:+.3f} +- {rand['metric_std']:.3f}, traced weights {rand['mean_weight']:.3f}, "
        f"residual cosine {rand['cosine']:.3f}, norm ratio {rand['norm_ratio']:.3f}"
    )
    print("faithfulness (patching the corrupted prompt, NDF):")
    for point in result.curve:
        print(f"  budget {point.budget:>5}: {point.n_edges:>4} edges, NDF {point.ndf:.3f}")

    spec = result.graph
    full = result.details.full_circuit_budget
    acc_heads = heads_of(spec, result.circuit(full))
    eap = get_method("eap-ig").run_on(model, IOI, None, budgets=(full, 200))
    print(f"\nEAP-IG on the same prompt: {', '.join(f'{k} {v:.2f}s' for k, v in eap.timings.items())}")
    for budget in (full, 200):
        mask = eap.circuit(budget)
        eap_heads = heads_of(spec, mask)
        both = acc_heads & eap_heads
        point = eap.point(budget)
        print(
            f"  EAP-IG at {budget} edges ({int(mask.sum())} kept, NDF {point.ndf:.3f}): {len(eap_heads)} heads; "
            f"ACC++ {len(acc_heads)} heads; both {len(both)} (Jaccard "
            f"{len(both) / max(1, len(acc_heads | eap_heads)):.2f}): {', '.join(sorted(both))}"
        )

    if args.prompts:
        nodes, edges, decisions, seconds = [], [], [], []
        light = method.make_config({"k": args.k, "n_random": 0})
        for task in ioi_prompts(model, args.prompts):
            start = time.perf_counter()
            traced = method.run_on(model, task, light, budgets=())
            seconds.append(time.perf_counter() - start)
            nodes.append(traced.details.summary["n_nodes"])
            edges.append(traced.details.summary["n_edges"])
            decisions.append(traced.details.summary["n_decisions"])
        print(
            f"\nover {args.prompts} IOI prompts (k={args.k}): nodes {mean_se(nodes)}, edges {mean_se(edges)}, "
            f"decisions {mean_se(decisions)}, seconds per prompt {mean_se(seconds)}"
        )
        print(PAPER)


if __name__ == "__main__":
    main()
