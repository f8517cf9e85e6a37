"""Content keys: a stable hash of the plain values that produced something (a result, a score
matrix, a memo). A leaf module, so everything that keys what it keeps imports only this.

Every key also holds the engine: the package's version and a digest of its source files, so a
result stored by other code (an upgrade, or any change to a method, the evaluator or the model
assembly) is never served as this code's: the version alone never changed while the figures did.
The app's pages (``ui/``), the drawings (``render/``) and the exports (``export/``) are left out:
they only display or write out what the store holds (what the pages read before a run is computed
and stored by ``entry.memos``), so an edit to a page, a drawing or an export keeps every stored
result valid instead of recomputing them all after the server restarts."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from .. import __version__

PACKAGE = Path(__file__).resolve().parent.parent
# the package's folders left out of the digest: nothing they hold is stored, and nothing that
# computes what is stored imports them (tests/test_keys.py)
DISPLAY_ONLY = ("ui", "render", "export")


@functools.cache
def engine_digest() -> str:
    """The version and a digest of every Python source file of the package but the pages' (their
    paths and bytes, in path order): computed once a process, about 2 MB read."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in DISPLAY_ONLY:
            continue
        digest.update(path.relative_to(PACKAGE).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:16]}"


def content_key(**parts) -> str:
    """A stable hash of plain values (sorted keys, so dict order never changes the key), with the
    engine's digest: the key of anything kept beyond this process (the result store, memos)."""
    return _hashed({"engine": engine_digest(), **parts})


def lineage_key(**parts) -> str:
    """``content_key`` of the same parts but for the engine: equal for a result stored by other code
    of the package, so a batch resumed after a code change can say which of its items were stored
    before and why they are computed again (``batch.resumed``); never a key of anything kept."""
    return _hashed(parts)


def process_key(**parts) -> str:
    """A stable hash of plain values for a cache that lives only in this process (a page's drawings
    of a result): the code cannot change under it, so the engine's digest is left out, and the
    pages, left out of that digest, key with this and never with ``content_key``."""
    return _hashed(parts)


def _hashed(parts: dict) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
