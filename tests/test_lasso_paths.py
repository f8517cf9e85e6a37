"""CircuitLasso's path scoring against brute force: every path into the metric enumerated."""

import itertools

import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.lasso.paths import path_circuit, path_shares
from circuitviz.methods import get_method


def _spec() -> GraphSpec:
    return GraphSpec.from_model(tiny_model("gpt2", seed=0, n_layers=2, n_heads=2))


def _paths_to_logits(spec: GraphSpec, strengths: torch.Tensor, reader: int) -> float:
    """Sum over every path from ``reader``'s node to logits of the product of its strengths."""
    owner = spec.backward_to_forward.tolist()
    if owner[reader] < 0:
        return 1.0
    writer = owner[reader]
    return sum(
        float(strengths[writer, nxt]) * _paths_to_logits(spec, strengths, nxt)
        for nxt in range(spec.n_backward)
        if spec.edge_mask[writer, nxt] and strengths[writer, nxt] > 0
    )


def test_shares_are_strength_times_every_path_into_the_metric():
    spec = _spec()
    generator = torch.Generator().manual_seed(0)
    shape = (spec.n_forward, spec.n_backward)
    strengths = torch.rand(shape, generator=generator, dtype=torch.float64, device="cpu")
    keep = torch.rand(strengths.shape, generator=generator, device="cpu") < 0.4
    strengths = strengths * keep * spec.edge_mask
    shares, importance = path_shares(spec, strengths)
    for writer, reader in itertools.product(range(spec.n_forward), range(spec.n_backward)):
        expected = float(strengths[writer, reader]) * _paths_to_logits(spec, strengths, reader)
        assert abs(float(shares[writer, reader]) - expected) <= 1e-12 * max(1.0, expected)
    assert float(importance[0]) > 0  # the input reaches the metric through some selected path


def test_an_edge_into_a_node_that_reaches_nothing_has_no_share_and_is_not_in_the_circuit():
    spec = _spec()
    strengths = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64, device="cpu")
    head = spec.head_forward(0).start  # a0.h0: read by the metric
    dead = head + 1  # a0.h1: read by nobody
    strengths[0, spec.head_backward(0, "v").start] = 1.0  # input -> a0.h0<v>
    strengths[0, spec.head_backward(0, "v").start + 1] = 5.0  # input -> a0.h1<v>, stronger
    strengths[head, spec.logits_backward] = 0.5
    shares, _ = path_shares(spec, strengths)
    assert float(shares[0, spec.head_backward(0, "v").start]) == 0.5
    assert float(shares[0, spec.head_backward(0, "v").start + 1]) == 0.0
    circuit = path_circuit(spec, shares, 0.03)
    assert spec.edge_names_of(circuit) == ["input->a0.h0<v>", "a0.h0->logits"]
    assert dead not in [spec.forward_names.index(n.split("->")[0]) for n in spec.edge_names_of(circuit)]


def test_a_weak_parallel_source_below_the_share_floor_leaves_the_circuit():
    spec = _spec()
    strengths = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64, device="cpu")
    mlp = spec.mlp_forward(0)
    strengths[0, spec.mlp_backward(0)] = 1.0
    strengths[spec.head_forward(0).start, spec.mlp_backward(0)] = 0.01  # 1 % of the strong source
    strengths[0, spec.head_backward(0, "q").start] = 1.0
    strengths[mlp, spec.logits_backward] = 1.0
    shares, _ = path_shares(spec, strengths)
    assert "a0.h0->m0" not in spec.edge_names_of(path_circuit(spec, shares, 0.03))
    assert "a0.h0->m0" in spec.edge_names_of(path_circuit(spec, shares, 0.0))


def test_a_model_with_norms_is_fitted_as_noisy():
    model = tiny_model("gemma", seed=0)
    method = get_method("circuit-lasso")
    result = method.run_on(model, IOI_TASK, method.make_config({"n_paraphrases": 2}), budgets=[5])
    spec = GraphSpec.from_model(model)
    assert result.details.regression["regime"] == "noisy"
    assert (
        result.details.regression["linear_residual"] is None
        or result.details.regression["linear_residual"] > 1e-6
    )
    circuit = spec.mask_from_edge_names(result.details.circuit_edges)
    assert bool((result.scores[circuit] > 0).all())
