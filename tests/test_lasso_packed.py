"""CircuitLasso's texts run packed as a prefix tree (``circuitviz.engine.packed``): one pass over
their distinct prefixes, each position attending to its ancestors at its depth. Every observation
and the clean and corrupted runs equal those of the padded batches to float rounding (the tiny
models are float64, so to 1e-10), whatever the position embedding (learned, rotary, rotary on
part of each head), and a model the packing cannot serve runs the batches as before."""

import pytest
import torch
from simulated_device import SimulatedDevice

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import prepare_task
from circuitviz.engine.packed import packs, prefix_tree
from circuitviz.lasso import observations as observing
from circuitviz.lasso import units
from circuitviz.lasso.observations import collect_observations, observation_texts
from circuitviz.lasso.units import component_hook_names
from circuitviz.models.adapter import adapter_of

SHAPES = {
    "gpt2": {},
    "gemma": {},
    "llama": {},
    "llama, rotary on half of each head": {"rotary_dim": 4},
}


def test_the_tree_numbers_each_distinct_prefix_once_after_its_ancestors():
    tree = prefix_tree([[1, 2, 3], [1, 2, 4], [1, 5], [1, 2, 3, 6]])
    assert tree.tokens.tolist() == [1, 2, 3, 4, 5, 6]
    assert tree.paths == [[0, 1, 2], [0, 1, 3], [0, 4], [0, 1, 2, 5]]
    assert tree.depth.tolist() == [0, 1, 2, 2, 1, 3]
    assert tree.ancestors[3].nonzero().flatten().tolist() == [0, 1, 3]
    assert tree.ancestors[5].nonzero().flatten().tolist() == [0, 1, 2, 5]
    assert tree.ancestors[4].nonzero().flatten().tolist() == [0, 4]
    assert not tree.ancestors.triu(1).any()  # ancestors come first: the causal mask holds them


def observed(model, packed: bool, monkeypatch):
    """The IOI task's observations (4 paraphrases), packed (whatever the cost) or in padded batches."""
    spec = adapter_of(model).spec
    prepared = prepare_task(model, IOI_TASK)
    texts = observation_texts(IOI_TASK, 4)

    def choose(model, spec, rows, *rest):
        tree = prefix_tree([ids for _, ids in rows])
        return tree if packed and packs(model, tree.n_nodes) else None

    monkeypatch.setattr(observing, "_tree_if_cheaper", choose)
    found = collect_observations(
        model, spec, prepared, texts, component_hook_names(model, spec), keep_runs=True
    )
    assert (found.distinct is not None) == packed  # the packed pass ran (it fits the context)
    return found


@pytest.mark.parametrize("shape", list(SHAPES))
def test_packed_observations_equal_the_batches(shape, monkeypatch):
    model = tiny_model(shape.split(",")[0], seed=1, n_ctx=256, **SHAPES[shape])
    batched = observed(model, False, monkeypatch)
    packed = observed(model, True, monkeypatch)
    assert packed.kinds == batched.kinds and torch.equal(packed.final, batched.final)
    assert packed.n_observations == batched.n_observations
    assert torch.allclose(packed.writers, batched.writers, rtol=1e-10, atol=1e-10)
    assert torch.allclose(packed.metric, batched.metric, rtol=1e-10, atol=1e-10)
    assert packed.activations.keys() == batched.activations.keys()
    for name, values in batched.activations.items():
        assert torch.allclose(packed.activations[name], values, rtol=1e-10, atol=1e-10), name
    for mine, theirs in zip(packed.runs, batched.runs):
        if theirs is None:
            assert mine is None
        else:
            assert mine.shape == theirs.shape
            assert torch.allclose(mine, theirs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape", ["gemma", "llama"])
@pytest.mark.parametrize("packed", [True, False])
def test_grouped_keys_and_values_are_each_groups_copy(shape, packed, monkeypatch):
    """The observation pass makes a grouped-query model's keys and values once per key/value
    head (``split_attention_inputs(False, grouped=True)``), where TransformerLens's ungrouped
    attention makes one copy per query head from a repeated weight: the keys and values are
    each group's copy, every other observation and the clean and corrupted runs the same, to
    rounding (products of other shapes; on the embedded Gemma-3-270M, to the bit)."""
    model = tiny_model(shape, seed=1, n_ctx=256)
    n_heads, groups = model.cfg.n_heads, model.cfg.n_key_value_heads
    assert groups < n_heads and model.cfg.ungroup_grouped_query_attention
    grouped = observed(model, packed, monkeypatch)
    assert model.cfg.ungroup_grouped_query_attention  # restored
    adapter_class = type(adapter_of(model))
    split = adapter_class.split_attention_inputs
    monkeypatch.setattr(
        adapter_class, "split_attention_inputs", lambda self, shared, grouped=False: split(self, shared)
    )
    ungrouped = observed(model, packed, monkeypatch)
    assert torch.allclose(grouped.writers, ungrouped.writers, rtol=1e-12, atol=1e-12)
    assert torch.allclose(grouped.metric, ungrouped.metric, rtol=1e-12, atol=1e-12)
    for mine, theirs in zip(grouped.runs, ungrouped.runs):  # raw heads: None without a post-norm
        assert (mine is None and theirs is None) or torch.allclose(mine, theirs, rtol=1e-12, atol=1e-12)
    for name, values in ungrouped.activations.items():
        if name.endswith(("hook_k", "hook_v")):
            assert grouped.activations[name].shape[1] == groups
            values = values[:, :: n_heads // groups]
        assert torch.allclose(grouped.activations[name], values, rtol=1e-12, atol=1e-12), name


def test_a_window_shorter_than_the_tree_runs_the_batches(monkeypatch):
    model = tiny_model(
        "gemma", seed=1, n_ctx=256, attn_types=["local", "global"], window_size=6, use_local_attn=True
    )
    assert packs(model, 6) and not packs(model, 7)
    texts = observation_texts(IOI_TASK, 4)
    rows = [ids for _, ids in observing._token_rows(model, texts)]
    assert prefix_tree(rows).n_nodes > 6
    spec = adapter_of(model).spec
    batches = list(observing._batches(observing._token_rows(model, texts), 1, 0))
    assert observing._tree_if_cheaper(model, spec, observing._token_rows(model, texts), batches, 1, 0) is None
    batched = observed(model, False, monkeypatch)
    assert batched.n_observations == sum(len(ids) - 1 for ids in rows)


@pytest.mark.parametrize("n_distinct, n_rows, width", [(40, 90, 64), (150, 200, 160)])
def test_the_reduction_on_distinct_rows_equals_the_reduction_on_every_row(n_distinct, n_rows, width):
    """Both paths: exact (at most ``units.EXACT_ROWS`` rows or columns) and randomized."""
    generator = torch.Generator().manual_seed(0)
    distinct = torch.randn(3, n_distinct, width, generator=generator, dtype=torch.float64, device="cpu")
    decay = torch.linspace(3, 0.1, width, dtype=torch.float64, device="cpu")  # a decaying spectrum
    distinct = distinct * decay
    extra = n_rows - n_distinct
    nodes = torch.cat(
        [
            torch.arange(n_distinct, device="cpu"),
            torch.randint(0, n_distinct, (extra,), generator=generator, device="cpu"),
        ]
    )
    order = nodes[torch.randperm(n_rows, generator=generator)].tolist()
    x = distinct[:, order]  # [3, n_rows, width]
    assert (min(n_rows, width) <= units.EXACT_ROWS) == (n_rows == 90)  # one case of each path
    first, inverse = observing._distinct_rows(order)
    assert len(first) == n_distinct and torch.equal(x[:, first][:, inverse], x)
    every = units.principal_scores(x, 4, seed=3, dtype=torch.float64)
    once = units.principal_scores(x, 4, seed=3, dtype=torch.float64, rows=(first, inverse))
    assert torch.allclose(aligned(once, every), every, rtol=1e-9, atol=1e-10)
    assert not torch.equal(once, every)  # computed otherwise: equal to rounding only


def aligned(scores: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``scores`` with each direction's sign turned to ``like``'s (a direction's sign is arbitrary:
    QR and SVD of other rows may choose the other one; the regression reads |coefficients| and
    squared differences only)."""
    return scores * torch.sign((scores * like).sum(-2, keepdim=True))


@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
def test_packed_rows_repeat_bit_for_bit_and_give_the_same_problem(shape, monkeypatch):
    model = tiny_model(shape, seed=1, d_model=64, n_ctx=256)  # wide enough for the randomized PCA
    spec = adapter_of(model).spec
    packed = observed(model, True, monkeypatch)
    first, inverse = packed.distinct
    assert len(first) < packed.n_observations
    assert torch.equal(packed.writers[first][inverse], packed.writers)
    for values in packed.activations.values():
        assert torch.equal(values[first][inverse], values)
    assert observed(model, False, monkeypatch).distinct is None
    problems = [
        units.build_component_problem(
            model, spec, packed.writers, packed.activations, packed.metric, 4, 0, rows
        )
        for rows in (None, packed.distinct)
    ]
    for name in ("predictors", "targets"):
        mine, theirs = getattr(problems[1], name), getattr(problems[0], name)
        assert torch.allclose(aligned(mine, theirs), theirs, rtol=1e-8, atol=1e-9)
    assert torch.allclose(problems[1].target_weight, problems[0].target_weight, rtol=1e-8, atol=1e-9)
    assert torch.equal(problems[0].source_of, problems[1].source_of)
    assert torch.equal(problems[0].target_of, problems[1].target_of)


@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
def test_the_packed_pass_runs_on_a_device(shape, monkeypatch):
    """Every tensor of the packed pass meets the model's device as CUDA would require."""
    model = tiny_model(shape, seed=1, d_model=64, n_ctx=256)
    on_host = observed(model, True, monkeypatch)
    with SimulatedDevice(model):
        on_device = observed(model, True, monkeypatch)
        problem = units.build_component_problem(
            model,
            adapter_of(model).spec,
            on_device.writers,
            on_device.activations,
            on_device.metric,
            4,
            0,
            on_device.distinct,
        )
        predictors = problem.predictors.cpu()
    assert torch.equal(on_device.writers.cpu(), on_host.writers)
    spec = adapter_of(model).spec
    expected = units.build_component_problem(
        model, spec, on_host.writers, on_host.activations, on_host.metric, 4, 0, on_host.distinct
    )
    assert torch.equal(predictors, expected.predictors)


@pytest.mark.parametrize("shape", ["gpt2", "gemma", "llama"])
def test_laid_out_projections_give_the_same_observations_to_the_bit(shape, monkeypatch):
    """The observation pass projects q/k/v with weights laid out once (``laid_out_projections``):
    the same product of the same operands as TransformerLens's per-call copy, so the same bits;
    the laid-out weights follow a weight changed in place, and nothing is left on the modules."""
    from contextlib import nullcontext

    from circuitviz.models import projections

    model = tiny_model(shape, seed=1, n_ctx=256)
    laid_out = observed(model, True, monkeypatch)
    assert all(projections._KEPT.get(block.attn) for block in model.blocks)
    assert not any("calculate_qkv_matrices" in block.attn.__dict__ for block in model.blocks)
    monkeypatch.setattr(observing, "laid_out_projections", lambda model: nullcontext())
    plain = observed(model, True, monkeypatch)
    assert torch.equal(laid_out.writers, plain.writers) and torch.equal(laid_out.metric, plain.metric)
    for name, values in plain.activations.items():
        assert torch.equal(laid_out.activations[name], values), name
    with torch.no_grad():
        model.blocks[0].attn.W_Q.mul_(1.5)  # a weight changed in place: laid out again
    plain = observed(model, True, monkeypatch)
    monkeypatch.undo()
    again = observed(model, True, monkeypatch)
    assert torch.equal(again.writers, plain.writers) and not torch.equal(again.writers, laid_out.writers)
