"""``AttentionParts``: one layer's attention under names that do not depend on the backend."""

from __future__ import annotations

import torch


class AttentionParts:
    """One layer's attention as ACC++ reads it, under names that do not depend on the backend."""

    def __init__(self, module):
        self._module = module

    W_Q = property(lambda self: self._module.W_Q)  # [n_heads, d_model, d_head]
    W_K = property(lambda self: self._module.W_K)  # [n_heads, d_model, d_head] (repeated per query head)
    W_O = property(lambda self: self._module.W_O)  # [n_heads, d_head, d_model]
    b_Q = property(lambda self: self._module.b_Q)  # [n_heads, d_head]
    b_K = property(lambda self: self._module.b_K)
    b_O = property(lambda self: self._module.b_O)  # [d_model]
    q_norm = property(lambda self: getattr(self._module, "q_norm", None))
    k_norm = property(lambda self: getattr(self._module, "k_norm", None))
    score_scale = property(lambda self: float(self._module.attn_scale))  # scores are q.k / this
    local = property(lambda self: getattr(self._module, "attn_type", "global") == "local")

    @property
    def stored_keys(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W_K, b_K) as stored: before grouped-query attention repeats them per query head."""
        stored = getattr(self._module, "_W_K", None)
        if stored is None:
            return self._module.W_K, self._module.b_K
        return stored, self._module._b_K

    def rotary_tables(self, n_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotary cos and sin of the first ``n_positions``.  # [n, rotary_dim] each"""
        if self._module.rotary_cos.shape[0] < n_positions:
            raise ValueError("the rotary tables are shorter than the prompt")
        return self._module.rotary_cos[:n_positions], self._module.rotary_sin[:n_positions]

    def rotate_pairs(self, x: torch.Tensor) -> torch.Tensor:
        """The backend's pair swap of rotary dimensions (the sin term's partner of each one)."""
        return self._module.rotate_every_two(x)
