"""Models: load one (embedded GGUF, TransformerLens name, local folder), pick its device.

This is the only package that chooses a device, a dtype or a model size; everything else
receives a HookedTransformer from load_model().
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
from circuitviz.models.devices import (  # noqa: E402
    default_device,
    default_dtype,
    resolve_device,
    resolve_dtype,
)
from circuitviz.models.errors import ModelLoadError  # noqa: E402
from circuitviz.models.loading import load_model, prepare_for_circuits  # noqa: E402

__all__ = [
    "EMBEDDED_MODEL",
    "EMBEDDED_MODELS",
    "SUPPORTED_MODELS",
    "ModelInfo",
    "ModelLoadError",
    "default_device",
    "default_dtype",
    "load_model",
    "prepare_for_circuits",
    "resolve_device",
    "resolve_dtype",
]
