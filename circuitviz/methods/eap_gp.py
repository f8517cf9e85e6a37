"""EAP-GP (Zhang et al. 2025, "GradPath"): EAP-IG's score with the straight interpolation replaced
by an adaptive path that descends the distance to the corrupted output (``engine.gradpath``).

score(u -> v) = (z'_u - z_u) . (1/m) sum_{j=1..m} dL/d(input of v) at the run whose embedding is
γ_j, the j-th point of the GradPath from the clean embedding. m sequential passes build the path,
m batched gradient passes score on it. With ``neurons`` on, every MLP neuron scores (a' - a) times
the same passes' mean gradient at its hidden activation (``methods.neuron_nodes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..details.neurons import NeuronDetails
from ..engine.gradients import reader_gradients
from ..engine.gradpath import grad_path
from ..engine.neurons import NeuronScores
from ..engine.scores import gradient_scores, score_dtype, scoring_checks
from .base import EDGE_CHANGE, Cost, RunContext, ScoringMethod, gradient_cost
from .neuron_nodes import (
    check_neurons,
    neuron_cost,
    neuron_top_k_setting,
    neurons_setting,
    scores_with_neurons,
)
from .registry import register
from .settings import check_settings, setting

# what one step of building the path costs, in passes: a sequential forward and backward pass of
# one sequence, set-up included, as EAP's single gradient pass (``core.pass_weights.gradient_passes(1)``);
# on Gemma-3-270M one step took 1.2 times EAP's scoring (same process, loaded machine); the
# backtracking's checks, forward passes of one sequence, were 8-12 for 5 steps on the nine
# yardstick prompts (2 a step)
PATH_STEP_PASSES = 9.0
CHECK_PASSES = 2.0


@dataclass(frozen=True)
class GradPathConfig:
    """Its steps and their length, and MLP neurons as nodes or not."""

    ig_steps: int = setting(5, "points on the GradPath (the paper uses 5).", low=1, high=200)
    step_scale: float = setting(
        1.0,
        "each step's length as a share of the straight path's length over the steps, ||e - e'|| / m "
        "(1: the path travels as far as the straight line).",
        low=0.01,
        high=10.0,
    )
    backtrack: bool = setting(
        True,
        "halve a step that would not bring the output closer to the corrupted one (up to 6 times a "
        "step; the length found carries on; a point none improves stays). Off: the paper's fixed "
        "steps, which climbed at the first step on 8 of 9 prompts of the embedded model.",
    )
    neurons: bool = neurons_setting()
    neuron_top_k: int = neuron_top_k_setting()

    def __post_init__(self):
        check_settings(self)  # every bound its fields declare
        check_neurons(self)


@register
class EAPGP(ScoringMethod):
    name = "eap-gp"
    label = "EAP-GP (GradPath)"
    summary = "Integrated gradients along an adaptive path that descends towards the corrupted output."
    Config = GradPathConfig
    score_meaning = f"integrated gradients' estimate (along the adaptive path) of {EDGE_CHANGE}"
    Details = NeuronDetails

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        steps = int(config.ig_steps)
        extra = (PATH_STEP_PASSES + CHECK_PASSES * bool(config.backtrack)) * steps
        neurons = neuron_cost(config, spec, n_tokens, steps)
        extra += neurons.pop("extra_passes", 0.0)
        return gradient_cost(steps, n_budgets, extra_passes=extra, spec=spec, **neurons)

    def score(self, ctx: RunContext, config):
        return self.score_with_path(ctx, config)[0]

    def score_with_details(self, ctx: RunContext, config):
        """(scores, the neuron details with ``neurons`` on, else None)."""

        def batch_scores(differences):
            scores, _, neurons = self._scores(ctx, config, differences)
            return [scores] if neurons is None else (scores[None], neurons)

        return scores_with_neurons([ctx], config, batch_scores)[0]

    def score_with_path(self, ctx: RunContext, config):
        """(scores [n_forward, n_backward], the path [m, pos, d_model])."""
        return self._scores(ctx, config)[:2]

    def _scores(self, ctx: RunContext, config, neuron_differences: torch.Tensor | None = None):
        """(scores, path, None); with ``neuron_differences`` ([1, pos, n_layers, d_mlp]) the
        neurons' scores from the same passes [1, n_layers, d_mlp] in place of None."""
        model, spec, prepared, evaluator = ctx.model, ctx.spec, ctx.prepared(), ctx.evaluator
        steps = int(config.ig_steps)
        clean = evaluator.clean_writers[0, :, 0]  # [pos, d_model]: the input embeddings
        corrupted = evaluator.corrupted_writers[0, :, 0]
        length = float(config.step_scale) * float((corrupted - clean).norm()) / steps
        # the path's passes and each chunk's pass report before each block, forward and backward
        # (``layer_checks``, ``scoring_checks``): the run's Cancel is heard inside them, not only
        # between chunks
        check = (lambda: ctx.report("score", 0.0)) if ctx.progress is not None else None
        path = grad_path(
            model, prepared, clean, corrupted, steps, length, backtrack=bool(config.backtrack), check=check
        )  # [m, pos, d_model]
        differences = evaluator.corrupted_writers - evaluator.clean_writers  # [1, pos, n_forward, d_model]
        neurons = None
        if neuron_differences is not None:
            neurons = NeuronScores(
                spec, neuron_differences, score_dtype(differences.dtype), differences.device
            )

        def batch_pass(rows: slice):
            points = path[rows]
            checks = scoring_checks(spec.n_layers, ctx.progress, rows, steps) or None
            names = neurons.names if neurons is not None else ()
            gradients, _ = reader_gradients(
                model, spec, prepared, len(points), lambda x: points, checks, extra_grads=names
            )
            if neurons is not None:  # every sequence is the one task's
                neurons.add(
                    rows, gradients.grads, torch.zeros(len(points), dtype=torch.long, device=points.device)
                )
            return gradients, differences, None, None

        commit = neurons.commit if neurons is not None else None
        scores = gradient_scores(
            model, spec, steps, prepared.n_positions, batch_pass, progress=ctx.progress, committed=commit
        )
        return scores / steps, path, (neurons.total / steps if neurons is not None else None)
