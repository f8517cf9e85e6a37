"""A disk cache of converted checkpoints, so only the first load pays for GGUF conversion.

An entry is a folder holding the Hugging Face config, the tokenizer and the TransformerLens
state dict as safetensors. It is keyed by the source file's size and modification time and by
the library versions that did the conversion, written into a staging folder and renamed into
place in one step, so a reader never sees half an entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..services import assets
from .layout import from_storage, storage_form

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

# 2: the weights TransformerLens copies in every forward are stored in the order it reads them
CACHE_FORMAT = 2
_CONFIG_FILE = "config.json"
_WEIGHTS_FILE = "weights.safetensors"
_MANIFEST_FILE = "manifest.json"
_STAGING_PREFIX = ".staging-"
_STALE_STAGING_SECONDS = 3600  # older staging folders belong to writes that died


def cache_root() -> Path:
    """Where circuitviz keeps converted models: $CIRCUITVIZ_CACHE/models, else ~/.cache/circuitviz/models."""
    return assets.cache_dir("models")


def _version(distribution: str) -> str:
    """An installed package's version, part of the key so an upgrade reconverts."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"


def source_fingerprint(source_file: Path) -> dict[str, Any]:
    """What the converted weights depend on: the source file's identity and the converters."""
    stat = source_file.stat()
    return {
        "format": CACHE_FORMAT,
        "source": str(source_file.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "transformer_lens": _version("transformer-lens"),
        "transformers": _version("transformers"),
    }


def slug_for(name: str) -> str:
    """A folder name for a model id or path that is safe on every filesystem."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.").lower()
    return slug[:80] or "model"


@dataclass(frozen=True)
class CacheEntry:
    """One converted checkpoint's folder in the cache (which may not exist yet)."""

    folder: Path
    fingerprint: dict[str, Any]

    @property
    def config_path(self) -> Path:
        return self.folder / _CONFIG_FILE

    @property
    def weights_path(self) -> Path:
        return self.folder / _WEIGHTS_FILE

    def exists(self) -> bool:
        """Whether a complete entry is present (the manifest is written last)."""
        return (self.folder / _MANIFEST_FILE).is_file() and self.weights_path.is_file()


def cache_entry(slug: str, fingerprint: dict[str, Any]) -> CacheEntry:
    """The entry for this source: <root>/<slug>/<hash of fingerprint>."""
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]
    return CacheEntry(cache_root() / slug / digest, fingerprint)


def _storable(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Tensors safetensors accepts: on the CPU, contiguous, and sharing no memory."""
    seen_storages: set[int] = set()
    storable = {}
    for name, tensor in state_dict.items():
        tensor = tensor.detach().cpu()
        storage = tensor.untyped_storage().data_ptr()
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        elif storage in seen_storages:
            tensor = tensor.clone()
        seen_storages.add(tensor.untyped_storage().data_ptr())
        storable[name] = tensor
    return storable


def write_entry(
    entry: CacheEntry,
    hf_config: dict[str, Any],
    tokenizer: PreTrainedTokenizerBase,
    state_dict: dict[str, torch.Tensor],
) -> bool:
    """Write the entry atomically; return False (and log why) when the disk refuses.

    A failed write only costs speed next time, so it never fails the load itself.
    """
    from safetensors.torch import save_file

    parent = entry.folder.parent
    staging: Path | None = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=parent))
        (staging / _CONFIG_FILE).write_text(json.dumps(hf_config, indent=2, default=str))
        tokenizer.save_pretrained(str(staging))
        save_file(
            _storable({name: storage_form(name, tensor) for name, tensor in state_dict.items()}),
            str(staging / _WEIGHTS_FILE),
            metadata={"circuitviz_cache_format": str(CACHE_FORMAT)},
        )
        (staging / _MANIFEST_FILE).write_text(json.dumps(entry.fingerprint, indent=2))
        if entry.folder.exists() and not entry.exists():
            shutil.rmtree(entry.folder)  # an incomplete leftover with our key
        if not entry.exists():
            os.replace(staging, entry.folder)
            staging = None
    except OSError as error:
        if entry.exists():  # another process finished the same entry first
            return True
        logger.warning("Could not write the model cache in %s (%s).", entry.folder, error)
        return False
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    _remove_stale_siblings(entry)
    return True


def _remove_stale_siblings(entry: CacheEntry) -> None:
    """Drop this model's entries with other keys, and staging folders of interrupted writes.

    Each entry is a full float32 copy of the model, so old ones are not kept around.
    """
    now = time.time()
    for sibling in entry.folder.parent.iterdir():
        if sibling == entry.folder:
            continue
        if sibling.name.startswith(_STAGING_PREFIX):
            if now - sibling.stat().st_mtime > _STALE_STAGING_SECONDS:
                shutil.rmtree(sibling, ignore_errors=True)
        elif (sibling / _MANIFEST_FILE).is_file():
            shutil.rmtree(sibling, ignore_errors=True)


def read_config(entry: CacheEntry) -> dict[str, Any]:
    """The Hugging Face config saved with the entry."""
    return json.loads(entry.config_path.read_text())


class CachedWeights:
    """The TransformerLens state dict saved with an entry, read a group of tensors at a time.

    Weights are kept in ``layout``'s storage form and read back as views in that layout.

    Reading by group (and closing the file in between) keeps only one group in memory
    beside the model being filled, instead of a second copy of every weight.
    """

    def __init__(self, weights_path: Path):
        self.weights_path = weights_path

    def names(self) -> list[str]:
        from safetensors import safe_open

        with safe_open(str(self.weights_path), framework="pt") as weights:
            return list(weights.keys())

    def take(self, names: list[str]) -> dict[str, torch.Tensor]:
        from safetensors import safe_open

        with safe_open(str(self.weights_path), framework="pt") as weights:
            return {name: from_storage(name, weights.get_tensor(name)) for name in names}
