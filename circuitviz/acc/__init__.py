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
- ``graph``: the position graph as JSON, its projection on the engine's edges, networkx;
- ``ablation``: the paper's knockout check (found vs random signals).
"""

from .graph import circuit_json, engine_scores, prune_to_logits, report_lines, to_networkx
from .svd import HeadSVD, load_svd, residual_directions
from .trace import Trace, Tracer, TraceSettings

__all__ = [
    "HeadSVD",
    "Trace",
    "TraceSettings",
    "Tracer",
    "circuit_json",
    "engine_scores",
    "load_svd",
    "prune_to_logits",
    "report_lines",
    "residual_directions",
    "to_networkx",
]
