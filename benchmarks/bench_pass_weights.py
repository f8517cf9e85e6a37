"""The weights behind the estimates' pass counts, measured: each kind of pass against a plain one.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pass_weights.py [--threads 1] [--model smollm2-135m]
        [--only learning]

A method's price counts its work in plain forward passes of the prompt (``methods.base.Cost``),
weighting the passes that cost more (``core.pass_weights``: the clean and corrupted runs, a
gradient pass's set-up and rows, the faithfulness curve's set-up and patched passes; the mask
learning's ``MASKED_STEP_PASSES`` and ``MASKED_FORWARD_PASSES``). This times, in one process on
the model (the embedded Gemma-3-270M unless named) and the IOI prompt (CPU seconds of the process,
medians), a plain batched forward pass (as the app's probe runs it) and each of those, and prints
what each cost in plain passes beside what the code counts. No assertions.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from circuitviz.bench.harness import add_threads_argument, apply_threads, ioi_task, load_average, load_timed
from circuitviz.core import pass_weights
from circuitviz.engine.prefix import final_residual
from circuitviz.engine.scores import score_dtype
from circuitviz.measure.evaluate import circuits_at_budgets, curves_of_tasks, forget_prompt_runs
from circuitviz.methods import RunContext, base, flow_routes, get_method, mask_learning
from circuitviz.methods.edge_pruning import _warm_scores
from circuitviz.models import EMBEDDED_MODEL
from circuitviz.models.adapter import model_dtype
from circuitviz.positions.graph import units_at_budgets

BATCH = 8  # sequences of the plain pass, as the app's probe (ui/loaders.PROBE_BATCH)
# the app's default budgets on Gemma-3-270M (ui.budget_box.default_budgets): the last is the whole graph
BUDGETS = [20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]


def cpu_seconds(function, repeats: int = 3):
    """(median CPU seconds of ``repeats`` calls, the last call's result)."""
    seconds, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = function()
        seconds.append(time.process_time() - start)
    return statistics.median(seconds), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=["all", "learning", "flow"], default="all")
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    model, _ = load_timed(args.model)
    task = ioi_task()
    ctx = RunContext(model, task)
    evaluator, spec = ctx.evaluator, ctx.spec
    budgets = [b for b in BUDGETS if b < spec.n_edges] + [spec.n_edges]
    tokens = evaluator.prepared.clean_tokens.repeat(BATCH, 1)  # [batch, pos]
    with torch.no_grad():
        final_residual(model, tokens[:1], [])  # one-time set-up, as the probe does
        plain, _ = cpu_seconds(lambda: final_residual(model, tokens, []), 5)
    plain /= BATCH
    print(load_average())
    print(f"plain forward pass: {plain * 1000:.1f} ms CPU a sequence ({tokens.shape[1]} tokens)")
    ig = get_method("eap-ig")
    if args.only in ("all", "flow"):
        flow = get_method("flow-routes")
        flow_config = flow.default_config()
        routes, _ = cpu_seconds(lambda: flow.score_batch([ctx], flow_config), 3)
        print(
            f"flow routes' observed pass and shares: {routes / plain:.1f} passes (counted {flow_routes.observed_passes(spec):.1f})"
        )
        if args.only == "flow":
            return
    if args.only == "all":

        def fresh():
            forget_prompt_runs(model)  # the clean prompt runs again, as a fresh prompt's does
            return RunContext(model, task).evaluator

        prepare, _ = cpu_seconds(fresh)
        print(f"clean+corrupted runs: {prepare / plain:.1f} passes (counted {base.PREPARE_PASSES})")
        few, _ = cpu_seconds(lambda: ig.score_batch([ctx], ig.make_config({"ig_steps": 1})), 3)
        config = ig.make_config({"ig_steps": 20})
        many, ((scores, _),) = cpu_seconds(lambda: ig.score_batch([ctx], config), 2)
        for steps, seconds in ((1, few), (20, many)):
            counted = pass_weights.gradient_passes(steps)
            print(f"EAP-IG's gradient, {steps} steps: {seconds / plain:.1f} passes (counted {counted:.1f})")
        eap = get_method("eap")
        one, _ = cpu_seconds(lambda: eap.score_batch([ctx], eap.make_config({})), 3)
        print(f"EAP's gradient: {one / plain:.1f} passes (counted {pass_weights.gradient_passes(1):.1f})")
        scores = scores.float().cpu()
        # the set-up and the per-budget part apart: curves of 1, 4 and 7 small budgets
        for few_budgets in (BUDGETS[:1], BUDGETS[:4], BUDGETS[:7]):
            circuits = circuits_at_budgets(spec, scores, few_budgets)
            curve, _ = cpu_seconds(
                lambda c=circuits, b=few_budgets: curves_of_tasks([evaluator], c[None], b), 2
            )
            print(
                f"curve of {len(few_budgets)} budgets (NDF and necessity): {curve / plain:.1f} passes, "
                f"{curve / len(few_budgets) / plain:.2f} a budget "
                f"(counted {pass_weights.curve_passes(len(few_budgets), spec):.1f})"
            )
        circuits = circuits_at_budgets(spec, scores, budgets)
        curve, _ = cpu_seconds(lambda: curves_of_tasks([evaluator], circuits[None], budgets), 2)
        print(
            f"curve of the app's {len(budgets)} budgets, to the whole graph: {curve / plain:.1f} passes "
            f"(counted {pass_weights.curve_passes(len(budgets), spec):.1f})"
        )
        positions, units = cpu_seconds(lambda: ig.score_positions(ctx, config), 2)
        unit_circuits = units_at_budgets(spec, units.float(), budgets)
        unit_curve, _ = cpu_seconds(lambda: curves_of_tasks([evaluator], unit_circuits[None], budgets), 2)
        print(
            f"positions: scoring {positions / many:.2f}x the edge scoring, unit curve "
            f"{unit_curve / curve:.2f}x the edge curve ({unit_curve / len(budgets) / plain:.2f} passes a budget)"
        )
    method = get_method("edge-pruning")
    config = method.default_config()
    trained = [b for b in budgets if 0 < b < spec.n_edges]
    warm = _warm_scores(ctx, config)
    dtype = score_dtype(model_dtype(model))
    start = mask_learning.initial_logits(mask_learning.edge_values(spec, warm).to(dtype=dtype), trained)

    def learn(steps: int):
        schedule = mask_learning.Schedule(
            steps, float(config.learning_rate), float(config.temperature), float(config.sparsity), 0
        )
        return mask_learning.learn_masks(ctx, [evaluator], start, trained, schedule)

    forward, alone = cpu_seconds(lambda: learn(0), 1)  # the last step only: a forward of each mask
    learning, stepped = cpu_seconds(lambda: learn(3), 1)
    rows_alone = sum(len(steps) for steps in alone.deviations)
    rows = sum(len(steps) for steps in stepped.deviations)
    # the 3-step run's last step is a forward too, of the budgets still learning
    last = sum(1 for steps in stepped.deviations if len(steps) == 4)
    masked_forward = forward / rows_alone
    masked_step = (learning - last * masked_forward) / (rows - last)
    print(
        f"mask learning, {len(trained)} masks together: a masked forward and backward "
        f"{masked_step / plain:.1f} passes a mask (counted {mask_learning.MASKED_STEP_PASSES}), "
        f"the last step's forward with the learning's set-up {masked_forward / plain:.1f} "
        f"(counted {mask_learning.MASKED_FORWARD_PASSES})"
    )


if __name__ == "__main__":
    main()
