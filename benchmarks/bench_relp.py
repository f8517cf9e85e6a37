"""The gradient methods' node scores against patching each node, and their NDF at 1 % of edges,
on the embedded model over the yardstick's nine prompts (``bench_bon.PROMPTS``).

For each prompt: every head's and MLP's effect of being patched alone in the model's own
computation (``yardstick.node_effects``), and each method's node scores (a node's outgoing edge
scores summed: its attribution estimate of that same patch; for AtP*, whose GradDrop scores are
magnitudes, against the size of the effect). Printed per prompt: the Pearson
correlation over the 18 MLPs, over the 72 heads and over all 90 pooled, the NDF of the method's circuit at 1 % of
the edges, and its scoring seconds; then the means over the prompts. RelP's paper claims a far
higher Pearson than attribution patching's on GPT-2's MLPs (0.956 against 0.006 on GPT-2 Large).

    .venv/bin/python benchmarks/bench_relp.py --threads 1
    .venv/bin/python benchmarks/bench_relp.py --methods eap-ig,eap-gp --prompts 3 --json out.json
    .venv/bin/python benchmarks/bench_relp.py --methods eap,relp,relp:attention=constant
    .venv/bin/python benchmarks/bench_relp.py --from-json relp.json   # the tables of a saved run
    .venv/bin/python benchmarks/bench_relp.py --positions --methods eap,relp   # the paper's measure

A method may carry settings after a colon (``relp:attention=constant``, several joined by ``;``).
``relp:rules=ln+half`` runs RelP with only the named relevance rules (``engine.relevance.RULES``:
ln, identity, half, ah; ``rules=none`` is the plain gradient, EAP): the ablation of the rules.

    .venv/bin/python benchmarks/bench_relp.py --methods eap,relp:rules=ah,relp:rules=ln+identity+half+ah
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
from bench_bon import PROMPTS  # the yardstick's nine prompts (a script beside this one)

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_average, load_timed
from circuitviz.bench.yardstick import component_nodes, node_effects, node_scores
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.engine import sites
from circuitviz.engine.metric import metric_from_residual
from circuitviz.engine.prefix import final_residual
from circuitviz.engine.relevance import DEFAULT_RULES, relevance_hooks
from circuitviz.engine.scores import batched_gradient_scores
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method
from circuitviz.methods.relp import RelP
from circuitviz.models.adapter import adapter_of

# methods whose scores have no sign (AtP*'s GradDrop sums |score| over layers): their node scores
# are compared with the size of the patching effect, |effect|
MAGNITUDES = ("atp-star",)


def pearson(first: torch.Tensor, second: torch.Tensor) -> float:
    a, b = first.double() - first.double().mean(), second.double() - second.double().mean()
    denominator = float(a.norm() * b.norm())
    return float((a * b).sum()) / denominator if denominator > 0 else float("nan")


def method_and_settings(text: str) -> tuple[str, dict[str, str]]:
    """'relp:attention=constant' -> ('relp', {'attention': 'constant'})."""
    name, _, rest = text.partition(":")
    pairs = [part.split("=", 1) for part in rest.split(";") if part.strip()]
    return name.strip(), {key.strip(): value.strip() for key, value in pairs}


class RelPRules(RelP):
    """RelP with a chosen subset of its relevance rules (the benchmark's ablation; not registered)."""

    def __init__(self, rules: frozenset[str]):
        self.chosen = rules

    def rules(self, config) -> frozenset[str]:
        return self.chosen


def method_of(name: str, settings: dict[str, str]):
    """(the method object, its settings): ``relp`` with ``rules`` is a ``RelPRules``."""
    if name == "relp" and "rules" in settings:
        text = settings.pop("rules")
        rules = frozenset() if text == "none" else frozenset(part.strip() for part in text.split("+"))
        return RelPRules(rules), settings
    return get_method(name), settings


def position_effects(model, spec: GraphSpec, prepared) -> dict[str, torch.Tensor]:
    """The paper's truth: for every layer's MLP output and whole attention output, at every
    position alone, the metric change of putting the corrupted run's value there in the clean run
    (everything downstream recomputed). {"mlps", "attention"}: [n_layers, pos] float64 on the CPU."""
    adapter = adapter_of(model)
    tokens = prepared.clean_tokens.to(adapter.device)
    n_positions = tokens.shape[1]
    corrupted: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        corrupted[hook.name] = x.detach()

    kinds = {"mlps": sites.mlp_out, "attention": sites.attention_out}
    names = [where(layer) for where in kinds.values() for layer in range(spec.n_layers)]
    with torch.no_grad():
        with adapter.hooked([(name, keep) for name in names]):
            adapter.blocks(prepared.corrupted_tokens.to(adapter.device))
        baseline = metric_from_residual(model, prepared, final_residual(model, tokens, []))
    effects = {}
    for kind, where in kinds.items():
        shape = (spec.n_layers, n_positions)
        rows = torch.zeros(shape, dtype=torch.float64, device="cpu")  # compared on the CPU
        for layer in range(spec.n_layers):
            name = where(layer)

            def replace(x, hook, name=name):
                x = x.clone()
                for position in range(n_positions):  # row p: position p patched
                    x[position, position] = corrupted[name][0, position]
                return x

            with torch.no_grad():
                batch = tokens.expand(n_positions, -1)
                metrics = metric_from_residual(
                    model, prepared, final_residual(model, batch, [(name, replace)])
                )
            rows[layer] = (metrics - baseline).double().cpu()
        effects[kind] = rows
    return effects


def position_scores(model, spec: GraphSpec, prepared, evaluator, rules) -> dict[str, torch.Tensor]:
    """A method's estimate of each ``position_effects`` entry: the (edge, position) scores of the
    MLP's outgoing edges, or of the layer's heads' (their shares add up to the attention output),
    summed over readers. ``rules`` None: EAP; else RelP's relevance rules."""
    hooks = None if rules is None else (lambda: relevance_hooks(model, spec, rules=rules))
    scores = batched_gradient_scores(
        model,
        spec,
        [prepared],
        evaluator.clean_writers,
        evaluator.corrupted_writers,
        None,
        positions=True,
        extra_hooks=hooks,
        split_inputs=True if rules is not None else None,
    )[0]  # [n_forward, n_backward, pos]
    per_writer = (scores.double() * spec.tensors(scores.device).edge_mask[..., None]).sum(1).cpu()
    mlps = torch.stack([per_writer[spec.mlp_forward(layer)] for layer in range(spec.n_layers)])
    heads = torch.stack([per_writer[spec.head_forward(layer)].sum(0) for layer in range(spec.n_layers)])
    return {"mlps": mlps, "attention": heads}


def positions_main(model, spec: GraphSpec, methods: list[str], chosen, json_path) -> None:
    """``--positions``: Pearson over every (layer, position) entry of the MLP outputs and of the
    whole attention outputs, as the paper reports, per prompt and the mean."""
    rows = []
    for number, (kind, task) in enumerate(chosen, start=1):
        prepared = prepare_task(model, task)
        evaluator = Evaluator(model, spec, prepared)
        effects = position_effects(model, spec, prepared)
        row = {"kind": kind, "prompt": task.clean, "methods": {}}
        for name in methods:
            method, settings = method_and_settings(name)
            if method == "eap":
                rules = None
            elif method == "relp":
                text = settings.get("rules")
                attention = settings.get("attention", "constant")
                default = DEFAULT_RULES if attention == "constant" else DEFAULT_RULES - {"ah"}
                rules = default if text is None else frozenset(() if text == "none" else text.split("+"))
            else:
                raise SystemExit(f"--positions measures eap and relp only, not {method}.")
            mine = position_scores(model, spec, prepared, evaluator, rules)
            row["methods"][name] = {
                f"pearson_{part}": pearson(mine[part].flatten(), effects[part].flatten()) for part in effects
            }
            log(
                f"{number} {kind:<16} {name:<22} per (layer, position): MLP outputs "
                f"{row['methods'][name]['pearson_mlps']:6.3f}  attention outputs "
                f"{row['methods'][name]['pearson_attention']:6.3f}"
            )
        rows.append(row)
    print(f"\nmeans over {len(rows)} prompts, per (layer, position) ({load_average()})")
    print(f"{'method':<24}{'MLP outputs':>13}{'attention outputs':>19}")
    for name in methods:
        column = [row["methods"][name] for row in rows]
        print(
            f"{name:<24}{statistics.fmean(c['pearson_mlps'] for c in column):>13.3f}"
            f"{statistics.fmean(c['pearson_attention'] for c in column):>19.3f}"
        )
    if json_path:
        with open(json_path, "w") as handle:
            json.dump({"rows": rows}, handle, indent=1)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="eap,relp", help="comma-separated registered methods")
    parser.add_argument("--prompts", type=int, default=0, help="only the first N prompts (0: all nine)")
    parser.add_argument("--model", default=None, help="model id (default: the embedded Gemma-3-270M)")
    parser.add_argument("--json", default=None, help="write the per-prompt figures here")
    parser.add_argument(
        "--from-json", default=None, help="recompute the correlations of a saved run and print its tables"
    )
    parser.add_argument(
        "--positions",
        action="store_true",
        help="the paper's measure instead: every (layer, position) of the MLP and attention outputs",
    )
    add_threads_argument(parser, default=1)
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json) as handle:
            saved = json.load(handle)
        summarise(refigured(saved["rows"]), list(saved["rows"][0]["methods"]), "a saved run")
        return
    apply_threads(args.threads)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    model, seconds = load_timed(args.model)
    spec = GraphSpec.from_model(model)
    budget = max(1, round(0.01 * spec.n_edges))
    log(f"model loaded in {seconds:.1f} s; {spec.n_edges} edges, 1 % = {budget}; {load_average()}")
    nodes = torch.tensor(component_nodes(spec), device="cpu")  # compared on the CPU
    mlps = torch.isin(
        nodes, torch.tensor([spec.mlp_forward(layer) for layer in range(spec.n_layers)], device="cpu")
    )
    chosen = PROMPTS[: args.prompts] if args.prompts else PROMPTS
    if args.positions:
        positions_main(model, spec, methods, chosen, args.json)
        return
    rows = []
    for number, (kind, task) in enumerate(chosen, start=1):
        evaluator = Evaluator(model, spec, prepare_task(model, task))
        effects = node_effects(model, spec, evaluator).double().cpu()
        row = {"kind": kind, "prompt": task.clean, "methods": {}}
        for name in methods:
            method, settings = method_and_settings(name)
            runner, settings = method_of(method, settings)
            result = runner.run_on(model, task, settings, budgets=[budget])
            mine = node_scores(spec, result.scores.double())[nodes]
            truth = effects.abs() if method in MAGNITUDES else effects
            figures = {
                **correlations(mine, truth, mlps),
                "ndf_1pct": result.point(budget).ndf,
                "scoring_s": result.timings.get("scoring_s", float("nan")),
            }
            row["methods"][name] = figures
            row.setdefault("effects", effects.tolist())
            row.setdefault("node_scores", {})[name] = mine.tolist()
            log(
                f"{number} {kind:<16} {name:<22} Pearson MLPs {figures['pearson_mlps']:6.3f}  heads "
                f"{figures['pearson_heads']:6.3f}  all {figures['pearson_all']:6.3f}  "
                f"NDF@1% {figures['ndf_1pct']:6.3f}  "
                f"scoring {figures['scoring_s']:6.2f} s"
            )
        rows.append(row)
    summarise(rows, methods, f"{spec.n_edges} edges, 1 % = {budget}; {load_average()}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"budget": budget, "rows": rows}, handle, indent=1)


def correlations(mine: torch.Tensor, truth: torch.Tensor, mlps: torch.Tensor) -> dict[str, float]:
    """Pearson of node scores with patching effects over the MLPs, the heads, and every node pooled."""
    return {
        "pearson_mlps": pearson(mine[mlps], truth[mlps]),
        "pearson_heads": pearson(mine[~mlps], truth[~mlps]),
        "pearson_all": pearson(mine, truth),
    }


def refigured(rows: list[dict]) -> list[dict]:
    """A saved run's rows with their correlations computed again from its effects and node scores
    (a run saved before the pooled column had none). The nodes are in writer order
    (``component_nodes``), on the embedded model 4 heads then the MLP per layer: every fifth is an
    MLP."""
    for row in rows:
        effects = torch.tensor(row["effects"], dtype=torch.float64, device="cpu")  # [n_nodes]
        mlps = torch.arange(len(effects), device="cpu") % 5 == 4  # the saved run's order, on the CPU
        for name, figures in row["methods"].items():
            mine = torch.tensor(row["node_scores"][name], dtype=torch.float64, device="cpu")
            truth = effects.abs() if method_and_settings(name)[0] in MAGNITUDES else effects
            figures.update(correlations(mine, truth, mlps))
    return rows


def summarise(rows: list[dict], methods: list[str], where: str) -> None:
    """The means over the prompts, and how often each method's NDF beats the first's."""
    print(f"\nmeans over {len(rows)} prompts ({where})")
    print(
        f"{'method':<24}{'Pearson MLPs':>14}{'Pearson heads':>15}{'Pearson all':>13}{'NDF@1%':>9}{'scoring s':>11}"
    )
    for name in methods:
        column = [row["methods"][name] for row in rows]

        def mean(key, column=column):
            return statistics.fmean(entry[key] for entry in column)

        print(
            f"{name:<24}{mean('pearson_mlps'):>14.3f}{mean('pearson_heads'):>15.3f}"
            f"{mean('pearson_all'):>13.3f}{mean('ndf_1pct'):>9.3f}{mean('scoring_s'):>11.2f}"
        )
    if len(methods) >= 2:
        first, *others = methods
        for other in others:
            wins = sum(row["methods"][other]["ndf_1pct"] > row["methods"][first]["ndf_1pct"] for row in rows)
            print(f"{other} NDF@1% above {first}'s on {wins} of {len(rows)} prompts")


if __name__ == "__main__":
    main()
