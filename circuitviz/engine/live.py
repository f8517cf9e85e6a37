"""The nodes of hard circuits that reach the logits, and hooks that keep the others out of a
gradient pass.

In a relaxed mask's run (``patching.masked_residual``) a reader's input is the model's own
residual plus ``weight x (corrupted - current)`` for every writer before it, so the derivative of
that input in a writer's output is ``1 - weight``: the edge's kept share. At a hard mask (the
straight-through forward of ``mask_learning``) it is 0 for every edge left out, and a node none of
whose kept edges leads on to the logits (through other such nodes) has, in exact arithmetic, no
gradient at all: nor have its readers' inputs, so no mask logit of an edge into it moves through
it. Computed, that gradient is the residual path's sum minus the patch's sum of the same terms:
float rounding's remainder, which the backward pass then carries through the node's MLP or
attention and its readers' products. ``frozen_hooks`` detach such nodes' outputs (their values
unchanged: the forward pass is the same to the bit), so the backward pass skips them; the
gradients of the live nodes lose only that remainder.
"""

from __future__ import annotations

import torch

from ..core.graph import QKV, GraphSpec
from ..models.adapter import Hook
from . import sites


def dead_layers(spec: GraphSpec, keep: torch.Tensor) -> tuple[list[int], list[int]]:
    """The layers whose MLP, and those whose every head, reach the logits through no kept edge of
    any circuit of ``keep`` [batch, n_forward, n_backward] (kept: above 0.5; off-graph entries
    are never kept). Returns (MLP layers, attention layers), each ascending."""
    kept = (keep.detach() > 0.5).any(0).cpu()  # [n_forward, n_backward]
    kept &= spec.tensors(kept.device).edge_mask
    live = torch.zeros(spec.n_backward, dtype=torch.bool, device=kept.device)  # live readers (CPU)
    live[spec.logits_backward] = True
    mlps: list[int] = []
    attention: list[int] = []
    for layer in reversed(range(spec.n_layers)):
        mlp = spec.mlp_forward(layer)
        if bool((kept[mlp] & live).any()):
            live[spec.mlp_backward(layer)] = True
        else:
            mlps.append(layer)
        heads = spec.head_forward(layer)
        any_head = False
        for h, writer in enumerate(range(heads.start, heads.stop)):
            if bool((kept[writer] & live).any()):
                any_head = True
                for kind in QKV:
                    live[spec.head_backward(layer, kind).start + h] = True
        if not any_head:
            attention.append(layer)
    return sorted(mlps), sorted(attention)


def frozen_hooks(mlps: list[int], attention: list[int]) -> list[Hook]:
    """Hooks that detach the MLP outputs of ``mlps`` and the heads' values (``hook_z``) of
    ``attention``, to run before any hook that reads them: the same values, out of the
    autograd graph."""

    def detached(x, hook):
        return x.detach()

    return [(sites.mlp_out(layer), detached) for layer in mlps] + [
        (sites.head_z(layer), detached) for layer in attention
    ]
