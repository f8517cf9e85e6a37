"""CircuitLasso: circuits by sparse regression on observed activations (docs/methods.md).

No interventions and no gradients: the model runs once, unpatched, over the observations (the
prompt's token positions, its corruption, its paraphrases, optionally a corpus), and a linear
structural equation model ``X ~ A^T X`` is fitted to the activations with one Lasso per target.
A layer only reads earlier layers, so A is block-triangular and the fit splits into independent
Lassos, solved together by batched FISTA (``circuitviz.lasso``).

Units (``units``):
- ``components``: every head and MLP of the engine's graph (see ``circuitviz.lasso.units``): a
  writer's output and a reader's input projection, each reduced to its top ``directions``
  principal directions. An edge u -> v is selected when any coefficient from u's scalars to v's
  is nonzero. Its strength is the sum of those |coefficients| (refitted by least squares on the
  Lasso's support, so the shrinkage does not decide), weighted by each of v's directions' share
  of v's spread; its score is its share of the SEM's linear explanation of the metric along the
  selected paths into it (``circuitviz.lasso.paths``): strength times the path sum from v to the
  metric. The circuit is the selected edges on paths into the metric whose share is at least
  ``min_share`` of the largest into the same reader. Budgets, the faithfulness curve and export
  come from the shared engine.
- ``sae``: features of sae-lens SAEs at the chosen ``layers``; the last layer's features link to
  the metric. The feature circuit is in ``result.details.feature_circuit``; the engine graph's
  scores (and so the curve) still come from the component units fitted on the same observations.

Coefficients are a dependency skeleton (which outputs linearly predict which inputs across the
observations), not causal effect sizes; the faithfulness curve is what measures effects.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from ..core.text import counted, given
from ..details.base import json_safe_deep
from ..details.lasso import LassoDetails
from ..lasso.observations import collect_observations, observation_texts, paraphrase_pairs
from ..lasso.paths import DEFAULT_MIN_SHARE, difference_scale, path_circuit, path_shares
from ..lasso.sae_units import choose_saes, parse_layers, sae_units
from ..lasso.sem import (
    NOISY_LAMBDA,
    fit_adaptive,
    fit_sem,
    parse_selection,
    ranked_shares,
    refitted_strengths,
)
from ..lasso.solver import solver_threads
from ..lasso.units import build_component_problem, build_sae_problem, component_hook_names
from ..measure.evaluate import Evaluator, evaluator_of_runs
from ..services.sae_store import load_sae
from .base import PREPARE_PASSES, Cost, RunContext, ScoringMethod, curve_passes
from .registry import register
from .settings import check_settings, setting

UNITS = ("components", "sae")
SOURCE_SCALES = ("difference", "none")
# chosen on the planted-circuit benchmark at three seeds (docs/methods.md: every variant's figures)
DEFAULT_LAMBDA = "adaptive"
_OBSERVED = "circuit-lasso observations"  # RunContext.kept: made with the clean and corrupted runs


@dataclass(frozen=True)
class LassoConfig:
    """Settings of CircuitLasso."""

    units: str = setting(
        "components",
        '"components" (heads and MLPs of the graph) or "sae" (SAE features at the layers below).',
        choices=UNITS,
    )
    lasso_lambda: str = setting(
        DEFAULT_LAMBDA,
        '"adaptive" (0.3 on a real model\'s observations; 0.002 with least-squares strengths where a linear '
        'model explains them exactly), a correlation level in (0, 1], or "auto" (refitted extended BIC).',
    )
    target_edges: int = setting(
        0, "when above 0, one lambda for all targets giving at most this many edges.", low=0, high=10**7
    )
    directions: int = setting(
        4, "principal directions per component output and per reader input.", low=1, high=64
    )
    n_paraphrases: int = setting(
        8, "template paraphrases (each with its corruption) added to the observations.", low=0, high=256
    )
    corpus: str = setting(
        "", 'a UTF-8 text file, one text per line, added to the observations ("" for none).'
    )
    max_observations: int = setting(
        1024,
        "at most this many token positions (a seeded subset of the corpus beyond it).",
        low=8,
        high=10**6,
    )
    layers: tuple[int, ...] = setting(
        (), "SAE units: the layers whose SAEs to use, comma separated, e.g. 3,9."
    )
    sae_dir: str = setting(
        "", 'SAE units: a folder of sae-lens SAEs ("" = the project\'s assets/saes/<model id>).'
    )
    max_features: int = setting(
        256,
        "SAE units: features kept per layer (those most active on the prompt first).",
        low=1,
        high=100_000,
    )
    n_lambdas: int = setting(20, "points on the lambda path.", low=2, high=200)
    seed: int = setting(0, "for the paraphrase templates, the corpus subset and the randomized PCA.")
    refit: bool = setting(
        False,
        'with a number or "auto": strengths from the least-squares refit on the Lasso\'s support (off: its own).',
    )
    source_scale: str = setting(
        "difference",
        '"difference": the budgets rank edges weighted by how much their source changes between the prompt '
        'and its corruption; "none": not.',
        choices=SOURCE_SCALES,
    )
    min_share: float = setting(
        DEFAULT_MIN_SHARE,
        "an edge joins the circuit when its share is at least this part of the largest into its reader.",
        low=0.0,
        high=1.0,
    )

    def __post_init__(self):
        check_settings(self)  # typed tuples, and every bound its fields declare
        object.__setattr__(self, "lasso_lambda", str(self.lasso_lambda).strip().lower() or DEFAULT_LAMBDA)
        object.__setattr__(self, "units", str(self.units).strip().lower())
        if self.units not in UNITS:
            raise ValueError(f"units must be 'components' or 'sae', not {given(self.units)}.")
        parse_selection(self.lasso_lambda)
        if self.units == "sae" and not self.layers:
            raise ValueError("SAE units need layers, e.g. layers=2,6,10 (--layers 2,6,10).")


# what an edge's score is (the details' note and the edge table's line)
SCORES_NOTE = (
    "the edge's share of the metric's linear explanation along the fitted paths into it (strength x "
    "the path sum from its reader to the metric); selected edges on no path into the metric, then "
    "every other edge by how close it is to entering the model (its largest |gradient| / lambda), "
    "rank below them"
)


@register
class CircuitLasso(ScoringMethod):
    name = "circuit-lasso"
    label = "CircuitLasso"
    summary = (
        "Sparse regression of each component's input on earlier components' outputs over observed "
        "token positions (no patching, no gradients); coefficients are a dependency skeleton, not effect sizes."
    )
    Config = LassoConfig
    Details = LassoDetails
    flag_aliases = {"lambda": "lasso_lambda"}
    scores_estimate_metric = False  # regression shares of a dependency skeleton
    score_meaning = SCORES_NOTE
    flat_curve_note = (
        "CircuitLasso's edges are a dependency skeleton (which outputs "
        "linearly predict which inputs across the observations), not edges chosen by their effect "
        "under patching, so its circuits need not carry the answer; its own check is the planted "
        "benchmark's recovery of known circuits."
    )

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        # every observed text (prompt, corruption, paraphrases) is a share of batched passes that
        # keep every component's input and output; the regression is CPU algebra over the lambda
        # path and directions; both in pass-equivalents (EAP-IG's passes on the same prompt as the
        # unit) as measured on the embedded model's IOI prompt (benchmarks/bench_estimates.py
        # --methods eap-ig,circuit-lasso, 2026-12-02, two runs at load 5.3-6.0, heads of one
        # key/value group reduced and solved once: observe 22-30 and reduce + solve 22-23 of
        # EAP-IG's passes; the earlier constants priced the run 2.1x over)
        observed = 1.45 * 2.0 * (1 + config.n_paraphrases)
        # a fixed lambda (the adaptive default's, or a number) is solved once, not down the path:
        # reduce + solve took about 0.65 of the path's time on the embedded model (docs/methods.md)
        path = parse_selection(config.lasso_lambda)[0] == "auto" or config.target_edges > 0
        regression = 0.42 * (int(config.n_lambdas) if path else 13) * int(config.directions)
        passes = PREPARE_PASSES + observed + regression + curve_passes(n_budgets, spec)
        return Cost(passes=passes, gradient_batch=1)

    def score(self, ctx: RunContext, config) -> torch.Tensor:
        return self.score_with_details(ctx, config)[0]

    def make_evaluators(self, contexts, config, check=None) -> list[Evaluator]:
        """A task alone: the prompt and its corruption are two of the observed texts, so their rows
        of the observation pass are its clean and corrupted runs (two one-row passes fewer; the
        baseline can differ from those passes' in the last bits, the scores cannot), and the
        observations wait on the context for the scoring. Several tasks: their shared passes (the
        observations of one task at a time are made when it is scored, not all held at once)."""
        if len(contexts) != 1:
            return super().make_evaluators(contexts, config, check)
        ctx = contexts[0]
        observations, saes = self._observe(ctx, config, keep_runs=True)
        ctx.kept[_OBSERVED] = (config, observations, saes)
        if observations.runs is None:  # the texts' tokens are not the prepared task's: made apart
            return super().make_evaluators(contexts, config, check)
        writers, residual, raw = observations.runs
        return [evaluator_of_runs(ctx.model, ctx.spec, ctx.prepared(True), writers, residual, raw)]

    def _observe(self, ctx: RunContext, config, keep_runs: bool = False):
        """The observations (every text's pass) and the SAEs of SAE mode."""
        model, spec, prepared = ctx.model, ctx.spec, ctx.prepared()
        start = time.perf_counter()
        texts = observation_texts(prepared.task, config.n_paraphrases, config.corpus, config.seed)
        hooks = component_hook_names(model, spec)
        saes = []
        if config.units == "sae":
            layers = parse_layers(",".join(map(str, config.layers)), spec.n_layers)
            model_name = str(getattr(model.cfg, "model_name", ""))
            saes = [
                # encoded in float32 whatever the stored dtype: a float16 product on the CPU is
                # slow (2.8 of IOI's 13.5 CPU-s) and rounds every activation to float16
                (layer, load_sae(folder, ctx.device, "float32"), hook)
                for layer, folder, hook in choose_saes(layers, config.sae_dir, spec.d_model, model_name)
            ]
            hooks += sorted({hook for _, _, hook in saes} - set(hooks))
        check = (lambda: ctx.report("observe", 0.0)) if ctx.progress is not None else None
        observations = collect_observations(
            model, spec, prepared, texts, hooks, True, config.max_observations, config.seed, keep_runs, check
        )
        ctx.timings["observe_s"] = time.perf_counter() - start
        ctx.report("observe", 1.0)
        return observations, saes

    def score_with_details(self, ctx: RunContext, config) -> tuple[torch.Tensor, LassoDetails]:
        model, spec, timings = ctx.model, ctx.spec, ctx.timings
        kept = ctx.kept.pop(_OBSERVED, None)  # made with the clean and corrupted runs
        if kept is not None and kept[0] == config:
            observations, saes = kept[1], kept[2]
        else:
            observations, saes = self._observe(ctx, config)

        start = time.perf_counter()
        with solver_threads(observations.metric.device):
            problem = build_component_problem(
                model,
                spec,
                observations.writers,
                observations.activations,
                observations.metric,
                config.directions,
                config.seed,
                observations.distinct,
                progress=ctx.progress,
            )
        timings["reduce_s"] = time.perf_counter() - start
        # the solver reports before each block it solves (a Cancel was not heard in it: 3-9 s of a busy CPU)
        check = (lambda: ctx.report("regress", 0.0)) if ctx.progress is not None else None
        if config.target_edges == 0 and parse_selection(config.lasso_lambda)[0] == "adaptive":
            fit, strengths, regime = fit_adaptive(problem, config.n_lambdas, check)
            problem.info.update(regime)
        else:
            fit = fit_sem(problem, config.lasso_lambda, config.target_edges, config.n_lambdas, check=check)
            strengths = refitted_strengths(problem, fit) if config.refit else fit.selected.cpu().clone()
        timings["solve_s"] = fit.info["solve_s"]
        ctx.report("regress", 1.0)
        shares, _ = path_shares(spec, strengths)
        circuit = path_circuit(spec, shares, config.min_share)  # the SEM's own structure into y
        if config.source_scale == "difference":  # the budgets rank what this corruption changes
            scale = difference_scale(
                problem, observations.rows_of("prompt"), observations.rows_of("corrupted")
            )
            shares, _ = path_shares(spec, strengths * scale[:, None])
        scores = ranked_shares(fit, shares, spec.edge_mask)
        selected = (fit.selected.cpu() > 0) & spec.edge_mask
        feature_circuit = None
        if saes:
            start = time.perf_counter()
            feature_circuit = _feature_circuit(saes, observations, config)
            timings["sae_s"] = time.perf_counter() - start
        # the template paraphrases it observed (observation_texts draws the same): held out of transfer
        observed, _ = paraphrase_pairs(ctx.prepared().task, config.n_paraphrases, config.seed)
        details = LassoDetails(
            units=config.units,
            observations=observations.summary(),
            paraphrases=[clean for clean, _ in observed],
            regression={**problem.info, **{k: v for k, v in fit.info.items() if k != "lambda_grid"}},
            lambda_path=fit.info["lambda_grid"],
            selected_edges=int(selected.sum()),
            circuit_edges=spec.edge_names_of(circuit),
            coefficients=_edge_coefficients(spec, strengths, selected),
            scores_note=f"score = {SCORES_NOTE}.",
            feature_circuit=feature_circuit,
        )
        details.report = _report(details)
        # plain JSON values, as a stored result reads them back (``to_dict``'s deep copy of the
        # thousands of coefficients took 0.3 s; the fields hold no dataclass to convert)
        plain = {f.name: getattr(details, f.name) for f in dataclasses.fields(details)}
        return scores, LassoDetails.from_dict(json_safe_deep(plain))


def _edge_coefficients(spec, selected_scores: torch.Tensor, selected: torch.Tensor) -> dict[str, float]:
    """{edge name: aggregated |coefficient|} of the selected edges, largest first."""
    forward, backward = selected.nonzero(as_tuple=True)
    values = selected_scores[forward, backward].tolist()
    names = [
        f"{spec.forward_names[f]}->{spec.backward_names[b]}"
        for f, b in zip(forward.tolist(), backward.tolist())
    ]
    return dict(sorted(zip(names, [float(v) for v in values]), key=lambda item: -item[1]))


def _feature_circuit(saes, observations, config) -> dict:
    """The SAE feature circuit: features with edges on a path into the metric, with coefficients."""
    prompt_rows = observations.rows_of("prompt")
    units = sae_units(saes, observations.activations, prompt_rows, config.max_features)
    problem = build_sae_problem(units, observations.metric)
    adaptive = parse_selection(config.lasso_lambda)[0] == "adaptive"
    selection = str(NOISY_LAMBDA) if adaptive else config.lasso_lambda  # features are never exactly linear
    if parse_selection(selection)[0] == "lambda" and config.target_edges == 0:
        coefficients, regression, solved = _fit_reached(problem, selection, config.n_lambdas)
    else:  # "auto" walks a grid from the largest lambda_max of all targets, target_edges counts
        # every target's edges: every target is solved. No closeness: nothing here ranks the
        # unselected pairs (a product by G of every column fewer)
        fit = fit_sem(problem, selection, config.target_edges, config.n_lambdas, closeness=False)
        coefficients, regression = fit.coefficients.cpu(), fit.info
        solved = problem.targets.shape[1]
    # one column per unit here, so the column coefficients are the signed edge coefficients
    signed = torch.zeros(problem.n_sources, problem.n_targets, dtype=torch.float64, device="cpu")
    source_of, target_of = problem.source_of.cpu(), problem.target_of.cpu()
    signed[source_of[:, None], target_of[None, :]] = coefficients
    edges = (signed != 0) & problem.allowed.cpu()
    metric_index = problem.n_targets - 1
    # keep what reaches the metric: walk back from it through selected edges
    reaches = torch.zeros(problem.n_targets, dtype=torch.bool)
    reaches[metric_index] = True
    for _ in range(len(units.layers) + 1):
        feeding = (edges & reaches[None, :]).any(1)  # [n_sources]
        reaches[: problem.n_sources] |= feeding
    kept_edges = edges & reaches[None, :] & reaches[: problem.n_sources, None]
    names = problem.target_names
    layer_of, feature_of, prompt_of = [], [], []
    for layer, features, prompt_mean in zip(units.layers, units.features, units.prompt_activation):
        layer_of += [layer] * len(features)
        feature_of += features.tolist()
        prompt_of += prompt_mean.tolist()
    in_circuit = sorted({int(i) for i in kept_edges.nonzero()[:, 0].tolist()})
    twins = problem.info.get("twins", {})
    merged = sum(len(members) for members in twins.values())
    nodes = [
        {
            "id": names[i],
            "layer": layer_of[i],
            "feature": int(feature_of[i]),
            "prompt_activation": float(prompt_of[i]),
            # features of its layer identical to it at every observation, merged into it
            "twins": [int(feature_of[j]) for j in twins.get(i, [])],
        }
        for i in in_circuit
    ]
    edge_list = [
        {"source": names[s], "target": names[t], "coefficient": float(signed[s, t])}
        for s, t in kept_edges.nonzero().tolist()
    ]
    edge_list.sort(key=lambda edge: -abs(edge["coefficient"]))
    return {
        "layers": list(units.layers),
        "hooks": list(units.hooks),
        "features_active": list(units.active_counts),
        "features_used": [len(f) for f in units.features],
        "target": "metric",
        "nodes": nodes,
        "edges": edge_list,
        # edges selected into the targets whose Lassos were solved (those a path into the metric
        # reaches, unless target_edges asked for every target: ``_fit_reached``)
        "selected_edges_solved": int(edges.sum()),
        "targets_solved": solved,
        "twins_merged": merged,
        "regression": {k: v for k, v in regression.items() if k != "lambda_grid"},
        "note": (
            "Signed standardised Lasso coefficients between SAE features (and from the last layer's "
            "features to the metric), kept when on a path into the metric: a dependency skeleton, "
            "not effect sizes."
            + (
                (
                    " 1 feature was merged into a feature of its layer that is identical to it"
                    if merged == 1
                    else f" {merged} features were merged into a feature of their layer that is identical to them"
                )
                + " at every observation (the observations cannot tell them apart); a drawn "
                "feature's tooltip names those it stands for."
                if merged
                else ""
            )
        ),
    }


def _fit_reached(problem, selection: str, n_lambdas: int) -> tuple[torch.Tensor, dict, int]:
    """(coefficients [P, T], the fits' summary, target columns solved): the Lassos of the targets
    a path into the metric reaches only, the metric's first, then those of the features it
    selected, and so on back a layer at a time; every other column's coefficients 0.

    For a fixed lambda only: the feature circuit is the edges into those targets, and at one
    lambda each target's Lasso is a problem of its own, so they are those of the fit of every
    target, to rounding (the products of a column subset). On the embedded model's nine prompts
    0-6 features of the last layer reach the metric, against the 253-256 Lassos of the whole fit
    (docs/methods.md, CircuitLasso, Speed)."""
    target_of = problem.target_of.cpu()
    has_rows = problem.column_allowed().any(0).cpu()  # a first layer's feature allows no source
    # the bookkeeping is on the host, as the feature circuit's (each fit's small result is read here)
    coefficients = torch.zeros(problem.predictors.shape[1], len(target_of), dtype=torch.float64, device="cpu")
    solved = torch.zeros(len(target_of), dtype=torch.bool, device="cpu")
    wanted = torch.zeros(problem.n_targets, dtype=torch.bool, device="cpu")
    wanted[problem.n_targets - 1] = True  # the metric
    fits = []
    while True:
        columns = (wanted[target_of] & ~solved & has_rows).nonzero(as_tuple=True)[0]
        if columns.numel() == 0:
            break
        part = columns.to(problem.targets.device)
        sub = dataclasses.replace(
            problem,
            targets=problem.targets[:, part],
            target_of=problem.target_of[part],
            target_weight=problem.target_weight[part],
        )
        fit = fit_sem(sub, selection, 0, n_lambdas, closeness=False)
        coefficients[:, columns] = fit.coefficients.cpu()
        solved[columns] = True
        fits.append(fit)
        wanted = torch.zeros(problem.n_targets, dtype=torch.bool, device="cpu")
        wanted[problem.source_of.cpu()[(fit.coefficients != 0).any(1).cpu()]] = True
    if not fits:
        return coefficients, {}, 0
    infos = [fit.info for fit in fits]
    chosen = torch.cat([fit.chosen for fit in fits])
    regression = {
        **infos[0],
        "lambda_chosen_median": float(chosen.median()),
        "path_steps": sum(info["path_steps"] for info in infos),
        "solver_rounds": sum(info["solver_rounds"] for info in infos),
        "max_kkt_violation": max(info["max_kkt_violation"] for info in infos),
        "converged": all(info["converged"] for info in infos),
        "distinct_target_columns": sum(info["distinct_target_columns"] for info in infos),
        "solve_s": sum(info["solve_s"] for info in infos),
    }
    return coefficients, regression, int(solved.sum())


def _selection_text(regression: dict) -> str:
    """How lambda was chosen, in words."""
    median = regression["lambda_chosen_median"]
    if regression.get("regime"):
        return f"{regression['lambda_fixed']:g} (adaptive: {regression['regime']} observations)"
    if regression["selection"] == "lambda":
        return f"{regression['lambda_fixed']:g}"
    if regression["selection"] == "target_edges":
        return f"{median:.4g} (for at most {regression['target_edges']} edges)"
    return f"auto: refitted extended BIC per target, median {median:.4g}"


def _report(details: LassoDetails) -> list[str]:
    """Lines the CLI prints under the faithfulness table."""
    observations, regression = details.observations, details.regression
    counts, texts = observations["positions_by_kind"], observations["texts_by_kind"]
    parts = ", ".join(
        f"{counts[k]} from {counted(texts.get(k, 0), k.replace('_', ' ') + ' text')}" for k in counts
    )
    lines = [
        f"observations: {observations['total']} token positions ({parts})",
        f"lasso: {regression['predictor_columns']} predictor and {regression['target_columns']} target "
        f"columns, lambda {_selection_text(regression)}, "
        f"{details.selected_edges} edges selected, {len(details.circuit_edges)} on a path to logits; "
        f"{counted(regression['path_steps'], 'lambda')}, {counted(regression['solver_rounds'], 'solver round')}, "
        "max KKT violation "
        f"{regression['max_kkt_violation']:.1e}{'' if regression['converged'] else ' (NOT converged)'}",
    ]
    lines += [f"note: {note}" for note in observations["notes"]]
    if regression["predictor_columns"] > observations["total"]:  # p > n: many exact fits
        lines.append(
            f"note: {regression['predictor_columns']} predictor columns from {observations['total']} "
            "observed positions: a target with more upstream predictors than observations has many "
            "exact fits, and which edges the lasso keeps there rests on its penalty more than on the "
            "data; a corpus (--corpus) adds observations, as do template paraphrases where the prompt has them"
        )
    if details.feature_circuit:
        circuit = details.feature_circuit
        lines.append(
            f"SAE feature circuit: layers {circuit['layers']}, {len(circuit['nodes'])} features and "
            f"{len(circuit['edges'])} edges on paths into the metric (details.feature_circuit)"
        )
    lines.append("coefficients are a dependency skeleton, not effect sizes")
    return lines
