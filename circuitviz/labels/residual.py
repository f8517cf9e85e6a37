"""Residual-stream reads and edits: what SAE labels and steering read and change."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..engine import sites
from ..engine.prefix import final_residual
from ..models.adapter import Hook, adapter_of


@torch.no_grad()
def residual_stream(model, tokens: torch.Tensor, layers) -> dict[int, torch.Tensor]:
    """The residual stream after each block in ``layers``.  {layer: [batch, pos, d_model]}

    The forward pass stops after the last requested block, so reading early layers never pays
    for the rest of the model or the unembedding.
    """
    adapter = adapter_of(model)
    layers = sorted({int(layer) for layer in layers})
    captured: dict[int, torch.Tensor] = {}

    def capture(x, hook, layer):
        captured[layer] = x.detach()

    hooks: list[Hook] = [
        (sites.resid_post(layer), lambda x, hook, layer=layer: capture(x, hook, layer)) for layer in layers
    ]
    with adapter.hooked(hooks):
        adapter.blocks(tokens.to(adapter.device), stop_at_layer=layers[-1] + 1)
    return captured


def final_residual_with_edits(
    model, tokens: torch.Tensor, edits: dict[int, Callable[[torch.Tensor], torch.Tensor]]
) -> torch.Tensor:
    """Final residual at the last position when each ``edits[layer]`` rewrites that layer's output.

    An edit maps the residual stream after block ``layer`` [batch, pos, d_model] to its
    replacement (e.g. an SAE reconstruction with chosen features removed); later blocks see
    the edited stream. Returns [batch, d_model], ready for ``metric_from_residual``.
    """
    hooks: list[Hook] = [
        (sites.resid_post(layer), lambda x, hook, edit=edit: edit(x)) for layer, edit in sorted(edits.items())
    ]
    return final_residual(model, tokens.to(adapter_of(model).device), hooks)
