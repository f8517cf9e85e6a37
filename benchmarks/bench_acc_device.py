"""ACC++ on an accelerator: correctness on tiny models moved to the device, and speed at Gemma-3 size.

    python benchmarks/bench_acc_device.py --device cuda

1. Tiny GPT-2/Llama/Gemma-3-shaped models on the device: the folded scores against the model's
   own hook_attn_scores (every head, destination and source), the greedy step recomputed inside
   the model, and the method end to end (with and without a corrupted prompt).
2. A model of the embedded Gemma-3-270M's shape with random weights (the real weights do not
   travel to a rented GPU): SVD, forward, tracing and knockout times of a 15-token prompt.

Prints figures and one PASS/FAIL line per check; nothing is asserted (benchmarks never are).
"""

from __future__ import annotations

import argparse

import torch

from circuitviz.acc import svd as acc_svd
from circuitviz.acc.ablation import build_edits
from circuitviz.acc.decompose import HeadTables, decompose
from circuitviz.acc.edits import run_with_qk_edits
from circuitviz.acc.forward import allowed_sources, run_forward
from circuitviz.acc.trace import Tracer, TraceSettings
from circuitviz.bench.harness import fresh_cache, peak_memory_gib, timed, verdict
from circuitviz.bench.toy_models import IOI_TASK, random_model, tiny_model
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.methods import get_method

NO_CORRUPTED = PromptTask(clean=IOI_TASK.clean, corrupted="", answer=" Mary", foils=(" John",))


def tiny_checks(device: str) -> None:
    for shape in ("gpt2", "llama", "gemma"):
        model = tiny_model(shape).to(device)
        forward = run_forward(model, model.to_tokens(IOI_TASK.clean))
        svd = acc_svd.load_svd(model, use_disk=False)
        worst = 0.0
        for layer in range(model.cfg.n_layers):
            folded = acc_svd.fold_layer(model, layer)
            for head in range(model.cfg.n_heads):
                tables = HeadTables(model, forward, folded, svd, layer, head)
                for destination in range(forward.n_positions):
                    start = allowed_sources(model, layer, destination).start
                    worst = max(worst, decompose(tables, destination, start).decomposition_error())
        print(
            f"{shape:>5} on {device}: folded scores vs hook_attn_scores, max rel. error {worst:.1e} {verdict(worst < 1e-9)}"
        )

        prepared = prepare_task(model, NO_CORRUPTED, need_corrupted=False)
        tracer = Tracer(model, forward, svd, TraceSettings(k=1.5, n_random=0))
        gaps = []
        last = forward.n_positions - 1
        for layer in range(model.cfg.n_layers):
            for head in range(model.cfg.n_heads):
                source = int(forward.patterns[layer][head, last].argmax())
                if not tracer.is_decision(layer, head, last, source):
                    continue
                traced = tracer.trace_decision(layer, head, last, source, 1)
                for side in "qk":
                    if traced.signals[side]:
                        sets = [[(traced, s) for s in traced.signals[side]]]
                        q, k = build_edits(model, svd, sets, forward.n_positions)
                        _, patterns = run_with_qk_edits(model, prepared.clean_tokens, q, k, [layer])
                        gaps.append(
                            abs(
                                float(patterns[layer][0, head, last, source])
                                - traced.signals[side][-1].weight_after
                            )
                        )
        worst_gap = max(gaps, default=float("nan"))
        print(
            f"       greedy weight recomputed in the model ({len(gaps)} sides): max gap {worst_gap:.1e} {verdict(bool(gaps) and worst_gap < 1e-9)}"
        )

        method = get_method("acc++")
        for task in (NO_CORRUPTED, IOI_TASK):
            result = method.run_on(
                model, task, method.make_config({"k": 1.5, "n_random": 2}), budgets=(5, 20)
            )
            kind = result.details.faithfulness["kind"]
            ok = result.details.summary["n_decisions"] > 0 and result.device.startswith(device.split(":")[0])
            print(
                f"       method ({kind}): {result.details.summary['n_decisions']} decisions, "
                f"{result.details.summary['n_edges']} edges, device {result.device} {verdict(ok)}"
            )


def gemma_sized(device: str) -> None:
    """Random weights in the embedded Gemma-3-270M's shape; timings of one 15-token trace."""
    model = random_model("gemma-3-270m", dtype=torch.float32, device=device, sharpen=30.0)
    task = PromptTask(
        clean="When Mary and John went to the store , John gave a drink to",
        corrupted="",
        answer=" Mary",
        foils=(" John",),
    )
    method = get_method("acc++")
    for label in ("first run (SVD computed)", "second run (SVD from memory)"):
        result, total = timed(
            method.run_on,
            model,
            task,
            method.make_config({"k": 2.0, "direct_top_k": 40}),
            budgets=(50, 200),
            sync=device,
        )
        times = ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items())
        summary = result.details.summary
        print(
            f"Gemma-3-270M shape, random weights, on {device}, {label}: total {total:.1f}s ({times}); "
            f"{summary['n_decisions']} decisions, {summary['n_nodes']} nodes, {summary['n_edges']} edges, "
            f"max decomposition error {summary['max_decomposition_error']:.1e}"
        )
    if device.startswith("cuda"):
        print(f"peak GPU memory {peak_memory_gib(device):.2f} GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, device {args.device}, cache {fresh_cache('circuitviz-acc-')}")
    tiny_checks(args.device)
    if not args.skip_large:
        gemma_sized(args.device)


if __name__ == "__main__":
    main()
