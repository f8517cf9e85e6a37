"""Patching: a run of the clean prompt in which chosen edges carry their writer's corrupted output.

A reader's input becomes its clean input plus, for each removed edge, (corrupted - current)
output of the edge's source (for a removed (edge, position) unit: at that position only). ``patched_metrics`` evaluates boolean circuits in batches (the
faithfulness curves), ``masked_residual`` continuous masks differentiably (Edge Pruning), and
``node_patched_metrics`` switches whole heads or MLPs (the node-tracking yardstick).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch

from ..core.graph import QKV, GraphSpec
from ..measure.chunks import run_in_chunks
from ..models.adapter import Hook, adapter_of
from . import sites
from .capture import WriterBuffer, WriterDifferences, writer_hooks
from .layer_start import LastPosition, LayerStart, start_layer
from .live import frozen_hooks
from .memory import evaluation_bytes_per_position
from .metric import RowsMetric, metric_from_residual
from .prefix import final_residual, layer_checks, shared_prefix
from .renorm import CleanCorrections, SharedNormPatch, reader_groups

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..core.tasks import PreparedTask


def patch_hooks(
    spec: GraphSpec,
    corrupted_writers: torch.Tensor | None,
    weights: torch.Tensor,
    current,
    renorm: SharedNormPatch | None = None,
    last: LastPosition | None = None,
    clean: torch.Tensor | None = None,
) -> list[Hook]:
    """Hooks that move each reader's input towards the corrupted run, edge by edge.

    weights: [batch, n_forward, n_backward] in the model's dtype, the share of each edge that
    carries its writer's corrupted output (1: the edge is removed, 0: kept, between: a learned
    mask's relaxation). ``current`` is this run's writer-major ``WriterBuffer`` (the boolean
    evaluation), with corrupted_writers [g, pos, n_forward, d_model]: the corrupted runs of g tasks
    whose rows make up the batch in g equal runs (task 0's rows, then task 1's, ...; g = 1 for one
    task); or ``WriterDifferences`` (a learned mask's differentiable run), which holds the
    corrupted outputs already (corrupted_writers None). A reader's input becomes

        x + sum_f weights[f] (corrupted_f - current_f)

    computed with matrix products over the writers, which lie writer-major ([batch, n_forward,
    pos, d_model], or a [pos * d_model] row per writer) so each reader's sum reads one contiguous
    block per row and no transposed copy of the writers is made per reader (that copy was most of
    an evaluation's time). A layer's q, k and v readers get their patches from one product.
    Readers whose weights are all zero in every circuit of the batch get no hook (their input
    stays clean). ``renorm``: on models that normalise a layer's summed heads, the corrections that
    make each reader see the norm of its own mix of clean and corrupted heads (``renorm``).
    ``last``: the last block runs for the last position only (``layer_start.LastPosition``): its
    readers are patched at the positions of each of its calls. ``clean`` [g, k, pos, d_model]:
    the first k writers are the tasks' clean run's in every row (a run started at a layer): their
    (corrupted - clean) joins the product shared by the rows, and only the writers from k on are
    read from each row's own run (``current``'s first k are not read).
    """
    batch = weights.shape[0]
    differences = isinstance(current, WriterDifferences)
    if differences:  # a learned mask's run: the differences are the writers' rows already
        groups, positions, corrupted = 1, current.positions, None
    else:
        groups, positions = corrupted_writers.shape[0], corrupted_writers.shape[1]
        corrupted = corrupted_writers.transpose(1, 2)  # [g, n_forward, pos, d_model]
        if clean is not None:  # a fresh tensor: (corrupted - clean) below the start
            corrupted = torch.cat([corrupted[:, : clean.shape[1]] - clean, corrupted[:, clean.shape[1] :]], 1)
        else:
            corrupted = corrupted.contiguous()
    fixed = clean.shape[1] if clean is not None else 0  # the writers every row shares
    if batch % groups:
        raise ValueError(f"{batch} circuits cannot be split evenly over {groups} tasks.")
    per_group = batch // groups
    # readers with a nonzero weight in any circuit of the batch, read off in one transfer
    active = (weights != 0).any(dim=1).any(dim=0).tolist()  # [n_backward]
    # a learned mask's run reads each reader group's weights reader-major, [b, r, up]: one
    # transpose and one split by group for all (each group's slices and transpose, forward and
    # backward, were 178 operators more a learning step on Gemma-3-270M); the same strides, so
    # the same products
    by_group = _reader_major_groups(spec, weights) if differences else {}

    def moved(upstream: int, readers: slice, part: slice | None = None) -> torch.Tensor:
        """sum_f w[b, f, r] (corrupted_f - current_f) for every row b and reader r: one product
        with each row's task's corrupted run, one with the row's own current run (or one with
        the learned run's differences); ``part``: at those positions only (a boolean run).
        # [batch, n_readers, pos, d_model]"""
        if differences:  # [b, r, up] @ [b, up, pos d]: the rows hold corrupted - current
            group = by_group.get((readers.start, readers.stop))
            if group is None:
                group = weights[:, :, readers].transpose(1, 2)
            into = torch.bmm(group[:, :, :upstream], current.upstream(upstream))
            return renormed(into.view(batch, group.shape[1], positions, spec.d_model), readers)
        share = weights[:, :upstream, readers]  # [b, up, r]
        n = share.shape[2]
        grouped = (
            share.reshape(groups, per_group, upstream, n)
            .transpose(2, 3)
            .reshape(groups, per_group * n, upstream)
        )
        was = corrupted[:, :upstream]  # [g, up, pos, d_model]
        if part is not None:
            was = was[:, :, part]
        count = was.shape[2]
        into = torch.bmm(grouped, was.reshape(groups, upstream, -1))  # [g, k r, pos d]
        into = into.reshape(batch, n, -1)
        if upstream > fixed:  # the writers of each row's own run
            now = current.between(fixed, upstream)  # [b, up - fixed, pos, d_model]
            if part is not None:
                now = now[:, :, part]
            now = now.reshape(batch, upstream - fixed, -1)  # [b, up - fixed, pos d]
            into = torch.baddbmm(into, share[:, fixed:].transpose(1, 2), now, alpha=-1)
        return renormed(into.view(batch, n, count, spec.d_model), readers, part)

    def renormed(into: torch.Tensor, readers: slice, part: slice | None = None) -> torch.Tensor:
        """The linear patch plus, under a shared post-norm, each reader's renormalisation."""
        extra = renorm.correction(readers) if renorm is not None else None
        if extra is not None and part is not None:
            extra = extra[:, :, part]
        return into if extra is None else into + extra

    def head_patch(x, hook, layer: int, kind: int, cache: dict):
        """A head input [b, pos, n_heads, d]; a layer's q, k and v patches come from one product."""
        if "moved" not in cache:
            readers = slice(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop)
            # [b, pos, 3 n_heads, d]: transposed once for the q, k and v hooks (a view)
            cache["moved"] = moved(spec.upstream_of_heads(layer), readers).transpose(1, 2)
        part = cache["moved"][:, :, kind * spec.n_heads : (kind + 1) * spec.n_heads]  # [b, pos, n_heads, d]
        calls = 1
        if last is not None:  # the last block's calls patch their positions
            part = part[:, last.part]
            calls = 2 if layer == last.layer else 1
        cache["used"] = cache.get("used", 0) + 1
        if cache["used"] == len(QKV) * calls:
            del cache["moved"]
            cache["used"] = 0
        return x + part.to(x.device)  # a split model: the layer may sit elsewhere

    def single_patch(x, hook, upstream: int, reader: int):
        """An MLP input or the logits' residual: [b, pos, d]."""
        part = last.part if last is not None and last.part != slice(None) else None
        return x + moved(upstream, slice(reader, reader + 1), part)[:, 0].to(x.device)

    hooks: list[Hook] = []
    for layer in range(spec.n_layers):
        heads = range(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop)
        if any(active[reader] for reader in heads):
            cache: dict = {}
            for kind, qkv in enumerate(QKV):
                hooks.append(
                    (
                        sites.head_input(layer, qkv),
                        lambda x, hook, layer=layer, kind=kind, cache=cache: head_patch(
                            x, hook, layer, kind, cache
                        ),
                    )
                )
        mlp = spec.mlp_backward(layer)
        if active[mlp]:  # otherwise every circuit keeps all of this reader's edges: its input stays clean
            upstream = spec.upstream_of_mlp(layer)
            hooks.append(
                (
                    sites.mlp_in(layer),
                    lambda x, hook, up=upstream, r=mlp: single_patch(x, hook, up, r),
                )
            )
    if active[spec.logits_backward]:
        hooks.append(
            (
                sites.resid_post(spec.n_layers - 1),
                lambda x, hook: single_patch(x, hook, spec.n_forward, spec.logits_backward),
            )
        )
    return hooks


def _reader_major_groups(spec: GraphSpec, weights: torch.Tensor) -> dict[tuple[int, int], torch.Tensor]:
    """Each reader group's weights reader-major: {(start, stop): [b, r, n_forward]}, views of one
    transpose of ``weights`` [b, n_forward, n_backward] split by ``renorm.reader_groups``."""
    groups = reader_groups(spec)
    sizes = [group.stop - group.start for group in groups]
    if (
        groups[0].start != 0
        or sum(sizes) != weights.shape[2]
        or any(a.stop != b.start for a, b in zip(groups, groups[1:]))
    ):
        return {}  # not a tiling of the readers: each group slices its own
    pieces = weights.transpose(1, 2).split(sizes, dim=1)
    return {(group.start, group.stop): piece for group, piece in zip(groups, pieces)}


def position_patch_hooks(
    spec: GraphSpec,
    corrupted_writers: torch.Tensor,
    weights: torch.Tensor,
    current: WriterBuffer,
    renorm: SharedNormPatch | None = None,
) -> list[Hook]:
    """Hooks that patch (edge, position) units: each removed unit's (corrupted - current) share
    is added to its reader's input at its own position only,

        x[p] + sum_f weights[f, r, p] (corrupted_f[p] - current_f[p]),

    one contraction over the writers per hooked reader group, every position at once.
    corrupted_writers: [g, pos, n_forward, d_model] (the batch is g equal runs of rows, as in
    ``patch_hooks``); weights: [batch, n_forward, n_backward, pos] in the model's dtype;
    ``current``: this run's writer-major buffer. Readers with no removed unit get no hook.
    """
    batch, groups = weights.shape[0], corrupted_writers.shape[0]
    if batch % groups:
        raise ValueError(f"{batch} circuits cannot be split evenly over {groups} tasks.")
    corrupted = corrupted_writers.transpose(1, 2)  # [g, n_forward, pos, d_model]
    rows = torch.arange(batch, device=weights.device) // (batch // groups)  # each row's task
    active = (weights != 0).any(dim=-1).any(dim=1).any(dim=0).tolist()  # [n_backward]

    def moved(upstream: int, readers: slice) -> torch.Tensor:
        """sum_f w[b, f, r, p] (corrupted_f[p] - current_f[p])  # [batch, pos, n_readers, d_model]"""
        share = weights[:, :upstream, readers]  # [b, up, r, pos]
        difference = corrupted[rows, :upstream] - current.major(upstream)  # [b, up, pos, d_model]
        into = torch.einsum("burp,bupd->bprd", share, difference)
        extra = renorm.correction(readers) if renorm is not None else None
        return into if extra is None else into + extra

    def head_patch(x, hook, layer: int, kind: int, cache: dict):
        """A head input [b, pos, n_heads, d_model]; a layer's q, k and v patches come from one
        contraction (they read the same writers), made at the first and dropped after the last."""
        if "moved" not in cache:
            readers = slice(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop)
            cache["moved"] = moved(spec.upstream_of_heads(layer), readers)  # [b, pos, 3 n_heads, d]
        part = cache["moved"][:, :, kind * spec.n_heads : (kind + 1) * spec.n_heads]
        cache["used"] = cache.get("used", 0) + 1
        if cache["used"] == len(QKV):
            cache.clear()
        return x + part.to(x.device)

    hooks: list[Hook] = []
    for layer in range(spec.n_layers):
        heads = range(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop)
        if any(active[r] for r in heads):
            cache: dict = {}
            for kind, qkv in enumerate(QKV):
                patch = functools.partial(head_patch, layer=layer, kind=kind, cache=cache)
                hooks.append((sites.head_input(layer, qkv), patch))
        mlp = spec.mlp_backward(layer)
        if active[mlp]:
            patch = functools.partial(
                _single_patch, moved=moved, upstream=spec.upstream_of_mlp(layer), reader=mlp
            )
            hooks.append((sites.mlp_in(layer), patch))
    if active[spec.logits_backward]:
        patch = functools.partial(
            _single_patch, moved=moved, upstream=spec.n_forward, reader=spec.logits_backward
        )
        hooks.append((sites.resid_post(spec.n_layers - 1), patch))
    return hooks


def _single_patch(x, hook, moved, upstream: int, reader: int):
    """An MLP input or the logits' residual [b, pos, d_model] with its removed units' share added."""
    return x + moved(upstream, slice(reader, reader + 1))[:, :, 0].to(x.device)


@torch.no_grad()
def patched_metrics(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    corrupted_writers: torch.Tensor,
    removed: torch.Tensor,
    tokens: torch.Tensor | None = None,
    metric: RowsMetric | None = None,
    prefix: int = 0,
    corrupted_raw: torch.Tensor | None = None,
    start: LayerStart | None = None,
    last: torch.Tensor | None = None,
    check=None,
) -> torch.Tensor:
    """Metric of the clean run with the edges in ``removed`` carrying corrupted activations.

    corrupted_writers: [1, pos, n_forward, d_model]; removed: [batch, n_forward, n_backward] bool,
    one circuit's complement per batch element. A reader's input becomes its current input plus,
    for each removed edge, (corrupted - current) output of the edge's source. Returns [batch].
    A batch of several tasks (a dataset's prompts, all of one length) gives g tasks' corrupted
    writers [g, pos, n_forward, d_model], the batch being g equal runs of rows (task 0's, then
    task 1's, ...), each row's clean ``tokens`` [batch, pos] and ``metric`` (``task_metric``).
    ``prefix``: leading positions that run once, unpatched (``shared_prefix`` of the tasks).
    ``removed`` [batch, n_forward, n_backward, pos] patches (edge, position) units instead, each
    at its own position (``position_patch_hooks``). ``corrupted_raw`` [g, pos, n_layers * n_heads,
    d_model]: the tasks' corrupted heads before a shared post-attention norm
    (``capture.writers_residual_and_raw_heads``); a model with such a norm needs them, and each
    reader then sees the norm of its own mix of clean and corrupted heads (``renorm``).
    ``start``: the rows start at block ``start.layer`` from the clean run (``layer_start``); no
    circuit may remove an edge into a reader below that block (ValueError). ``last`` [batch]:
    each row's own last position, for prompts padded at the end (``final_residual``; whole passes).
    ``check``: called before each block (``layer_checks``): a run's progress report, raising when
    the run is cancelled, inside a batched pass that takes seconds on a CPU.
    """
    if start is not None and last is not None:
        raise ValueError("Rows padded to one length run whole passes; they cannot start at a layer.")
    batch = removed.shape[0]
    adapter = adapter_of(model)
    device = adapter.device
    if tokens is None:
        tokens = prepared.clean_tokens.to(device).expand(batch, -1)
    tokens = tokens.to(device)
    dtype = adapter.dtype
    positions = tokens.shape[1] - prefix
    below = None  # [g, k, pos, d_model]: the clean writers below the start, the same in every row
    if start is not None and start.states and removed.dim() == 3:
        k = spec.head_forward(start.layer).start
        parts = [state.writers[:, :k] for state in start.states]
        below = parts[0] if len(parts) == 1 else torch.cat(parts)
    first = below.shape[1] if below is not None else 0  # the rows' own writers: from the start on
    current = WriterBuffer(spec, batch, positions, dtype, device, True, first)  # [b, fwd - first, pos, d]
    corrupted_writers = corrupted_writers[:, prefix:].to(device=device, dtype=dtype)
    if removed.dim() == 4:  # (edge, position) units; the prefix's positions run unpatched
        weights = removed[..., prefix:].to(device=device, dtype=dtype)
    else:
        weights = removed.to(device=device, dtype=dtype)
    clean = None
    if start is not None and start.states and start.raw is not None and removed.dim() == 3:
        states = start.states
        clean = CleanCorrections(
            start.layer,
            [state.raw for state in states],
            [state.writers for state in states],
            [state.corrections for state in states],
        )
    renorm = _shared_norm_patch(model, spec, weights, corrupted_raw, corrupted_writers, prefix, True, clean)
    if start is not None:
        _fill_below(spec, removed, start, current, renorm, copy=below is None)
    one = None  # the last block for the last position only: what the metric reads (not ``last``)
    if start is not None and removed.dim() == 3 and positions > 1 and adapter.runs_last_position_alone:
        one = LastPosition(spec, positions)
        current.last = one
        if renorm is not None:
            renorm.last = one
    hooks = writer_hooks(model, spec, current, renorm)
    if removed.dim() == 4:
        hooks += position_patch_hooks(spec, corrupted_writers, weights, current, renorm)
    else:
        hooks += patch_hooks(spec, corrupted_writers, weights, current, renorm, one, below)
    if one is not None:
        hooks += one.hooks()  # after the patch hooks: the earlier queries are dropped once patched
    hooks += layer_checks(spec.n_layers, check)
    if start is not None:
        with adapter.hooked(hooks):
            residual = adapter.from_layer(start.residual, start.layer, start.caches, one)[
                :, -1
            ]  # [batch, d_model]
    else:
        residual = final_residual(model, tokens, hooks, prefix, last)
    return metric(residual) if metric is not None else metric_from_residual(model, prepared, residual)


def _fill_below(
    spec: GraphSpec, removed, start: LayerStart, current: WriterBuffer, renorm, copy: bool = True
) -> None:
    """A run starting at block ``start.layer``: the writers below it hold the clean run's outputs
    (no row patches a reader below it, so they are what the whole pass would compute; copied into
    ``current`` unless the patches read them from the clean run, ``patch_hooks``'s ``clean``), and
    each post-normed layer below it gets its corrections from the clean heads."""
    if start_layer(spec, removed) < start.layer:
        raise ValueError(f"These circuits patch a reader below layer {start.layer}: they cannot start there.")
    below = spec.head_forward(start.layer).start  # the writers of the blocks below the start
    if copy:
        current.values[:, :below] = start.writers[:, :below]
    if renorm is None:
        return
    for layer in range(start.layer):
        heads = spec.head_forward(layer)
        raw = start.raw[:, :, layer * spec.n_heads : (layer + 1) * spec.n_heads]  # [b, pos, H, d]
        renorm(layer, raw, start.writers[:, heads].transpose(1, 2))  # shares [b, pos, H, d]


def masked_residual(
    model,
    spec: GraphSpec,
    prepared: PreparedTask | Sequence[PreparedTask],
    corrupted_writers: torch.Tensor,
    keep: torch.Tensor,
    corrupted_raw: torch.Tensor | None = None,
    prefix: int | None = None,
    check=None,
    frozen: tuple[list[int], list[int]] | None = None,
) -> torch.Tensor:
    """Final residual of the clean run under continuous circuits, differentiable in ``keep``.

    keep: [batch, n_forward, n_backward], each edge's kept share in [0, 1] (off-graph entries are
    ignored): the relaxation of ``patched_metrics``, which it equals at 0/1 masks (within float
    rounding: it contracts all positions at once, ``patch_hooks``). Every writer's output stays
    in the autograd graph (``WriterDifferences``), so the gradient includes what a mask changes
    downstream. The positions no mask can change (``unchanged_prefix``) run once, without
    gradients, and the batch continues from their keys and values: a corruption late in a long
    prompt makes each step that much cheaper. Returns [batch, d_model] (``metric_from_residual``
    reads the metric). ``corrupted_raw``: the corrupted heads before a shared post-attention norm,
    as ``patched_metrics`` takes them; each (reader, layer) whose weights mix that layer's heads
    is renormalised on its own, in the autograd graph.

    Several tasks (``batch_compatible``) run in one pass: ``prepared`` their list, corrupted_writers
    (and corrupted_raw) [g, pos, ...] their corrupted runs, and the batch g equal runs of rows
    (task 0's circuits, then task 1's, ...), each row patched towards its own task's corrupted run;
    ``task_metric`` with the same rows reads each row's metric. Tasks of several prompt lengths
    run padded at the end to the longest (their corrupted runs ``padded_to`` it): each row's
    residual is read at its own last position, which under causal attention no padded position
    reaches (the same metric and gradient, to float rounding). ``prefix``: the tasks'
    ``shared_prefix``, when the caller knows it already (it reads the tokens back from the device).
    ``check``: called before each block, forward and backward (``layer_checks``). ``frozen``: (MLP
    layers, attention layers) whose outputs leave the autograd graph (``live.dead_layers`` of hard
    circuits: the same values, and a backward pass that skips what has no gradient there).
    """
    batch = keep.shape[0]
    adapter = adapter_of(model)
    device, dtype = adapter.device, adapter.dtype
    tasks = list(prepared) if isinstance(prepared, (list, tuple)) else [prepared]
    lengths = [t.n_positions for t in tasks]
    if corrupted_writers.shape[1] != max(lengths):
        raise ValueError(
            f"the corrupted runs hold {corrupted_writers.shape[1]} positions, not {max(lengths)}"
        )
    prefix = shared_prefix(model, tasks) if prefix is None else prefix
    edge_mask = spec.tensors(device).edge_mask
    weights = (1 - keep.to(device=device, dtype=dtype)) * edge_mask  # [batch, n_forward, n_backward]
    # [g, pos - prefix, n_forward, d_model]: the positions that run
    corrupted = corrupted_writers[:, prefix:].to(device=device, dtype=dtype)
    per_task = batch // len(tasks)
    group = torch.arange(batch, device=device) // per_task  # each row's task
    current = WriterDifferences(corrupted, group)
    renorm = _shared_norm_patch(model, spec, weights, corrupted_raw, corrupted, prefix, False)
    hooks = frozen_hooks(*frozen) if frozen is not None else []  # before the writers' hooks read them
    hooks += writer_hooks(model, spec, current, renorm)
    hooks += patch_hooks(spec, None, weights, current, renorm)
    hooks += layer_checks(spec.n_layers, check)
    # [batch, pos]: each task's clean tokens for its rows
    tokens = (
        torch.cat([padded_to(t.clean_tokens.to(device), max(lengths)).expand(per_task, -1) for t in tasks])
        if len(tasks) > 1
        else (tasks[0].clean_tokens.to(device).expand(batch, -1))
    )
    last = None
    if len(set(lengths)) > 1:  # each row's own last position  # [batch]
        last = torch.tensor(lengths, device=device).repeat_interleave(per_task) - 1
    with torch.enable_grad():
        return final_residual(model, tokens, hooks, prefix, last)


def padded_to(tensor: torch.Tensor, length: int) -> torch.Tensor:
    """``tensor`` [rows, pos, ...] padded at the end to ``length`` positions with copies of its
    last position (a prompt in a batch of longer ones: no row reads its padding, which is only
    kept finite and like the model's own values)."""
    missing = length - tensor.shape[1]
    if missing <= 0:
        return tensor
    return torch.cat([tensor, tensor[:, -1:].expand(tensor.shape[0], missing, *tensor.shape[2:])], dim=1)


def _shared_norm_patch(
    model, spec, weights, corrupted_raw, corrupted_writers, prefix: int, grouped: bool, clean=None
) -> SharedNormPatch | None:
    """The renormalisation of shared post-attention norms for this batch, or None (a model
    without such a norm). corrupted_writers: already cut to the positions that run. ``clean``:
    a run started at a layer, whose layers below take their corrections from the clean states
    (``renorm.CleanCorrections``)."""
    adapter = adapter_of(model)
    if not any(adapter.post_normed_layers):
        return None
    if corrupted_raw is None:
        raise ValueError(
            "This model normalises each layer's summed heads: patching it exactly needs the "
            "corrupted run's heads before that norm (corrupted_raw)."
        )
    groups = corrupted_writers.shape[0]
    batch = weights.shape[0]
    group = torch.arange(batch, device=weights.device) // (batch // groups)  # each row's task
    raw = corrupted_raw[:, prefix:].to(device=adapter.device, dtype=adapter.dtype)
    return SharedNormPatch(model, spec, weights, raw, corrupted_writers, group, grouped, clean)


@torch.no_grad()
def node_patched_metrics(model, spec: GraphSpec, prepared: PreparedTask, nodes) -> torch.Tensor:
    """Metric of the clean run with one head or MLP switched to its corrupted-run output, per node.

    The model computes everything else itself: a head is replaced at its z (before the output
    projection and any post-attention norm, which then renormalises the layer's sum as it would),
    an MLP at its output. This is the effect of patching that node alone, measured without the
    graph's edge decomposition. nodes: writer indices (heads and MLPs); one batch element each,
    chunked to the device's memory. Returns [len(nodes)] on the model's device.
    """
    nodes = [int(node) for node in nodes]
    places = [sites.writer_site(spec, node) for node in nodes]
    adapter = adapter_of(model)
    device = adapter.device
    corrupted: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        corrupted[hook.name] = x.detach()

    names = sorted({name for name, _ in places})
    with adapter.hooked([(name, keep) for name in names]):
        adapter.blocks(prepared.corrupted_tokens.to(device))
    results: list[torch.Tensor] = []

    def compute(rows: slice) -> torch.Tensor:
        chosen = places[rows]
        tokens = prepared.clean_tokens.to(device).expand(len(chosen), -1)

        def replace(x, hook):
            x = x.clone()
            for row, (name, head) in enumerate(chosen):
                if name != hook.name:
                    continue
                if head is None:
                    x[row] = corrupted[name][0]  # [pos, d_model]
                else:
                    x[row, :, head] = corrupted[name][0, :, head]  # [pos, d_head]
            return x

        hooks = [(name, replace) for name in sorted({name for name, _ in chosen})]
        return metric_from_residual(model, prepared, final_residual(model, tokens, hooks))

    run_in_chunks(
        model,
        "evaluate",
        len(nodes),
        prepared.n_positions,
        evaluation_bytes_per_position(spec, adapter.element_size),
        compute,
        lambda rows, values: results.append(values),
    )
    if not results:
        return torch.zeros(0, device=device)
    return torch.cat(results)
