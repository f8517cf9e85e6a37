"""Models: load one (embedded GGUF, TransformerLens name, local folder), pick its device.

This is the only package that chooses a device, a dtype or a model size; everything else
receives a HookedTransformer from load_model().

Importing the package imports no torch: the catalog (the sidebar's first paint needs it) is read
at once, the loader and devices on first use of their names (``__getattr__`` below).
"""

import os

# Weights come from pip packages and local folders; the hub is used only through its cache
# unless the user sets HF_HUB_OFFLINE=0. Set before transformers or huggingface_hub import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from circuitviz.models.catalog import (  # noqa: E402
    EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    SUPPORTED_MODELS,
    ModelInfo,
)
from circuitviz.models.errors import ModelLoadError  # noqa: E402

# name -> the module that defines it, imported on first use (they import torch)
_LAZY = {
    "default_device": "devices",
    "default_dtype": "devices",
    "resolve_device": "devices",
    "resolve_dtype": "devices",
    "load_model": "loading",
    "check_model_name": "loading",
    "estimate_memory": "estimate",
    "prepare_for_circuits": "loading",
}


def __getattr__(name: str):
    """The loader's and devices' names, imported when first asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "EMBEDDED_MODEL",
    "EMBEDDED_MODELS",
    "SUPPORTED_MODELS",
    "ModelInfo",
    "ModelLoadError",
    "check_model_name",
    "default_device",
    "default_dtype",
    "estimate_memory",
    "load_model",
    "prepare_for_circuits",
    "resolve_device",
    "resolve_dtype",
]
