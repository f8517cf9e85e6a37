"""Units of CircuitLasso's structural equation model, and the regression problem they define.

Components (``build_component_problem``): every node of the engine's graph becomes a few scalars
per observed position, so that the Lasso's nonzero coefficients are the engine's edges:

- a writer u (``input``, head ``a{l}.h{h}``, MLP ``m{l}``): its residual contribution projected on
  its own top-k principal directions (k = ``directions``) -> k predictor columns;
- a reader v: what it computes linearly from its input, reduced to its own top-k principal
  directions -> k target columns. For a head's q, k and v inputs: the head's query, key and value
  vectors (``hook_q``/``hook_k``/``hook_v``, before any q/k norm and rotary); for an MLP: its
  pre-activations (``hook_pre``, and ``hook_pre_linear`` for gated MLPs); for ``logits``: the
  task's metric at that position (one column). Heads whose vectors are identical at every
  observation (the heads of one key/value group under grouped-query attention, for keys and
  values) are reduced once and share the columns (``distinct_heads``).

Reader v may use writer u's columns exactly where the engine has the edge u -> v (writers of
earlier layers, and for an MLP its own layer's heads), so the model is block-triangular by
construction. Every column is standardised; a direction whose variance is numerically zero
(beyond the unit's rank, or a unit that never varies) is dropped, never divided by ~0.

SAE features (``build_sae_problem``): each feature of each chosen layer's SAE is one scalar (its
activation); a feature may depend on the features of every earlier chosen layer, and the
metric on the features of the last chosen layer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from ..core.graph import QKV, GraphSpec
from ..core.phases import Report
from ..engine import sites
from .columns import Batch, assemble, silent_floor
from .solver import standardize

# the matrices here are small (positions x directions), so the analysis runs in float64 whatever
# the model's dtype: the duality-gap certificates and the support then do not depend on it
ANALYSIS_DTYPE = torch.float64


@dataclass
class RegressionProblem:
    """One batched regression: standardised predictor and target columns, grouped into units.

    predictors [M, P]; targets [M, T]; source_of [P] and target_of [T] map columns to unit
    indices; target_weight [T] (each target unit's weights sum to 1: a direction's share of the
    unit's standard deviation); allowed [n_sources, n_targets] bool: which unit pairs may be edges.
    """

    predictors: torch.Tensor
    targets: torch.Tensor
    source_of: torch.Tensor
    target_of: torch.Tensor
    target_weight: torch.Tensor
    allowed: torch.Tensor
    source_names: list[str] = field(default_factory=list)
    target_names: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    @property
    def n_sources(self) -> int:
        return int(self.allowed.shape[0])

    @property
    def n_targets(self) -> int:
        return int(self.allowed.shape[1])

    def column_allowed(self) -> torch.Tensor:
        """allowed expanded to columns.  # [P, T] bool"""
        allowed = self.allowed.to(self.source_of.device)
        return allowed[self.source_of][:, self.target_of]

    def aggregate(self, coefficients: torch.Tensor) -> torch.Tensor:
        """Unit-level scores: sum over a pair's columns of |coefficient| x target weight.

        coefficients [P, T] -> [n_sources, n_targets] (on the coefficients' device).
        """
        device, dtype = coefficients.device, coefficients.dtype
        weighted = coefficients.abs() * self.target_weight.to(device=device, dtype=dtype)[None, :]
        by_source = torch.zeros(self.n_sources, weighted.shape[1], dtype=dtype, device=device)
        by_source.index_add_(0, self.source_of.to(device), weighted)
        scores = torch.zeros(self.n_sources, self.n_targets, dtype=dtype, device=device)
        scores.index_add_(1, self.target_of.to(device), by_source)
        return scores


def analysis_device(device: torch.device) -> torch.device:
    """Where the analysis runs: the model's device, unless it has no float64 (Apple's MPS)."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def principal_scores(
    x: torch.Tensor | list[torch.Tensor],
    k: int,
    seed: int = 0,
    power_iterations: int = 4,
    dtype: torch.dtype | None = None,
    rows: tuple[torch.Tensor, torch.Tensor] | None = None,
    progress=None,
) -> torch.Tensor:
    """Scores of the rows of each unit on its top-k principal directions (``progress``, a run's,
    hears ``Report.REGRESS`` before each chunk: a run can stop between two).

    x: [n_units, M, d] (any layout; converted to ``dtype``, default x's own, a chunk of units at a
    time) -> [n_units, M, k'] with k' = min(k, M, d). Or a list of such groups (all of one M and
    d; the layers of one kind of reader): reduced together, each group from the random start a
    call of its own would draw, so the scores are those of one call per group (bit for bit on
    the CPU) from a few batches instead of one per group (on a GPU, 4 calls instead of 72 for the
    embedded model's readers). Exact (eigendecomposition of the smaller
    Gram matrix) when the rows (all M) or the columns are at most ``EXACT_ROWS`` (or 4 x (k + 8));
    otherwise randomized subspace iteration (Halko, Martinsson and Tropp 2011) with a seeded
    generator, so results are reproducible. Until 2026-12-03 the exact path was taken only below
    4 x (k + 8) = 48 rows at the default k; on the short prompts, where the randomized iteration's
    ten products and five factorisations a unit cost more than one Gram matrix and its
    eigendecomposition, the exact scores are now both cheaper and exact (docs/methods.md).

    On the CPU the units are reduced a few at a time (``_CPU_CHUNK_BYTES`` of ``dtype`` each):
    every unit's arithmetic is its own (a batched product or factorisation treats each matrix
    alone, and the random start is drawn for all units first), so the scores are bit for bit
    those of one batch, while the working copies stay small enough to be reused instead of
    being allocated, page-faulted and read from main memory anew (the embedded model's writers
    on IOI: 0.27 CPU-s against 0.95-1.5 in one batch; the whole reduction, median of 3 back to
    back: 1.58 against 1.72 on IOI, 3.24 against 5.06 on a 638-row prompt; docs/methods.md).

    ``rows`` = (first [r], inverse [M]) says that row i of every unit equals row first[inverse[i]]
    bit for bit (texts packed as a prefix tree share their prefixes' rows). The randomized
    iteration then runs on the r distinct rows, each centred and weighted by the square root of
    its count: with U the M x r matrix of those rows' copies scaled by 1 / sqrt(count), which has
    orthonormal columns, the rows are U times the weighted ones, every iterate is U times the
    weighted iteration's, and the scores are U times its scores (the exact path likewise: the
    weighted rows have the same Gram matrix W^T W as all M, so the same directions). The same
    scores up to float rounding, from r rows' products instead of M (factual: 75 rows instead of
    116).
    """
    groups = list(x) if isinstance(x, (list, tuple)) else [x]
    n, (m, d), device = sum(int(g.shape[0]) for g in groups), groups[0].shape[1:], groups[0].device
    dtype = dtype or groups[0].dtype
    k = max(1, min(k, m, d))
    width = min(k + 8, m, d)
    if rows is None or len(rows[0]) == m:
        rows = None
    else:
        first, inverse = (part.to(device) for part in rows)
        count = torch.bincount(inverse, minlength=len(first)).to(dtype)  # [r]
        root = count.sqrt()[None, :, None]  # [1, r, 1]
    # decided on all M rows, so a packed run (distinct rows given) takes the path an unpacked one does
    exact = min(m, d) <= max(4 * width, EXACT_ROWS)
    if exact and rows is not None and len(first) < k:  # too few distinct rows for k directions
        rows = None
    omega = None
    if not exact:  # each group's own draw (a kept one when groups are alike), moved once
        draws = [_random_start(seed, int(g.shape[0]), d, width, dtype) for g in groups if g.shape[0]]
        omega = torch.cat(draws).to(device) if draws else None

    def reduce(centred: torch.Tensor, start: int) -> torch.Tensor:
        if exact:
            return _exact_scores(centred, k)
        return _randomized_scores(centred, omega[start : start + len(centred)], k, power_iterations)

    per_unit = (m if rows is None else len(first)) * d * torch.finfo(dtype).bits // 8
    offsets = [0]
    for group in groups:
        offsets.append(offsets[-1] + int(group.shape[0]))
    if device.type == "cpu":  # each group in the chunks a call of its own would make (same bits)
        size = max(1, _CPU_CHUNK_BYTES // max(per_unit, 1))
        spans = [(a, min(a + size, hi)) for lo, hi in zip(offsets, offsets[1:]) for a in range(lo, hi, size)]
    else:  # as few batches as the memory allows, across groups
        size = max(1, _DEVICE_CHUNK_BYTES // max(per_unit, 1))
        spans = [(a, min(a + size, n)) for a in range(0, n, size)]

    def units(start: int, stop: int, pick=None) -> torch.Tensor:
        """Units start..stop of the groups in ``dtype``, a copy of their own: [c, M or r, d]."""
        pieces = []
        for group, offset in zip(groups, offsets):
            a, b = max(start - offset, 0), min(stop - offset, int(group.shape[0]))
            if a < b:
                pieces.append(group[a:b] if pick is None else group[a:b].index_select(1, pick))
        if len(pieces) == 1:  # one group's slice: a working copy (even in ``dtype`` already)
            return pieces[0].to(dtype, copy=pick is None)
        return torch.cat(pieces).to(dtype)

    parts = []
    for start, stop in spans:
        if progress is not None:  # begun, its share unknown: the bar names it without a figure
            progress(Report.REGRESS, 0.0)
        if rows is not None:  # the distinct rows, centred on the mean of all M, weighted
            chunk = units(start, stop, first)  # a copy: [c, r, d]
            mean = torch.matmul(count, chunk) / m  # [c, d]
            centred = chunk.sub_(mean[:, None, :]).mul_(root)
            parts.append((reduce(centred, start) / root).index_select(1, inverse))
            continue
        # centred in place: one working array a chunk
        chunk = units(start, stop)
        parts.append(reduce(chunk.sub_(chunk.mean(1, keepdim=True)), start))
    return torch.cat(parts) if parts else torch.zeros(0, m, k, dtype=dtype, device=device)


_CPU_CHUNK_BYTES = 2 * 2**20  # units reduced together on the CPU (see ``principal_scores``)
# and on an accelerator, where one batch is fastest, at most this much working copy at a time
_DEVICE_CHUNK_BYTES = 512 * 2**20
# at most this many rows (all M, not the distinct ones) or columns, the scores come from the
# eigendecomposition of the smaller Gram matrix, exact, instead of the randomized iteration
# (cheaper there: fewer products)
EXACT_ROWS = 128
# at most this many (distinct) rows, the randomized iteration runs on the rows' Gram matrix
# (``_randomized_scores``): cheaper there than its thin products, dearer on many more rows
GRAM_ROWS = 160
_RANDOM_STARTS: OrderedDict[tuple, torch.Tensor] = OrderedDict()  # see ``_random_start``
_RANDOM_STARTS_BYTES = 64 * 2**20  # at most this much kept (the embedded model's draws: 6.1 MB)
_RANDOM_STARTS_LOCK = threading.Lock()


def _random_start(seed: int, n: int, d: int, width: int, dtype: torch.dtype) -> torch.Tensor:
    """The randomized iteration's start for n units of width d: normal draws on the CPU from a
    generator seeded with ``seed`` (so every device projects onto the same directions).  # [n, d, width]

    The draw depends only on its arguments, so it is kept (the most recent, within
    ``_RANDOM_STARTS_BYTES``): a components problem asks for the same one 18 times (each layer's
    queries, keys, values and MLP inputs), and every run of a process for the same ones again
    (0.03 CPU-s a run drawn anew). Never modified in place by its readers."""
    key = (int(seed), int(n), int(d), int(width), dtype)
    with _RANDOM_STARTS_LOCK:  # runs of several threads share the kept draws
        start = _RANDOM_STARTS.get(key)
        if start is None:
            generator = torch.Generator(device="cpu").manual_seed(seed)
            start = torch.randn(n, d, width, generator=generator, device="cpu", dtype=dtype)
            _RANDOM_STARTS[key] = start
        _RANDOM_STARTS.move_to_end(key)
        kept = sum(draw.numel() * draw.element_size() for draw in _RANDOM_STARTS.values())
        while _RANDOM_STARTS and kept > _RANDOM_STARTS_BYTES:  # the oldest first, this one too if alone
            _, dropped = _RANDOM_STARTS.popitem(last=False)
            kept -= dropped.numel() * dropped.element_size()
        return start


def _exact_scores(centred: torch.Tensor, k: int) -> torch.Tensor:
    """Top-k principal scores from the eigendecomposition of the smaller Gram matrix.  # [n, M, k]"""
    m, d = centred.shape[1:]
    if d <= m:
        values, vectors = torch.linalg.eigh(centred.transpose(1, 2) @ centred)  # [n, d], [n, d, d]
        return centred @ vectors.flip(-1)[:, :, :k]
    values, vectors = torch.linalg.eigh(centred @ centred.transpose(1, 2))  # [n, m], [n, m, m]
    top = values.flip(-1)[:, :k].clamp_min(0).sqrt()
    return vectors.flip(-1)[:, :, :k] * top[:, None, :]


def _randomized_scores(
    centred: torch.Tensor, omega: torch.Tensor, k: int, power_iterations: int
) -> torch.Tensor:
    """Top-k principal scores by randomized subspace iteration from ``omega``.  # [n, M, k]

    On few rows (at most ``GRAM_ROWS``: arithmetic 2's 108 distinct rows) the same iteration runs
    on the rows' Gram matrix K = C C^T, made once: each power step's C (C^T Q) is K Q, and the
    final SVD of Q^T C is the eigendecomposition of Q^T K Q (its eigenvalues the squared singular
    values). The same scores in exact arithmetic, up to each direction's sign, from one product as
    wide as the rows instead of ten thin ones (2026-12-04: arithmetic 2's whole reduction 0.35 ->
    0.25 CPU-s, its standardised columns within 2e-12; docs/methods.md). On more rows K costs
    more than the thin products (IOI's 229: 0.32 against 0.24 CPU-s for the writers)."""
    if centred.shape[1] <= GRAM_ROWS:
        gram = centred @ centred.transpose(1, 2)  # [n, m, m]
        sample = centred @ omega
        for _ in range(power_iterations):
            sample, _ = torch.linalg.qr(sample)
            sample = gram @ sample
        basis, _ = torch.linalg.qr(sample)
        values, vectors = torch.linalg.eigh(basis.transpose(1, 2) @ (gram @ basis))  # ascending
        top = values.flip(-1)[:, :k].clamp_min(0).sqrt()
        return basis @ vectors.flip(-1)[:, :, :k] * top[:, None, :]
    sample = centred @ omega  # [n, m, width]
    for _ in range(power_iterations):
        sample, _ = torch.linalg.qr(sample)
        sample = centred @ (centred.transpose(1, 2) @ sample)
    basis, _ = torch.linalg.qr(sample)  # [n, m, width]
    small = basis.transpose(1, 2) @ centred  # [n, width, d]
    # on CUDA, cuSOLVER's approximate driver, meant for wide and tall matrices such as these
    # (width x d): on an H200, 0.17 ms for 72 of 12 x 256 against the default Jacobi's 30 ms,
    # singular values within 2.2e-15 of LAPACK's (benchmarks/gpu_syncs.py --svd); elsewhere LAPACK
    driver = "gesvda" if small.is_cuda else None
    left, singular, _ = torch.linalg.svd(small, full_matrices=False, driver=driver)
    return basis @ left[:, :, :k] * singular[:, None, :k]


def _reader_activations(model, spec: GraphSpec, activations: dict, layer: int, qkv: str) -> torch.Tensor:
    """A layer's query/key/value vectors per head.  # [M, n_heads, d_head]"""
    values = activations[sites.head_projection(layer, qkv)]
    groups = int(getattr(model.cfg, "n_key_value_heads", None) or spec.n_heads)
    if qkv != "q" and groups < spec.n_heads == values.shape[1]:
        # keys and values copied per query head (TransformerLens's ungrouped attention): each
        # group's first copy stands for it (with one shared input per layer the copies come from
        # one product and may differ in the last bits; from per-head inputs they are equal)
        values = values[:, :: spec.n_heads // groups]
    if values.shape[1] != spec.n_heads:  # grouped key/value heads: head h uses group h // size
        group = spec.n_heads // values.shape[1]
        values = values.repeat_interleave(group, dim=1)
    return values


def distinct_heads(values: torch.Tensor) -> tuple[list[int], list[int]]:
    """Heads whose vectors are identical at every observation, grouped (grouped-query attention:
    every head of a key/value group reads the same keys and values, copied per head).

    values [M, H, d_head] -> (the first head of each group, each head's group index).
    """
    return distinct_heads_by_layer([values])[0]


def distinct_heads_by_layer(layers: list[torch.Tensor]) -> list[tuple[list[int], list[int]]]:
    """``distinct_heads`` of each layer's values [M, H, d_head], with two reads from the device in
    all (not one comparison per pair of heads, each a wait on a GPU): the first observation's
    vectors of every layer's heads compared at once, then every head against the first earlier
    head that agrees there, over all observations, at once. Equality is transitive, so a head
    equal to an earlier one joins that one's group; a head that agrees with an earlier one at the
    first observation only (never seen on real activations) is compared with each earlier group
    as before."""
    if not layers:
        return []
    opening = torch.stack([values[0] for values in layers]) if layers[0].shape[0] else None
    n_heads = layers[0].shape[1]
    if opening is None:  # no observation: every head is its own group
        return [(list(range(n_heads)), list(range(n_heads))) for _ in layers]
    # [L][H][H] as Python lists: the pairs are walked in Python, not indexed as tensors (an index
    # and a nonzero per pair)
    agree = (opening[:, :, None] == opening[:, None, :]).all(-1).cpu().tolist()
    candidates = []  # (layer, head, the first earlier head that agrees at the first observation)
    for layer in range(len(layers)):
        for head in range(1, n_heads):
            earlier = next((other for other in range(head) if agree[layer][head][other]), None)
            if earlier is not None:
                candidates.append((layer, head, earlier))
    # the heads that agree with one earlier head at the first observation, compared with it at
    # once: their vectors (a view where they run in a row) against its, broadcast, instead of
    # stacked copies of both sides (two of 6.4 MB for the embedded model's keys on the factual
    # prompt); one read back for all. With the list walk above: 12.4 -> 6.9 CPU-ms for its
    # queries, keys and values there, the same groups
    heads_of: dict[tuple[int, int], list[int]] = {}
    for layer, head, other in candidates:
        heads_of.setdefault((layer, other), []).append(head)
    checks = [
        (_heads(layers[layer], heads) == layers[layer][:, other : other + 1]).flatten(2).all(2).all(0)
        for (layer, other), heads in heads_of.items()
    ]
    flags = torch.cat(checks).cpu().tolist() if checks else []
    pairs = [(layer, head, other) for (layer, other), heads in heads_of.items() for head in heads]
    equal = {(layer, head): other for (layer, head, other), ok in zip(pairs, flags) if ok}
    doubtful = {(layer, head) for layer, head, _ in candidates} - set(equal)
    grouped = []
    for layer, values in enumerate(layers):
        first: list[int] = []
        group: list[int] = []
        for head in range(n_heads):
            if (layer, head) in equal:
                same = group[equal[(layer, head)]]
            elif (layer, head) in doubtful:  # agreed at the first observation only
                same = next(
                    (g for g, h in enumerate(first) if torch.equal(values[:, head], values[:, h])), None
                )
            else:
                same = None
            if same is None:
                first.append(head)
                same = len(first) - 1
            group.append(same)
        grouped.append((first, group))
    return grouped


def _heads(values: torch.Tensor, heads: list[int]) -> torch.Tensor:
    """values[:, heads] ([M, H, d] -> [M, len(heads), d]): a slice where the heads run in a row
    (every head, or a key/value group's first), which needs no index moved to the device."""
    if heads == list(range(heads[0], heads[0] + len(heads))):
        return values[:, heads[0] : heads[0] + len(heads)]
    return values[:, heads]


def component_hook_names(model, spec: GraphSpec) -> list[str]:
    """The hooks whose activations are the readers' targets in components mode."""
    names = []
    for layer in range(spec.n_layers):
        names += [sites.head_projection(layer, qkv) for qkv in QKV]
        names.append(sites.mlp_pre(layer))
        if getattr(model.cfg, "gated_mlp", False):
            names.append(sites.mlp_pre(layer, gate=True))
    return names


def build_component_problem(
    model,
    spec: GraphSpec,
    writers: torch.Tensor,
    activations: dict,
    metric: torch.Tensor,
    k: int,
    seed: int = 0,
    rows: tuple[torch.Tensor, torch.Tensor] | None = None,
    progress=None,
) -> RegressionProblem:
    """The components-mode problem from observations (see the module docstring).

    writers [M, n_forward, d_model]; activations from ``component_hook_names``; metric [M];
    ``rows``: which rows repeat others bit for bit (``Observations.distinct``, ``principal_scores``);
    ``progress``: the run's, told as each chunk of units is reduced (4.7 of CircuitLasso's 8 s of
    scoring on Gemma-3-270M under load, in one silent step the app's Cancel waited for).
    """
    compute, device = ANALYSIS_DTYPE, analysis_device(writers.device)
    writers = writers.to(device)
    sources = Batch(
        principal_scores(writers.transpose(0, 1), k, seed, dtype=compute, rows=rows, progress=progress)
    )
    # each kind of reader reduced for all layers together (``principal_scores`` takes the layers
    # as groups): its queries, keys, values and MLP inputs, 4 calls instead of 4 a layer
    heads, offsets = {}, {}
    for qkv in QKV:
        values = [
            _reader_activations(model, spec, activations, layer, qkv).to(device)
            for layer in range(spec.n_layers)
        ]  # per layer [M, H, d_head]
        groups = distinct_heads_by_layer(values)
        # heads that read one key/value group see the same vectors: reduced once, shared
        chosen = [
            _heads(layer_values, first).transpose(0, 1) for layer_values, (first, _) in zip(values, groups)
        ]
        heads[qkv] = (
            Batch(principal_scores(chosen, k, seed, dtype=compute, rows=rows, progress=progress)),
            groups,
        )
        offsets[qkv] = [0]
        for first, _ in groups:
            offsets[qkv].append(offsets[qkv][-1] + len(first))
    hidden = []
    for layer in range(spec.n_layers):
        pre = [activations[sites.mlp_pre(layer)]]
        if sites.mlp_pre(layer, gate=True) in activations:
            pre.append(activations[sites.mlp_pre(layer, gate=True)])
        joined = pre[0] if len(pre) == 1 else torch.cat(pre, dim=-1)  # [M, d_mlp (x2 gated)]
        hidden.append(joined.to(device)[None])
    mlps = Batch(principal_scores(hidden, k, seed, dtype=compute, rows=rows, progress=progress))
    del hidden

    targets: list[tuple[int, Batch, int]] = []  # (reader, its batch, its row there), in reader order
    for layer in range(spec.n_layers):
        for qkv in QKV:
            batch, groups = heads[qkv]
            start = spec.head_backward(layer, qkv).start
            targets += [
                (start + head, batch, offsets[qkv][layer] + groups[layer][1][head])
                for head in range(spec.n_heads)
            ]
        targets.append((spec.mlp_backward(layer), mlps, layer))
    logits = Batch(metric.to(device).to(compute)[None, :, None])
    targets.append((spec.logits_backward, logits, 0))

    source_columns, source_of, _ = assemble(
        [(unit, sources, unit) for unit in range(spec.n_forward)], silent_floor([sources])
    )
    target_floor = silent_floor([batch for batch, _ in heads.values()] + [mlps])
    target_columns, target_of, target_weights = assemble(targets, target_floor)
    silent_writers = sorted(set(range(spec.n_forward)) - set(source_of))
    silent_readers = sorted(set(range(spec.n_backward)) - set(target_of))
    return RegressionProblem(
        predictors=_stack(source_columns, metric.shape[0], device),
        targets=_stack(target_columns, metric.shape[0], device),
        source_of=torch.tensor(source_of, dtype=torch.long, device=device),
        target_of=torch.tensor(target_of, dtype=torch.long, device=device),
        target_weight=torch.cat(target_weights).to(device)
        if target_weights
        else torch.zeros(0, device=device),
        allowed=spec.edge_mask.to(device),
        source_names=list(spec.forward_names),
        target_names=list(spec.backward_names),
        info={
            "directions": k,
            "predictor_columns": len(source_of),
            "target_columns": len(target_of),
            "silent_writers": [spec.forward_names[i] for i in silent_writers],
            "silent_readers": [spec.backward_names[i] for i in silent_readers],
        },
    )


def _stack(columns: list[torch.Tensor], rows: int, device) -> torch.Tensor:
    if not columns:
        return torch.zeros(rows, 0, dtype=torch.float64, device=device)
    return torch.cat(columns, dim=1)


# ----- SAE features -------------------------------------------------------------------------------
@dataclass
class SAEUnits:
    """Chosen features of the chosen SAEs: for each layer, feature indices and activations [M, n]."""

    layers: list[int]
    hooks: list[str]
    features: list[torch.Tensor]  # per layer: [n_chosen] feature indices into the SAE
    activations: list[torch.Tensor]  # per layer: [M, n_chosen]
    prompt_activation: list[torch.Tensor]  # per layer: [n_chosen] mean activation on the prompt
    active_counts: list[int]  # per layer: features active at some observation


def build_sae_problem(units: SAEUnits, metric: torch.Tensor) -> RegressionProblem:
    """Features of layer i may depend on features of layers < i; the metric on the last layer's."""
    offsets, names = [], []
    for layer, features in zip(units.layers, units.features):
        offsets.append(len(names))
        names += [f"L{layer}.f{int(index)}" for index in features.tolist()]
    n_units = len(names)
    layer_of = (
        torch.cat([torch.full((len(f),), i, dtype=torch.long) for i, f in enumerate(units.features)])
        if n_units
        else torch.zeros(0, dtype=torch.long)
    )
    # targets: every feature (those of the first layer have no allowed sources) and the metric
    allowed = torch.zeros(n_units, n_units + 1, dtype=torch.bool)
    allowed[:, :n_units] = layer_of[:, None] < layer_of[None, :]
    allowed[:, n_units] = layer_of == len(units.layers) - 1
    device = analysis_device(metric.device)
    values = torch.cat([a.to(device) for a in units.activations], dim=1) if n_units else torch.zeros(0, 0)
    values = values.to(ANALYSIS_DTYPE) if n_units else torch.zeros(metric.shape[0], 0, dtype=ANALYSIS_DTYPE)
    source_columns, kept = standardize(values.to(device))
    preference = torch.cat([a.to(device=device, dtype=ANALYSIS_DTYPE) for a in units.prompt_activation])
    twins = twin_columns(source_columns, kept, layer_of.to(device), preference) if n_units else {}
    for members in twins.values():  # a twin is a copy of its representative: one predictor stands for both
        kept[members] = False
    target_values = torch.cat([values.to(device), metric.to(device).to(ANALYSIS_DTYPE)[:, None]], dim=1)
    target_columns, target_kept = standardize(target_values)
    source_of = torch.arange(n_units, device=device)[kept.to(device)]
    target_of = torch.arange(n_units + 1, device=device)[target_kept.to(device)]
    return RegressionProblem(
        predictors=source_columns[:, kept],
        targets=target_columns[:, target_kept],
        source_of=source_of,
        target_of=target_of,
        target_weight=torch.ones(len(target_of), dtype=torch.float64, device=device),
        allowed=allowed.to(device),
        source_names=names,
        target_names=names + ["metric"],
        info={"features": n_units, "layers": list(units.layers), "twins": twins},
    )


# standardised values (order 1-10) this close at every observation are the same column to the
# precision of the activations (float32: about 1e-6 here)
TWIN_TOLERANCE = 1e-5


def twin_columns(
    columns: torch.Tensor, kept: torch.Tensor, layer_of: torch.Tensor, preference: torch.Tensor
) -> dict[int, list[int]]:
    """{representative: [its twins]}: features of one layer whose standardised activations are the
    same column, or its negative, at every observation to ``TWIN_TOLERANCE`` (SAE features that
    fire at the same few positions in proportion: 2-26 of the 512 features of layers 3 and 9 on the
    embedded model's nine yardstick prompts).

    With two identical predictors the Lasso's objective is the same however the weight is split
    between them, so which one carries it is decided by float rounding: measured, every support
    that changed when the solve summed in another order changed among twins. Each group keeps one
    predictor, the feature most active on the prompt (``preference`` [n], ties to the lower
    index); the others are listed as its twins. columns [M, n] standardised, kept [n] bool."""
    candidates = kept.nonzero(as_tuple=True)[0]
    if candidates.numel() < 2:
        return {}
    x = columns[:, candidates]
    correlation = (x.T @ x) / max(x.shape[0], 1)  # unit variance: 1 or -1 for a twin pair
    same_layer = layer_of[candidates][:, None] == layer_of[candidates][None, :]
    close = ((correlation.abs() >= 1 - 1e-10) & same_layer).cpu()
    close.fill_diagonal_(False)
    paired = close.any(1).nonzero(as_tuple=True)[0].tolist()  # most features have no twin
    rank, index = preference[candidates].cpu().tolist(), candidates.cpu().tolist()
    order = sorted(paired, key=lambda i: (-rank[i], index[i]))
    taken = torch.zeros(len(candidates), dtype=torch.bool, device="cpu")
    twins = {}
    for i in order:
        if taken[i]:
            continue
        members = [
            j
            for j in close[i].nonzero(as_tuple=True)[0].tolist()
            if not taken[j]
            and float((x[:, j] - x[:, i] * correlation[i, j].sign()).abs().max()) <= TWIN_TOLERANCE
        ]
        taken[i] = True
        if members:
            taken[members] = True
            twins[index[i]] = [index[j] for j in members]
    return twins
