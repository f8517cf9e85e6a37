"""Every writer's output of a run: captured into buffers, or kept in the autograd graph.

Writers' outputs are their *additive contributions to the residual stream*. For models that
normalise the attention output before adding it (Gemma's ``ln1_post``, OLMo-2's post-norm), a
head's contribution is its result passed through that norm with the norm's scale frozen at this
run's value, so the heads of a layer still sum exactly to what the layer adds. Those shares are
what scoring reads; patching also needs each head's output before the norm (``raw_sink``,
``writers_residual_and_raw_heads``) to renormalise a reader's mix of heads (``renorm``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ..core.graph import GraphSpec
from ..models.adapter import Hook, adapter_of
from . import sites
from .packed import PrefixTree, tree_hooks
from .prefix import final_residual, layer_checks

if TYPE_CHECKING:
    pass


def frozen_norm(norm, heads: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Apply ``norm`` to each head's share with the scale of the whole sum frozen.

    heads: [batch, pos, n_heads, d_model]; scale: [batch, pos, 1]. LayerNorm's centring and bias
    are linear, so they distribute over the heads too (the bias split evenly).
    """
    n_heads = heads.shape[2]
    centred = "LayerNorm" in type(norm).__name__
    if centred:
        heads = heads - heads.mean(-1, keepdim=True)
    out = heads / scale[:, :, None, :]
    weight = getattr(norm, "w", None)
    if weight is not None:
        out = out * weight
    bias = getattr(norm, "b", None)
    if bias is not None:
        out = out + bias / n_heads
    return out


def writer_hooks(
    model,
    spec: GraphSpec,
    sink: Callable[[int | slice, torch.Tensor], None],
    raw_sink: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
) -> list[Hook]:
    """Hooks that hand each writer's residual contribution to ``sink(forward_index, tensor)``.

    tensor shapes: input and MLP [batch, pos, d_model]; heads [batch, pos, n_heads, d_model].
    ``raw_sink(layer, raw, shares)``, in layers whose heads' sum is normalised before the residual
    add, also gets the heads' outputs before that norm (raw) and their frozen-scale shares, both
    [batch, pos, n_heads, d_model] (the exact patching renormalises each reader's mix of them).
    """
    adapter = adapter_of(model)
    hooks: list[Hook] = [(sites.EMBEDDING, lambda x, hook: sink(0, x))]
    for layer in range(spec.n_layers):
        heads = spec.head_forward(layer)
        norm, norm_name = adapter.attention_post_norm(layer)
        if norm is None:
            hooks.append(
                (
                    sites.head_z(layer),
                    lambda z, hook, heads=heads, layer=layer: sink(heads, adapter.head_results(layer, z)),
                )
            )
        else:
            pending: dict[str, torch.Tensor] = {}

            def keep(z, hook, pending=pending, layer=layer):
                pending["result"] = adapter.head_results(layer, z)

            def scaled(scale, hook, pending=pending, heads=heads, norm=norm, layer=layer):
                raw = pending.pop("result")
                shares = frozen_norm(norm, raw, scale)
                sink(heads, shares)
                if raw_sink is not None:
                    raw_sink(layer, raw, shares)

            hooks.append((sites.head_z(layer), keep))
            hooks.append((sites.norm_scale(layer, norm_name), scaled))
        mlp = spec.mlp_forward(layer)
        hooks.append((sites.mlp_out(layer), lambda x, hook, mlp=mlp: sink(mlp, x)))
    return hooks


class WriterBuffer:
    """Every writer's contribution of one run in one tensor.  # [batch, pos, n_forward, d_model]

    ``writer_major`` keeps them as [batch, n_forward, pos, d_model] instead, so the writers a
    reader sums over are one contiguous block per row (the patched runs contract them with a
    matrix product and no transposed copy).
    """

    def __init__(
        self,
        spec: GraphSpec,
        batch: int,
        positions: int,
        dtype,
        device,
        writer_major: bool = False,
        first: int = 0,
    ):
        """``first``: the writers before it are never written nor read (a run started at a layer
        whose patches read the clean run's below it): only writers ``first`` onwards are held
        (writer-major only)."""
        if first and not writer_major:
            raise ValueError("a buffer from a later writer on is writer-major")
        shape = (
            (batch, spec.n_forward - first, positions, spec.d_model)
            if writer_major
            else (batch, positions, spec.n_forward, spec.d_model)
        )
        self.first = first
        self.writer_major = writer_major
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.last = None  # a ``layer_start.LastPosition``: its block's calls write their positions

    def __call__(self, index, tensor: torch.Tensor) -> None:
        if not self.writer_major:
            self.values[:, :, index] = tensor.detach()
            return
        if self.first:  # the writers from ``first`` on: their places shift
            start = index.start if isinstance(index, slice) else index
            if start < self.first:
                raise ValueError(f"writer {start} arrived; this buffer holds writers {self.first} onwards")
            index = (
                slice(index.start - self.first, index.stop - self.first)
                if isinstance(index, slice)
                else index - self.first
            )
        into = self.values[:, index] if self.last is None else self.values[:, index, self.last.part]
        if tensor.dim() == 4:  # a layer's heads: [batch, pos, n_heads, d_model]
            into.copy_(tensor.detach().transpose(1, 2))
        else:
            into.copy_(tensor.detach())

    def major(self, count: int) -> torch.Tensor:
        """The first ``count`` writers' contributions, writer-major (a view; needs ``writer_major``).
        # [batch, count, pos, d_model]"""
        if not self.writer_major:
            raise ValueError(
                "patching reads the writers writer-major: make the buffer with writer_major=True"
            )
        return self.between(0, count)

    def between(self, start: int, stop: int) -> torch.Tensor:
        """Writers ``start`` to ``stop``'s contributions, writer-major (a view).
        # [batch, stop - start, pos, d_model]"""
        if start < self.first:
            raise ValueError(f"writer {start} asked for; this buffer holds writers {self.first} onwards")
        return self.values[:, start - self.first : stop - self.first]


class WriterDifferences:
    """(corrupted - current) output of every writer of one run, kept in the autograd graph (a
    learned mask's run), laid out so that a reader's masked change is one batched matrix product.

    A reader's change is sum_f w[f] (corrupted_f - current_f); with each writer's difference
    stored as a [pos * d_model] row, that is [n_readers, up] @ [up, pos * d_model] per circuit:
    one product over every position at once, differentiable in both the weights and the current
    outputs. (``WriterBuffer`` writes into one preallocated tensor in place, which autograd cannot
    differentiate through.) Writers arrive in forward order, as ``writer_hooks`` calls them;
    ``upstream(count)`` joins the first ``count`` (once per count: a layer's q, k and v readers
    share theirs). Each writer's difference is also copied once into one store as it arrives,
    and a join is a view of the store's first writers (``_Joined``): the joins used to be copies,
    every reader group's of every writer before it (on Gemma-3-270M 283 MB a pass for four
    rows of 16 positions; the readers' products kept each for the backward pass), now one
    store of 15 MB. The values and the backward node are ``cat``'s (tested to the bit).
    """

    def __init__(self, corrupted_writers: torch.Tensor, group: torch.Tensor | None = None):
        """corrupted_writers: [g, pos, n_forward, d_model], the corrupted runs of g tasks; with
        g > 1, ``group`` [batch] says each row's task (a batch of several tasks' rows)."""
        self.corrupted = corrupted_writers.transpose(1, 2)  # [g, n_forward, pos, d_model]
        self.group = group if corrupted_writers.shape[0] > 1 else None
        self.positions = int(corrupted_writers.shape[1])
        self.parts: list[torch.Tensor] = []  # [batch, k, pos * d_model] each, in forward order
        self.count = 0
        self._joined: dict[int, torch.Tensor] = {}
        # every part copied once into one store as it arrives, [batch, n_forward, pos * d_model]:
        # a join is a view of its first writers (``_Joined``), not a copy of every part before it
        self._store: torch.Tensor | None = None
        self._writes: torch.Tensor | None = None  # the store's alias the copies go through
        self.n_forward = int(corrupted_writers.shape[2])

    def __call__(self, index, tensor: torch.Tensor) -> None:
        start = index.start if isinstance(index, slice) else index
        if start != self.count:
            raise RuntimeError(f"writer {start} arrived after {self.count} writers; hooks out of order")
        part = tensor if tensor.dim() == 4 else tensor[:, :, None]  # [batch, pos, k, d_model]
        k = part.shape[2]
        corrupted = self.corrupted[:, start : start + k]  # [g, k, pos, d_model]
        if self.group is not None:  # each row its own task's corrupted run
            corrupted = corrupted[self.group]  # [batch, k, pos, d_model]
        # part: on its layer's device (a split model's may differ from the corrupted run's)
        difference = corrupted - part.transpose(1, 2).to(corrupted.device)  # [batch, k, pos, d_model]
        flat = difference.flatten(2)  # [batch, k, pos * d_model]
        self.parts.append(flat)
        if self._store is None and start == 0:
            self._store = torch.empty(
                flat.shape[0], self.n_forward, flat.shape[2], dtype=flat.dtype, device=flat.device
            )
            # ``.data``: an alias with its own version counter, so the copies leave the joins'
            # (the store's views, saved by the readers' products for the backward pass) unmarked;
            # each copy writes writers no join made before it holds
            self._writes = self._store.data
        if self._store is not None and (
            flat.dtype != self._store.dtype
            or flat.device != self._store.device
            or flat.shape[0] != self._store.shape[0]
            or flat.shape[2] != self._store.shape[2]
        ):
            self._store = self._writes = None  # an unusual run: the joins are copies (``cat``)
        if self._writes is not None:
            self._writes[:, start : start + k].copy_(flat.detach())
        self.count += k

    def upstream(self, count: int) -> torch.Tensor:
        """The first ``count`` writers' differences.  # [batch, count, pos * d_model]

        Each join extends the largest earlier one by the parts written since (one node of a few
        inputs), not every part from the first: a step on Gemma-3-270M's 37 reader groups
        sliced and joined 703 parts forward and as many backward, now about 75. The values are
        the same; a part's gradient then sums its readers' shares as a chain, a + (b + c) where
        the autograd engine summed (c + b) + a, the same additions in the same order, to the bit.
        """
        if count not in self._joined:
            base = max((n for n in self._joined if n <= count), default=0)
            joined = [self._joined[base]] if base else []
            total = 0
            for part in self.parts:
                if total >= count:
                    break
                size = part.shape[1]
                if total + size > base:  # beyond the earlier join: this part (or its start)
                    low = max(base - total, 0)
                    high = min(count - total, size)
                    joined.append(part if (low, high) == (0, size) else part[:, low:high])
                total += size
            if total < count:
                raise RuntimeError(f"{count} writers asked for, {total} written so far")
            if len(joined) == 1:
                self._joined[count] = joined[0]
            elif self._store is not None:
                self._joined[count] = _Joined.apply(self._store[:, :count], *joined)
            else:
                self._joined[count] = torch.cat(joined, dim=1)
        return self._joined[count]


class _Joined(torch.autograd.Function):
    """``torch.cat(parts, dim=1)`` read from a store that holds their values already (``view``,
    the store's first writers, laid out as ``cat`` lays them): the same values without copying
    them, and the same backward node, each input (the earlier join, then the parts written
    since) getting the slice of the output's gradient at its place, as ``cat``'s backward hands
    it, so every gradient sums the same terms in the same order."""

    @staticmethod
    def forward(ctx, view: torch.Tensor, *parts: torch.Tensor) -> torch.Tensor:
        ctx.sizes = [part.shape[1] for part in parts]
        return view

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return (None, *grad.split(ctx.sizes, dim=1))


@torch.no_grad()
def writers_and_residual(model, spec: GraphSpec, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One batched plain pass of prompts of equal length, keeping every writer's output.

    tokens: [batch, pos]. Returns (writers [batch, pos, n_forward, d_model], the final residual at
    the last position [batch, d_model], which any task's metric reads).
    """
    writers, residual, _ = writers_residual_and_raw_heads(model, spec, tokens)
    return writers, residual


@torch.no_grad()
def writers_residual_and_raw_heads(
    model, spec: GraphSpec, tokens: torch.Tensor, check=None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``writers_and_residual`` and, on a model whose layers normalise their heads' sum before the
    residual add, every head's output before that norm: raw heads [batch, pos, n_layers * n_heads,
    d_model] (layer-major), else None. The exact patching reads a corrupted run's raw heads.
    ``check``: called before each block (``layer_checks``: a run's report, raising once cancelled)."""
    adapter = adapter_of(model)
    tokens = tokens.to(adapter.device)
    buffer = WriterBuffer(spec, tokens.shape[0], tokens.shape[1], adapter.dtype, tokens.device)
    raw = None
    if any(adapter.post_normed_layers):
        shape = (tokens.shape[0], tokens.shape[1], spec.n_layers * spec.n_heads, spec.d_model)
        raw = torch.zeros(shape, dtype=adapter.dtype, device=tokens.device)

    def keep_raw(layer: int, heads: torch.Tensor, shares: torch.Tensor) -> None:
        raw[:, :, layer * spec.n_heads : (layer + 1) * spec.n_heads] = heads

    hooks = writer_hooks(model, spec, buffer, keep_raw if raw is not None else None)
    hooks += layer_checks(spec.n_layers, check)
    residual = final_residual(model, tokens, hooks)  # [batch, d_model]
    return buffer.values, residual, raw


@torch.no_grad()
def observe(
    model, spec: GraphSpec, tokens: torch.Tensor, hook_names=(), keep_writers: bool = True
) -> tuple[torch.Tensor | None, dict[str, torch.Tensor], torch.Tensor]:
    """One plain forward pass that keeps what an observational method (CircuitLasso, ACC++,
    labels) reads.

    tokens: [batch, pos]. Returns (every writer's contribution [batch, pos, n_forward, d_model],
    or None without ``keep_writers``; {hook name: the activation as that hook saw it}; the
    residual stream after the last block at every position [batch, pos, d_model]).
    """
    return observe_with_raw_heads(model, spec, tokens, hook_names, keep_writers)[:3]


@torch.no_grad()
def observe_with_raw_heads(
    model,
    spec: GraphSpec,
    tokens: torch.Tensor,
    hook_names=(),
    keep_writers: bool = True,
    raw_rows=(),
    tree: PrefixTree | None = None,
    raw_positions: list[int] | None = None,
    check=None,
) -> tuple[torch.Tensor | None, dict[str, torch.Tensor], torch.Tensor, torch.Tensor | None]:
    """``observe``, and for the batch rows ``raw_rows`` the heads before a shared post-attention
    norm as ``writers_residual_and_raw_heads`` keeps them: [len(raw_rows), pos, n_layers *
    n_heads, d_model] (only the positions ``raw_positions``, when given), or None (no rows asked,
    or a model without such a norm). With them a row's writers, raw heads and final residual are
    what an evaluator reads of a prompt's run. With ``tree`` the one row ``tokens`` is the packed
    pass of several texts (``engine.packed``; ``tree.tokens[None]``).
    """
    adapter = adapter_of(model)
    tokens = tokens.to(adapter.device)
    kept = list(range(tokens.shape[1])) if raw_positions is None else list(raw_positions)
    buffer = None
    if keep_writers:
        buffer = WriterBuffer(spec, tokens.shape[0], tokens.shape[1], adapter.dtype, adapter.device)
    captured: dict[str, torch.Tensor] = {}
    rows = list(raw_rows)
    raw = None
    if rows and keep_writers and any(adapter.post_normed_layers):
        shape = (len(rows), len(kept), spec.n_layers * spec.n_heads, spec.d_model)
        raw = torch.zeros(shape, dtype=adapter.dtype, device=tokens.device)

    def keep_raw(layer: int, heads: torch.Tensor, shares: torch.Tensor) -> None:
        chosen = heads[rows] if raw_positions is None else heads[rows][:, kept]
        raw[:, :, layer * spec.n_heads : (layer + 1) * spec.n_heads] = chosen

    def capture(x, hook):
        # on the model's device: a split model's later layers hand theirs over on another
        captured[hook.name] = x.detach().to(tokens.device)

    hooks = (
        writer_hooks(model, spec, buffer, keep_raw if raw is not None else None) if buffer is not None else []
    )
    hooks += [(name, capture) for name in hook_names]
    if tree is not None:
        hooks += tree_hooks(model, tree, tokens.device)
    hooks += layer_checks(spec.n_layers, check)  # ``check`` before each block (a run's report)
    with adapter.hooked(hooks):
        residual = adapter.blocks(tokens)  # [batch, pos, d_model]
    return (buffer.values if buffer is not None else None), captured, residual, raw
