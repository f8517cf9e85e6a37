"""Query/key edits: the runs ACC++'s signal knockouts make."""

from __future__ import annotations

import torch

from ..engine import sites
from ..engine.prefix import final_residual, layer_checks
from ..models.adapter import Hook, adapter_of


def qk_edit_sites(model, layer: int) -> tuple[str, str]:
    """Where the queries and keys a layer's scores are made of can be edited.

    Rotary models: after any q/k-norm and the rotation; others straight after the projection. A
    q/k-norm without rotation follows that projection, so such models are refused.
    """
    adapter = adapter_of(model)
    if not adapter.rotary and getattr(adapter.cfg, "use_qk_norm", False):
        raise ValueError("Query/key edits need rotary positions when the model has q/k-norms.")
    return sites.rotated_query_key(layer, adapter.rotary)


@torch.no_grad()
def run_with_qk_edits(
    model,
    tokens: torch.Tensor,
    q_edits: dict[int, torch.Tensor],
    k_edits: dict[int, torch.Tensor],
    pattern_layers=(),
    check=None,
) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """Run with additive edits to the queries and keys heads score with; read patterns and output.

    tokens: [batch, pos]; q_edits[layer], k_edits[layer]: [batch, pos, n_heads, d_head], added
    where ``qk_edit_sites`` says. Returns (residual after the last block at the last position
    [batch, d_model], {layer: attention pattern [batch, n_heads, pos, pos]} for ``pattern_layers``).
    """
    captured: dict[int, torch.Tensor] = {}
    hooks: list[Hook] = []
    for edits, which in ((q_edits, 0), (k_edits, 1)):
        for layer, delta in edits.items():
            name = qk_edit_sites(model, layer)[which]
            hooks.append((name, lambda x, hook, delta=delta: x + delta.to(device=x.device, dtype=x.dtype)))
    for layer in sorted({int(layer) for layer in pattern_layers}):
        hooks.append(
            (
                sites.attention_pattern(layer),
                lambda x, hook, layer=layer: captured.__setitem__(layer, x.detach()),
            )
        )
    hooks += layer_checks(model.cfg.n_layers, check)  # ``check`` before each block (a run's report)
    residual = final_residual(model, tokens.to(adapter_of(model).device), hooks)
    return residual, captured
