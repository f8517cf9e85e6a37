"""Attention's query, key and value weights laid out once, for passes with one shared q/k/v input
per layer (CircuitLasso's observation pass).

TransformerLens projects a layer's shared input with ``simple_attn_linear``, which re-lays each
[heads, d_model, d_head] weight as [(heads d_head), d_model] on every call: a transposing copy
that cost about as much as the product itself (Gemma-3-270M's queries: about 1 ms a layer, 18
layers, every pass; factual's observation pass 0.35 -> 0.33 CPU-s). ``laid_out_projections(model)`` keeps each attention module's laid-out
weights (made on first use, made again when a weight changes: its storage or version) and, inside
the context, has the module project with them: the same product of the same operands in the same
layout, so the same bits (tested). A model whose laid-out weights would exceed ``KEPT_BYTES``, a
TransformerBridge, split or 4-bit inputs, or an attention class not known here run as before.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

# laid-out weights kept per model at most, counted as their sources' bytes (an upper bound: a
# single key/value head's weight is laid out as a view); the embedded Gemma's queries: 47 MB
KEPT_BYTES = 256 * 2**20
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # attention module -> (key, weights)
_KEPT_LOCK = threading.Lock()


def _known(attention) -> bool:
    """Whether ``attention`` projects with TransformerLens's own ``calculate_qkv_matrices`` of a
    class this module mirrors (plain or grouped-query attention)."""
    try:
        from transformer_lens.components.abstract_attention import AbstractAttention
        from transformer_lens.components.grouped_query_attention import GroupedQueryAttention
    except ImportError:  # pragma: no cover - TransformerLens is a dependency
        return False
    own = getattr(type(attention), "calculate_qkv_matrices", None)
    return own in (AbstractAttention.calculate_qkv_matrices, GroupedQueryAttention.calculate_qkv_matrices)


def _sources(attention) -> list[torch.Tensor]:
    """The weights and biases a pass projects with now: (W_Q, b_Q, W_K, b_K, W_V, b_V), the keys'
    and values' per key/value head where grouped-query attention runs grouped."""
    grouped = hasattr(attention, "_W_K") and not attention.cfg.ungroup_grouped_query_attention
    keys = (attention._W_K, attention._b_K, attention._W_V, attention._b_V) if grouped else None
    keys = keys or (attention.W_K, attention.b_K, attention.W_V, attention.b_V)
    return [attention.W_Q, attention.b_Q, *keys]


def _laid_out(attention, sources: list[torch.Tensor]) -> list[torch.Tensor]:
    """The weights as ``simple_attn_linear`` lays them out ([(heads d_head), d_model], biases
    flat), kept per module while the sources are unchanged."""
    key = tuple((t.data_ptr(), t._version, tuple(t.shape)) for t in sources)
    with _KEPT_LOCK:
        kept = _KEPT.get(attention)
        if kept is not None and kept[0] == key:
            return kept[1]
    with torch.no_grad():
        weights = []
        for weight, bias in zip(sources[0::2], sources[1::2]):
            heads, d_model, d_head = weight.shape
            # einops's rearrange "h m d -> (h d) m" exactly: a permuted view reshaped, so a copy
            # where the heads must be interleaved and a transposed view for one head (the product
            # then runs on the same layout as TransformerLens's, to the bit)
            weights.append(weight.detach().permute(0, 2, 1).reshape(heads * d_head, d_model))
            weights.append(bias.detach().reshape(heads * d_head))
    with _KEPT_LOCK:
        _KEPT[attention] = (key, weights)
    return weights


def _projecting(attention, weights: list[torch.Tensor]):
    """``calculate_qkv_matrices`` of ``attention`` for one shared input, from laid-out weights:
    TransformerLens's with ``simple_attn_linear``'s copy made once."""
    d_head = int(attention.cfg.d_head)

    def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if x.device != weight.device:  # a split model's layer, as simple_attn_linear moves it
            weight, bias = weight.to(x.device), bias.to(x.device)
        return F.linear(x, weight, bias).reshape(x.shape[0], x.shape[1], -1, d_head)

    def calculate_qkv_matrices(query_input, key_input, value_input):
        w_q, b_q, w_k, b_k, w_v, b_v = weights
        q = attention.hook_q(project(query_input, w_q, b_q))
        k = attention.hook_k(project(key_input, w_k, b_k))
        v = attention.hook_v(project(value_input, w_v, b_v))
        if attention.cfg.use_qk_norm:
            q = attention._apply_qk_norm(q, attention.q_norm)
            k = attention._apply_qk_norm(k, attention.k_norm)
        return q, k, v

    return calculate_qkv_matrices


@contextmanager
def laid_out_projections(model) -> Iterator[None]:
    """Inside: ``model``'s attention layers project a shared q/k/v input with weights laid out
    once (see the module docstring); enter it inside ``split_attention_inputs(False, ...)``,
    whose settings decide which weights are laid out. Nothing changes where it does not apply."""
    from .adapter import BridgeAdapter, adapter_of

    adapter = adapter_of(model)
    cfg = adapter.cfg
    if (
        isinstance(adapter, BridgeAdapter)
        or cfg.use_split_qkv_input
        or getattr(cfg, "use_attn_in", False)
        or getattr(cfg, "load_in_4bit", False)
    ):
        yield
        return
    with adapter.lock:
        modules = [block.attn for block in adapter.model.blocks]
        sources = [_sources(attention) if _known(attention) else None for attention in modules]
        size = sum(t.numel() * t.element_size() for found in sources if found for t in found)
        if None in sources or size > KEPT_BYTES:
            yield
            return
        try:
            for attention, found in zip(modules, sources):
                attention.calculate_qkv_matrices = _projecting(attention, _laid_out(attention, found))
            yield
        finally:
            for attention in modules:
                attention.__dict__.pop("calculate_qkv_matrices", None)
