"""The yardstick's node checks, and the evidence for the engine's post-attention-norm handling.

Gemma normalises the summed attention output (``ln1_post``) before adding it to the residual
stream. The engine takes a head's contribution as its output through that norm with the norm's
scale frozen; a tool that takes a head's output before the norm scores it in the wrong space.
On tiny Gemma-shaped models whose post-norm weights spread over orders of magnitude as
Gemma-3-270M's do (0 to about 500 within a layer), the engine's head scores track the effect of
patching each head in the model's own computation, and the pre-norm scores do not.
"""

from __future__ import annotations

import math

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.bench.yardstick import (
    component_nodes,
    node_effects,
    node_scores,
    node_tracking,
    prenorm_eap_scores,
    spearman,
)
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method


def _setup(model):
    spec = GraphSpec.from_model(model)
    return spec, Evaluator(model, spec, prepare_task(model, IOI_TASK))


def _without_node(spec: GraphSpec, nodes: list[int]) -> torch.Tensor:
    """One circuit per node: the whole graph without that node's outgoing edges."""
    circuits = spec.edge_mask.expand(len(nodes), -1, -1).clone()
    for row, node in enumerate(nodes):
        circuits[row, node] = False
    return circuits


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
def test_patching_a_node_alone_is_removing_all_its_edges(shape):
    """Ground truth for the node effects: switching a head's z (or an MLP's output) to its
    corrupted value is exactly the engine's evaluation with every outgoing edge of that node
    removed (under Gemma's post-attention norm too: each reader renormalises its own mix)."""
    model = tiny_model(shape, seed=2)
    spec, evaluator = _setup(model)
    nodes = component_nodes(spec)
    effects = node_effects(model, spec, evaluator)
    through_graph = evaluator.metrics(_without_node(spec, nodes)) - evaluator.baseline.clean
    assert torch.allclose(effects, through_graph, atol=1e-9)
    assert effects.abs().max() > 1e-3


def test_spearman_by_hand():
    assert spearman(
        torch.tensor([1.0, 2.0, 3.0, 4.0], device="cpu"), torch.tensor([10.0, 20.0, 25.0, 40.0], device="cpu")
    ) == pytest.approx(1.0)
    assert spearman(
        torch.tensor([1.0, 2.0, 3.0], device="cpu"), torch.tensor([3.0, 2.0, 1.0], device="cpu")
    ) == pytest.approx(-1.0)
    # ties share their mean rank: ranks (0.5, 0.5, 2) and (0, 1, 2)
    assert spearman(
        torch.tensor([1.0, 1.0, 2.0], device="cpu"), torch.tensor([1.0, 2.0, 3.0], device="cpu")
    ) == pytest.approx(0.8660254, abs=1e-6)
    assert math.isnan(spearman(torch.ones(3, device="cpu"), torch.tensor([1.0, 2.0, 3.0], device="cpu")))


def test_node_scores_sum_outgoing_edges():
    spec = GraphSpec(n_layers=2, n_heads=2)
    scores = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")
    scores[spec.edge_position("a0.h1->m1")] = 2.0
    scores[spec.edge_position("a0.h1->logits")] = -0.5
    scores[spec.mlp_forward(1), 0] = 9.0  # not an edge (m1 cannot feed layer 0): ignored
    totals = node_scores(spec, scores)
    assert totals[spec.head_forward(0).start + 1].item() == 1.5 and totals[spec.mlp_forward(1)].item() == 0.0


def _gemma_with_gemma_like_post_norms(seed: int):
    """A tiny Gemma-shaped model whose ln1_post weights are log-uniform over [0.05, 50]."""
    model = tiny_model("gemma", seed=seed, n_layers=3, n_heads=4, d_model=64)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in model.blocks:
            weight = block.ln1_post.w
            spread = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device).uniform_(
                math.log(0.05), math.log(50.0), generator=generator
            )
            weight.copy_(spread.exp())
    return model


def test_head_outputs_before_the_post_norm_do_not_predict_patching_and_the_engine_s_do():
    engine, before_norm = [], []
    for seed in range(5):
        model = _gemma_with_gemma_like_post_norms(seed)
        spec, evaluator = _setup(model)
        effects = node_effects(model, spec, evaluator)  # each head patched at its z, norm recomputed
        eap = get_method("eap").run_on(model, IOI_TASK, budgets=[5]).scores
        prenorm = prenorm_eap_scores(model, spec, evaluator)
        engine.append(node_tracking(spec, eap, effects)["signed_heads"])
        before_norm.append(node_tracking(spec, prenorm, effects)["signed_heads"])
        # the engine's own patching of each head (every out-edge removed) is patching the head
        heads = [n for n in component_nodes(spec) if n not in {spec.mlp_forward(layer) for layer in range(3)}]
        through_graph = evaluator.metrics(_without_node(spec, heads)) - evaluator.baseline.clean
        truth = effects[[component_nodes(spec).index(n) for n in heads]]
        assert torch.allclose(through_graph, truth.to(through_graph.dtype), atol=1e-9), seed
    assert all(e > b + 0.2 for e, b in zip(engine, before_norm)), (engine, before_norm)
    assert sum(engine) / 5 > 0.85 and sum(before_norm) / 5 < 0.5, (engine, before_norm)


def test_without_a_post_norm_the_pre_norm_scores_are_the_engine_s():
    model = tiny_model("llama", seed=0)
    spec, evaluator = _setup(model)
    eap = get_method("eap").run_on(model, IOI_TASK, budgets=[5]).scores
    assert torch.allclose(prenorm_eap_scores(model, spec, evaluator).float(), eap, atol=1e-6)
