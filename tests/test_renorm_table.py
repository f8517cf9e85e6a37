"""The exact evaluator's bookkeeping under a shared post-attention norm (``engine.renorm``).

Each reader's correction is a sum of rows of one table of per-(row, layer, mask) corrections,
taken with a sparse matrix built from the plan. Checked here against a brute-force rebuild of
that matrix from the plan's pairs, one pair at a time, for edge and position circuits; and a
boolean run writes each layer's corrections straight into the one table (no second copy), so
what the readers sum is what the layers computed.
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


def _run(seed: int, positions: bool):
    model = tiny_model("gemma", seed=seed, n_layers=3, n_heads=4, d_model=64)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    generator = torch.Generator().manual_seed(seed)
    shape = (4, spec.n_forward, spec.n_backward) + ((evaluator.prepared.n_positions,) if positions else ())
    keep = torch.tensor([0.3, 0.5, 0.7, 0.9]).view(-1, *([1] * (len(shape) - 1)))
    circuits = torch.rand(shape, generator=generator) < keep
    mask = spec.edge_mask[..., None] if positions else spec.edge_mask
    measured = evaluator.metrics(circuits & mask)
    return spec, measured


def _reference_summing(patch: renorm.SharedNormPatch, readers: slice) -> torch.Tensor:
    """The [targets, table rows] 0/1 matrix, one pair at a time from the plan."""
    batch, n = patch.weights.shape[0], readers.stop - readers.start
    positions = patch.weights.shape[-1] if patch.positions else 1
    total = sum(patch._table_rows(layer) for layer in patch.pairs)
    dense = torch.zeros(batch * positions * n, total, dtype=patch.weights.dtype)
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
    for layer, corrections in patch.tables.items():
        # a view of the shared table at the layer's rows, not a copy beside it
        assert corrections.untyped_storage().data_ptr() == table.untyped_storage().data_ptr()
        start = patch.offsets[layer]
        assert torch.equal(corrections, table[start : start + corrections.shape[0]])
