"""Content keys: a stable hash of the plain values that produced something (a result, a score
matrix, a memo). A leaf module, so everything that keys what it keeps imports only this."""

from __future__ import annotations

import hashlib
import json

from .. import __version__


def content_key(**parts) -> str:
    """A stable hash of plain values (sorted keys, so dict order never changes the key)."""
    text = json.dumps({"engine": __version__, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
