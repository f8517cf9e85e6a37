"""Rewrite a ``transformers`` model so the bridge's hooks see every edge's whole contribution.

Each rewrite changes the model's weights or form, never the function the booted bridge computes
(its logits agree with the original ``transformers`` model's to float rounding,
``tests/test_bridge_rewrites.py``):

- ``fold_scalar_multipliers`` (Granite): ``embedding_multiplier`` scales the embedding's output,
  ``residual_multiplier`` every attention and MLP output before its residual add, ``logits_scaling``
  divides the logits; all three act outside the modules the bridge hooks, so an edge read at a
  hook would miss its factor. Each is folded into the one matrix it multiplies (embedding,
  output projections, unembedding) and set to 1.
- ``fused_multi_query`` (Falcon-7B, GPT-BigCode / StarCoder): one key and one value head inside a
  fused q/k/v projection. The bridge's adapters split the fused projection into q, k and v linears
  of their own at boot and compute attention from those (GPT-BigCode's accepts only the
  multi-query layout), so after boot ``ungroup_bridge_multi_query`` repeats their one key and
  value head per query head. Falcon-7B's parallel blocks read one norm for attention and MLP,
  where the bridge gives the MLP no input of its own; Falcon's own newer decoder (Falcon-40B's)
  has a norm for each, and with one key/value group it reads the same fused rows
  ``[q_0 .. q_{n-1} | k | v]``, so the model is switched to it with two copies of the norm.
- Cohere and Cohere 2 (Command-R, Command-A): ``fold_logit_scale`` folds the scale the logits are
  multiplied by into the unembedding; ``mlp_norm_per_layer`` gives each parallel layer's MLP its
  own copy of the one norm, mapped as the bridge's ``ln2`` after boot (``bridge_mlp_norms``);
  ``rotation_in_halves`` reorders each head's query and key dimensions so the bridge's rotation
  of halves computes Cohere's rotation of adjacent pairs (the bridge as TransformerLens boots it
  computes another function; the ``transformers`` model alone, rewritten, does too).
- MPT and Falcon-RW: ``fork_alibi_inputs`` makes the bridge's ALiBi attention fork the per-head
  inputs it otherwise never forks (the bridge's function is unchanged; only the hooks differ).
- OLMo 1, 2 and 3 and FlexOlmo in a half precision: ``rotary_tables_in_model_dtype`` hands the
  bridge's rotation tables in the model's dtype (their rotary embeddings keep float32, which
  the bridge's Llama rotation never casts back, so attention failed on float32 weights against
  bfloat16 values).
"""

from __future__ import annotations

import copy

import torch

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


@torch.no_grad()
def fold_logit_scale(hf_model) -> bool:
    """Fold Cohere's ``logit_scale`` (it multiplies the logits after the unembedding, where the
    engine's unembedding would miss it) into the unembedding, untied first, and set it to 1; True
    when folded."""
    scale = getattr(hf_model, "logit_scale", None)
    unembedding = hf_model.get_output_embeddings()
    if not isinstance(scale, (int, float)) or scale == 1 or unembedding is None:
        return False
    _untie_unembedding(hf_model)
    _scale_linear(unembedding, float(scale))
    hf_model.logit_scale = 1.0
    for config in {id(c): c for c in (hf_model.config, _text_config(hf_model.config))}.values():
        if hasattr(config, "logit_scale"):
            config.logit_scale = 1.0
    return True


@torch.no_grad()
def fused_multi_query(hf_model) -> bool:
    """True when ``hf_model`` has multi-query attention in a fused q/k/v projection that the bridge
    splits (Falcon, GPT-BigCode): ``ungroup_bridge_multi_query`` then ungroups it after boot. A
    Falcon whose parallel blocks share one norm is given two copies of it first
    (``_falcon_norm_per_sublayer``)."""
    config = _text_config(hf_model.config)
    if not getattr(config, "multi_query", False):
        return False
    architecture = type(hf_model).__name__
    if architecture == "GPTBigCodeForCausalLM":
        return True
    if architecture != "FalconForCausalLM" or getattr(config, "new_decoder_architecture", False):
        return False
    if getattr(config, "parallel_attn", False):
        _falcon_norm_per_sublayer(hf_model)
    return True


def _falcon_norm_per_sublayer(hf_model) -> None:
    """Falcon-7B's decoder (parallel attention and MLP reading one ``input_layernorm``, one
    key/value head) as Falcon's newer decoder with one key/value group: ``ln_attn`` and
    ``ln_mlp`` two copies of the norm, the fused projection's rows unchanged (that decoder reads
    a group as its query heads, then its key, then its value head: with one group, the same
    rows). The function is unchanged: both sublayers normalise the same input by the same
    weights."""
    config = _text_config(hf_model.config)
    for layer in hf_model.transformer.h:
        norm = layer.input_layernorm
        del layer.input_layernorm
        layer.ln_attn, layer.ln_mlp = norm, copy.deepcopy(norm)
        layer.self_attention.new_decoder_architecture = True
    config.new_decoder_architecture = True
    config.num_ln_in_parallel_attn = 2
    config.num_kv_heads = 1


@torch.no_grad()
def ungroup_bridge_multi_query(bridge) -> bool:
    """Repeat the one key and value head of the linears the bridge split from a multi-query fused
    projection (GPT-BigCode's ``c_attn``, ``[q | k | v]`` with k and v one head wide) so every
    query head has its own; the bridge's attention then runs with as many key/value heads as
    query heads. True when no head was shared; False when they are shared otherwise than one
    key/value head in split linears."""
    cfg = bridge.cfg
    n_heads, d_head = int(cfg.n_heads), int(cfg.d_head)
    n_kv = int(getattr(cfg, "n_key_value_heads", None) or n_heads)
    if n_kv == n_heads:
        return True
    if n_kv != 1:
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


# transformers' parallel decoder layers whose attention and MLP read one norm, which the bridge's
# adapters map without an ``ln2``: class name -> (the norm, the attention). CodeGen's layer is one
# too, but TransformerLens's CodeGen attention has no per-head inputs (``prepare_bridge``)
SHARED_NORM_LAYERS = {
    "CohereDecoderLayer": ("input_layernorm", "self_attn"),
    "Cohere2DecoderLayer": ("input_layernorm", "self_attn"),
}
MLP_NORM = "ln_mlp"  # the MLP's own copy of the shared norm


class _MlpNormOfItsOwn(torch.nn.Module):
    """The forward of a parallel layer in ``SHARED_NORM_LAYERS`` with the MLP reading its own copy
    of the norm: transformers' operations in transformers' order, the norm applied twice."""

    _shared_norm_layer = ""

    def forward(self, hidden_states: torch.Tensor, **kwargs):
        norm, attention = SHARED_NORM_LAYERS[self._shared_norm_layer]
        attention_out, _ = getattr(self, attention)(
            hidden_states=getattr(self, norm)(hidden_states), **kwargs
        )
        return hidden_states + attention_out + self.mlp(getattr(self, MLP_NORM)(hidden_states))


def mlp_norm_per_layer(hf_model) -> bool:
    """Give the MLP of each parallel layer in ``SHARED_NORM_LAYERS`` (Cohere, Cohere 2) its own copy of the norm the attention reads (``ln_mlp``), the layer switched to a forward
    that calls it; ``bridge_mlp_norms`` maps the copy as the bridge's ``ln2`` after boot, so the
    MLP gets an input hook of its own. True when a layer was switched. The function is unchanged:
    both sublayers normalise the same input by the same weights."""
    switched = {}
    for module in hf_model.modules():
        name = type(module).__name__
        if name not in SHARED_NORM_LAYERS or hasattr(module, MLP_NORM):
            continue
        if name not in switched:
            switched[name] = type(name, (_MlpNormOfItsOwn, type(module)), {"_shared_norm_layer": name})
        setattr(module, MLP_NORM, copy.deepcopy(getattr(module, SHARED_NORM_LAYERS[name][0])))
        module.__class__ = switched[name]
    return bool(switched)


def bridge_mlp_norms(bridge) -> None:
    """Map each block's ``ln_mlp`` (``mlp_norm_per_layer``) as the bridge's ``ln2``, built as the
    adapter builds ``ln1``, so the bridge fires ``hook_mlp_in`` on the MLP's own input."""
    from transformer_lens.model_bridge.generalized_components import NormalizationBridge

    for block in bridge.blocks:
        layer = block.original_component
        if not isinstance(layer, _MlpNormOfItsOwn) or "ln2" in block.submodules:
            continue
        shared = block.ln1  # the adapter's bridge of the shared norm
        norm = NormalizationBridge(
            name=MLP_NORM,
            config=bridge.cfg,
            use_native_layernorm_autograd=shared.use_native_layernorm_autograd,
            uses_rms_norm=shared._uses_rms_norm_override,
        )
        norm.set_original_component(getattr(layer, MLP_NORM))
        block.submodules["ln2"] = norm
        block.add_module("ln2", norm)
        block.real_components["ln2"] = (MLP_NORM, norm)
        setattr(layer, MLP_NORM, norm)  # transformers' layer calls the bridge's norm, as for ln1


# transformers' rotary embeddings whose tables interleave each frequency ([c0, c0, c1, c1, ...]) for
# a rotation of adjacent pairs (Cohere's ``rotate_half``), where the bridge's attention rotates
# halves with Llama's (``[c0, c1, .., c0, c1, ..]``)
INTERLEAVED_ROTARY = frozenset({"CohereRotaryEmbedding", "Cohere2RotaryEmbedding"})


def _halves_order(width: int, device) -> torch.Tensor:
    """Each head's dimensions, the even ones first: pair (2i, 2i + 1) becomes (i, i + width/2)."""
    return torch.cat([torch.arange(0, width, 2, device=device), torch.arange(1, width, 2, device=device)])


class _TablesInHalves(torch.nn.Module):
    """An interleaved rotary embedding whose tables come in halves (``_halves_order``)."""

    def forward(self, x, position_ids):
        cos, sin = super().forward(x, position_ids)
        order = _halves_order(cos.shape[-1], cos.device)
        return cos[..., order], sin[..., order]


@torch.no_grad()
def rotation_in_halves(hf_model) -> bool:
    """Cohere's and Cohere 2's rotary embedding rotates adjacent pairs of each head's query and key
    dimensions; TransformerLens's bridge recomputes their attention with Llama's rotation of
    halves on the same tables, which is another function. Each head's query and key dimensions
    (projection rows and biases, q/k-norm weights) are reordered evens first and the tables with
    them, so the rotation of halves rotates what Cohere's rotation of pairs did: the scores, dot
    products of equally reordered queries and keys, are unchanged. True when reordered. The
    ``transformers`` model alone, whose attention still rotates pairs, no longer computes the
    original function; booted through the bridge it does."""
    rotary = getattr(getattr(hf_model, "model", None), "rotary_emb", None)
    if type(rotary).__name__ not in INTERLEAVED_ROTARY:
        return False
    head_dim = int(_text_config(hf_model.config).head_dim)
    for layer in hf_model.model.layers:
        attention = layer.self_attn
        order = _halves_order(head_dim, attention.q_proj.weight.device)
        for projection in (attention.q_proj, attention.k_proj):
            projection.weight.copy_(
                projection.weight.view(-1, head_dim, projection.in_features)[:, order].flatten(0, 1)
            )
            if projection.bias is not None:
                projection.bias.copy_(projection.bias.view(-1, head_dim)[:, order].flatten())
        for norm in (getattr(attention, "q_norm", None), getattr(attention, "k_norm", None)):
            if norm is not None:
                norm.weight.copy_(norm.weight[..., order])
    rotary.__class__ = type(type(rotary).__name__, (_TablesInHalves, type(rotary)), {})
    return True


class _ForkedInputs(torch.nn.Module):
    """An ALiBi attention bridge whose forward forks per-head inputs as its parent's does."""

    def forward(self, *args, **kwargs):
        if not self._is_split_qkv_fork_active():
            return super().forward(*args, **kwargs)
        if args and isinstance(args[0], torch.Tensor):
            hidden_states = args[0]
        else:
            hidden_states = kwargs.pop("hidden_states")
        q, k, v = self._split_forward_qkv(self.hook_in(hidden_states))
        output, weights = self._reconstruct_attention(q, k, v, **kwargs)
        return self.hook_out(output), weights


def fork_alibi_inputs(bridge) -> bool:
    """TransformerLens's ALiBi attention bridge over a fused q/k/v projection (MPT's subclass of
    it, and the bridge of Falcon-RW's ALiBi attention) computes q, k and v from the one input it
    is handed and never forks the per-head inputs its parent's forward forks (``hook_q_input`` and the others never fire). Its class is switched to
    one whose forward forks them as the parent's does, then runs the ALiBi bridge's own attention
    (``_reconstruct_attention`` reads heads of [batch, pos, head, d_head] as well as flat ones).
    Without split inputs the forward is the ALiBi bridge's own. True when switched."""
    from transformer_lens.model_bridge.generalized_components.alibi_joint_qkv_attention import (
        ALiBiJointQKVAttentionBridge,
    )

    switched = {}
    for block in bridge.blocks:
        attention = block.attn
        kind = type(attention)
        if not isinstance(attention, ALiBiJointQKVAttentionBridge) or isinstance(attention, _ForkedInputs):
            continue
        if kind not in switched:
            switched[kind] = type(kind.__name__, (_ForkedInputs, kind), {})
        attention.__class__ = switched[kind]
    return bool(switched)


def rotary_tables_in_model_dtype(hf_model, bridge) -> int:
    """Have every rotary embedding of a model in a half precision hand its cos and sin tables in
    the dtype of the states it is given, as Llama's does. OLMo's (1, 2, 3, FlexOlmo's) keep them
    in float32 and rotate in float32 and cast back in their own attention; the bridge's attention
    rotates with Llama's ``apply_rotary_pos_emb``, which does not cast back, so its queries came
    out float32 and its pattern times the bfloat16 values raised "expected scalar type Float but
    found BFloat16". The bridge's rotation of adjacent pairs (GLM, ERNIE) computes in float32 and
    casts back itself: left as it is. The number of rotary embeddings changed."""
    dtype = next(hf_model.parameters()).dtype
    if torch.finfo(dtype).bits > 16 or getattr(bridge.cfg, "rotary_adjacent_pairs", False):
        return 0
    changed = 0
    for module in hf_model.modules():
        if not type(module).__name__.endswith("RotaryEmbedding") or getattr(module, "_tables_cast", False):
            continue
        forward = module.forward

        def in_dtype_of_states(x, *args, _forward=forward, **kwargs):
            cos, sin = _forward(x, *args, **kwargs)
            return cos.to(x.dtype), sin.to(x.dtype)

        module.forward = in_dtype_of_states
        module._tables_cast = True
        changed += 1
    return changed
