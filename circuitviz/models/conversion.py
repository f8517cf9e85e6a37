"""Turn a transformers model into a TransformerLens config and state dict, without the hub.

TransformerLens 3.9 builds configs only for official names, or from a folder holding
config.json, and for the Gemma families it knows the architecture from the name alone. This
module bridges both cases: Gemma checkpoints are matched to the official name with the same
shape (and checked against it), everything else goes through a temporary config.json.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from circuitviz.core.text import first_sentence
from circuitviz.models.architectures import (
    HOOKED_IGNORES_ROPE_SCALING,
    NAME_ONLY_ARCHITECTURES,
    whole_vector_qk_norm,
)
from circuitviz.models.errors import USE_THE_BRIDGE, ConversionRefused, ModelLoadError

if TYPE_CHECKING:
    from transformer_lens import HookedTransformerConfig
    from transformers import PreTrainedModel


# Substrings that make TransformerLens pick an architecture from a path's text instead of
# reading its config.json; a temporary config folder must not contain them.
_NAME_SNIFFED_WORDS = ("llama", "gemma")


def hf_config_dict(hf_model: PreTrainedModel) -> dict[str, Any]:
    """The model's config as a plain dict TransformerLens can read.

    architectures is filled in (GGUF-derived configs lack it) and quantization_config is
    dropped: the weights in hand are already dense floats.
    """
    config = hf_model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = [type(hf_model).__name__]
    return config


_SHIM_LOCK = threading.Lock()

# (transformers config class, field TransformerLens 3.9's converter reads, where transformers 5 keeps it)
_MOVED_FIELDS = {
    "GPT2LMHeadModel": ("GPT2Config", "n_ctx", lambda config: config.n_positions),
    "PhiForCausalLM": (
        "PhiConfig",
        "partial_rotary_factor",
        lambda config: (config.rope_parameters or {}).get("partial_rotary_factor", 1.0),
    ),
}


def _keep(field: str):
    def keep(config, value) -> None:
        config.__dict__[field] = value

    return keep


@contextlib.contextmanager
def moved_config_field(architecture: str) -> Iterator[None]:
    """While TransformerLens 3.9 reads a config: the one field of ``architecture``'s config that
    transformers 5 no longer keeps (GPT-2's ``n_ctx``, Phi's ``partial_rotary_factor``, now in
    ``rope_parameters``), read from where it is now; the class is as it was after."""
    import transformers

    if architecture not in _MOVED_FIELDS:
        yield
        return
    class_name, field, read = _MOVED_FIELDS[architecture]
    config_class = getattr(transformers, class_name)
    with _SHIM_LOCK:
        added = not hasattr(config_class, field)
        if added:  # a config that does hold the field (an older config.json's) keeps its own
            setattr(
                config_class,
                field,
                property(lambda config: config.__dict__.get(field, read(config)), _keep(field)),
            )
        try:
            yield
        finally:
            if added:
                delattr(config_class, field)


def _architecture(hf_config: dict[str, Any]) -> str:
    """The transformers class name the config describes."""
    architectures = hf_config.get("architectures")
    if not (isinstance(architectures, list) and architectures and isinstance(architectures[0], str)):
        raise ModelLoadError(
            "The checkpoint's config.json does not name its architecture; give it "
            '"architectures": ["<ModelClass>ForCausalLM"].'
        )
    return architectures[0]


def _head_dim(hf_config: dict[str, Any]) -> int:
    """Per-head width, which Gemma sets explicitly and other configs derive."""
    return hf_config.get("head_dim") or hf_config["hidden_size"] // hf_config["num_attention_heads"]


def _shape_matches(candidate: dict[str, Any], hf_config: dict[str, Any]) -> bool:
    """Whether a TransformerLens template has this checkpoint's layer and head sizes."""
    n_kv_heads = hf_config.get("num_key_value_heads") or hf_config["num_attention_heads"]
    template_kv_heads = candidate.get("n_key_value_heads") or candidate["n_heads"]
    return (
        candidate["d_model"] == hf_config["hidden_size"]
        and candidate["n_layers"] == hf_config["num_hidden_layers"]
        and candidate["n_heads"] == hf_config["num_attention_heads"]
        and candidate["d_head"] == _head_dim(hf_config)
        and candidate["d_mlp"] == hf_config["intermediate_size"]
        and template_kv_heads == n_kv_heads
    )


def _behaviour_mismatches(candidate: dict[str, Any], hf_config: dict[str, Any]) -> list[str]:
    """Fields the name-based template fixes that this checkpoint might set differently."""
    mismatches = []
    layer_types = hf_config.get("layer_types")
    if layer_types and candidate.get("attn_types"):
        as_tl = ["local" if kind == "sliding_attention" else "global" for kind in layer_types]
        if as_tl != list(candidate["attn_types"]):
            mismatches.append("the pattern of local and global attention layers")
    window = hf_config.get("sliding_window")
    if window and candidate.get("window_size") and window != candidate["window_size"]:
        mismatches.append(f"the sliding window ({window} vs {candidate['window_size']})")
    rope = hf_config.get("rope_parameters") or {}
    theta_by_kind = {
        "full_attention": candidate.get("rotary_base"),
        "sliding_attention": candidate.get("rotary_base_local") or candidate.get("rotary_base"),
    }
    for kind, expected in theta_by_kind.items():
        theta = (rope.get(kind) or {}).get("rope_theta") if isinstance(rope, dict) else None
        if theta is not None and expected is not None and float(theta) != float(expected):
            mismatches.append(f"the {kind} rotary base ({theta} vs {expected})")
    return mismatches


def official_template_name(hf_config: dict[str, Any]) -> str:
    """The official TransformerLens name whose built-in config describes this checkpoint.

    Used for architectures TransformerLens only knows by name (the Gemma families).
    """
    from transformer_lens import loading_from_pretrained as loading

    architecture = _architecture(hf_config)
    for name in loading.OFFICIAL_MODEL_NAMES:
        if "gemma" not in name.lower():
            continue
        try:
            candidate = loading.convert_hf_model_config(name)
        except (NotImplementedError, AttributeError, KeyError, ValueError):
            continue
        if candidate.get("original_architecture") != architecture:
            continue
        if not _shape_matches(candidate, hf_config):
            continue
        mismatches = _behaviour_mismatches(candidate, hf_config)
        if mismatches:
            raise ConversionRefused(
                f"This {architecture} checkpoint has the shape of {name} but differs in "
                f"{' and '.join(mismatches)}, which TransformerLens fixes for that name; "
                "it cannot be converted faithfully.",
                f"its {' and '.join(mismatches)} differ from {name}'s",
            )
        return name
    shape = f"{hf_config.get('num_hidden_layers')} layers, {hf_config.get('hidden_size')} wide"
    raise ConversionRefused(
        f"TransformerLens knows {architecture} only by official name and none has this "
        f"checkpoint's shape ({shape}); load an official size instead.",
        f"it knows {architecture} only in its official sizes, not {shape}",
    )


@contextlib.contextmanager
def transformer_lens_reference(hf_config: dict[str, Any]) -> Iterator[str]:
    """Yield a name TransformerLens resolves to this checkpoint's architecture, offline.

    For name-only architectures that is the matching official name; otherwise a temporary
    folder holding the config as config.json, which lives until the block ends.
    """
    architecture = _architecture(hf_config)
    if architecture in NAME_ONLY_ARCHITECTURES:
        yield official_template_name(hf_config)
        return
    with tempfile.TemporaryDirectory(prefix="circuitviz-config-") as folder:
        if any(word in folder.lower() for word in _NAME_SNIFFED_WORDS):
            raise ModelLoadError(
                f"The temporary folder {folder} contains a model-family name that confuses "
                "TransformerLens; set TMPDIR to a plain folder such as /tmp."
            )
        (Path(folder) / "config.json").write_text(json.dumps(hf_config, default=str))
        yield folder


def _bridge_adapts(hf_config: dict[str, Any]) -> bool:
    """Whether TransformerLens's bridge has an adapter for the config's architecture (BioGPT: no),
    so that a refusal of HookedTransformer's does not send the user to a bridge that refuses too."""
    import transformer_lens.factories.architecture_adapter_factory  # noqa: F401  (what the check reads)

    from circuitviz.models.estimate import _unsupported_architecture

    return _unsupported_architecture({"architectures": [_architecture(hf_config)]}) is None


def tl_config(hf_config: dict[str, Any], device: torch.device, dtype: torch.dtype) -> HookedTransformerConfig:
    """The TransformerLens config for this checkpoint, unfolded and with GQA ungrouped.

    Ungrouping makes hook_k_input and hook_v_input carry one slice per query head, so every
    head is its own node in a circuit graph.
    """
    from transformer_lens import loading_from_pretrained as loading

    architecture = _architecture(hf_config)
    n_kv = hf_config.get("num_key_value_heads") or hf_config.get("num_attention_heads")
    if whole_vector_qk_norm(architecture) and n_kv != hf_config.get("num_attention_heads"):
        raise ConversionRefused(  # its k-norm spans the grouped keys, not the ungrouped ones
            f"TransformerLens's HookedTransformer normalises an {architecture} model's keys over "
            f"the grouped heads' width, which ungrouping changes; {USE_THE_BRIDGE}.",
            f"its {architecture} key norm spans {n_kv} grouped key heads",
        )
    scaling = _rope_scaling(hf_config)
    if scaling and architecture in HOOKED_IGNORES_ROPE_SCALING:
        raise ConversionRefused(
            f"TransformerLens's HookedTransformer rotates an {architecture} model's queries and keys "
            f"without its '{scaling}' rope scaling, so its logits would be off; {USE_THE_BRIDGE}.",
            f"its converter ignores the '{scaling}' rope scaling",
        )
    with transformer_lens_reference(hf_config) as reference, moved_config_field(architecture):
        try:
            cfg = loading.get_pretrained_model_config(
                reference, hf_cfg=hf_config, fold_ln=False, device=str(device), dtype=dtype
            )
        except NotImplementedError as error:
            unknown, adapted = _architecture(hf_config), _bridge_adapts(hf_config)
            message = (
                f"TransformerLens's HookedTransformer has no converter for {unknown}; {USE_THE_BRIDGE}."
                if adapted
                else f"TransformerLens has neither a converter nor a bridge adapter for {unknown}; use a "
                "supported architecture (Llama, Qwen, Gemma, GPT-2, GPT-NeoX, OLMo, Mistral, Phi, ...) or "
                "a newer TransformerLens that adds it."
            )
            raise ConversionRefused(message, f"it has no converter for {unknown}", adapted) from error
        except (AttributeError, KeyError) as error:  # its converter reads a field this config lacks
            raise ConversionRefused(
                f"TransformerLens cannot read this {_architecture(hf_config)} config ({error}); "
                f"{USE_THE_BRIDGE}.",
                f"its converter cannot read this config ({error})",
            ) from error
    _match_partial_rotary(cfg, hf_config)
    cfg.ungroup_grouped_query_attention = True
    return cfg


def _rope_scaling(hf_config: dict[str, Any]) -> str:
    """The checkpoint's rope scaling ('longrope', 'linear', ...), '' for none: ``rope_type`` in
    ``rope_parameters`` (transformers 5) or ``rope_scaling`` (older configs, also as ``type``)."""
    for source in (hf_config.get("rope_parameters"), hf_config.get("rope_scaling")):
        if isinstance(source, dict):
            kind = str(source.get("rope_type") or source.get("type") or "")
            if kind and kind != "default":
                return kind
    return ""


def _rotary_fraction(hf_config: dict[str, Any]) -> float | None:
    """The share of each head's width that rotary embeddings rotate, where the config gives one
    (``partial_rotary_factor``, at the top or in ``rope_parameters`` as transformers 5 keeps it)."""
    for source in (hf_config, hf_config.get("rope_parameters"), hf_config.get("rope_scaling")):
        value = source.get("partial_rotary_factor") if isinstance(source, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1:
            return float(value)
    return None


def _match_partial_rotary(cfg: HookedTransformerConfig, hf_config: dict[str, Any]) -> None:
    """Rotate only the share of each head the checkpoint rotates: TransformerLens 3.9's Phi-3
    converter leaves ``rotary_dim`` at the head's whole width whatever ``partial_rotary_factor``
    says (Phi-4-mini's is 0.75), and a random Phi-3 with 0.5 gave logits 4.2e-3 (of the largest)
    away from transformers' where every other family agreed to 3e-7."""
    fraction = _rotary_fraction(hf_config)
    if fraction is None or cfg.positional_embedding_type != "rotary":
        return
    width = int(cfg.d_head * fraction)  # as transformers computes it
    if cfg.rotary_dim != width:
        cfg.rotary_dim = width


def tl_state_dict(
    hf_model: PreTrainedModel, cfg: HookedTransformerConfig, hf_config: dict[str, Any]
) -> dict[str, torch.Tensor]:
    """The model's weights renamed and reshaped for TransformerLens, in float32 on the CPU."""
    from transformer_lens import loading_from_pretrained as loading

    with transformer_lens_reference(hf_config) as reference:
        try:
            return loading.get_pretrained_state_dict(reference, cfg, hf_model, dtype=torch.float32)
        except (NotImplementedError, ValueError) as error:
            first = first_sentence(error, 200)
            raise ConversionRefused(
                f"TransformerLens could not convert the {_architecture(hf_config)} weights "
                f"({first}); {USE_THE_BRIDGE}.",
                f"its converter refuses the {_architecture(hf_config)} weights ({first})",
            ) from error
