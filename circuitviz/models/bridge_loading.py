"""Load a model through TransformerLens's ``TransformerBridge`` (``bridge.py``).

Sources: an embedded GGUF or a local ``.gguf`` (dequantised by ``transformers`` once, then read
from the conversion cache), a local folder holding a ``transformers`` checkpoint, or a Hugging
Face hub id of any architecture the bridge supports (from the hub's local cache when offline).
``device_map`` / ``n_devices`` / ``max_memory`` split a model over several accelerators the
way ``transformers`` dispatches it; every tensor the engine makes follows the data it meets.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

import circuitviz.models.cache as cache
from circuitviz.core.text import counted, first_sentence, shown
from circuitviz.models.bridge import bridge_from_hf
from circuitviz.models.catalog import not_cached_offline
from circuitviz.models.checkpoints import (
    LocalCheckpoint,
    from_pretrained_checked,
    read_hf_model,
    read_tokenizer,
    require_complete,
    saved_tokenizer_loader,
)
from circuitviz.models.errors import USE_THE_BRIDGE, ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

BRIDGE_CACHE_FORMAT = 2  # 1: the transformers state dict as transformers names it; 2: sealed (cache.seal)


def _bridge_fingerprint(source: Path) -> dict:
    return {**cache.source_fingerprint(source), "backend": "bridge", "bridge_format": BRIDGE_CACHE_FORMAT}


def _write_bridge_entry(entry: cache.CacheEntry, hf_model: PreTrainedModel, tokenizer) -> bool:
    """Store the dequantised ``transformers`` checkpoint (``save_pretrained``) with its tokenizer,
    sealed and renamed into place once whole (``cache.write_sealed``); False (logged) when the
    disk refuses."""

    def fill(staging: Path) -> None:
        hf_model.save_pretrained(str(staging), safe_serialization=True)
        tokenizer.save_pretrained(str(staging))

    return cache.write_sealed(entry, fill)


def _model_from_entry(entry: cache.CacheEntry, dtype: torch.dtype, placement: dict) -> PreTrainedModel:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(entry.folder), dtype=dtype, attn_implementation="eager", local_files_only=True, **placement
    )
    return model.eval()


def gguf_hf_model(checkpoint: LocalCheckpoint, slug: str, dtype: torch.dtype, placement: dict, verify):
    """(the ``transformers`` model, its tokenizer) of a GGUF file: dequantised on the first load
    and stored in the conversion cache, read from there after. A cache entry that does not read
    back whole is removed and rebuilt."""
    entry = cache.cache_entry(f"bridge-{slug}", _bridge_fingerprint(checkpoint.gguf_path))
    read = _read_bridge_entry(entry, slug, dtype, placement)
    if read is not None:
        return read
    with cache.converting(entry):  # another process converting it: wait, then read its entry
        read = _read_bridge_entry(entry, slug, dtype, placement)
        if read is not None:
            return read
        return _convert_for_the_bridge(entry, checkpoint, slug, dtype, placement, verify)


def _read_bridge_entry(entry: cache.CacheEntry, slug: str, dtype: torch.dtype, placement: dict):
    """(model, tokenizer) from a sound entry; None when it is absent or does not read back."""
    if cache.entry_is_sound(entry):
        try:
            load_tokenizer = saved_tokenizer_loader(entry.folder)
            return _model_from_entry(entry, dtype, placement), load_tokenizer()
        except Exception as error:  # a damaged entry costs one conversion, never a wrong model
            logger.warning("The cached %s could not be read (%s); converting again.", slug, error)
    return None


def _convert_for_the_bridge(entry, checkpoint: LocalCheckpoint, slug: str, dtype, placement: dict, verify):
    """Convert the GGUF file for the bridge and store it (the caller holds the conversion lock)."""
    cache.remove_entry(entry)
    logger.info("Converting %s once for the bridge; later loads read %s.", slug, entry.folder)
    verify()
    hf_model = read_hf_model(checkpoint)
    tokenizer = read_tokenizer(checkpoint, model_type=getattr(hf_model.config, "model_type", None))
    if _write_bridge_entry(entry, hf_model, tokenizer):  # first and later loads read the same files
        del hf_model
        gc.collect()
        return _model_from_entry(entry, dtype, placement), saved_tokenizer_loader(entry.folder)()
    return hf_model.to(dtype=dtype), tokenizer


def dense_hf_model(checkpoint: LocalCheckpoint, dtype: torch.dtype, placement: dict):
    """(model, tokenizer) of a local ``transformers`` folder (safetensors, or a plain-tensor .bin
    read by ``read_hf_model``); reading these is fast, nothing is cached."""
    if checkpoint.weights == "safetensors":
        model = from_pretrained_checked(
            checkpoint.folder,
            dtype=dtype,
            attn_implementation="eager",
            local_files_only=True,
            use_safetensors=True,
            **placement,
        )
        return model.eval(), read_tokenizer(checkpoint)
    model = read_hf_model(checkpoint)
    return model.to(dtype=dtype, device=next(iter(placement["device_map"].values()))), read_tokenizer(
        checkpoint
    )


def hub_hf_model(model_id: str, dtype: torch.dtype, placement: dict, local: bool = True):
    """(model, tokenizer) of a hub id, from the local cache when offline; ``placement`` holds
    ``device_map`` / ``max_memory`` for a model split over several devices; ``local`` False (a
    shared server's pages) offers no local folder in its sentences."""
    from huggingface_hub import is_offline_mode, try_to_load_from_cache
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_offline_mode() and not isinstance(try_to_load_from_cache(model_id, "config.json"), str):
        raise ModelLoadError(not_cached_offline(shown(model_id, 60), local))
    kwargs = {"dtype": dtype, "attn_implementation": "eager", **placement}
    try:  # every weight read, in its shape (a cache missing one would leave it random)
        model, info = AutoModelForCausalLM.from_pretrained(
            model_id, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs
        )
        tokenizer = AutoTokenizer.from_pretrained(model_id)
    except (OSError, ValueError, KeyError) as error:
        first = first_sentence(error, 160)
        raise ModelLoadError(
            f"{shown(model_id, 60)} could not be read from the Hugging Face hub ({first}); check the "
            "id, the network and HF_TOKEN for gated models."
        ) from error
    return require_complete(model, info, shown(model_id, 60)).eval(), tokenizer


def boot(hf_model: PreTrainedModel, tokenizer, name: str):
    """The bridge around ``hf_model``, ready for circuits (the transformers model is kept by it)."""
    bridge = bridge_from_hf(hf_model, tokenizer, name=name)
    gc.collect()
    return bridge


@dataclass(frozen=True)
class HubModel:
    """A model read from the Hugging Face hub or its cache: an official TransformerLens name
    (either backend) or any hub id (the bridge only)."""

    official_name: str
    official: bool = True
    local: bool = True  # False: the sentences offer no folder of this machine (a shared server)


def looks_like_hub_id(name: str) -> bool:
    """``owner/name`` with the characters the hub allows."""
    pattern = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}"
    return re.fullmatch(pattern, name) is not None


BACKENDS = ("bridge", "hooked")


def choose_backend(source, backend: str | None, placement: dict) -> str:
    """The backend a load uses: the one asked for, else the bridge where only it can load the
    model (a hub id TransformerLens has no name for, a model split over devices), else
    ``DEFAULT_BACKEND``."""
    if backend is not None and backend not in BACKENDS:
        raise ModelLoadError(f"Unknown backend {shown(backend, 20)}; use 'bridge' or 'hooked'.")
    bridge_only = (
        (isinstance(source, HubModel) and not source.official)
        or "max_memory" in placement
        or (
            isinstance(placement.get("device_map"), str)
            or len(set(placement.get("device_map", {}).values())) > 1
        )
    )
    if backend == "hooked" and bridge_only:
        raise ModelLoadError(
            "Only the bridge backend loads a hub id TransformerLens has no name for, or a model "
            f"split over several devices; {USE_THE_BRIDGE}."
        )
    if backend is not None:
        return backend
    return "bridge" if bridge_only else DEFAULT_BACKEND


# The backend of a load that does not ask for one. The bridge gives the same scores and NDFs and
# scores as fast on both embedded models, but loads 0.6-1.0 s slower with 0.25-0.4 GiB more memory
# (docs/models.md, "The embedded models: the same scores"), so HookedTransformer while it exists.
DEFAULT_BACKEND = "hooked"


def device_placement(
    device: torch.device, device_map=None, n_devices: int | None = None, max_memory: dict | None = None
) -> dict:
    """The ``from_pretrained`` placement arguments: the whole model on ``device``, or split over
    devices by ``device_map`` ("auto", "balanced", or {module: device}) or over ``n_devices``
    accelerators (each given an equal share of its memory unless ``max_memory`` says otherwise)."""
    if n_devices is not None:
        if n_devices < 1:
            raise ModelLoadError(f"n_devices must be at least 1, not {n_devices}.")
        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n_devices > available:
            raise ModelLoadError(
                f"{n_devices} devices were asked for but {counted(available, 'CUDA device')} {'is' if available == 1 else 'are'} visible; "
                "lower n_devices or set CUDA_VISIBLE_DEVICES."
            )
        if max_memory is None:
            max_memory = {index: torch.cuda.mem_get_info(index)[0] for index in range(n_devices)}
        device_map = device_map or "balanced"
    if device_map is None:
        return {"device_map": {"": str(device)}}
    placement: dict = {"device_map": device_map}
    if max_memory is not None:
        placement["max_memory"] = max_memory
    return placement


def placement_name(device: torch.device, placement: dict) -> str:
    """Where a model lives, for its cache key: one device, or the devices of a split."""
    device_map = placement.get("device_map")
    if isinstance(device_map, dict):
        devices = sorted({str(value) for value in device_map.values()})
        return devices[0] if len(devices) == 1 else "+".join(devices)
    return f"{device_map} split"


def load_bridge(source, model_id: str, dtype: torch.dtype, placement: dict):
    """A model booted through the bridge from ``source`` (``loading.resolve_source``)."""
    from circuitviz.models.embedded import EmbeddedGguf

    if isinstance(source, EmbeddedGguf):
        hf_model, tokenizer = gguf_hf_model(
            source.checkpoint, source.model_id, dtype, placement, source.verify
        )
    elif isinstance(source, LocalCheckpoint) and source.weights == "gguf":
        tag = hashlib.sha256(str(source.gguf_path.resolve()).encode()).hexdigest()[:8]
        slug = cache.slug_for(f"local-{source.gguf_path.stem}-{tag}")
        hf_model, tokenizer = gguf_hf_model(source, slug, dtype, placement, verify=lambda: None)
    elif isinstance(source, LocalCheckpoint):
        hf_model, tokenizer = dense_hf_model(source, dtype, placement)
    else:
        hf_model, tokenizer = hub_hf_model(source.official_name, dtype, placement, source.local)
    return boot(hf_model, tokenizer, model_id)
