"""Patching with a position axis: each reader's input moved towards the corrupted run position by
position, by the weights of the (edge, position) units removed there.

The hooks are the engine's (``reader_hook_points`` names every reader; ``writer_hooks`` keeps the
current writers writer-major); only the sum changes: for a reader r at position p,

    moved[b, r, p] = sum_f w[b, f, r, p] (corrupted_f[p] - current_f[p])

one contraction per hooked reader group over the writers, every position at once.
"""

from __future__ import annotations

import torch

from ..activations import (
    Hook,
    WriterBuffer,
    final_residual,
    metric_from_residual,
    model_device,
    model_dtype,
    reader_hook_points,
    writer_hooks,
)
from ..graph import GraphSpec
from ..tasks import PreparedTask


def position_patch_hooks(
    spec: GraphSpec, corrupted_writers: torch.Tensor, weights: torch.Tensor, current: WriterBuffer
) -> list[Hook]:
    """Hooks that add each removed unit's (corrupted - current) share at its own position.

    corrupted_writers: [1, pos, n_forward, d_model]; weights: [batch, n_forward, n_backward,
    pos] in the model's dtype (1: the unit is removed); ``current``: this run's writer-major
    buffer [batch, n_forward, pos, d_model]. Readers with no removed unit in any circuit of the
    batch get no hook.
    """
    corrupted = corrupted_writers[0].transpose(0, 1)  # [n_forward, pos, d_model]
    active = (weights != 0).any(dim=-1).any(dim=1).any(dim=0).tolist()  # [n_backward]

    def moved(upstream: int, readers: slice) -> torch.Tensor:
        """sum_f w[b, f, r, p] (corrupted_f[p] - current_f[p])  # [batch, pos, n_readers, d_model]"""
        share = weights[:, :upstream, readers]  # [b, up, r, pos]
        difference = corrupted[None, :upstream] - current.major(upstream)  # [b, up, pos, d_model]
        return torch.einsum("burp,bupd->bprd", share, difference)

    def head_patch(x, hook, upstream: int, readers: slice):
        return x + moved(upstream, readers)  # x: [b, pos, n_heads, d_model]

    def single_patch(x, hook, upstream: int, reader: int):
        return x + moved(upstream, slice(reader, reader + 1))[:, :, 0]  # x: [b, pos, d_model]

    hooks: list[Hook] = []
    for name, upstream, readers in reader_hook_points(spec):
        if isinstance(readers, slice):
            if any(active[r] for r in range(readers.start, readers.stop)):
                hooks.append((name, lambda x, hook, u=upstream, r=readers: head_patch(x, hook, u, r)))
        elif active[readers]:
            hooks.append((name, lambda x, hook, u=upstream, r=readers: single_patch(x, hook, u, r)))
    return hooks


@torch.no_grad()
def patched_position_metrics(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    corrupted_writers: torch.Tensor,
    removed: torch.Tensor,
    prefix: int = 0,
) -> torch.Tensor:
    """Metric of the clean run with the units in ``removed`` carrying corrupted activations.

    corrupted_writers: [1, pos, n_forward, d_model]; removed: [batch, n_forward, n_backward, pos]
    bool. ``prefix``: leading positions that run once, unpatched (no unit there changes
    anything: ``shared_prefix``). Returns [batch].
    """
    batch = removed.shape[0]
    device, dtype = model_device(model), model_dtype(model)
    tokens = prepared.clean_tokens.to(device).expand(batch, -1)  # [batch, pos]
    positions = tokens.shape[1] - prefix
    current = WriterBuffer(spec, batch, positions, dtype, device, writer_major=True)  # [b, fwd, pos, d]
    corrupted = corrupted_writers[:, prefix:].to(device=device, dtype=dtype)
    weights = removed[..., prefix:].to(device=device, dtype=dtype)  # [b, fwd, bwd, pos - prefix]
    hooks = writer_hooks(model, spec, current) + position_patch_hooks(spec, corrupted, weights, current)
    residual = final_residual(model, tokens, hooks, prefix)
    return metric_from_residual(model, prepared, residual)
