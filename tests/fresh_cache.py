"""A fresh circuitviz cache folder that reuses the converted models.

A test that wants an empty result store (and calibration, atlases, ...) but not a new conversion
of the embedded models points ``$CIRCUITVIZ_CACHE`` at one of these: its ``models`` folder is a
link to the converted models of the cache the suite runs with. Converting Gemma-3-270M from its
GGUF again costs minutes of CPU and is tested on its own (tests/test_models.py, test_model_cache.py).
"""

from __future__ import annotations

from pathlib import Path

from circuitviz.models.cache import cache_root


def fresh_cache(root: Path) -> Path:
    """``root`` made (if needed) as an empty cache whose ``models`` links to the suite's converted
    models (``models.cache.cache_root``, read before ``$CIRCUITVIZ_CACHE`` points at ``root``)."""
    root.mkdir(parents=True, exist_ok=True)
    models = cache_root()
    if models.exists() and not (root / "models").exists():
        (root / "models").symlink_to(models, target_is_directory=True)
    return root
