"""Exact patching where a norm sits between several writers and the residual stream.

Gemma (and OLMo-2) normalise the *sum* of a layer's heads before adding it to the residual
stream: the layer adds ``norm(sum_h raw_h)``. The graph gives each head a share of that,
``raw_h`` through the norm at the run's own scale (``capture.frozen_norm``), so the shares add up
to what the layer adds. A reader v that keeps some of the layer's heads and loses others sees,
in the model's own computation, ``norm(sum_h mix_h)`` with ``mix_h`` the head's current raw
output where the edge h -> v is kept and its corrupted raw output where it is removed (weights
in between for a relaxed mask: ``raw_h + w_h (raw'_h - raw_h)``). Summing frozen-scale shares
instead, ``sum_h share_h + w_h (share'_h - share_h)``, mixes two runs' scales: a linearisation,
exact only when v keeps all of the layer's heads or none of them.

``SharedNormPatch`` adds to each reader's patch the difference between the two for every
(reader, layer) pair whose weights on the layer's heads are neither all 0 nor all 1 (the others
are exact already), so the reader sees exactly ``norm`` of its own mix. Boolean circuits are
grouped by identical masks: one norm per distinct (circuit, layer, mask of the layer's heads)
(per position too for position circuits), however many readers share it. A relaxed mask's pairs
are computed one by one (their weights differ), in the autograd graph. Models without such a
norm get no ``SharedNormPatch`` and run as before.
"""

from __future__ import annotations

import warnings

import torch

from ..core.graph import GraphSpec
from ..models.adapter import adapter_of, apply_norm
from .head_masks import _mask_codes, _unique_keys, _weighted


class CleanCorrections:
    """What a run started at block ``below`` (``layer_start``) knows of the layers below it:
    every row's heads there are its task's clean ones, so a correction depends only on the task
    and the mask of the layer's heads, and each is computed once per clean state (``stores``,
    one dict per task of the batch, kept on its ``CleanState`` across runs).

    raws: per task [1, pos, n_layers * n_heads, d_model], the clean heads before the norm;
    writers: per task [1, n_forward, pos, d_model], the clean writers (writer-major)."""

    def __init__(self, below: int, raws: list, writers: list, stores: list[dict]):
        self.below, self.raws, self.writers, self.stores = below, raws, writers, stores

    def heads(self, task: int, layer: int, spec: GraphSpec) -> tuple[torch.Tensor, torch.Tensor]:
        """Task ``task``'s clean raw heads and shares of ``layer``, [1, pos, H, d_model] each."""
        raw = self.raws[task][:, :, layer * spec.n_heads : (layer + 1) * spec.n_heads]
        forward = spec.head_forward(layer)
        return raw, self.writers[task][:, forward.start : forward.stop].transpose(1, 2)

    def row(self, patch: SharedNormPatch, task: int, layer: int, code: int) -> torch.Tensor:
        """The correction of mask ``code`` of ``layer``'s heads in task ``task``, made once.
        # [pos * d_model]"""
        store = self.stores[task]
        if (layer, code) not in store:
            store[(layer, code)] = patch.fixed_row(task, layer, code)
        return store[(layer, code)]


class SharedNormPatch:
    """Per-reader corrections for post-normed layers, filled as the run reaches each layer.

    weights: [batch, n_forward, n_backward] (or [..., pos] for position units), the share of each
    edge carrying its writer's corrupted output, the same tensor the linear patch uses.
    corrupted_raw: [g, pos, n_layers * n_heads, d_model], the g tasks' corrupted raw heads;
    corrupted_writers: [g, pos, n_forward, d_model], their frozen-scale shares as the linear patch
    reads them (the batch is g equal runs of rows, as in ``patching.patch_hooks``).
    ``group``: each batch row's task [batch]. ``grouped``: merge pairs with identical 0/1 masks
    (boolean circuits); otherwise each pair is its own entry, differentiable in the weights.

    An entry is one (row, layer, mask) (and position, for position units); its correction is a
    row of the layer's table. Boolean edge circuits lay each row's masks out side by side
    ([batch, K, H], K the most entries any row has), so one batched product per layer makes
    every mix, and the entries (not the padding) are taken from it; the others gather theirs. A reader's correction sums its pairs' table rows with
    one sparse product per (reader group, layer).
    """

    def __init__(
        self,
        model,
        spec: GraphSpec,
        weights: torch.Tensor,
        corrupted_raw: torch.Tensor,
        corrupted_writers: torch.Tensor,
        group: torch.Tensor,
        grouped: bool,
        clean: CleanCorrections | None = None,
    ):
        adapter = adapter_of(model)
        self.spec = spec
        self.weights = weights
        self.positions = weights.dim() == 4
        self.padded = grouped and not self.positions  # entries side by side per row
        self.corrupted_raw = corrupted_raw
        self.corrupted_writers = corrupted_writers
        self.group = group
        self.grouped = grouped
        self.norms = {
            layer: adapter.attention_post_norm(layer)[0]
            for layer, normed in enumerate(adapter.post_normed_layers)
            if normed
        }
        # layer -> (entries' rows, positions or None, masks [T, H] (a relaxed run's, in the autograd
        # graph; a boolean run's 0/1) or [batch, K, H] or None, pairs or places or None)
        self.entries: dict[int, tuple] = {}
        # layer -> (pairs [P, 2 or 3]: row, reader(, position); each pair's table row [P]), CPU
        self.pairs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.tables: dict[int, torch.Tensor] = {}  # layer -> corrections [table rows, width]
        self._sums: dict[tuple[int, int], torch.Tensor | None] = {}  # readers -> sparse sum
        self._by_reader: tuple | None = None  # every pair sorted by reader (``_summing``)
        # the reader groups the patch hooks ask for (a layer's q, k and v heads; an MLP; the
        # logits): a relaxed mask's pairs are ordered by group, so each layer's table splits
        # into one block per group and every block feeds one group's correction only
        self.groups = reader_groups(spec)
        self._group_index = {(g.start, g.stop): i for i, g in enumerate(self.groups)}
        self.group_sizes: dict[int, list[int]] = {}  # layer -> its pairs per group (relaxed)
        self.blocks: dict[int, tuple[torch.Tensor, ...]] = {}  # layer -> its table per group
        self._local: torch.Tensor | None = None  # table row -> its row in its group's blocks
        self._row_groups: torch.Tensor | None = None  # table row -> its reader group (a relaxed plan)
        self.clean = clean
        self.fixed: set[int] = set()  # layers below a run's start: tables known before the run
        # a ``layer_start.LastPosition``: its block's corrections are made at its positions only
        # (the others are left unwritten; only the readers' columns at those positions are read)
        self.last = None
        self._plan()
        # every layer's table rows one after another: the boolean run fills one tensor in place
        self.offsets: dict[int, int] = {}
        total = 0
        for layer in self.pairs:
            self.offsets[layer] = total
            total += self._table_rows(layer)
        self._table = None
        if not weights.requires_grad and total:
            positions = corrupted_raw.shape[1]
            width = spec.d_model * (1 if self.positions else positions)
            # every row is written (a layer's whole block) before any reader reads it
            self._table = torch.empty(total, width, dtype=corrupted_raw.dtype, device=corrupted_raw.device)
            for layer in self.fixed:
                self._place(layer, self.tables[layer])

    # ----- before the run: which (row, layer, reader) pairs mix, and their distinct masks --------
    def _plan(self) -> None:
        if not self.grouped and not self.positions:
            self._plan_relaxed()
            return
        spec, n_heads = self.spec, self.spec.n_heads
        batch = self.weights.shape[0]
        with torch.no_grad():
            values = self.weights.detach()
            for layer in self.norms:
                heads = spec.head_forward(layer)
                share = values[:, heads.start : heads.stop]  # [b, H, bwd(, pos)]
                mixed = (share != 0).any(1) & ~(share == 1).all(1)  # [b, bwd(, pos)]
                index = mixed.nonzero()  # [P, 2 or 3]: row, reader(, position)
                if not index.shape[0]:
                    continue
                if self.positions:
                    masks = share[index[:, 0], :, index[:, 1], index[:, 2]]  # [P, H]
                else:
                    masks = share[index[:, 0], :, index[:, 1]]  # [P, H]
                if not self.grouped:
                    # grouped by reader group, in order within each (a stable sort)
                    group = self._reader_group_of(index[:, 1].cpu())  # on the CPU, as the plan
                    order = torch.argsort(group, stable=True)
                    index = index[order.to(index.device)]
                    self.group_sizes[layer] = torch.bincount(group, minlength=len(self.groups)).tolist()
                    row = torch.arange(index.shape[0], device=index.device)
                    place = index[:, 2] if self.positions else None
                    self.entries[layer] = (index[:, 0], place, None, index)
                    self.pairs[layer] = (index.cpu(), row.cpu())  # read once per batch
                    continue
                if self.clean is not None and layer < self.clean.below and not self.positions:
                    self._plan_fixed(layer, index, masks)
                    continue
                unique, inverse = _unique_keys(index, masks.round().long(), self.positions)
                bits = unique[:, -n_heads:].to(values.dtype)  # [T, H]
                if self.positions:
                    self.entries[layer] = (unique[:, 0], unique[:, 1], bits, None)
                    self.pairs[layer] = (index.cpu(), inverse.cpu())
                    continue
                rows = unique[:, 0]
                counts = torch.bincount(rows, minlength=batch)  # entries per row
                first = torch.cumsum(counts, 0) - counts  # each row's first entry
                slot = torch.arange(rows.shape[0], device=rows.device) - first[rows]  # within its row
                width = int(counts.max())
                padded = torch.zeros(batch, width, n_heads, dtype=values.dtype, device=values.device)
                padded[rows, slot] = bits
                # the table keeps the T entries only: the padding (most of [batch, K] here, as
                # rows differ in their number of masks) is never normalised nor stored
                used = rows * width + slot  # [T]: each entry's place in [batch, K]
                self.entries[layer] = (rows, None, padded, used)
                self.pairs[layer] = (index.cpu(), inverse.cpu())

    def _plan_relaxed(self) -> None:
        """A relaxed mask's plan (``_plan``'s ungrouped edge pairs, the same to the element): every
        post-normed layer's mixed pairs from one comparison and one transfer to the CPU, sorted
        there by (layer, reader group), stably, so each group keeps its (row, reader) order. A
        layer at a time, each layer's nonzero and its three copies to the CPU were a sync each on
        an accelerator (72 a learning step on Gemma-3-270M)."""
        spec, n_heads, layers = self.spec, self.spec.n_heads, list(self.norms)
        if not layers:
            return
        batch, n_backward = self.weights.shape[0], self.weights.shape[2]
        device = self.weights.device
        forward = [
            f
            for layer in layers
            for f in range(spec.head_forward(layer).start, spec.head_forward(layer).stop)
        ]
        pick = torch.tensor(forward, device=device)  # every post-normed layer's heads
        # in the autograd graph: every pair's weights on its layer's heads are gathered from it
        share = self.weights.index_select(1, pick).view(batch, len(layers), n_heads, n_backward)
        with torch.no_grad():
            mixed = ((share != 0).any(2) & ~(share == 1).all(2)).cpu()  # [b, L, bwd]: the one transfer
        index = mixed.nonzero()  # [P, 3]: row, layer's place, reader; (row, reader) order per layer
        n_groups = len(self.groups)
        key = index[:, 1] * n_groups + self._reader_group_of(index[:, 2])
        order = torch.argsort(key, stable=True)
        key, index = key[order], index[order]  # [P], [P, 3] (row, layer's place, reader)
        pairs = index[:, [0, 2]]  # [P, 2] (row, reader)
        sizes = torch.bincount(key, minlength=len(layers) * n_groups).view(len(layers), n_groups)
        per_layer, sizes = sizes.sum(1).tolist(), sizes.tolist()
        on_device = index.to(device)  # one copy for every layer
        # every pair's weights [P, H] and row [P], gathered once and split by layer (a layer at a
        # time, forward and backward, took 167 operators more a learning step on Gemma-3-270M)
        masks = share[on_device[:, 0], on_device[:, 1], :, on_device[:, 2]].split(per_layer)
        rows = on_device[:, 0].split(per_layer)
        numbers = torch.arange(max(per_layer), device="cpu")  # each pair's table row, planned on the CPU
        start = 0
        for place, layer in enumerate(layers):
            count = per_layer[place]
            if not count:
                continue
            self.group_sizes[layer] = sizes[place]
            self.entries[layer] = (rows[place], None, masks[place], None)
            self.pairs[layer] = (pairs[start : start + count], numbers[:count])
            start += count
        self._row_groups = key % n_groups  # each table row's reader group, the rows in table order

    def _plan_fixed(self, layer: int, index: torch.Tensor, masks: torch.Tensor) -> None:
        """A layer below the run's start: its heads are the clean run's in every row, so an
        entry's correction depends only on its task and its mask of the layer's heads. One table
        row per distinct (task, mask), from the clean state's store (made there once)."""
        tasks = self.group[index[:, 0]]  # [P]
        unique, inverse = torch.unique(tasks * 2**self.spec.n_heads + _mask_codes(masks), return_inverse=True)
        codes = unique.tolist()
        places = [divmod(code, 2**self.spec.n_heads) for code in codes]  # (task, mask code)
        self.tables[layer] = torch.stack(
            [self.clean.row(self, task, layer, code) for task, code in places]
        )  # [T, pos * d_model]
        self.entries[layer] = (None, None, None, None)
        self.pairs[layer] = (index.cpu(), inverse.cpu())
        self.fixed.add(layer)

    def fixed_row(self, task: int, layer: int, code: int) -> torch.Tensor:
        """The correction of one mask (``code``, head 0 the highest bit) of ``layer``'s heads in
        task ``task``'s clean run, as ``__call__`` computes an entry of a boolean run whose
        heads are the clean ones.  # [pos * d_model]"""
        n_heads = self.spec.n_heads
        bits = [(code >> (n_heads - 1 - head)) & 1 for head in range(n_heads)]
        raw, shares = self.clean.heads(task, layer, self.spec)  # [1, pos, H, d_model] each
        masks = torch.tensor(bits, dtype=raw.dtype, device=raw.device).view(1, 1, n_heads)  # [1, 1, H]
        heads = slice(layer * n_heads, (layer + 1) * n_heads)
        forward = self.spec.head_forward(layer)
        was_raw = self.corrupted_raw[task : task + 1, :, heads]  # [1, pos, H, d]
        was_share = self.corrupted_writers[task : task + 1, :, forward.start : forward.stop]
        _, positions, _, d_model = raw.shape
        moves = torch.cat([was_raw - raw, was_share - shares], dim=-1)  # [1, pos, H, 2d]
        moves = moves.transpose(1, 2).reshape(1, n_heads, positions * 2 * d_model)
        moved = torch.bmm(masks, moves).view(1, 1, positions, 2 * d_model)
        mix = raw.sum(2)[:, None] + moved[..., :d_model]
        linear = shares.sum(2)[:, None] + moved[..., d_model:]
        return (apply_norm(self.norms[layer], mix) - linear).reshape(-1)

    def _masks(self, layer: int) -> torch.Tensor:
        """Each entry's weights on the layer's heads [entries, H] (in the autograd graph for a
        relaxed mask), or [batch, K, H] laid out per row."""
        rows, place, masks, index = self.entries[layer]
        if masks is not None:
            return masks
        heads = self.spec.head_forward(layer)
        share = self.weights[:, heads.start : heads.stop]  # [b, H, bwd(, pos)]
        if self.positions:
            return share[index[:, 0], :, index[:, 1], index[:, 2]]
        return share[index[:, 0], :, index[:, 1]]

    # ----- during the run: a layer's corrections, as soon as its heads are known ----------------
    def __call__(self, layer: int, raw: torch.Tensor, shares: torch.Tensor) -> None:
        """The corrections of every entry of ``layer``: norm(mix of raw heads) minus the linear
        patch's mix of shares. raw, shares: this run's [batch, pos, H, d_model]."""
        if layer not in self.entries or layer in self.fixed:
            return
        rows, place, _, _ = self.entries[layer]
        # from the layer's device to the corrupted run's (a split model's layers sit on several)
        raw, shares = raw.to(self.corrupted_raw.device), shares.to(self.corrupted_raw.device)
        masks = self._masks(layer).to(raw.dtype)  # [T, H] or [batch, K, H]
        heads = slice(layer * self.spec.n_heads, (layer + 1) * self.spec.n_heads)
        forward = self.spec.head_forward(layer)
        was_raw = self.corrupted_raw[:, :, heads]  # [g, pos, H, d]
        was_share = self.corrupted_writers[:, :, forward.start : forward.stop]  # [g, pos, H, d]
        if self.padded:  # one product per layer for every row's entries
            batch, positions, n_heads, d_model = raw.shape
            if self.last is not None and self.last.part != slice(None):
                was_raw, was_share = was_raw[:, self.last.part], was_share[:, self.last.part]
            if was_raw.shape[0] > 1:
                was_raw, was_share = was_raw[self.group], was_share[self.group]
            moves = torch.cat([was_raw - raw, was_share - shares], dim=-1)  # [b, pos, H, 2d]
            moves = moves.transpose(1, 2).reshape(batch, n_heads, positions * 2 * d_model)
            moved = torch.bmm(masks, moves).view(-1, positions, 2 * d_model)  # [b K, pos, 2d]
            moved = moved[self.entries[layer][3]]  # the entries only: [T, pos, 2d]
            mix = raw.sum(2)[rows] + moved[..., :d_model]
            linear = shares.sum(2)[rows] + moved[..., d_model:]
            self._keep(layer, apply_norm(self.norms[layer], mix), linear)  # [T, pos, d]
            return
        if self.positions:  # one position per entry: [T, H, d_model]
            task = self.group[rows]
            now_raw, now_share = raw[rows, place], shares[rows, place]
            was_raw, was_share = was_raw[task, place], was_share[task, place]
            pattern = "th,thd->td"
        else:  # every position: [T, pos, H, d_model]
            now_raw, now_share = raw[rows], shares[rows]
            if was_raw.shape[0] > 1:  # one task's corrupted run meets its rows by broadcasting
                task = self.group[rows]
                was_raw, was_share = was_raw[task], was_share[task]
            pattern = "th,tphd->tpd"
        mix = now_raw.sum(-2) + _weighted(pattern, masks, was_raw - now_raw)
        linear = now_share.sum(-2) + _weighted(pattern, masks, was_share - now_share)
        self._keep(layer, apply_norm(self.norms[layer], mix), linear)  # [T, (pos,) d_model]

    def _keep(self, layer: int, normed: torch.Tensor, linear: torch.Tensor) -> None:
        """A layer's corrections ``normed - linear`` (entries first, [rows, ...]) as [rows, width]:
        written straight into the shared table (a boolean run: no second copy of every
        correction) or kept as they are (a relaxed mask's run, whose gradient flows through them)."""
        rows = normed.shape[0]
        direct = self._table is not None and normed.dtype == linear.dtype == self._table.dtype
        if not direct or normed.requires_grad or linear.requires_grad:
            self._place(layer, (normed - linear).reshape(rows, -1))
            if layer in self.group_sizes:  # one block per reader group, each read once
                sizes = self.group_sizes[layer]  # the empty blocks are not made (nor their zero
                # gradients, one per empty block of every layer in each backward pass)
                pieces = iter(self.tables[layer].split([size for size in sizes if size]))
                self.blocks[layer] = tuple(next(pieces) if size else None for size in sizes)
            return
        start = self.offsets[layer]
        table = self._table[start : start + rows]
        if normed.dim() == 3 and normed.shape[1] * normed.shape[2] != table.shape[1]:  # some positions
            table.view(rows, -1, normed.shape[2])[:, self.last.part] = normed - linear
        else:
            torch.sub(normed, linear, out=table.view(normed.shape))  # the same subtraction, in place
        self.tables[layer] = table

    def _place(self, layer: int, table: torch.Tensor) -> None:
        """A layer's corrections made already ([rows, width]: a relaxed run's, or a layer below
        the run's start, from the clean state) copied into the shared table when there is one."""
        if self._table is not None:
            self._table[self.offsets[layer] : self.offsets[layer] + table.shape[0]] = table
        self.tables[layer] = table

    def correction(self, readers: slice) -> torch.Tensor | None:
        """What readers ``readers`` add to the linear patch: the sum of their pairs' corrections
        over the layers computed so far (every layer upstream of them), one sparse product.
        [batch, n_readers, pos, d_model] for edge circuits, [batch, pos, n_readers, d_model] for
        position circuits; None when none of them mixes."""
        group = self._group_index.get((readers.start, readers.stop))
        if self.weights.requires_grad and self.group_sizes and group is not None:
            return self._group_correction(readers, group)
        summing = self._summing(readers)
        if summing is None:
            return None
        n_rows = summing.shape[1]
        needed = [layer for layer in self.pairs if self.offsets[layer] < n_rows]
        missing = [layer for layer in needed if layer not in self.tables]
        if missing:
            raise RuntimeError(f"readers {readers} mix layer {missing[0]} before it ran")
        if self.weights.requires_grad:  # the tables stay separate tensors in the autograd graph
            table = torch.cat([self.tables[layer] for layer in needed])
        else:
            table = self._table[:n_rows]
        return self._shaped(torch.mm(summing, table), readers)  # sparse times dense

    def _group_correction(self, readers: slice, group: int) -> torch.Tensor | None:
        """``correction`` of a relaxed mask's run: the group's blocks of every layer upstream,
        one after another, summed with one sparse product. Each block is used by this group only,
        so the backward pass hands each layer's table its gradient once (a product with every
        layer's whole table made each of them gather a table-sized gradient per reader group)."""
        summing = self._summing(readers, local=True)
        if summing is None:
            return None
        layers = [layer for layer, sizes in self.group_sizes.items() if sizes[group]]
        missing = [layer for layer in layers if layer not in self.blocks]
        if missing:
            raise RuntimeError(f"readers {readers} mix layer {missing[0]} before it ran")
        blocks = [self.blocks[layer][group] for layer in layers]
        table = blocks[0] if len(blocks) == 1 else torch.cat(blocks)
        return self._shaped(torch.mm(summing, table), readers)

    def _shaped(self, total: torch.Tensor, readers: slice) -> torch.Tensor:
        batch, n = self.weights.shape[0], readers.stop - readers.start
        if self.positions:
            return total.view(batch, -1, n, self.spec.d_model)
        return total.view(batch, n, -1, self.spec.d_model)

    def _reader_group_of(self, readers: torch.Tensor) -> torch.Tensor:
        """Each reader's group (its index in ``self.groups``).  # like readers, on the CPU"""
        starts = torch.tensor([g.start for g in self.groups], device="cpu")  # sorted
        return torch.searchsorted(starts, readers, right=True) - 1

    def _local_rows(self) -> torch.Tensor:
        """Each table row's row among its group's blocks, laid one layer after another.  # CPU"""
        if self._local is None and self._row_groups is not None:  # a relaxed plan: every row's group
            groups = self._row_groups  # the rank of each row among its group's, in table order
            counts = torch.bincount(groups, minlength=len(self.groups))
            order = torch.argsort(groups, stable=True)
            local = torch.empty_like(groups)
            local[order] = (
                torch.arange(groups.shape[0], device="cpu")
                - (torch.cumsum(counts, 0) - counts)[groups[order]]
            )
            self._local = local
        if self._local is None:
            total = sum(self._table_rows(layer) for layer in self.pairs)
            local = torch.zeros(total, dtype=torch.long, device="cpu")  # planned on the CPU
            counts = [0] * len(self.groups)
            for layer, sizes in self.group_sizes.items():
                start = self.offsets[layer]
                for group, size in enumerate(sizes):
                    first = counts[group]
                    local[start : start + size] = torch.arange(first, first + size, device="cpu")
                    counts[group] += size
                    start += size
            self._local = local
        return self._local

    def _summing(self, readers: slice, local: bool = False) -> torch.Tensor | None:
        """The sparse [targets, table rows] matrix that sums each target's pairs (targets: (row,
        reader) or (row, position, reader); table rows: every layer's, one after another, up to
        the last layer these readers mix), or None when no pair targets ``readers``. Made once
        per reader group from the plan, on the CPU: every layer's pairs are sorted by reader once
        (stably, so a target's pairs stay in layer order), and each group reads its stretch.
        ``local``: the table rows are the group's blocks (``_group_correction``) instead of every
        layer's table."""
        key = (readers.start, readers.stop, local)
        if key not in self._sums and local and not self.positions:
            self._local_sums()
        if key not in self._sums:
            if self._by_reader is None:
                self._by_reader = self._pairs_by_reader()
            reader, index, source, end = self._by_reader
            bounds = torch.tensor([readers.start, readers.stop], device="cpu")  # the plan is on the CPU
            low, high = torch.searchsorted(reader, bounds).tolist()
            if low == high:
                self._sums[key] = None
                return None
            chosen, source, last = index[low:high], source[low:high], int(end[low:high].max())
            if local:  # the group's own blocks: its rows of every layer, one layer after another
                source = self._local_rows()[source]
                last = int(source.max()) + 1
            batch, n = self.weights.shape[0], readers.stop - readers.start
            if self.positions:
                positions = self.weights.shape[-1]
                target = (chosen[:, 0] * positions + chosen[:, 2]) * n + chosen[:, 1] - readers.start
            else:
                target = chosen[:, 0] * n + chosen[:, 1] - readers.start
            size = batch * n * (self.weights.shape[-1] if self.positions else 1)
            # each (target, source) appears once: sorting by target gives the CSR layout directly
            order = torch.argsort(target, stable=True)
            rows = torch.zeros(size + 1, dtype=torch.long, device="cpu")  # planned on the CPU
            rows[1:] = torch.cumsum(torch.bincount(target, minlength=size), 0)
            device = self.weights.device
            rows, columns = rows.to(device), source[order].to(device)
            ones = torch.ones(len(target), dtype=self.weights.dtype, device=device)
            with warnings.catch_warnings():  # torch calls sparse CSR "beta"; its product is what we need
                warnings.simplefilter("ignore")
                self._sums[key] = torch.sparse_csr_tensor(
                    rows, columns, ones, (size, last)
                )  # on their device
        return self._sums[key]

    def _local_sums(self) -> None:
        """``_summing(group, local=True)`` of every reader group at once (edge circuits): the same
        sparse matrices, element for element, from one pass over the plan and one copy to the
        device (a group at a time, each made ~20 small CPU operations and two copies: 37 groups a
        learning step on Gemma-3-270M). Every pair's target counts over the groups one after
        another, so one stable sort by it orders each group's pairs as its own sort did."""
        if self._by_reader is None:
            self._by_reader = self._pairs_by_reader()
        reader, index, source, _ = self._by_reader
        batch, n_groups = self.weights.shape[0], len(self.groups)
        starts = torch.tensor([g.start for g in self.groups], device="cpu")  # the plan is on the CPU
        widths = torch.tensor([g.stop - g.start for g in self.groups], device="cpu")
        sizes = batch * widths  # each group's targets
        group = self._reader_group_of(reader)  # [P]
        base = torch.cumsum(sizes, 0) - sizes  # each group's first target among all
        target = base[group] + index[:, 0] * widths[group] + reader - starts[group]
        order = torch.argsort(target, stable=True)
        local = self._local_rows()[source]
        pairs = torch.bincount(group, minlength=n_groups)  # each group's pairs
        first = torch.cumsum(pairs, 0) - pairs  # its first pair among all (sorted by target)
        total = int(sizes.sum())
        running = torch.cumsum(torch.bincount(target, minlength=total), 0)  # [total]
        of_target = torch.repeat_interleave(torch.arange(n_groups, device="cpu"), sizes)  # [total]
        rows = torch.zeros(total + n_groups, dtype=torch.long, device="cpu")  # a leading 0 per group
        rows[torch.arange(total, device="cpu") + of_target + 1] = running - first[of_target]
        last = torch.zeros(n_groups, dtype=torch.long, device="cpu").scatter_reduce_(
            0, group, local + 1, "amax"
        )
        device = self.weights.device
        both = torch.cat([rows, local[order]]).to(device)  # one copy for every group
        ones = torch.ones(len(target), dtype=self.weights.dtype, device=device)
        pairs, first, sizes, last = pairs.tolist(), first.tolist(), sizes.tolist(), last.tolist()
        columns, row_start = both[total + n_groups :], 0
        for number, readers in enumerate(self.groups):
            crow = both[row_start : row_start + sizes[number] + 1]
            row_start += sizes[number] + 1
            span = slice(first[number], first[number] + pairs[number])
            with warnings.catch_warnings():  # torch calls sparse CSR "beta"; its product is what we need
                warnings.simplefilter("ignore")
                self._sums[(readers.start, readers.stop, True)] = (
                    torch.sparse_csr_tensor(crow, columns[span], ones[span], (sizes[number], last[number]))
                    if pairs[number]
                    else None
                )  # on their device

    def _pairs_by_reader(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every layer's pairs, in layer order, sorted stably by reader: (readers [P], pairs [P, 2
        or 3], their table rows counted over all layers [P], the end of their layer's table [P]),
        on the CPU."""
        if not self.pairs:
            empty = torch.zeros(0, dtype=torch.long, device="cpu")  # planned on the CPU
            return empty, empty.view(0, 3 if self.positions else 2), empty, empty
        indices, sources, ends = [], [], []
        for layer, (index, source) in self.pairs.items():
            indices.append(index)
            sources.append(source + self.offsets[layer])
            ends.append(torch.full_like(source, self.offsets[layer] + self._table_rows(layer)))
        index, source, end = torch.cat(indices), torch.cat(sources), torch.cat(ends)
        order = torch.argsort(index[:, 1], stable=True)
        return index[order, 1], index[order], source[order], end[order]

    def _table_rows(self, layer: int) -> int:
        """How many rows the layer's table has (known from the plan, before the run)."""
        if layer in self.fixed:
            return int(self.tables[layer].shape[0])
        return int(self.entries[layer][0].shape[0])  # one row per entry


def reader_groups(spec: GraphSpec) -> list[slice]:
    """The reader groups each patch hook asks one correction for, in reader order: a layer's
    q, k and v heads together, its MLP, and the logits."""
    groups = []
    for layer in range(spec.n_layers):
        groups.append(slice(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop))
        mlp = spec.mlp_backward(layer)
        groups.append(slice(mlp, mlp + 1))
    groups.append(slice(spec.logits_backward, spec.logits_backward + 1))
    return groups
