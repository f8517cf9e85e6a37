"""Runs to the final residual, and the positions before the corruption that need running once.

Where the clean and corrupted prompts agree (every position before the first token that
differs), every writer's corrupted-minus-clean difference is 0: no patched edge changes anything
there, no edge score takes anything from there, and under causal attention nothing at a later
position reads a gradient or a patch from there. Those positions run once per distinct prompt,
without hooks or gradients, and the hooked run continues from their keys and values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

import torch

from ..models.adapter import Hook, adapter_of
from . import sites

if TYPE_CHECKING:
    from ..core.tasks import PreparedTask

# the prefix keys and values kept by ``reusing_prefixes``, keyed by the prefix's distinct rows
_KEPT: ContextVar[dict | None] = ContextVar("kept_prefixes", default=None)


@contextmanager
def reusing_prefixes() -> Iterator[None]:
    """Within it, ``final_residual`` runs each distinct set of prefix rows once and reuses its
    frozen keys and values, whatever batch asks for them next: for runs that pass the same
    prompts many times with the model's weights unchanged (mask learning's steps; a method's warm
    start, learning and measurement). A kept entry is the very tensor a fresh run of those rows
    makes (``prefix_caches`` runs each distinct row once, as the rows it is given; one entry per
    attention-input mode, which rounds them differently), so nothing a caller reads changes;
    they are dropped on leaving the outermost one (a nested one shares it)."""
    kept = _KEPT.get()
    token = _KEPT.set(kept if kept is not None else {})
    try:
        yield
    finally:
        _KEPT.reset(token)


def _prefix_caches(adapter, tokens: torch.Tensor) -> list:
    """``adapter.prefix_caches(tokens)``, its distinct rows' run reused within ``reusing_prefixes``."""
    kept = _KEPT.get()
    if kept is None:
        return adapter.prefix_caches(tokens)
    distinct, inverse = torch.unique(tokens, dim=0, return_inverse=True)  # [g, prefix], [batch]
    # the attention inputs' mode is part of the key: a gradient pass sharing one input per layer (on
    # accelerators) rounds the keys and values otherwise than a split run, so each mode keeps its own
    split = adapter.attention_inputs_split
    key = (split, tuple(distinct.shape), str(distinct.device), distinct.cpu().numpy().tobytes())  # CPU: a key
    if key not in kept:
        kept[key] = adapter.prefix_caches(distinct)
    return adapter.prefix_rows(kept[key], inverse)


def final_residual(
    model, tokens: torch.Tensor, fwd_hooks: list[Hook], prefix: int = 0, last: torch.Tensor | None = None
) -> torch.Tensor:
    """Residual stream after the last block at the last position.  # [batch, d_model]

    Stops before the unembedding: the metric needs a few logits at one position, not the whole
    vocabulary at every position (for Gemma-3 that is most of the forward pass's cost). With
    ``prefix`` > 0 the first ``prefix`` positions run once per distinct row, without hooks or
    gradients, and the hooked run continues from their keys and values: the hooks see positions
    ``prefix`` onwards only (``shared_prefix`` says when that changes nothing a caller reads).
    ``last`` [batch]: each row's own last position (prompts of several lengths padded at the end
    to one: under causal attention no position reads a later one, so the padding changes nothing
    a row's last position holds); None: the batch's last position.
    """
    adapter = adapter_of(model)
    if prefix <= 0:
        with adapter.hooked(fwd_hooks):
            residual = adapter.blocks(tokens)  # [batch, pos, d_model]
    else:
        caches = _prefix_caches(adapter, tokens[:, :prefix])
        mask = torch.ones_like(tokens, device=tokens.device)  # [batch, pos]
        with adapter.hooked(fwd_hooks):
            residual = adapter.continuing(tokens[:, prefix:], caches, mask)  # [batch, pos - prefix, d_model]
    if last is None:
        return residual[:, -1]
    rows = torch.arange(residual.shape[0], device=residual.device)
    return residual[rows, last.to(residual.device) - prefix]


def unchanged_prefix(prepared: PreparedTask) -> int:
    """How many leading positions no circuit can change: those before the first token where the
    clean and corrupted prompts differ (always leaving the last position to run)."""
    differ = (prepared.clean_tokens[0] != prepared.corrupted_tokens[0]).nonzero()  # [k, 1]
    first = int(differ[0, 0]) if differ.numel() else prepared.n_positions
    return min(first, prepared.n_positions - 1)


def shared_prefix(model, tasks: Sequence[PreparedTask]) -> int:
    """How many leading positions a batched run of ``tasks`` may run once, unhooked and without
    gradients: the shortest of their ``unchanged_prefix`` (0 for models whose positions enter
    inside attention, where a continued run would skip them). Skipping them changes no score and
    no metric, only the time.
    """
    if not tasks or adapter_of(model).positions_inside_attention:
        return 0
    return min(unchanged_prefix(task) for task in tasks)


def layer_checks(n_layers: int, check) -> list[Hook]:
    """Hooks that call ``check()`` before each block, and again as the backward pass (if any)
    reaches it, and change nothing ([] for None): a run's progress report inside one pass, which
    raises once the run is cancelled. A batched pass of every budget's circuit (or of every IG
    step) took 2-6 s on Gemma-3-270M on a busy CPU, one silent step that the app's Cancel waited
    for; cut into smaller chunks instead, the passes cost 5 to 8 times as much on a CPU (each pays
    for reading the weights)."""
    if check is None:
        return []
    return _block_hooks(n_layers, lambda layer: check(), lambda layer: check())


FORWARD_SHARE = 1 / 3  # of a gradient pass's time, its forward half: the backward costs about twice


def pass_checks(n_layers: int, report) -> list[Hook]:
    """``layer_checks`` that say how far one gradient pass has gone: ``report(done)`` before each
    block, with ``done`` the share of the pass behind it (forward, block l: FORWARD_SHARE x l /
    n_layers; as the backward pass reaches block l, the blocks from the last down to l are behind
    it too), rising from 0 towards 1; [] for None. On a CPU one chunk of the scoring may be the
    whole phase, and a report that said only where the chunk began stood at 'score 0.0%' until
    the phase ended."""
    if report is None:
        return []
    forward = FORWARD_SHARE / n_layers

    def backward(layer: int) -> None:
        report(FORWARD_SHARE + (1 - FORWARD_SHARE) * (n_layers - layer) / n_layers)

    return _block_hooks(n_layers, lambda layer: report(forward * layer), backward)


def _block_hooks(n_layers: int, before, reached) -> list[Hook]:
    """Hooks that call ``before(layer)`` as the forward pass enters each block and ``reached(layer)``
    as the backward pass (if any) reaches the block's input, and change nothing."""

    def hook_of(layer: int):
        def backward(gradient):
            reached(layer)

        def hook(value, hook):
            before(layer)
            if value.requires_grad:
                value.register_hook(backward)

        return hook

    return [(sites.resid_pre(layer), hook_of(layer)) for layer in range(n_layers)]
