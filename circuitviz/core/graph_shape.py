"""The size of a model's graph from its shape alone: no torch, so the first paint can show it.

A model of L layers and H heads has ``1 + L(H+1)`` writers (``input``, every head, every MLP)
and ``L(3H+1) + 1`` readers (each head's q, k and v input, every MLP, ``logits``). A head of
layer l reads the ``1 + l(H+1)`` writers before its layer; an MLP of layer l reads those and,
unless attention and MLP run in parallel off the same residual stream, its own layer's H heads
too; ``logits`` reads every writer. Summing over layers:

    sequential: E = (3H+1)(L + (H+1)L(L-1)/2) + LH + 1 + L(H+1)
    parallel:   E = (3H+1)(L + (H+1)L(L-1)/2) + 1 + L(H+1)    (LH fewer: no head -> own MLP)

``graph.GraphSpec`` builds the edge mask these count (the tests check one against the other).
"""

from __future__ import annotations


def n_writers(n_layers: int, n_heads: int) -> int:
    """Forward nodes: ``input``, then each layer's heads and MLP."""
    return 1 + n_layers * (n_heads + 1)


def n_readers(n_layers: int, n_heads: int) -> int:
    """Backward nodes: each layer's head q/k/v inputs and MLP, then ``logits``."""
    return n_layers * (3 * n_heads + 1) + 1


def edge_count(n_layers: int, n_heads: int, parallel_attn_mlp: bool = False) -> int:
    """Edges of the graph (every earlier writer to every later reader), without building it."""
    before_layers = n_layers + (n_heads + 1) * n_layers * (n_layers - 1) // 2  # sum of 1 + l(H+1)
    own_heads_to_mlp = 0 if parallel_attn_mlp else n_layers * n_heads
    return (3 * n_heads + 1) * before_layers + own_heads_to_mlp + n_writers(n_layers, n_heads)
