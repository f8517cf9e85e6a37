"""Results on disk, keyed by a hash of what produced them, so a request is never computed twice.

An entry is one file written atomically (a temporary file in the same folder, then a rename), so
a run killed mid-write leaves no half entry. Entries hold only plain values and tensors and are
read back with ``torch.load(weights_only=True)``: a stored file cannot run code. An entry that
cannot be read is moved aside into ``corrupt/`` and reported, and the caller recomputes it.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..core.results import CircuitResult
from . import assets

log = logging.getLogger(__name__)


def default_root() -> Path:
    """``$CIRCUITVIZ_CACHE/results``, else ``~/.cache/circuitviz/core/results``."""
    return assets.cache_dir("results")


def default_max_bytes() -> int | None:
    """``$CIRCUITVIZ_STORE_MAX_GB`` (default 10 GB; 0 or 'none' for no limit)."""
    text = os.environ.get("CIRCUITVIZ_STORE_MAX_GB", "").strip().lower()
    if not text:
        return int(10e9)
    if text in ("0", "none", "unlimited"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"CIRCUITVIZ_STORE_MAX_GB={text!r} is not a number of gigabytes; set e.g. 10, or 0 for no limit."
        ) from None
    return int(value * 1e9) if value > 0 else None


class ResultStore:
    """A folder of entries named by content key, kept under ``max_bytes`` (least recently used
    entries go first; reading an entry counts as a use).

    Several processes may share one folder: every write is a rename of a complete file, so two
    writers of one key leave one of their complete entries, and an entry evicted while another
    process reads it is simply absent for that process (it recomputes).
    """

    def __init__(self, root: str | Path | None = None, max_bytes: int | None | str = "env"):
        self.root = Path(root) if root is not None else default_root()
        self.max_bytes = default_max_bytes() if max_bytes == "env" else max_bytes
        self.notices: list[str] = []

    def path(self, key: str, kind: str) -> Path:
        return self.root / kind / f"{key}.pt"

    def load_state(self, key: str, kind: str = "result") -> dict | None:
        """The stored payload, or None when absent or unreadable (then set aside, with a notice)."""
        path = self.path(key, kind)
        if not path.exists():
            return None
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError:  # evicted (or replaced) by another process meanwhile
            return None
        except Exception as error:  # any unreadable file: truncated, corrupted, foreign
            self._set_aside(path, error)
            return None
        self._touch(path)
        return state

    def _touch(self, path: Path) -> None:
        """Mark an entry as just used (its modification time orders the eviction)."""
        try:
            os.utime(path)
        except OSError:
            pass

    def entries(self) -> list[tuple[float, int, Path]]:
        """(last use, bytes, path) of every stored entry, least recently used first."""
        found = []
        for path in self.root.glob("*/*.pt"):
            if path.parent.name == "corrupt":
                continue
            try:
                info = path.stat()
            except OSError:  # removed meanwhile
                continue
            found.append((info.st_mtime, info.st_size, path))
        return sorted(found)

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove least recently used entries until the store is within ``max_bytes``."""
        if self.max_bytes is None:
            return []
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = []
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            if keep is not None and path == keep:
                continue
            path.unlink(missing_ok=True)
            total -= size
            removed.append(path)
        if removed:
            log.info(
                "result store over %s bytes: removed %d least recently used entries",
                self.max_bytes,
                len(removed),
            )
        return removed

    def save_state(self, key: str, state: dict, kind: str = "result") -> Path:
        path = self.path(key, kind)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                torch.save(state, stream)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self.evict(keep=path)
        return path

    def _set_aside(self, path: Path, error: Exception) -> None:
        aside = self.root / "corrupt" / f"{path.stem}.{int(time.time())}.pt"
        aside.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, aside)
        except OSError:
            path.unlink(missing_ok=True)
        notice = f"A stored result could not be read ({type(error).__name__}); it was set aside and is being recomputed."
        self.notices.append(notice)
        log.warning("%s (%s -> %s)", notice, path, aside)

    # ----- circuit results ----------------------------------------------------------------------
    def get(self, key: str) -> CircuitResult | None:
        state = self.load_state(key)
        if state is None:
            return None
        try:
            return CircuitResult.from_state(state)
        except (KeyError, TypeError, ValueError) as error:
            self._set_aside(self.path(key, "result"), error)
            return None

    def put(self, key: str, result: CircuitResult) -> Path:
        return self.save_state(key, result.to_state())

    def get_or_compute(self, key: str, compute: Callable[[], CircuitResult]) -> tuple[CircuitResult, bool]:
        """(result, whether it came from the store)."""
        cached = self.get(key)
        if cached is not None:
            return cached, True
        result = compute()
        self.put(key, result)
        return result, False


class GuardedStore:
    """``store`` as one run sees it: before the run keeps work on the way (``save_state``) and
    before its result goes in (``get_or_compute``, once computed), ``guard`` is asked
    (``before_work_kept(key)``, ``before_result_kept(key)``) and may raise to keep nothing (the
    app's Cancel, ``ui/run.py``); everything else is the store's own."""

    def __init__(self, store, guard):
        self._store, self._guard = store, guard

    def __getattr__(self, name):
        return getattr(self._store, name)

    def save_state(self, key, state, kind="result"):
        self._guard.before_work_kept(key)
        return self._store.save_state(key, state, kind=kind)

    def get_or_compute(self, key, compute):
        def checked():
            result = compute()
            self._guard.before_result_kept(key)
            return result

        return self._store.get_or_compute(key, checked)
