"""The adapter of a model: ``adapter_of(model)`` for a HookedTransformer or a TransformerBridge.

``ModelAdapter`` (``base_adapter.py``) serves a HookedTransformer, ``BridgeAdapter``
(``bridge_adapter.py``) a TransformerBridge; both answer the engine's questions under the same
names, and nothing outside ``circuitviz.models`` learns which one it got. The adapters live in a
weak registry keyed by the model: nothing is set on or replaced in the model itself.
"""

from __future__ import annotations

import threading
import weakref

import torch

from .attention_parts import AttentionParts
from .base_adapter import Hook, ModelAdapter, apply_norm, head_results
from .bridge_adapter import BridgeAdapter, is_bridge

__all__ = [
    "AttentionParts",
    "BridgeAdapter",
    "Hook",
    "ModelAdapter",
    "adapter_of",
    "apply_norm",
    "backend_of",
    "head_results",
    "model_device",
    "model_dtype",
    "register",
]

_ADAPTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_REGISTRY_GUARD = threading.Lock()


def _adapter_class(model) -> type[ModelAdapter]:
    """``BridgeAdapter`` for a TransformerBridge, ``ModelAdapter`` for a HookedTransformer."""
    return BridgeAdapter if is_bridge(model) else ModelAdapter


def adapter_of(model) -> ModelAdapter:
    """The adapter of ``model`` (a HookedTransformer, a TransformerBridge or an adapter already),
    made on first use."""
    if isinstance(model, ModelAdapter):
        return model
    with _REGISTRY_GUARD:
        adapter = _ADAPTERS.get(model)
        if adapter is None:
            adapter = _adapter_class(model)(model)
            _ADAPTERS[model] = adapter
        return adapter


def register(model, key: str) -> ModelAdapter:
    """Make (or rename) the adapter of a freshly loaded model: ``key`` names this instance in
    cache keys (a model id alone names several instances: one per device, or per load)."""
    adapter = adapter_of(model)
    adapter.key = key
    return adapter


def model_device(model) -> torch.device:
    """The device the model's weights are on (where its runs' tensors belong)."""
    return adapter_of(model).device


def model_dtype(model) -> torch.dtype:
    return adapter_of(model).dtype


def backend_of(model) -> str:
    """ "bridge" for a TransformerBridge, "hooked" for a HookedTransformer: what store keys add
    to a model's id, so one model's results through the two backends are kept apart (they agree
    to about 1e-4, not to the bit)."""
    return "bridge" if isinstance(adapter_of(model), BridgeAdapter) else "hooked"
