"""Several texts in one pass, packed as a prefix tree.

Texts that share their first tokens (every text's BOS, a corruption's prefix before the token it
changes, paraphrases from one template) compute those positions alike: under causal attention a
position sees only what precedes it. Packed as a prefix tree, each distinct prefix is one position
of a single sequence, in an order where every position's ancestors come before it; it attends to
its ancestors only (a mask on the attention scores) and is placed at its depth, the position it has
in its texts (rotary queries and keys are turned from their index to their depth; learned position
embeddings are read at the depth). Every text's positions are then rows of the packed pass
(``PrefixTree.paths``), equal to those of the text run alone up to float rounding.

CircuitLasso's observations (18 texts of 5-13 tokens on the short prompts) hold 134 positions on
the factual prompt, 150 computed with padding, of which 76 are distinct prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..models.adapter import Hook, adapter_of
from . import sites


@dataclass
class PrefixTree:
    """tokens [n]: each node's token; depth [n]: its position in its texts; ancestors [n, n] bool:
    node j is node i's ancestor or i itself; paths: per text, its positions' node indices."""

    tokens: torch.Tensor
    depth: torch.Tensor
    ancestors: torch.Tensor
    paths: list[list[int]]

    @property
    def n_nodes(self) -> int:
        return int(self.tokens.shape[0])


def prefix_tree(texts: list[list[int]]) -> PrefixTree:
    """The prefix tree of token sequences; nodes numbered in order of first appearance (texts in
    order, positions in order), so every node's ancestors have lower numbers."""
    index: dict[tuple[int, int], int] = {}  # (parent node, token) -> node
    tokens, parents, depths, paths = [], [], [], []
    for ids in texts:
        parent, path = -1, []
        for token in ids:
            node = index.get((parent, token))
            if node is None:
                node = len(tokens)
                index[(parent, token)] = node
                tokens.append(int(token))
                parents.append(parent)
                depths.append(len(path))
            path.append(node)
            parent = node
        paths.append(path)
    n = len(tokens)
    # the tree is built on the CPU on purpose (Python loops over its rows); each hook moves what it
    # reads to its layer's device (``tree_hooks``)
    ancestors = torch.eye(n, dtype=torch.bool, device="cpu")
    for node in range(n):  # parents come first, so their rows are complete
        if parents[node] >= 0:
            ancestors[node] |= ancestors[parents[node]]
    return PrefixTree(
        tokens=torch.tensor(tokens, dtype=torch.long, device="cpu"),
        depth=torch.tensor(depths, dtype=torch.long, device="cpu"),
        ancestors=ancestors,
        paths=paths,
    )


def packs(model, n_nodes: int) -> bool:
    """Whether ``model`` can run ``n_nodes`` packed positions: a causal TransformerLens model whose
    positions enter as plain rotary angles or learned embeddings (no rescaled or length-dependent
    rotary, no ALiBi), within its context and any sliding window (a window counts indices, not
    depths)."""
    adapter = adapter_of(model)
    cfg = adapter.cfg
    if not adapter.packs_prefix_trees or getattr(cfg, "attention_dir", "causal") != "causal":
        return False
    if cfg.positional_embedding_type not in ("rotary", "standard"):
        return False
    rescaled = ("use_dynamic_ntk_rope", "use_yarn_rope", "use_logn_attn", "use_attn_scale_by_position")
    if any(getattr(cfg, flag, False) for flag in rescaled):
        return False
    limit = int(cfg.n_ctx)
    window = getattr(cfg, "window_size", None)
    if isinstance(window, int) and any(adapter.attention(layer).local for layer in range(cfg.n_layers)):
        limit = min(limit, window)
    return n_nodes <= limit


def tree_hooks(model, tree: PrefixTree, device: torch.device) -> list[Hook]:
    """Hooks that make a pass over ``tree.tokens`` (one row) the packed pass of its texts."""
    adapter = adapter_of(model)
    n = tree.n_nodes
    hooks: list[Hook] = []
    for layer in range(adapter.cfg.n_layers):
        layer_device = adapter.layer_device(layer)
        allowed = tree.ancestors.to(layer_device)[None, None]  # [1, 1, n, n]

        def mask(scores, hook, allowed=allowed):
            return scores.masked_fill(~allowed, float("-inf"))

        hooks.append((sites.attention_scores(layer), mask))
        if adapter.rotary:
            parts = adapter.attention(layer)
            cos, sin = parts.rotary_tables(n)  # [n, rotary_dim]: at index i, then at depth
            depth = tree.depth.to(cos.device)
            turn = (cos[:, None, :], sin[:, None, :], cos[depth][:, None, :], sin[depth][:, None, :])

            def to_depth(x, hook, parts=parts, turn=turn):
                # undo the rotation to the index, then rotate to the depth: each step a rotation of
                # the backend's own tables, so the result is the depth's rotation to rounding
                cos_i, sin_i, cos_d, sin_d = turn
                width = cos_i.shape[-1]
                rot, rest = x[..., :width], x[..., width:]
                plain = rot * cos_i - parts.rotate_pairs(rot) * sin_i
                return torch.cat([plain * cos_d + parts.rotate_pairs(plain) * sin_d, rest], dim=-1)

            hooks += [(name, to_depth) for name in sites.rotated_query_key(layer, True)]
    if adapter.cfg.positional_embedding_type == "standard":
        table = adapter.position_table()  # [n_ctx, d_model]
        at_depth = table[tree.depth.to(table.device)][None]  # [1, n, d_model]
        hooks.append((sites.POSITION_EMBEDDING, lambda x, hook: at_depth.to(x.device, x.dtype)))
    return hooks
