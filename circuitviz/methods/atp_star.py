"""AtP* (Kramár et al. 2024): attribution patching with the QK fix and GradDrop
(``engine.atp_star``). With both off it is AtP, which on edges is EAP."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.atp_star import atp_star_scores
from .base import Cost, RunContext, ScoringMethod, gradient_cost
from .registry import register
from .settings import setting


@dataclass(frozen=True)
class AtPStarConfig:
    """Its two fixes, each of which can be switched off."""

    qk_fix: bool = setting(
        True, "recompute the attention softmax exactly for edges into queries and keys (the QK fix)."
    )
    grad_drop: bool = setting(
        True,
        "one backward pass per layer with that layer's gradient dropped, scores the mean |score| "
        "(GradDrop; scores become magnitudes).",
    )


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
    # by default (GradDrop) its scores are sums of |score| over layers: sizes, not the metric's change
    scores_estimate_metric = False

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        rows = spec.n_layers if config.grad_drop else 1
        extra = qk_fix_passes(spec) if config.qk_fix else 0.0
        return gradient_cost(rows, n_budgets, extra_passes=extra, integrated=False, spec=spec)

    def score(self, ctx: RunContext, config):
        evaluator = ctx.evaluator
        return atp_star_scores(
            ctx.model,
            ctx.spec,
            ctx.prepared(),
            evaluator.clean_writers,
            evaluator.corrupted_writers,
            qk_fix=bool(config.qk_fix),
            grad_drop=bool(config.grad_drop),
            progress=ctx.progress,
        )


def qk_fix_passes(spec) -> float:
    """What the QK fix costs in forward passes: a plain pass to read every layer's input and
    scores, then every layer's queries and keys projected once per upstream writer, 2 d² a
    position each, against a block's forward of about 16 d² a position (q, k, v, o and an MLP
    of width 4 d), so sum over layers of upstream / (8 n_layers) passes."""
    upstream = sum(spec.upstream_of_heads(layer) for layer in range(spec.n_layers))
    return 1.0 + upstream / (8.0 * spec.n_layers)
