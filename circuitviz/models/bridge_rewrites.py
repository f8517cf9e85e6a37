"""Rewrite a ``transformers`` model's weights so the bridge's hooks see every edge's whole contribution.

Each rewrite changes the weights, never the function (the logits agree to float rounding,
``tests/test_bridge_rewrites.py``):

- ``fold_scalar_multipliers`` (Granite): ``embedding_multiplier`` scales the embedding's output,
  ``residual_multiplier`` every attention and MLP output before its residual add, ``logits_scaling``
  divides the logits; all three act outside the modules the bridge hooks, so an edge read at a
  hook would miss its factor. Each is folded into the one matrix it multiplies (embedding,
  output projections, unembedding) and set to 1.
- ``ungroup_fused_multi_query`` (Falcon-7B): one key and one value head inside a fused q/k/v
  projection; rewritten as the same architecture without multi-query, every query head with its
  own copy of the key and value rows.
- ``ungroup_bridge_multi_query`` (GPT-BigCode / StarCoder): the bridge's adapter accepts only the
  multi-query layout, but it splits the fused projection into its own q, k and v linears at boot
  and computes attention from those; their one key and value head is repeated per query head.
"""

from __future__ import annotations

import torch

# architectures whose bridge adapter accepts only the multi-query layout and splits it itself
BRIDGE_SPLITS_MULTI_QUERY = ("GPTBigCodeForCausalLM",)
MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "logits_scaling")


def _text_config(config):
    getter = getattr(config, "get_text_config", None)
    return getter() if getter is not None else config


def _scale_linear(linear: torch.nn.Module, factor: float) -> None:
    linear.weight.mul_(factor)
    if getattr(linear, "bias", None) is not None:
        linear.bias.mul_(factor)


def _untie_unembedding(hf_model) -> None:
    """Give the unembedding its own copy of a weight it shares with the input embedding."""
    embedding, unembedding = hf_model.get_input_embeddings(), hf_model.get_output_embeddings()
    if unembedding is None or unembedding.weight is not embedding.weight:
        return
    unembedding.weight = torch.nn.Parameter(embedding.weight.detach().clone(), requires_grad=False)
    for config in {id(c): c for c in (hf_model.config, _text_config(hf_model.config))}.values():
        config.tie_word_embeddings = False


@torch.no_grad()
def fold_scalar_multipliers(hf_model) -> bool:
    """Fold Granite's three scalar multipliers into the weights they scale and set them to 1;
    False (nothing changed) when the model has none or is not laid out as dense Granite is
    (``prepare_bridge`` then refuses it with the reason)."""
    config = _text_config(hf_model.config)
    values = {field: getattr(config, field, None) for field in MULTIPLIERS}
    if all(value in (None, 1, 1.0) for value in values.values()):
        return False
    base = getattr(hf_model, "model", None)
    layers = list(getattr(base, "layers", None) or [])
    unembedding = hf_model.get_output_embeddings()
    dense = bool(layers) and all(
        hasattr(layer, "residual_multiplier")
        and isinstance(getattr(getattr(layer, "self_attn", None), "o_proj", None), torch.nn.Linear)
        and isinstance(getattr(getattr(layer, "mlp", None), "down_proj", None), torch.nn.Linear)
        for layer in layers
    )
    if not dense or not hasattr(base, "embedding_multiplier") or unembedding is None:
        return False
    _untie_unembedding(hf_model)
    embedding = float(values["embedding_multiplier"] or 1.0)
    residual = float(values["residual_multiplier"] or 1.0)
    logits = float(values["logits_scaling"] or 1.0)
    hf_model.get_input_embeddings().weight.mul_(embedding)
    base.embedding_multiplier = 1.0
    for layer in layers:
        _scale_linear(layer.self_attn.o_proj, residual)
        _scale_linear(layer.mlp.down_proj, residual)
        layer.residual_multiplier = 1.0
    _scale_linear(unembedding, 1.0 / logits)
    for field in MULTIPLIERS:
        setattr(config, field, 1.0)
        if config is not hf_model.config and hasattr(hf_model.config, field):
            setattr(hf_model.config, field, 1.0)
    return True


def _multi_head_layout(rows: torch.Tensor, n_heads: int, head_dim: int) -> torch.Tensor:
    """Rows ``[q_0 .. q_{n-1} | k | v]`` -> ``[q_0 k v | q_1 k v | ...]`` (weights or a bias)."""
    heads = rows.reshape(n_heads + 2, head_dim, *rows.shape[1:])
    q, k, v = heads[:n_heads], heads[n_heads:-1], heads[-1:]
    layout = torch.stack([q, k.expand_as(q), v.expand_as(q)], dim=1)  # [n, 3, head_dim, ...]
    return layout.reshape(3 * n_heads * head_dim, *rows.shape[1:]).contiguous()


@torch.no_grad()
def ungroup_fused_multi_query(hf_model) -> bool:
    """Falcon's multi-query fused projection, rows ``[q_0 .. q_{n-1} | k | v]`` (head_dim rows
    each), rewritten in its multi-head layout ``[q_0 k v | q_1 k v | ...]`` (what
    ``FalconAttention._split_heads`` reads when ``multi_query`` is off); False when the model is
    not Falcon with multi-query attention."""
    config = _text_config(hf_model.config)
    if not getattr(config, "multi_query", False) or getattr(config, "new_decoder_architecture", False):
        return False
    kinds = ("FalconAttention", "FalconFlashAttention2")  # the eager/SDPA and the flash attention
    modules = [m for m in hf_model.modules() if type(m).__name__ in kinds]
    if not modules:
        return False
    n_heads = int(config.num_attention_heads)
    for module in modules:
        head_dim = int(module.head_dim)
        fused = module.query_key_value
        fused.weight = torch.nn.Parameter(
            _multi_head_layout(fused.weight.data, n_heads, head_dim), requires_grad=False
        )
        if fused.bias is not None:
            fused.bias = torch.nn.Parameter(
                _multi_head_layout(fused.bias.data, n_heads, head_dim), requires_grad=False
            )
        fused.out_features = 3 * n_heads * head_dim
        module.multi_query = False
        module.num_kv_heads = n_heads
    config.multi_query = False
    config.num_kv_heads = n_heads
    if config is not hf_model.config:
        hf_model.config.multi_query, hf_model.config.num_kv_heads = False, n_heads
    return True


@torch.no_grad()
def ungroup_bridge_multi_query(bridge) -> bool:
    """Repeat the one key and value head of the linears the bridge split from a multi-query fused
    projection (GPT-BigCode's ``c_attn``, ``[q | k | v]`` with k and v one head wide) so every
    query head has its own; the bridge's attention then runs with as many key/value heads as
    query heads. False when its attention has no such split linears."""
    cfg = bridge.cfg
    n_heads, d_head = int(cfg.n_heads), int(cfg.d_head)
    if int(getattr(cfg, "n_key_value_heads", None) or n_heads) != 1 or n_heads == 1:
        return False
    attentions = [block.attn for block in bridge.blocks]
    parts = [
        part
        for attention in attentions
        for part in (getattr(attention, "k", None), getattr(attention, "v", None))
    ]
    widths = [getattr(getattr(part, "original_component", None), "out_features", None) for part in parts]
    if any(getattr(a, "split_qkv_matrix", None) is None for a in attentions) or set(widths) != {d_head}:
        return False
    for part in parts:
        linear = part.original_component
        repeated = torch.nn.Linear(
            linear.in_features,
            n_heads * d_head,
            bias=linear.bias is not None,
            device=linear.weight.device,
            dtype=linear.weight.dtype,
        )
        repeated.weight = torch.nn.Parameter(linear.weight.data.repeat(n_heads, 1), requires_grad=False)
        if linear.bias is not None:
            repeated.bias = torch.nn.Parameter(linear.bias.data.repeat(n_heads), requires_grad=False)
        part.set_original_component(repeated)
    cfg.n_key_value_heads = n_heads
    for attention in attentions:  # hook_k and hook_v were shaped at boot for one head
        attention._setup_qkv_hook_reshaping()
    return True
