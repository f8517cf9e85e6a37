"""The same model through TransformerLens's TransformerBridge and as a HookedTransformer: do they
give the same numbers?

    .venv/bin/python benchmarks/compare_backends.py [--model gemma-3-270m] [--ig-steps 5]

Prints, for the indirect-object prompt: whether the tokens agree; the largest difference of the
last position's logits; EAP and EAP-IG edge scores' largest difference relative to the largest
score; the NDF curve of each backend's own circuits (10 budgets) and its largest difference; the
time of each scoring. No assertions: the figures go into docs/models.md.
"""

from __future__ import annotations

import argparse

import torch

from circuitviz.bench.harness import (
    add_threads_argument,
    apply_threads,
    ioi_task,
    load_timed,
    machine_line,
    timed,
)
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.measure.evaluate import circuits_at_budgets, curves_of_tasks
from circuitviz.methods import RunContext, get_method
from circuitviz.models import EMBEDDED_MODEL
from circuitviz.models.adapter import adapter_of

BUDGETS = [20, 50, 100, 200, 500, 1000, 2000, 3000, 5000, 8000]
TASK = ioi_task()


def measure(model, ig_steps: int, other_circuits: torch.Tensor | None = None) -> dict:
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, TASK)
    ctx = RunContext(model, TASK)
    evaluator = ctx.evaluator
    eap, ig = get_method("eap"), get_method("eap-ig")
    ((eap_scores, _),), eap_s = timed(eap.score_batch, [ctx], eap.default_config())
    ((ig_scores, _),), ig_s = timed(ig.score_batch, [ctx], ig.make_config({"ig_steps": ig_steps}))
    circuits = circuits_at_budgets(spec, ig_scores.float().cpu(), BUDGETS)
    (curve,) = curves_of_tasks([evaluator], circuits[None], BUDGETS, with_necessity=False)
    crossed = None
    if other_circuits is not None:  # the other backend's circuits, evaluated on this one
        (other_curve,) = curves_of_tasks([evaluator], other_circuits[None], BUDGETS, with_necessity=False)
        crossed = torch.tensor([point.ndf for point in other_curve], dtype=torch.float64, device="cpu")
    with torch.no_grad():
        logits = adapter_of(model).logits(prepared.clean_tokens.to(adapter_of(model).device))[0, -1]
    return {
        "tokens": prepared.clean_tokens.cpu(),
        "logits": logits.double().cpu(),
        "eap": eap_scores.double().cpu(),
        "ig": ig_scores.double().cpu(),
        "ndf": torch.tensor([point.ndf for point in curve], dtype=torch.float64, device="cpu"),
        "circuits": circuits.cpu(),
        "crossed": crossed,
        "eap_s": eap_s,
        "ig_s": ig_s,
    }


def edge_sets(hooked: dict, bridge: dict) -> None:
    """Per budget: how many edges one backend's circuit keeps that the other's does not, and how
    close their EAP-IG scores sit to that budget's boundary (the smallest score kept)."""
    scores = hooked["ig"].abs().flatten()  # [edges]
    largest = float(scores.max())
    for index, budget in enumerate(BUDGETS):
        mine, theirs = hooked["circuits"][index].flatten(), bridge["circuits"][index].flatten()
        only_hooked, only_bridge = (mine & ~theirs).nonzero().flatten(), (theirs & ~mine).nonzero().flatten()
        if not len(only_hooked) and not len(only_bridge):
            print(f"  budget {budget}: the same {int(mine.sum())} edges")
            continue
        boundary = float(scores[mine].min())
        swapped = torch.cat([only_hooked, only_bridge])
        gaps = (scores[swapped] - boundary).abs() / largest
        print(
            f"  budget {budget}: {len(only_hooked)} edge(s) only in hooked's circuit, {len(only_bridge)} only "
            f"in the bridge's; their |score| differs from the boundary's by at most {float(gaps.max()):.2g} of "
            f"the largest score (the backends' scores differ by up to "
            f"{relative(bridge['ig'], hooked['ig']):.2g})"
        )


def relative(first: torch.Tensor, second: torch.Tensor) -> float:
    return float((first - second).abs().max() / second.abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--ig-steps", type=int, default=5)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    print(machine_line())
    results = {}
    for backend in ("hooked", "bridge"):
        model, load_s = load_timed(args.model, backend=backend)
        others = results["hooked"]["circuits"] if backend == "bridge" else None
        results[backend] = measure(model, args.ig_steps, others)
        print(f"{backend}: {type(model).__name__} loaded in {load_s:.2f}s")
        del model
    hooked, bridge = results["hooked"], results["bridge"]
    print(f"model {args.model}; tokens agree: {torch.equal(hooked['tokens'], bridge['tokens'])}")
    print(
        f"last-position logits: largest difference {float((hooked['logits'] - bridge['logits']).abs().max()):.3g}"
    )
    print(f"EAP edge scores: largest difference / largest score {relative(bridge['eap'], hooked['eap']):.3g}")
    print(
        f"EAP-IG ({args.ig_steps} steps) edge scores: largest difference / largest score "
        f"{relative(bridge['ig'], hooked['ig']):.3g}"
    )
    print(f"NDF curve (budgets {BUDGETS}):")
    print("  hooked " + " ".join(f"{value:.4f}" for value in hooked["ndf"].tolist()))
    print("  bridge " + " ".join(f"{value:.4f}" for value in bridge["ndf"].tolist()))
    print(f"  largest difference {float((hooked['ndf'] - bridge['ndf']).abs().max()):.3g}")
    crossed = bridge["crossed"]
    print("  the hooked circuits evaluated through the bridge (same edges, other backend):")
    print("  bridge " + " ".join(f"{value:.4f}" for value in crossed.tolist()))
    print(f"  largest difference from hooked's own {float((hooked['ndf'] - crossed).abs().max()):.3g}")
    edge_sets(hooked, bridge)
    for name in ("eap_s", "ig_s"):
        print(
            f"{name[:-2].upper()} scoring: hooked {hooked[name]:.3f}s, bridge {bridge[name]:.3f}s "
            f"({bridge[name] / hooked[name]:.2f}x)"
        )


if __name__ == "__main__":
    main()
