"""Results on disk, keyed by a hash of what produced them, so a request is never computed twice.

An entry is one file written atomically (a temporary file in the same folder, then a rename), so
a run killed mid-write leaves no half entry. Entries hold only plain values and tensors and are
read back with ``torch.load(weights_only=True)``: a stored file cannot run code. An entry that
cannot be read is moved aside into ``corrupt/`` and reported, and the caller recomputes it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from . import __version__
from .results import CircuitResult

log = logging.getLogger(__name__)


def default_root() -> Path:
    """``$CIRCUITVIZ_CACHE/results``, else ``~/.cache/circuitviz/results``."""
    base = os.environ.get("CIRCUITVIZ_CACHE") or Path.home() / ".cache" / "circuitviz"
    return Path(base) / "results"


def content_key(**parts) -> str:
    """A stable hash of plain values (sorted keys, so dict order never changes the key)."""
    text = json.dumps({"engine": __version__, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class ResultStore:
    """A folder of entries named by content key."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.notices: list[str] = []

    def path(self, key: str, kind: str) -> Path:
        return self.root / kind / f"{key}.pt"

    def load_state(self, key: str, kind: str = "result") -> dict | None:
        """The stored payload, or None when absent or unreadable (then set aside, with a notice)."""
        path = self.path(key, kind)
        if not path.exists():
            return None
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # any unreadable file: truncated, corrupted, foreign
            self._set_aside(path, error)
            return None

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
