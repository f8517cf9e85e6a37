"""CircuitLasso's components problem built a kind of reader at a time (all layers' queries in one
reduction, then keys, values and MLP inputs) and its columns standardised a batch at a time,
against the code before, written out here: one reduction per layer and kind, heads compared pair
by pair, every unit standardised alone with three reads from the device each. The problem must
be the same to the bit on the CPU, and the device reads must not grow with the model's depth."""

import pytest
import torch
from torch.utils._pytree import tree_flatten

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import QKV
from circuitviz.core.tasks import prepare_task
from circuitviz.engine import sites
from circuitviz.lasso import columns, units
from circuitviz.lasso.observations import collect_observations, observation_texts
from circuitviz.models.adapter import adapter_of
from tests.simulated_device import HOST, SimulatedDevice


def reference_standardize(values, rel_tol=1e-6):
    centred = values - values.mean(0, keepdim=True)
    spread = centred.pow(2).mean(0).sqrt()
    top = float(spread.max()) if spread.numel() else 0.0
    kept = spread > max(rel_tol * top, 1e-30)
    return torch.where(kept, centred / spread.clamp_min(1e-30), torch.zeros_like(centred)), kept


def reference_distinct_heads(values):
    first, group = [], []
    for head in range(values.shape[1]):
        same = next((g for g, h in enumerate(first) if torch.equal(values[:, head], values[:, h])), None)
        if same is None:
            first.append(head)
            same = len(first) - 1
        group.append(same)
    return first, group


def reference_assemble(unit_scores, floor):
    out_columns, owners, weights = [], [], []
    for unit, scores in unit_scores:
        sd = scores.double().pow(2).mean(0).sqrt()
        first = float(sd.max()) if sd.numel() else 0.0
        kept = (sd > 1e-4 * first) & (sd > floor)
        unit_columns = reference_standardize(scores.double()[:, kept])[0]
        if unit_columns.shape[1] == 0:
            continue
        out_columns.append(unit_columns)
        owners += [unit] * unit_columns.shape[1]
        weights.append(sd[kept] / sd[kept].sum())
    return out_columns, owners, weights


def reference_floor(unit_scores):
    loudest = max(
        (float(s.double().pow(2).mean(0).sqrt().max()) for _, s in unit_scores if s.numel()), default=0.0
    )
    return 1e-6 * loudest


def reference_problem(model, spec, writers, activations, metric, k, seed=0, rows=None):
    """``build_component_problem`` before 2026-12-04 (predictors, targets, their units, weights)."""
    compute = torch.float64
    writer_scores = units.principal_scores(writers.transpose(0, 1), k, seed, dtype=compute, rows=rows)
    sources = [(unit, writer_scores[unit]) for unit in range(spec.n_forward)]
    targets = []
    for layer in range(spec.n_layers):
        for qkv in QKV:
            values = units._reader_activations(model, spec, activations, layer, qkv)
            first, group = reference_distinct_heads(values)
            scores = units.principal_scores(
                values[:, first].transpose(0, 1), k, seed, dtype=compute, rows=rows
            )
            start = spec.head_backward(layer, qkv).start
            targets += [(start + head, scores[group[head]]) for head in range(spec.n_heads)]
        pre = [activations[sites.mlp_pre(layer)]]
        if sites.mlp_pre(layer, gate=True) in activations:
            pre.append(activations[sites.mlp_pre(layer, gate=True)])
        hidden = torch.cat(pre, dim=-1)
        targets.append(
            (
                spec.mlp_backward(layer),
                units.principal_scores(hidden[None], k, seed, dtype=compute, rows=rows)[0],
            )
        )
    targets.append((spec.logits_backward, metric.to(compute)[:, None]))
    source_columns, source_of, _ = reference_assemble(sources, reference_floor(sources))
    target_columns, target_of, weights = reference_assemble(targets, reference_floor(targets[:-1]))
    return (
        torch.cat(source_columns, 1),
        torch.cat(target_columns, 1),
        source_of,
        target_of,
        torch.cat(weights),
    )


def observations(model, n_paraphrases=2):
    spec = adapter_of(model).spec
    prepared = prepare_task(model, IOI_TASK)
    texts = observation_texts(IOI_TASK, n_paraphrases)
    return spec, collect_observations(model, spec, prepared, texts, units.component_hook_names(model, spec))


@pytest.mark.parametrize(
    "shape, k, overrides",
    [
        ("gpt2", 4, {}),
        ("gemma", 4, {"d_model": 64, "n_ctx": 256}),  # wide enough for the randomized reduction
        ("gemma", 1, {}),
        ("gemma", 3, {"n_layers": 3}),
        ("llama", 2, {"n_heads": 4, "n_key_value_heads": 2}),
        ("llama", 8, {}),
    ],
)
def test_the_problem_equals_the_one_built_unit_by_unit(shape, k, overrides):
    model = tiny_model(shape, seed=3, **overrides)
    spec, observed = observations(model)
    for rows in (None, observed.distinct):
        problem = units.build_component_problem(
            model, spec, observed.writers, observed.activations, observed.metric, k, 0, rows
        )
        predictors, targets, source_of, target_of, weights = reference_problem(
            model, spec, observed.writers, observed.activations, observed.metric, k, 0, rows
        )
        assert torch.equal(problem.predictors, predictors)
        assert torch.equal(problem.targets, targets)
        assert problem.source_of.tolist() == source_of and problem.target_of.tolist() == target_of
        assert torch.equal(problem.target_weight, weights)


def test_a_unit_that_drops_a_direction_is_standardised_alone():
    """A unit whose third direction has no variance keeps two columns, standardised as the unit-by-
    unit code did; a silent unit keeps none; the others keep all four, from their batch."""
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(5, 40, 4, generator=generator, dtype=torch.float64, device="cpu")
    scores[1, :, 2] = 1e-9 * scores[1, :, 2]  # below 1e-4 of the unit's first direction
    scores[3] = 1e-12 * scores[3]  # silent: below 1e-6 of the loudest unit
    batch = columns.Batch(scores)
    placed = [(10 + row, batch, row) for row in range(5)] + [(20, batch, 1)]  # a row read twice
    got, owners, weights = columns.assemble(placed, columns.silent_floor([batch]))
    expected = reference_assemble(
        [(unit, scores[row]) for unit, _, row in placed], reference_floor([(0, s) for s in scores])
    )
    assert owners == expected[1] == [10] * 4 + [11] * 3 + [12] * 4 + [14] * 4 + [20] * 3
    assert all(torch.equal(a, b) for a, b in zip(got, expected[0], strict=True))
    assert all(torch.equal(a, b) for a, b in zip(weights, expected[2], strict=True))


def test_heads_grouped_across_layers_as_pair_by_pair():
    generator = torch.Generator().manual_seed(1)
    layers = []
    for pattern in ([0, 0, 1, 1], [0, 1, 2, 3], [0, 1, 0, 2], [0, 0, 0, 0]):
        base = torch.randn(6, 4, 3, generator=generator, dtype=torch.float64, device="cpu")
        layers.append(base[:, pattern].clone())
    tricky = layers[1].clone()
    tricky[0, 3] = tricky[0, 1]  # head 3 agrees with head 1 at the first observation only
    layers.append(tricky)
    assert units.distinct_heads_by_layer(layers) == [reference_distinct_heads(v) for v in layers]
    assert units.distinct_heads(layers[2]) == ([0, 1, 3], [0, 1, 0, 2])
    # heads that copy one earlier head without running in a row (compared through an index)
    wider = []
    for pattern in ([0, 1, 0, 2, 0], [0, 1, 2, 1, 1], [0, 0, 1, 0, 1]):
        base = torch.randn(6, 5, 3, generator=generator, dtype=torch.float64, device="cpu")
        wider.append(base[:, pattern].clone())
    wider[2][4, 3] = -wider[2][4, 3]  # head 3 agrees with head 0 at the first observation only
    assert units.distinct_heads_by_layer(wider) == [reference_distinct_heads(v) for v in wider]
    assert units.distinct_heads(wider[0]) == ([0, 1, 3], [0, 1, 0, 2, 0])


def test_groups_of_units_reduce_as_one_call_each(monkeypatch):
    """``principal_scores`` of a list of groups equals a call per group (each its own random start),
    in one batch and in CPU chunks that span groups, on the exact and the randomized path."""
    generator = torch.Generator().manual_seed(2)
    for m, d in ((20, 6), (300, 160)):  # exact (at most 128 rows or columns), randomized
        groups = [torch.randn(n, m, d, generator=generator, device="cpu") for n in (3, 1, 4)]
        alone = torch.cat([units.principal_scores(g, 4, seed=5, dtype=torch.float64) for g in groups])
        for chunk in (units._CPU_CHUNK_BYTES, 2 * m * d * 8):  # 2 units a chunk: across groups
            monkeypatch.setattr(units, "_CPU_CHUNK_BYTES", chunk)
            assert torch.equal(units.principal_scores(groups, 4, seed=5, dtype=torch.float64), alone)


class CountingDevice(SimulatedDevice):
    """A simulated device that counts the reads of device values back to the host (on a GPU, each
    waits for every kernel queued before it)."""

    READS = frozenset(
        ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "equal", "numpy")
    )

    def __init__(self, *modules):
        super().__init__(*modules)
        self.reads = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        flat = tree_flatten((args, kwargs or {}))[0]
        if any(self.on_device(value) for value in flat):
            to_host = name == "to" and any(
                value == "cpu" or (isinstance(value, torch.device) and value.type == "cpu") for value in flat
            )
            if name in self.READS or name == "nonzero" or to_host:
                self.reads += 1
        result = super().__torch_function__(func, types, args, kwargs)
        return result


def test_device_reads_do_not_grow_with_depth():
    """Reading back per unit made about 2,000 waits on the embedded model's GPU run; the problem now
    reads a fixed handful whatever the number of layers."""
    counts = []
    for n_layers in (2, 4):
        model = tiny_model("gemma", seed=0, n_layers=n_layers)
        spec, _ = observations(model)
        with CountingDevice(model) as device:
            _, observed = observations(model)
            device.reads = 0
            units.build_component_problem(
                model, spec, observed.writers, observed.activations, observed.metric, 4, 0, observed.distinct
            )
            counts.append(device.reads)
            assert device.place(observed.writers) not in (None, HOST)
    assert counts[0] == counts[1] <= 12, counts
