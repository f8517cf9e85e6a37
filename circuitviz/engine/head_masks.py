"""Small pieces of the shared-norm renormalisation (``renorm``): a relaxed run's head mixes, and
0/1 masks of a layer's heads as integer keys."""

from __future__ import annotations

import torch


def _weighted(pattern: str, masks: torch.Tensor, moves: torch.Tensor) -> torch.Tensor:
    """``torch.einsum(pattern, masks, moves)``; for every position ("th,tphd->tpd") the same
    product einsum makes, [T, 1, H] @ [T, H, pos * d], so the same bits, without its eight
    reshaping operators forward and as many backward (a relaxed run's 36 einsums a step)."""
    if pattern != "th,tphd->tpd":
        return torch.einsum(pattern, masks, moves)
    entries, positions, n_heads, d_model = moves.shape
    flat = moves.transpose(1, 2).reshape(entries, n_heads, positions * d_model)
    return torch.bmm(masks[:, None], flat).view(entries, positions, d_model)


def _mask_codes(masks: torch.Tensor) -> torch.Tensor:
    """Each 0/1 mask of a layer's heads [P, H] as one integer, head 0 the highest bit, so codes
    sort as the masks do.  # [P] long"""
    n_heads = masks.shape[1]
    powers = 2 ** torch.arange(n_heads - 1, -1, -1, device=masks.device)  # [H]
    return (masks.round().long() * powers).sum(1)


def _unique_keys(index: torch.Tensor, bits: torch.Tensor, positions: bool):
    """``torch.unique(cat([row, (position,) bits]), dim=0, return_inverse=True)`` of each pair's
    row (and position) and 0/1 mask [P, H], through one integer per key where it fits in 62
    bits (a sort of integers instead of rows: the same order, the same result)."""
    n_heads = bits.shape[1]
    lead = [index[:, :1]] + ([index[:, 2:3]] if positions else [])
    span = [int(part.max()) + 1 for part in lead]
    bound = 2**n_heads
    for size in span:
        bound *= size
    if bound >= 2**62:
        return torch.unique(torch.cat(lead + [bits], dim=1), dim=0, return_inverse=True)
    code = index[:, 0]
    if positions:
        code = code * span[1] + index[:, 2]
    code = code * 2**n_heads + _mask_codes(bits)
    unique, inverse = torch.unique(code, return_inverse=True)  # sorted
    heads = (unique[:, None] >> torch.arange(n_heads - 1, -1, -1, device=unique.device)) & 1  # [T, H]
    rest = unique >> n_heads
    parts = [rest] if not positions else [rest // span[1], rest % span[1]]
    return torch.stack(parts + [heads[:, h] for h in range(n_heads)], dim=1), inverse
