"""Boot a ``transformers`` model through TransformerLens's ``TransformerBridge`` for circuits.

The bridge wraps the ``transformers`` model as it is (its own forward, its own weights, no
folding or centring: ``enable_compatibility_mode(no_processing=True)`` only adds the classic
hook names) and circuitviz reads it through ``BridgeAdapter`` (``bridge_adapter.py``), so the
engine never learns which backend it got.

Grouped-query attention is ungrouped first (``ungroup_attention``): every query head gets its
own copy of the key and value projection it shares, so each head has its own k and v reader in
the graph, as circuitviz's HookedTransformers have (``ungroup_grouped_query_attention``). The
function is unchanged: a repeated head computes what the shared one did. Multi-query attention in a
fused projection (Falcon-7B, GPT-BigCode) is ungrouped too, Granite's scalar multipliers and
Cohere's logit scale are folded into the weights they scale, Cohere's MLP gets its own copy of the
norm and its rotation is made the bridge's, and MPT's attention forks per-head inputs
(``bridge_rewrites.py``). A booted model must then give the ``transformers`` model's logits, with
blocks of attention and an MLP alone whose writers add up to its residual stream
(``bridge_checks.py``): else it is refused with the reason.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch

from circuitviz.core.text import first_sentence
from circuitviz.models.architectures import HOOKED_CONVERTS_SHARED_NORM, whole_vector_qk_norm
from circuitviz.models.bridge_checks import (
    probe_tokens,
    reference_logits,
    refuse_divergent,
    require_faithful_graph,
    require_head_wise_qk_norms,
    require_transformer_blocks,
)
from circuitviz.models.bridge_rewrites import (
    bridge_mlp_norms,
    fold_logit_scale,
    fold_scalar_multipliers,
    fork_alibi_inputs,
    fused_multi_query,
    mlp_norm_per_layer,
    rotary_tables_in_model_dtype,
    rotation_in_halves,
    ungroup_bridge_multi_query,
)
from circuitviz.models.errors import ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

# attention bridges that accept split inputs but compute q, k and v from the one input they are
# handed, never firing the per-head input hooks: TransformerLens 3.9's CodeGen attention (which
# also reads the position table and scale transformers 4 kept on the attention, absent in 5)
ONE_INPUT_ATTENTION = frozenset({"CodeGenAttentionBridge"})


def _text_config(config):
    getter = getattr(config, "get_text_config", None)
    return getter() if getter is not None else config


def _repeat_rows(weight: torch.Tensor, n_groups: int, repeats: int) -> torch.Tensor:
    """[n_groups * rows, ...] -> [n_groups * repeats * rows, ...], each group's rows repeated
    ``repeats`` times in place (how ``repeat_kv`` shares a key-value head among query heads)."""
    grouped = weight.reshape(n_groups, -1, *weight.shape[1:])  # [groups, rows, ...]
    return grouped.repeat_interleave(repeats, dim=0).reshape(-1, *weight.shape[1:])


@torch.no_grad()
def ungroup_attention(hf_model: PreTrainedModel) -> int:
    """Give every query head its own key and value projection; returns the repeat factor (1 when
    the model was not grouped). Separate q/k/v projections only: a fused qkv projection with
    grouped heads is refused with the reason."""
    config = _text_config(hf_model.config)
    n_heads = int(config.num_attention_heads)
    n_kv = int(
        getattr(config, "num_key_value_heads", None) or getattr(config, "num_kv_heads", None) or n_heads
    )
    if getattr(config, "multi_query", False) and not getattr(config, "new_decoder_architecture", False):
        n_kv = 1  # Falcon-7B's and StarCoder's multi-query attention: one key/value head
    if n_kv == n_heads:
        return 1
    repeats = n_heads // n_kv
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // n_heads)
    touched = 0
    for module in hf_model.modules():
        k_proj, v_proj = getattr(module, "k_proj", None), getattr(module, "v_proj", None)
        if k_proj is None or v_proj is None or not hasattr(module, "num_key_value_groups"):
            continue
        for projection in (k_proj, v_proj):
            projection.weight = torch.nn.Parameter(_repeat_rows(projection.weight.data, n_kv, repeats))
            if projection.bias is not None:
                projection.bias = torch.nn.Parameter(_repeat_rows(projection.bias.data, n_kv, repeats))
            projection.out_features = n_heads * head_dim
        # OLMo-2 normalises the whole key vector (its k_norm is n_kv * head_dim wide); Gemma and
        # Qwen 3 each head's (head_dim wide, which equals n_kv * head_dim when n_kv is 1)
        k_norm = getattr(module, "k_norm", None)
        weight = getattr(k_norm, "weight", None)
        whole_vector = whole_vector_qk_norm(architecture_of(hf_model))
        if whole_vector and weight is not None and weight.shape[0] == n_kv * head_dim:
            k_norm.weight = torch.nn.Parameter(_repeat_rows(weight.data, n_kv, repeats))
        module.num_key_value_groups = 1
        if hasattr(module, "num_key_value_heads"):
            module.num_key_value_heads = n_heads
        touched += 1
    if touched == 0:
        raise ModelLoadError(
            f"{type(hf_model).__name__} shares {n_kv} key/value heads among {n_heads} query heads "
            "in a fused projection circuitviz cannot ungroup; use a model with separate q/k/v "
            "projections or one without grouped-query attention."
        )
    config.num_key_value_heads = n_heads
    if config is not hf_model.config and hasattr(hf_model.config, "num_key_value_heads"):
        hf_model.config.num_key_value_heads = n_heads
    return repeats


def architecture_of(hf_model: PreTrainedModel) -> str:
    """The architecture name the bridge picks its adapter by (the class name when a config made
    in memory lists none)."""
    names = getattr(hf_model.config, "architectures", None)
    listed = isinstance(names, (list, tuple)) and names and isinstance(names[0], str) and names[0]
    return names[0] if listed else type(hf_model).__name__  # a config's NaN or [] names nothing


def official_name(name: str) -> str:
    """The hub id TransformerLens files ``name`` under when it is one of its old short names
    ("gemma-3-270m"): the bridge warns on every load given a short name, though the model it
    boots from is ours either way."""
    from transformer_lens.supported_models import MODEL_ALIASES

    return next((official for official, aliases in MODEL_ALIASES.items() if name in aliases), name)


def refuse_offload(hf_model: PreTrainedModel, name: str) -> None:
    """One sentence, before any work, for a model ``accelerate`` spread over a GPU and the CPU or
    disk: what ``device_map="auto"`` does when the GPUs given are too small, and what
    TransformerBridge refuses ("device_map mixes CPU and GPU targets"; seen on an H200)."""
    placed = getattr(hf_model, "hf_device_map", None) or {}
    offloaded = [module for module, where in placed.items() if str(where) in ("cpu", "disk")]
    if not offloaded or len(offloaded) == len(placed):
        return
    raise ModelLoadError(
        f"{name} does not fit the GPU memory it was given: {len(offloaded)} of its {len(placed)} parts "
        f"(first {offloaded[0] or 'the whole model'}) were put on the CPU or disk, which the bridge "
        "cannot run; give it more GPUs (n_devices), more memory per GPU (max_memory) or a smaller "
        "dtype (bfloat16)."
    )


def bridge_from_hf(hf_model: PreTrainedModel, tokenizer, name: str, device_map_used: bool = False):
    """Boot ``hf_model`` (a ``transformers`` causal LM, already on its devices) through the
    bridge, ready for circuit discovery; ``name`` becomes ``cfg.model_name``."""
    from transformer_lens.model_bridge import TransformerBridge

    refuse_offload(hf_model, name)
    refuse_divergent(architecture_of(hf_model))
    tokens = probe_tokens(hf_model)
    expected = reference_logits(hf_model, tokens)  # before any rewrite: what the bridge must give
    require_head_wise_qk_norms(hf_model, architecture_of(hf_model))
    try:
        split_by_bridge = _rewrite(hf_model)
    except Exception as error:
        if type(error).__name__ != "AmbiguousGlobalPerLayerAttributeError":
            raise
        raise ModelLoadError(
            f"{architecture_of(hf_model)}'s layers differ in shape ({first_sentence(error, 90)}), "
            "while circuitviz's graph gives every layer one head count and width; use a model "
            "whose layers share one shape."
        ) from None
    hf_model.config.architectures = [architecture_of(hf_model)]
    hf_model.requires_grad_(False)
    try:
        bridge = TransformerBridge.boot_transformers(
            official_name(name),
            hf_model=hf_model,
            tokenizer=tokenizer,
            dtype=next(hf_model.parameters()).dtype,
        )
    except ValueError as error:
        if "Could not determine supported architecture" not in str(error):
            raise
        raise ModelLoadError(
            f"TransformerLens's bridge has no adapter for {architecture_of(hf_model)}; use a "
            "supported architecture (Llama, Qwen, Gemma, GPT-2, GPT-NeoX, OLMo, Mistral, Phi, ...) "
            "or a newer TransformerLens that adds it."
        ) from None
    require_transformer_blocks(bridge)
    bridge_mlp_norms(bridge)
    fork_alibi_inputs(bridge)
    rotary_tables_in_model_dtype(hf_model, bridge)
    if split_by_bridge and not ungroup_bridge_multi_query(bridge):
        raise ModelLoadError(
            f"TransformerLens's bridge gives {architecture_of(hf_model)}'s query heads shared key/value "
            "heads circuitviz cannot ungroup; use a model without multi-query attention."
        )
    prepare_bridge(bridge, name)
    require_faithful_graph(bridge, tokens, expected)
    return bridge


def _rewrite(hf_model: PreTrainedModel) -> bool:
    """The rewrites before boot (``bridge_rewrites.py``); True when the bridge's own q/k/v split
    of a fused multi-query projection is left to ungroup after boot."""
    fold_scalar_multipliers(hf_model)
    fold_logit_scale(hf_model)
    mlp_norm_per_layer(hf_model)  # mapped as the bridge's ln2 after boot
    rotation_in_halves(hf_model)
    split_by_bridge = fused_multi_query(hf_model)  # ungrouped in the bridge's own q/k/v, after boot
    if not split_by_bridge:
        ungroup_attention(hf_model)
    return split_by_bridge


def prepare_bridge(bridge, name: str):
    """Switch on the hooks circuit discovery reads and record what the engine asks of the config.

    Compatibility mode without processing gives the classic hook names on the model's own
    weights; split q/k/v inputs and ``hook_mlp_in`` give every head and MLP its own reader.
    """

    architecture = bridge.cfg.architecture
    try:
        bridge.enable_compatibility_mode(disable_warnings=True, no_processing=True)
    except RuntimeError as error:
        if "does not support compatibility mode" not in str(error):
            raise
        raise ModelLoadError(
            f"TransformerLens's bridge gives {architecture} none of the classic hook names circuitviz "
            "reads (it refuses its compatibility mode for this architecture); use another "
            "architecture or a newer TransformerLens."
        ) from None
    try:
        bridge.set_use_split_qkv_input(True)
        splits = type(bridge.blocks[0].attn).__name__ not in ONE_INPUT_ATTENTION
    except NotImplementedError:
        splits = False
    if not splits:
        raise ModelLoadError(
            f"TransformerLens's bridge has no per-head query, key and value inputs for {architecture}'s "
            "attention, which circuit edges into heads need; use an architecture it splits (Llama, "
            "Qwen, Gemma, GPT-2, ...) or a newer TransformerLens."
        ) from None
    shared_norm = [
        index
        for index, block in enumerate(bridge.blocks)
        if "mlp" in block.submodules
        and "ln2" not in block.submodules
        and not getattr(block, "mlp_reads_resid_directly", False)
    ]
    if shared_norm:
        fix = (
            "load it as a HookedTransformer, which TransformerLens converts for it"
            if architecture in HOOKED_CONVERTS_SHARED_NORM
            else "the HookedTransformer has no converter for it either, so use a checkpoint with serial "
            "blocks or another architecture"
        )
        raise ModelLoadError(
            f"{architecture}'s attention and MLP read one shared norm, and TransformerLens's bridge "
            f"gives its MLP no input of its own, which circuit edges into MLPs need; {fix}."
        )
    scaled = {
        field: value
        for field in ("embedding_multiplier", "residual_multiplier", "logits_scaling")
        if (value := getattr(_text_config(bridge.original_model.config), field, None)) not in (None, 1, 1.0)
    }
    if scaled:
        raise ModelLoadError(
            f"{architecture} multiplies its embedding, its blocks' outputs or its logits outside the "
            f"modules the bridge hooks ({', '.join(f'{k} {v:g}' for k, v in scaled.items())}), which "
            "circuitviz folds into the weights only for dense Granite; use another architecture."
        )
    bridge.set_use_hook_mlp_in(True)
    bridge.eval()
    bridge.requires_grad_(False)
    describe_config(bridge, name)
    weigh_plain_norms(bridge)
    require_circuit_hooks(bridge)
    return bridge


@torch.no_grad()
def weigh_plain_norms(bridge) -> None:
    """Give a norm without parameters (OLMo's LayerNorm) a weight of ones and a bias of zeros,
    which it computes with anyway: TransformerLens's norm, once a hook reads its scale (RelP's
    frozen norms), multiplies by the module's weight and fails without one."""
    for module in bridge.modules():
        inner = getattr(module, "original_component", None)
        if "Norm" not in type(inner).__name__ or getattr(inner, "weight", None) is not None:
            continue
        width = int(bridge.cfg.d_model)
        reference = next(bridge.parameters())
        inner.register_buffer("weight", torch.ones(width, dtype=reference.dtype, device=reference.device))
        inner.register_buffer("bias", torch.zeros(width, dtype=reference.dtype, device=reference.device))


@torch.no_grad()
def require_circuit_hooks(bridge) -> None:
    """Run two tokens with per-head and with shared attention inputs and check that the bridge
    calls every hook the engine reads in the first block; a model it cannot run, or whose hooks
    it never calls (BLOOM's MLP input), is refused with a sentence at load instead
    of a traceback in the middle of a run."""
    from circuitviz.core.graph import QKV
    from circuitviz.engine import sites
    from circuitviz.models.adapter import adapter_of

    adapter, architecture = adapter_of(bridge), bridge.cfg.architecture
    tokens = torch.zeros((1, 2), dtype=torch.long, device=adapter.device)
    wanted = {
        True: [sites.head_input(0, kind) for kind in QKV]
        + [sites.mlp_in(0), sites.head_z(0), sites.mlp_out(0)],
        False: [sites.head_projection(0, kind) for kind in QKV],
    }
    fired: set[str] = set()

    def seen(x, hook):
        fired.add(hook.name)

    for split, names in wanted.items():
        try:
            with adapter.split_attention_inputs(split), adapter.hooked([(name, seen) for name in names]):
                adapter.blocks(tokens)
        except Exception as error:  # TransformerLens's adapter for it fails: one sentence, not a traceback
            first = first_sentence(error) if str(error).strip() else ""
            raise ModelLoadError(
                f"TransformerLens's bridge cannot run {architecture} here ({type(error).__name__}: "
                f"{first}); use a supported architecture or a newer TransformerLens."
            ) from error
    missing = [name for names in wanted.values() for name in names if name not in fired]
    if missing:
        raise ModelLoadError(
            f"TransformerLens's bridge never calls {', '.join(missing[:3])} in {architecture}, which "
            "circuit discovery reads; use another architecture or a newer TransformerLens."
        )


def describe_config(bridge, name: str) -> None:
    """Write onto ``bridge.cfg`` the HookedTransformer-config fields circuitviz reads that the
    bridge leaves unset or reads otherwise (post-norms, q/k-norms, rotary width, local windows)."""
    cfg = bridge.cfg
    block = bridge.blocks[0]
    hf_config = _text_config(bridge.original_model.config)
    cfg.model_name = name
    cfg.original_architecture = cfg.architecture
    cfg.ungroup_grouped_query_attention = True
    cfg.n_key_value_heads = cfg.n_heads
    cfg.use_normalization_before_and_after = hasattr(block, "ln1_post")
    cfg.use_qk_norm = hasattr(block.attn, "q_norm")
    # gpt-oss's per-head sink logit joins each softmax: what recomputes attention must refuse it
    cfg.use_attention_sinks = getattr(block.attn.original_component, "sinks", None) is not None
    if cfg.positional_embedding_type == "rotary":
        fraction = getattr(hf_config, "partial_rotary_factor", None) or getattr(hf_config, "rotary_pct", None)
        cfg.rotary_dim = int(cfg.d_head * float(fraction)) if fraction else int(cfg.d_head)
    window = getattr(hf_config, "sliding_window", None)
    cfg.window_size = int(window) if isinstance(window, int) and window > 0 else None
