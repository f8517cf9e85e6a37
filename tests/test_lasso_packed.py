"""CircuitLasso's texts run packed as a prefix tree (``circuitviz.engine.packed``): one pass over
their distinct prefixes, each position attending to its ancestors at its depth. Every observation
and the clean and corrupted runs equal those of the padded batches to float rounding (the tiny
models are float64, so to 1e-10), whatever the position embedding (learned, rotary, rotary on
part of each head), and a model the packing cannot serve runs the batches as before."""

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import prepare_task
from circuitviz.engine.packed import packs, prefix_tree
from circuitviz.lasso import observations as observing
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
    return collect_observations(
        model, spec, prepared, texts, component_hook_names(model, spec), keep_runs=True
    )


@pytest.mark.parametrize("shape", list(SHAPES))
def test_packed_observations_equal_the_batches(shape, monkeypatch):
    model = tiny_model(shape.split(",")[0], seed=1, **SHAPES[shape])
    assert packs(model, 32)
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


def test_a_window_shorter_than_the_tree_runs_the_batches(monkeypatch):
    model = tiny_model("gemma", seed=1, attn_types=["local", "global"], window_size=6, use_local_attn=True)
    assert packs(model, 6) and not packs(model, 7)
    texts = observation_texts(IOI_TASK, 4)
    rows = [ids for _, ids in observing._token_rows(model, texts)]
    assert prefix_tree(rows).n_nodes > 6
    spec = adapter_of(model).spec
    batches = list(observing._batches(observing._token_rows(model, texts), 1, 0))
    assert observing._tree_if_cheaper(model, spec, observing._token_rows(model, texts), batches, 1, 0) is None
    batched = observed(model, False, monkeypatch)
    assert batched.n_observations == sum(len(ids) - 1 for ids in rows)
