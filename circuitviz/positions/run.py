"""A position-resolved run of a scoring method: position scores, units at every budget, pruning,
one batched position curve, and the clean run's attention the drawing shares key/value units by.

``ScoringMethod.run`` comes here when the config asks for positions (``positions=True``); the
method supplies ``score_positions`` (the same gradients as its ``score``, before they are summed
over positions). The result's ``scores`` are those position scores summed, so every
position-agnostic view of it (tables, overlaps, the EAP-IG JSON's edge scores) reads what the
position-agnostic run would give; its curve counts (edge, position) units.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.phases import Timing
from ..engine import sites
from ..engine.prefix import final_residual
from ..engine.score_checks import require_finite_scores
from ..measure.evaluate import curves_of_tasks
from ..models.adapter import adapter_of
from .graph import summed_over_positions, unit_mask, units_at_budgets


@torch.no_grad()
def attention_patterns(model, prepared) -> torch.Tensor:
    """The clean run's attention of every head.  # [n_layers, n_heads, pos, pos] (destination, source)"""
    layers = range(adapter_of(model).spec.n_layers)
    captured: dict[int, torch.Tensor] = {}

    tokens = prepared.clean_tokens.to(adapter_of(model).device)

    def keep(pattern, hook, layer: int):  # [batch, n_heads, pos, pos]
        # on the tokens' device: a split model's later layers hand theirs over on another
        captured[layer] = pattern[0].detach().float().to(tokens.device)

    hooks = [
        (sites.attention_pattern(layer), lambda x, hook, layer=layer: keep(x, hook, layer))
        for layer in layers
    ]
    final_residual(model, tokens, hooks)
    return torch.stack([captured[layer] for layer in layers])


def run_positions(method, ctx, config, budgets: Sequence[int]):
    """The position-resolved ``CircuitResult`` of ``method`` on ``ctx`` at every budget (units)."""
    spec, evaluator = ctx.spec, ctx.evaluator
    n_positions = ctx.prepared().n_positions
    with ctx.timed(Timing.SCORING):
        position_scores = method.score_positions(ctx, config).float()  # [fwd, bwd, pos]
        units = unit_mask(spec, n_positions, position_scores.device)
        require_finite_scores(position_scores, spec, method.name, ctx.model, units=units.bool())
        position_scores = (position_scores * units).nan_to_num(0.0)
    with ctx.timed(Timing.EVALUATION):
        budgets = sorted({int(b) for b in budgets})
        circuits = units_at_budgets(spec, position_scores, budgets)  # [n_budgets, fwd, bwd, pos]
        # each unit patched at its own position, every budget in shared passes
        (curve,) = curves_of_tasks([evaluator], circuits[None], budgets, ctx.progress)
    with ctx.timed("attention_s"):
        attention = attention_patterns(ctx.model, ctx.prepared())
    # the edges each position circuit uses at some position: what edge views of the result draw
    edges = {budget: circuit.any(-1) for budget, circuit in zip(budgets, circuits)}
    result = ctx.result(method.name, config, summed_over_positions(position_scores), curve, circuits=edges)
    result.position_scores = position_scores.cpu()
    result.attention = attention.cpu()
    return result
