"""The exact evaluator's bookkeeping under a shared post-attention norm (``engine.renorm``).

Each reader's correction is a sum of rows of one table of per-(row, layer, mask) corrections,
taken with a sparse matrix built from the plan. Checked here against a brute-force rebuild of
that matrix from the plan's pairs, one pair at a time, for edge and position circuits; and a
boolean run writes each layer's corrections straight into the one table (no second copy), so
what the readers sum is what the layers computed, one row per distinct entry.
"""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.engine import patching, renorm
from circuitviz.measure.evaluate import Evaluator


class _Recording(renorm.SharedNormPatch):
    made: list[renorm.SharedNormPatch] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _Recording.made.append(self)


@pytest.fixture
def recorded(monkeypatch):
    _Recording.made = []
    monkeypatch.setattr(patching, "SharedNormPatch", _Recording)
    return _Recording.made


def _distinct_entries(spec: GraphSpec, weights: torch.Tensor, positions: bool) -> int:
    """Distinct (row, layer, mask of the layer's heads) (and position) among the (row, reader)
    pairs whose mask mixes a post-normed layer's heads, counted one pair at a time."""
    seen = set()
    for layer in range(spec.n_layers):
        heads = spec.head_forward(layer)
        share = weights[:, heads.start : heads.stop]  # [b, H, bwd(, pos)]
        for row in range(share.shape[0]):
            for reader in range(share.shape[2]):
                for place in range(share.shape[3]) if positions else [None]:
                    mask = share[row, :, reader] if place is None else share[row, :, reader, place]
                    mask = tuple(int(v) for v in mask.round().tolist())
                    if any(mask) and not all(mask):
                        seen.add((row, layer, place, mask))
    return len(seen)


def _run(seed: int, positions: bool):
    model = tiny_model("gemma", seed=seed, n_layers=3, n_heads=4, d_model=64)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    generator = torch.Generator().manual_seed(seed)
    shape = (4, spec.n_forward, spec.n_backward) + ((evaluator.prepared.n_positions,) if positions else ())
    keep = torch.tensor([0.3, 0.5, 0.7, 0.9], device="cpu").view(-1, *([1] * (len(shape) - 1)))
    circuits = torch.rand(shape, generator=generator, device="cpu") < keep
    mask = spec.edge_mask[..., None] if positions else spec.edge_mask
    measured = evaluator.metrics(circuits & mask)
    return spec, measured


def _reference_summing(patch: renorm.SharedNormPatch, readers: slice) -> torch.Tensor:
    """The [targets, table rows] 0/1 matrix, one pair at a time from the plan."""
    batch, n = patch.weights.shape[0], readers.stop - readers.start
    positions = patch.weights.shape[-1] if patch.positions else 1
    total = sum(patch._table_rows(layer) for layer in patch.pairs)
    dense = torch.zeros(batch * positions * n, total, dtype=patch.weights.dtype, device="cpu")
    last = 0
    for layer, (index, source) in patch.pairs.items():
        for pair, row in zip(index.tolist(), source.tolist()):
            if not readers.start <= pair[1] < readers.stop:
                continue
            place = pair[2] if patch.positions else 0
            target = (pair[0] * positions + place) * n + pair[1] - readers.start
            dense[target, patch.offsets[layer] + row] = 1.0
            last = patch.offsets[layer] + patch._table_rows(layer)
    return dense[:, :last]


@pytest.mark.parametrize("positions", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_each_readers_sum_is_the_brute_force_sum_of_its_pairs(recorded, seed, positions):
    spec, _ = _run(seed, positions)
    assert recorded, "the tiny Gemma normalises its summed heads: the run makes a SharedNormPatch"
    patch = recorded[0]
    groups = [slice(r, r + 1) for r in range(spec.n_backward)]
    groups += [
        slice(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop)
        for layer in range(spec.n_layers)
    ]
    mixed = 0
    for readers in groups:
        summing = patch._summing(readers)
        reference = _reference_summing(patch, readers)
        if summing is None:
            assert not reference.any()
            continue
        mixed += 1
        assert torch.equal(summing.to_dense(), reference)
    assert mixed > 0


@pytest.mark.parametrize("positions", [False, True])
def test_a_boolean_run_writes_each_layers_corrections_into_the_one_table(recorded, positions):
    _run(0, positions)
    patch = recorded[0]
    assert patch._table is not None and patch.tables
    table = patch._table
    # one row per distinct entry: no padding is normalised or stored
    assert table.shape[0] == _distinct_entries(patch.spec, patch.weights, positions)
    for layer, corrections in patch.tables.items():
        # a view of the shared table at the layer's rows, not a copy beside it
        assert corrections.untyped_storage().data_ptr() == table.untyped_storage().data_ptr()
        start = patch.offsets[layer]
        assert torch.equal(corrections, table[start : start + corrections.shape[0]])


def test_a_relaxed_masks_tables_feed_each_reader_group_through_its_own_block(recorded):
    """With a gradient, each layer's table is split into one block per reader group, and a
    group's correction sums its own blocks: every pair's row is read by one group only (the
    backward pass then hands each table its gradient once), and the sum is the brute-force one."""
    from circuitviz.engine.patching import masked_residual

    model = tiny_model("gemma", seed=2, n_layers=3, n_heads=4, d_model=64)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    generator = torch.Generator().manual_seed(2)
    keep = (torch.rand(3, spec.n_forward, spec.n_backward, generator=generator, device="cpu") < 0.6).double()
    keep = keep.to(evaluator.corrupted_writers.dtype).requires_grad_(True)
    masked_residual(
        model, spec, evaluator.prepared, evaluator.corrupted_writers, keep, evaluator.corrupted_raw
    )
    patch = recorded[-1]
    assert patch.blocks, "a relaxed run with a gradient splits its tables"
    pairs = sum(len(index) for index, _ in patch.pairs.values())
    # an empty block is not made (None): its group reads nothing of that layer
    assert (
        sum(len(block) for blocks in patch.blocks.values() for block in blocks if block is not None) == pairs
    )
    for number, readers in enumerate(patch.groups):
        summing = patch._summing(readers, local=True)
        # the group's pairs, layer after layer, in the plan's order: one column each
        batch, n = patch.weights.shape[0], readers.stop - readers.start
        columns = []
        for index, _ in patch.pairs.values():
            columns += [pair for pair in index.tolist() if readers.start <= pair[1] < readers.stop]
        if not columns:
            assert summing is None
            continue
        reference = torch.zeros(batch * n, len(columns), dtype=patch.weights.dtype, device="cpu")
        for column, pair in enumerate(columns):
            reference[pair[0] * n + pair[1] - readers.start, column] = 1.0
        assert torch.equal(summing.to_dense(), reference)
        assert sum(sizes[number] for sizes in patch.group_sizes.values()) == len(columns)
