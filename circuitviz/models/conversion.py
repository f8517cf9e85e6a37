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
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from circuitviz.models.errors import ModelLoadError

if TYPE_CHECKING:
    from transformer_lens import HookedTransformerConfig
    from transformers import PreTrainedModel

# Architectures whose TransformerLens config exists only under official names.
NAME_ONLY_ARCHITECTURES = frozenset({"GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM"})

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


def _architecture(hf_config: dict[str, Any]) -> str:
    """The transformers class name the config describes."""
    architectures = hf_config.get("architectures") or []
    if not architectures:
        raise ModelLoadError(
            "The checkpoint's config.json does not name its architecture; add "
            '"architectures": ["<ModelClass>ForCausalLM"] to it.'
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
            raise ModelLoadError(
                f"This {architecture} checkpoint has the shape of {name} but differs in "
                f"{' and '.join(mismatches)}, which TransformerLens fixes for that name; "
                "it cannot be converted faithfully."
            )
        return name
    raise ModelLoadError(
        f"TransformerLens knows {architecture} only by official name and none has this "
        f"checkpoint's shape ({hf_config.get('num_hidden_layers')} layers, "
        f"{hf_config.get('hidden_size')} wide); load an official size instead."
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


def tl_config(hf_config: dict[str, Any], device: torch.device, dtype: torch.dtype) -> HookedTransformerConfig:
    """The TransformerLens config for this checkpoint, unfolded and with GQA ungrouped.

    Ungrouping makes hook_k_input and hook_v_input carry one slice per query head, so every
    head is its own node in a circuit graph.
    """
    from transformer_lens import loading_from_pretrained as loading

    with transformer_lens_reference(hf_config) as reference:
        try:
            cfg = loading.get_pretrained_model_config(
                reference, hf_cfg=hf_config, fold_ln=False, device=str(device), dtype=dtype
            )
        except NotImplementedError as error:
            raise ModelLoadError(
                f"TransformerLens cannot build a {_architecture(hf_config)} model "
                f"({error}); pick a model from the supported table."
            ) from error
    cfg.ungroup_grouped_query_attention = True
    return cfg


def tl_state_dict(
    hf_model: PreTrainedModel, cfg: HookedTransformerConfig, hf_config: dict[str, Any]
) -> dict[str, torch.Tensor]:
    """The model's weights renamed and reshaped for TransformerLens, in float32 on the CPU."""
    from transformer_lens import loading_from_pretrained as loading

    with transformer_lens_reference(hf_config) as reference:
        try:
            return loading.get_pretrained_state_dict(reference, cfg, hf_model, dtype=torch.float32)
        except (NotImplementedError, ValueError) as error:
            raise ModelLoadError(
                f"TransformerLens could not convert the {_architecture(hf_config)} weights "
                f"({str(error).splitlines()[0][:200]}); pick a model from the supported table."
            ) from error
