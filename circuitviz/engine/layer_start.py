"""Patched runs that start at a layer: what every row shares below it, run once.

A patched row changes a reader's input only where one of its edges is removed. When no circuit
of a batch removes an edge into any reader below layer l, every writer below layer l computes
exactly what it computes in the clean run (its inputs are the clean residual stream), so every
row's residual stream before block l is the clean one, and so are the keys and values layers l
onwards read at the positions before the corruption. A row can then start at block l from the
clean run's residual stream before it, with the clean writers' outputs (and, on models that
normalise a layer's summed heads, the clean heads before that norm) standing in for the writers
below l that its patches read. ``CleanState`` holds that one clean run of a prompt;
``start_layer`` says where a batch of circuits may start, and ``rows_from_layer`` lays a batch's
start out row by row for ``patching.patched_metrics``. The numbers equal a whole pass's to float
rounding (a batch of one row and a batch of many round their sums differently).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..core.graph import GraphSpec
from ..models.adapter import adapter_of
from ..models.base_adapter import KeysDone
from . import sites
from .capture import WriterBuffer, writer_hooks


@dataclass(frozen=True)
class CleanState:
    """One prompt's clean run at the positions a patched pass runs (``prefix`` onwards).

    residuals: [1, n_layers, pos, d_model], the residual stream before each block; writers:
    [1, n_forward, pos, d_model], every writer's output, writer-major (as ``WriterBuffer`` holds
    a patched run's); raw: [1, pos, n_layers * n_heads, d_model], the heads before a shared
    post-attention norm, or None on models without one; caches: the prefix's keys and values
    (``prefix_caches`` of one row), or None when the whole prompt runs.
    """

    residuals: torch.Tensor
    writers: torch.Tensor
    raw: torch.Tensor | None
    caches: list | None
    corrections: dict = field(default_factory=dict, compare=False)  # renorm.CleanCorrections' store


@dataclass(frozen=True)
class LayerStart:
    """A batch's start at block ``layer``: each row's clean residual before it [batch, pos,
    d_model], the clean writers [batch, n_forward, pos, d_model] (those below ``layer`` are
    read), the clean raw heads [batch, pos, n_layers * n_heads, d_model] or None, the caches
    of each row's prefix (or None), and the clean state of each task of the batch."""

    layer: int
    residual: torch.Tensor
    writers: torch.Tensor
    raw: torch.Tensor | None
    caches: list | None
    states: list = field(default_factory=list)


@torch.no_grad()
def clean_state(model, spec: GraphSpec, tokens: torch.Tensor, prefix: int) -> CleanState:
    """The clean run of ``tokens`` [1, pos], the first ``prefix`` positions run once unhooked
    (``prefix.final_residual``), keeping what a row started at any layer reads."""
    adapter = adapter_of(model)
    device, dtype = adapter.device, adapter.dtype
    tokens = tokens.to(device)
    positions = tokens.shape[1] - prefix
    writers = WriterBuffer(spec, 1, positions, dtype, device, writer_major=True)
    shape = (1, spec.n_layers, positions, spec.d_model)
    residuals = torch.zeros(shape, dtype=dtype, device=device)  # [1, n_layers, pos, d_model]
    raw = None
    if any(adapter.post_normed_layers):
        shape = (1, positions, spec.n_layers * spec.n_heads, spec.d_model)
        raw = torch.zeros(shape, dtype=dtype, device=device)  # [1, pos, n_layers * n_heads, d_model]

    def keep_raw(layer: int, heads: torch.Tensor, shares: torch.Tensor) -> None:
        raw[:, :, layer * spec.n_heads : (layer + 1) * spec.n_heads] = heads

    def keep_residual(x, hook, layer: int):
        residuals[:, layer] = x

    hooks = writer_hooks(model, spec, writers, keep_raw if raw is not None else None)
    hooks += [
        (sites.resid_pre(layer), lambda x, hook, layer=layer: keep_residual(x, hook, layer))
        for layer in range(spec.n_layers)
    ]
    caches = None
    if prefix > 0:
        caches = adapter.prefix_caches(tokens[:, :prefix])
        mask = torch.ones_like(tokens)  # [1, pos]
        with adapter.hooked(hooks):
            adapter.continuing(tokens[:, prefix:], caches, mask)
    else:
        with adapter.hooked(hooks):
            adapter.blocks(tokens)
    return CleanState(residuals, writers.values, raw, caches)


def reader_layers(spec: GraphSpec) -> list[int]:
    """The block whose hooks patch each reader's input: its own layer's (the logits' residual is
    the last block's output).  # [n_backward]"""
    per_layer = 3 * spec.n_heads + 1  # q, k and v of every head, then the MLP
    return [min(reader // per_layer, spec.n_layers - 1) for reader in range(spec.n_backward)]


def start_layer(spec: GraphSpec, removed: torch.Tensor) -> int:
    """The lowest block where any circuit of the batch patches a reader (0 when none does):
    every block below it runs as in the clean run. removed: [batch, n_forward, n_backward(,
    pos)] bool, the edges (or units) each circuit removes."""
    active = removed.any(0).any(0)  # [n_backward(, pos)]
    if active.dim() > 1:
        active = active.any(-1)
    readers = active.nonzero()
    if not readers.numel():
        return 0
    return reader_layers(spec)[int(readers[0, 0])]


def rows_from_layer(model, states: list[CleanState], owner: torch.Tensor, layer: int) -> LayerStart:
    """A batch's start at block ``layer``: row i from ``states[owner[i]]`` (one clean state per
    task of the batch, all cut at the same prefix). owner: [batch] on the model's device."""

    def rows(parts: list[torch.Tensor]) -> torch.Tensor:  # [1, ...] each -> [batch, ...]
        if len(parts) == 1:
            return parts[0].expand(len(owner), *parts[0].shape[1:])
        return torch.cat(parts)[owner]

    raw = rows([state.raw for state in states]) if states[0].raw is not None else None
    caches = None
    if states[0].caches is not None:
        caches = adapter_of(model).cache_rows([state.caches for state in states], owner)
    return LayerStart(
        layer=layer,
        residual=rows([state.residuals[:, layer] for state in states]),
        writers=rows([state.writers for state in states]),
        raw=raw,
        caches=caches,
        states=list(states),
    )


class LastPosition:
    """The last block of a run started at a layer, run for the last position's output only.

    The metric reads the residual after the last block at the last position, so in that block
    every other position is needed only for its keys and values (what the last position's
    attention reads): the block runs twice (``ModelAdapter.from_layer``), first on the earlier
    positions until their keys and values are cached (their queries dropped at the query
    input, the block stopped at the rotated queries, before any score), then on the last
    position alone. ``part`` is the positions the block's current call runs, of the
    ``positions`` a patched row runs (all of them below the last block): the hooks patch and
    capture those only. Writers of the last block and the readers after it (its MLP, the
    logits) hold nothing at the earlier positions; nothing reads them there.
    """

    def __init__(self, spec: GraphSpec, positions: int):
        self.layer = spec.n_layers - 1
        self.positions = positions
        self.part = slice(None)
        self.earlier = False  # the first call: the earlier positions' keys and values only

    def keys(self) -> None:
        self.part, self.earlier = slice(0, self.positions - 1), True

    def last(self) -> None:
        self.part, self.earlier = slice(self.positions - 1, self.positions), False

    def hooks(self) -> list:
        """The first call's hooks: no queries at the earlier positions, a stop once their keys
        and values are cached (after every patch hook, which they must follow)."""

        def no_queries(x, hook):
            return x[:, :0] if self.earlier else x

        def stop(x, hook):
            if self.earlier:
                raise KeysDone
            return x

        rotated_query = sites.rotated_query_key(self.layer, True)[0]
        return [(sites.head_input(self.layer, "q"), no_queries), (rotated_query, stop)]
