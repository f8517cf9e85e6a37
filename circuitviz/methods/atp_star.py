"""AtP* (Kramár et al. 2024): attribution patching with the QK fix and GradDrop
(``engine.atp_star``). With both off it is AtP, which on edges is EAP. With ``neurons`` on, MLP
neurons score from the same rows (``methods.neuron_nodes``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..details.neurons import NeuronDetails
from ..engine.atp_star import atp_star_scores
from .base import Cost, RunContext, ScoringMethod, gradient_cost
from .neuron_nodes import (
    SCORES_NOTE,
    check_neurons,
    neuron_cost,
    neuron_top_k_setting,
    neurons_setting,
    scores_with_neurons,
)
from .registry import register
from .settings import check_settings, setting

GRAD_DROP_NEURONS = (
    "a neuron scores, for each layer, its corrupted-minus-clean activation times the gradient with that "
    "layer's outputs cut from the backward pass, summed over positions, then the sum of their sizes over "
    "layers / (L - 1): a size, not the metric's change"
)


@dataclass(frozen=True)
class AtPStarConfig:
    """Its two fixes, each of which can be switched off, and MLP neurons as nodes or not."""

    qk_fix: bool = setting(
        True, "recompute the attention softmax exactly for edges into queries and keys (the QK fix)."
    )
    grad_drop: bool = setting(
        True,
        "one backward pass per layer with that layer's gradient dropped, scores the mean |score| "
        "(GradDrop; scores become magnitudes).",
    )
    neurons: bool = neurons_setting()
    neuron_top_k: int = neuron_top_k_setting()

    def __post_init__(self):
        check_settings(self)
        check_neurons(self)


@register
class AtPStar(ScoringMethod):
    name = "atp-star"
    label = "AtP*"
    summary = "Attribution patching with exact attention for queries and keys, and gradients dropped layer by layer."
    score_meaning = (
        "with GradDrop (the default), the sum over layers of |attribution| with that layer's gradient "
        "dropped: a size, not the metric's change; without it, attribution patching's estimate of "
        "the metric's change with exact attention for queries and keys"
    )
    Config = AtPStarConfig
    Details = NeuronDetails
    # by default (GradDrop) its scores are sums of |score| over layers: sizes, not the metric's change
    scores_estimate_metric = False

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        rows = spec.n_layers if config.grad_drop else 1
        extra = qk_fix_passes(spec) if config.qk_fix else 0.0
        extra += (rows - 1) * grad_drop_row_passes(spec)  # GradDrop's backward passes after the first
        neurons = neuron_cost(config, spec, n_tokens, rows)
        extra += neurons.pop("extra_passes", 0.0)
        cost = gradient_cost(1, n_budgets, extra_passes=extra, integrated=False, spec=spec, **neurons)
        return dataclasses.replace(cost, gradient_batch=rows)

    def score(self, ctx: RunContext, config):
        return self.score_with_details(ctx, config)[0]

    def score_with_details(self, ctx: RunContext, config):
        """(scores, the neuron details with ``neurons`` on, else None)."""
        evaluator = ctx.evaluator

        def batch_scores(differences):
            found = atp_star_scores(
                ctx.model,
                ctx.spec,
                ctx.prepared(),
                evaluator.clean_writers,
                evaluator.corrupted_writers,
                qk_fix=bool(config.qk_fix),
                grad_drop=bool(config.grad_drop),
                progress=ctx.progress,
                neuron_differences=differences,
            )
            return [found] if differences is None else (found[0][None], found[1][None])

        note = GRAD_DROP_NEURONS if config.grad_drop else SCORES_NOTE
        return scores_with_neurons([ctx], config, batch_scores, note)[0]


# what AtP*'s two fixes cost in plain forward passes, measured on both embedded models (the
# scoring's CPU seconds of one thread over a plain pass, each fix on and off, 2026-12-07, load
# 7-9; docs/benchmarks.md, "The weights from measurement"): the QK fix 17.0 on Gemma-3-270M and
# 33.3 on SmolLM2-135M (a count of its projections' FLOPs said 6.4 and 19.3); a GradDrop row
# after the first 2.5 and 5.1 (counted 2 as an IG step before: AtP*'s first estimate was
# 0.6-0.8 times its run), a backward pass and a product over every edge, which grows with the
# edges per layer and unit of width as a patched pass's mixing does. A change to one of these
# raises ``core.pass_weights.WEIGHTS_VERSION``, as the runs stored here were counted with them
QK_FIX_SET_UP = 10.1
QK_FIX_PROJECTION = 1.27  # times the projections' share of a pass (upstream / (8 n_layers))
GRAD_DROP_ROW = 2.1
GRAD_DROP_EDGES = 0.42  # times edges / (layers x width)


def qk_fix_passes(spec) -> float:
    """What the QK fix costs in forward passes: a set-up (a plain pass to read every layer's input
    and scores, and the softmax recomputed), then every layer's queries and keys projected once
    per upstream writer, 2 d² a position each against a block's forward of about 16 d², so
    upstream / (8 n_layers) passes, each weighted as measured (``QK_FIX_PROJECTION``)."""
    upstream = sum(spec.upstream_of_heads(layer) for layer in range(spec.n_layers))
    return QK_FIX_SET_UP + QK_FIX_PROJECTION * upstream / (8.0 * spec.n_layers)


def grad_drop_row_passes(spec) -> float:
    """One GradDrop backward pass after the first, with its scores (Gemma-3-270M 2.5, SmolLM2-135M 5.1)."""
    spread = spec.n_edges / max(spec.n_layers * spec.d_model, 1) if spec.d_model else 1.0
    return GRAD_DROP_ROW + GRAD_DROP_EDGES * spread
