"""ACC++: prompt-specific circuits of attention causal communication, from one forward pass.

Where EAP-IG says which components are connected, ACC++ says why a head attends where it does:
which upstream components write which low-rank signal (a singular direction of the head's
query-key form) that the head's query and key match on. It needs no patching and no corrupted
prompt. Modules:

- ``svd``: each head's bilinear form with biases, norms and Gemma-3's q/k-norm folded in, and
  its one SVD, cached on disk per model;
- ``forward``: the one forward pass and its frozen per-position constants (norm scales, RoPE);
- ``decompose``: candidate signals (component x singular direction) of a decision, their exact
  pre-softmax contributions;
- ``attribution``: integrated gradients through the softmax, greedy removal to tau(d) = k/d;
- ``trace``: seeds by direct effect on the answer, breadth-first recursive tracing;
- ``circuit``: the position graph as JSON, its projection on the engine's edges, networkx (what
  a result keeps, ``ACCDetails``, and its circuits at any budget are ``circuitviz.details.acc``);
- ``ablation``: the paper's knockout check (found vs random signals).
"""

from importlib import import_module

# names -> defining module; imported on first use, so ``circuitviz.acc.tables`` (the app's
# Signals page) loads without torch
_EXPORTS = {
    "circuit_json": "circuit",
    "engine_scores": "circuit",
    "to_networkx": "circuit",
    "HeadSVD": "svd",
    "load_svd": "svd",
    "residual_directions": "svd",
    "Trace": "trace",
    "TraceSettings": "trace",
    "Tracer": "trace",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
