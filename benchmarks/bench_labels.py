"""Labels on the embedded model: timings, SAE quality, steering and the gender-bias experiment.

    .venv/bin/python benchmarks/bench_labels.py                     # everything (~10-20 min on 2 cores)
    .venv/bin/python benchmarks/bench_labels.py --skip-gender       # timings, quality, steering only
    .venv/bin/python benchmarks/bench_labels.py --gender-prompts 4  # a quicker gender run

Prints: load times; logit-lens labels for every node (issue target < 1 s); SAE labels of a
circuit's nodes (target < 3 s once the SAEs are loaded); each embedded SAE's explained
variance, L0, dead fraction and the task metric's change when its reconstruction replaces the
residual stream; one steering example next to random features; Query Circuits' best-versus-
worst circuit gender-bias check; and, when an endpoint is configured, LLM labels with the judge
check. Timings taken while other work shares the CPU are noisy.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from circuitviz.bench.harness import timed


def reported(label: str, fn, *args, **kwargs):
    """fn's value; its time printed on one line under ``label``."""
    value, seconds = timed(fn, *args, **kwargs)
    print(f"{label:<52} {seconds:8.2f} s", flush=True)
    return value


def timings_quality_steering(args, model, spec, saes, figures: dict) -> None:
    """Label timings, each SAE's quality, and one steering example; figures go into ``figures``."""
    from circuitviz.core.tasks import PromptTask, prepare_task
    from circuitviz.labels import sae_features as sae_labels
    from circuitviz.labels.logit_lens import logit_lens_labels
    from circuitviz.labels.steer import load_gender_prompts, reconstruction_metric_change, steer_node

    item = load_gender_prompts()[0]
    task = PromptTask(item["clean"], item["corrupted"], item["answer"], (item["foil"],))
    prepared = prepare_task(model, task)
    start = time.perf_counter()
    logit_lens_labels(model, spec, prepared)
    figures["logit_lens_all_nodes_s"] = time.perf_counter() - start
    print(
        f"{'logit-lens labels, all ' + str(spec.n_forward) + ' nodes':<52} {figures['logit_lens_all_nodes_s']:8.2f} s"
    )
    nodes = [name for name in spec.forward_names if name != "input"][::3][:20]
    start = time.perf_counter()
    labels = sae_labels.circuit_node_features(model, task.clean, nodes, saes)
    figures["sae_labels_20_nodes_s"] = time.perf_counter() - start
    print(f"{'SAE labels, 20 circuit nodes':<52} {figures['sae_labels_20_nodes_s']:8.2f} s")
    start = time.perf_counter()
    sae_labels.circuit_node_features(model, task.clean, list(spec.forward_names), saes)
    figures["sae_labels_all_nodes_s"] = time.perf_counter() - start
    print(
        f"{'SAE labels, all ' + str(spec.n_forward) + ' nodes':<52} {figures['sae_labels_all_nodes_s']:8.2f} s"
    )
    for node in nodes[:3]:
        top = labels[node]["features"][:2]
        print(f"  {node}: " + " | ".join(f["label"] for f in top))

    print("\nSAE quality (held-out corpus tokens; metric change on the gender prompts)")
    print(
        f"{'layer':>5} {'d_sae':>6} {'expl.var':>9} {'L0':>6} {'dead':>6} {'|dmetric|':>10} {'|metric|':>9} {'sign kept':>9}"
    )
    figures["quality"] = []
    for labelled in saes:
        change = reconstruction_metric_change(model, labelled)
        quality = {**labelled.quality, "metric_change": change}
        figures["quality"].append({"layer": labelled.layer, **quality})
        print(
            f"{labelled.layer:>5} {labelled.d_sae:>6} {quality.get('explained_variance', float('nan')):>9.3f} "
            f"{quality.get('l0', float('nan')):>6.1f} {quality.get('dead_fraction', float('nan')):>6.3f} "
            f"{change['mean_abs_metric_change']:>10.3f} {change['mean_abs_clean_metric']:>9.3f} {change['sign_kept']:>9.1%}"
        )

    print("\nSteering: zero the 5 features m9 drives most on", repr(task.clean))
    steer_task = PromptTask(task.clean, "", task.answer, task.foils)
    result = reported(
        "steer_node (with 5 random draws)", steer_node, model, steer_task, "m9", saes, n_features=5
    )
    figures["steer_example"] = {
        "before": result["before"]["metric"],
        "after": result["after"]["metric"],
        "random_mean": result["random"]["mean_metric"],
    }
    print(
        f"  metric {result['before']['metric']:.3f} -> {result['after']['metric']:.3f} "
        f"(random features: {result['random']['mean_metric']:.3f}); top tokens after: "
        + ", ".join(f"{t!r} {p:.2f}" for t, p in result["after"]["top_tokens"][:3])
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--skip-gender", action="store_true")
    parser.add_argument("--only-gender", action="store_true", help="skip timings, quality and steering")
    parser.add_argument("--gender-prompts", type=int, default=16)
    parser.add_argument("--budget", type=int, default=200, help="edges per Best-of-N candidate circuit")
    parser.add_argument("--method", default="eap-ig")
    parser.add_argument("--ig-steps", type=int, default=5)
    parser.add_argument("--threshold", type=float, default=0.5, help="gender score a feature needs")
    parser.add_argument("--per-node", type=int, default=10, help="features considered per circuit node")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    from circuitviz.core.graph import GraphSpec
    from circuitviz.labels import sae_features as sae_labels
    from circuitviz.labels.llm import LLMLabeler, llm_status
    from circuitviz.labels.steer import (
        _mean,
        _std,
        gender_bias_experiment,
        gender_feature_scores,
        load_gender_prompts,
        sign_test,
    )
    from circuitviz.models import load_model

    figures: dict = {}
    model = reported("load model", load_model, args.model)
    spec = GraphSpec.from_model(model)
    saes = reported("load embedded SAEs (first time)", sae_labels.load_embedded_saes, model, args.model)
    reported("load embedded SAEs (cached)", sae_labels.load_embedded_saes, model, args.model)

    if not args.only_gender:
        timings_quality_steering(args, model, spec, saes, figures)

    if not args.skip_gender:
        prompts = load_gender_prompts()[: args.gender_prompts]
        print(
            f"\nGender-bias check: {len(prompts)} prompts, budget {args.budget}, {args.method}, "
            f"threshold {args.threshold}, {args.per_node} features per node"
        )
        config = {"ig_steps": args.ig_steps} if args.method == "eap-ig" else {}

        start = time.perf_counter()
        scores = gender_feature_scores(model, saes)
        for labelled in saes:
            top = scores[labelled.layer].topk(3)
            print(
                f"  most gendered features at layer {labelled.layer}: "
                + ", ".join(f"{f} ({v:.2f})" for f, v in zip(top.indices.tolist(), top.values.tolist()))
            )
        rows = []
        print(f"{'prompt':<42} {'bias':>6} {'NDF b/w':>11} {'#feat b/w':>9} {'reduction b/w':>15}")
        for item in prompts:  # one prompt at a time, so the rows print as they are done
            row = gender_bias_experiment(
                model,
                saes,
                [item],
                budget=args.budget,
                method=args.method,
                method_config=config,
                threshold=args.threshold,
                per_node=args.per_node,
                gender_scores=scores,
            )["prompts"][0]
            rows.append(row)
            best, worst = row["best"], row["worst"]
            print(
                f"{row['prompt']:<42} {row['bias_before']:>6.2f} {best['ndf']:>5.2f}/{worst['ndf']:<5.2f} "
                f"{len(best['gender_features']):>4}/{len(worst['gender_features']):<4} "
                f"{best['reduction']:>7.3f}/{worst['reduction']:<7.3f}",
                flush=True,
            )
        best_reductions = [row["best"]["reduction"] for row in rows]
        worst_reductions = [row["worst"]["reduction"] for row in rows]
        wins = sum(b > w for b, w in zip(best_reductions, worst_reductions))
        losses = sum(b < w for b, w in zip(best_reductions, worst_reductions))
        gender = {
            "best_reduction_mean": _mean(best_reductions),
            "best_reduction_std": _std(best_reductions),
            "worst_reduction_mean": _mean(worst_reductions),
            "worst_reduction_std": _std(worst_reductions),
            "best_wins": wins,
            "worst_wins": losses,
            "sign_test_p": sign_test(wins, losses),
            "seconds": time.perf_counter() - start,
        }
        figures["gender_bias"] = gender
        figures["gender_bias_prompts"] = rows
        print(
            f"reduction best {gender['best_reduction_mean']:.3f} ± {gender['best_reduction_std']:.3f}, "
            f"worst {gender['worst_reduction_mean']:.3f} ± {gender['worst_reduction_std']:.3f}; "
            f"best wins {wins}, worst wins {losses}, sign test p = {gender['sign_test_p']:.3g} "
            f"({gender['seconds']:.0f} s)"
        )

    enabled, sentence = llm_status()
    print("\n" + sentence)
    if enabled:
        labeler = LLMLabeler()
        labelled = saes[len(saes) // 2]
        live = [i for i, f in enumerate(labelled.features) if len(f["contexts"]) >= 5][:5]
        correct = []
        for feature in live:
            description = sae_labels.feature_description(model, labelled, feature, n_contexts=10)
            label = labeler.label_feature(description, labelled.random_contexts, check=True)
            correct.append(label["judge"]["accuracy"])
            print(
                f"  L{labelled.layer}/{feature}: {label['description']} (judge accuracy {label['judge']['accuracy']:.2f})"
            )
        figures["llm_judge_accuracy"] = sum(correct) / len(correct) if correct else None
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=float))


if __name__ == "__main__":
    torch.set_grad_enabled(True)
    main()
