"""A disk cache of converted checkpoints, so only the first load pays for GGUF conversion.

Both backends keep one: an entry is a folder holding what a load reads (HookedTransformer's:
the Hugging Face config, the tokenizer and the TransformerLens state dict as safetensors; the
bridge's: a ``transformers`` checkpoint written by ``save_pretrained``).

- **Keyed by content and version**: the source file's sha256 (computed once per file identity
  and remembered in ``sources.json``) and the versions of the libraries that converted it, so a
  moved or copied file finds its entry and an upgrade converts again.
- **Written whole or not at all**: into a staging folder renamed into place in one step, the
  manifest written last.
- **A damaged entry is detected and rebuilt, never used** (``entry_is_sound``): the manifest
  records every file's size and sha256; each read checks that the manifest matches the key,
  that every file is there with its size, that each safetensors header describes exactly its
  file, and that every file's bytes hash to the manifest's digest. Hashing a gigabyte costs
  about a second, so a file is hashed once per identity (size, modification and change times,
  inode; any write changes them) and the identity it was verified under kept in ``verified.json``.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
# 3: keyed by the source's content; the manifest records each file's size and sha256
CACHE_FORMAT = 3
_CONFIG_FILE = "config.json"
_WEIGHTS_FILE = "weights.safetensors"
_MANIFEST_FILE = "manifest.json"
_VERIFIED_FILE = "verified.json"
_SOURCES_FILE = "sources.json"
_HASH_CHUNK = 16 * 2**20
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
    """What the converted weights depend on: the source file's content and the converters."""
    return {
        "format": CACHE_FORMAT,
        "sha256": content_digest(source_file),
        "size": source_file.stat().st_size,
        "transformer_lens": _version("transformer-lens"),
        "transformers": _version("transformers"),
    }


def _identity(path: Path) -> list[int]:
    """What changes whenever a file's bytes may have changed: size, modification and change times,
    inode (a rename keeps them; any write, copy or replacement changes at least one)."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes (hashlib works outside the GIL on each chunk)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    """Atomically (a temporary file renamed over it); a disk that refuses only costs speed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(handle, "w") as stream:
            json.dump(data, stream, indent=1)
        os.replace(temporary, path)
    except OSError as error:
        logger.debug("Could not write %s (%s).", path, error)


def content_digest(source_file: Path) -> str:
    """The sha256 of ``source_file``, hashed once per file identity (``sources.json`` in the cache
    remembers it: a start does not hash a model's file again)."""
    path = source_file.resolve()
    memo_path = cache_root() / _SOURCES_FILE
    memo = _read_json(memo_path)
    identity = _identity(path)
    known = memo.get(str(path))
    if isinstance(known, dict) and known.get("identity") == identity and known.get("sha256"):
        return str(known["sha256"])
    digest = file_digest(path)
    memo = _read_json(memo_path)  # another process may have added its own meanwhile
    memo[str(path)] = {"identity": identity, "sha256": digest}
    _write_json(memo_path, memo)
    return digest


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
        """Whether a complete entry is present (the manifest is written last); ``entry_is_sound``
        says whether it may be read."""
        return (self.folder / _MANIFEST_FILE).is_file() and self.weights_path.is_file()


def complete_entries() -> set[Path]:
    """The folders of the entries complete in the cache now (their manifest written): one more
    after a load than before means the load converted its checkpoint."""
    return {manifest.parent for manifest in cache_root().glob(f"*/*/{_MANIFEST_FILE}")}


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
    """Write HookedTransformer's entry atomically; return False (and log why) when the disk refuses.

    A failed write only costs speed next time, so it never fails the load itself.
    """
    from safetensors.torch import save_file

    def fill(staging: Path) -> None:
        (staging / _CONFIG_FILE).write_text(json.dumps(hf_config, indent=2, default=str))
        tokenizer.save_pretrained(str(staging))
        save_file(
            _storable({name: storage_form(name, tensor) for name, tensor in state_dict.items()}),
            str(staging / _WEIGHTS_FILE),
            metadata={"circuitviz_cache_format": str(CACHE_FORMAT)},
        )

    return write_sealed(entry, fill)


@contextmanager
def converting(entry: CacheEntry) -> Iterator[None]:
    """Held while ``entry`` is converted, so a cold cache is converted once however many
    processes load the same model together (app servers, test workers, Ray workers): the others
    wait here, then find the entry written (callers check ``entry_is_sound`` again inside).

    An advisory lock on a file beside the entry, released by the system if the holder dies.
    Where there is no ``fcntl`` (Windows) or the disk refuses the lock file, each process
    converts on its own, which ``write_sealed`` keeps safe (only slower).
    """
    try:
        import fcntl
    except ImportError:  # not POSIX
        fcntl = None
    handle = None
    if fcntl is not None:
        try:
            entry.folder.parent.mkdir(parents=True, exist_ok=True)
            handle = open(entry.folder.parent / f".{entry.folder.name}.lock", "a")  # noqa: SIM115
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError as error:
            logger.info("No conversion lock for %s (%s); converting without it.", entry.folder, error)
            if handle is not None:
                handle.close()
            handle = None
    try:
        yield
    finally:
        if handle is not None:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()


def write_sealed(entry: CacheEntry, fill: Callable[[Path], None]) -> bool:
    """Fill a staging folder (``fill(folder)``), seal it (``seal``) and rename it into place as
    ``entry``; False (logged) when the disk refuses. A damaged entry in the way is replaced."""
    parent = entry.folder.parent
    staging: Path | None = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=parent))
        fill(staging)
        seal(staging, entry.fingerprint)
        if entry.folder.exists() and not entry_is_sound(entry):
            shutil.rmtree(entry.folder, ignore_errors=True)  # a damaged or partial leftover
        if not entry.folder.exists():
            os.replace(staging, entry.folder)
            staging = None
    except OSError as error:
        if entry_is_sound(entry):  # another process finished the same entry first
            return True
        logger.warning("Could not write the model cache in %s (%s).", entry.folder, error)
        return False
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    _remove_stale_siblings(entry)
    return True


def _sealed_files(folder: Path) -> list[Path]:
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file()
        and path.name not in (_MANIFEST_FILE, _VERIFIED_FILE)
        and not path.name.startswith(".")
    )


def seal(folder: Path, fingerprint: dict[str, Any]) -> None:
    """Record every file of ``folder`` (size and sha256) in its manifest, written last, and the
    identity each was hashed under (``verified.json``: they need no hashing on the next read)."""
    files = _sealed_files(folder)
    records = {path.name: {"size": path.stat().st_size, "sha256": file_digest(path)} for path in files}
    (folder / _VERIFIED_FILE).write_text(json.dumps({path.name: _identity(path) for path in files}))
    (folder / _MANIFEST_FILE).write_text(json.dumps({"fingerprint": fingerprint, "files": records}, indent=2))


def safetensors_header_fits(path: Path) -> bool:
    """Whether a safetensors file's header parses and its tensors end exactly at the file's end
    (a file cut short, or grown, fails)."""
    try:
        with open(path, "rb") as stream:
            header_size = int.from_bytes(stream.read(8), "little")
            if header_size <= 0 or header_size > 100 * 2**20:
                return False
            header = json.loads(stream.read(header_size))
        ends = [
            int(value["data_offsets"][1])
            for name, value in header.items()
            if name != "__metadata__" and isinstance(value, dict)
        ]
        return 8 + header_size + max(ends, default=0) == path.stat().st_size
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False


def entry_is_sound(entry: CacheEntry) -> bool:
    """Whether ``entry`` may be read: its manifest matches its key, and every file it lists is
    present with its size, a well-formed safetensors header where it is one, and its sha256
    (hashed again only when the file's identity changed since it was last verified). A partial,
    truncated, altered or foreign entry is not sound."""
    manifest = _read_json(entry.folder / _MANIFEST_FILE)
    records = manifest.get("files")
    if manifest.get("fingerprint") != entry.fingerprint or not isinstance(records, dict) or not records:
        return False
    verified = _read_json(entry.folder / _VERIFIED_FILE)
    rehashed = False
    try:
        for name, record in records.items():
            path = entry.folder / name
            if not isinstance(record, dict):  # a manifest edited or written by other code
                return False
            if not path.is_file() or path.stat().st_size != record.get("size"):
                return False
            if name.endswith(".safetensors") and not safetensors_header_fits(path):
                return False
            identity = _identity(path)
            if verified.get(name) != identity:
                if file_digest(path) != record.get("sha256"):
                    return False
                verified[name] = identity
                rehashed = True
    except OSError:
        return False
    if rehashed:
        _write_json(entry.folder / _VERIFIED_FILE, verified)
    return True


def remove_entry(entry: CacheEntry) -> None:
    """Remove an entry that is not sound, so it is rebuilt."""
    if entry.folder.exists():
        logger.warning("The model cache entry %s is damaged or incomplete; converting again.", entry.folder)
        shutil.rmtree(entry.folder, ignore_errors=True)


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
