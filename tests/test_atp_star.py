"""AtP* against exact patching and against a reference written from its equations.

QK fix: an edge into a query or key of head h is scored by recomputing h's softmax exactly with
the patched query or key, then sum_{t,s} (A' - A) dL/dA. Where the metric is linear in the
pattern (one layer, no norm, an MLP that writes a constant), that is the exact effect of patching
the edge. GradDrop: score = sum over layers l of |AtP score with layer l's attention and MLP
outputs cut from the backward pass| / (L - 1).
"""

from __future__ import annotations

import pytest
import torch
from neuron_checks import assert_neuron_circuit_at_4, assert_neuron_scores
from reference_patching import edges, metric_of, reader_hook, writer_outputs

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.methods import get_method


def scores_of(model, method: str, **settings) -> torch.Tensor:
    chosen = get_method(method)
    return chosen.run_on(model, IOI_TASK, chosen.make_config(settings), budgets=[1]).scores.double()


def query_key_columns(spec: GraphSpec) -> torch.Tensor:
    columns = torch.zeros(spec.n_backward, dtype=torch.bool, device="cpu")  # compared with CPU scores
    for layer in range(spec.n_layers):
        for kind in "qk":
            columns[spec.head_backward(layer, kind)] = True
    return columns


@pytest.mark.parametrize("shape", ["gpt2", "llama"])
def test_without_either_fix_atp_is_eap(shape):
    model = tiny_model(shape, seed=1)
    torch.testing.assert_close(
        scores_of(model, "atp-star", qk_fix=False, grad_drop=False), scores_of(model, "eap"), rtol=0, atol=0
    )


@pytest.mark.parametrize("shape", ["gpt2", "llama"])
def test_the_qk_fix_is_exact_where_the_metric_is_linear_in_the_pattern(shape):
    model = tiny_model(shape, seed=2, n_layers=1, normalization_type=None, final_rms=False)
    with torch.no_grad():
        model.blocks[0].mlp.W_out.zero_()
        for name, parameter in model.named_parameters():
            if name.endswith(("W_Q", "W_K")):
                parameter.mul_(6.0)  # sharper patterns: queries and keys matter, softmax saturates
    spec = GraphSpec.from_model(model)
    columns = query_key_columns(spec)
    exact = scores_of(model, "exact")[:, columns]
    fixed = scores_of(model, "atp-star", grad_drop=False)[:, columns]
    plain = scores_of(model, "eap")[:, columns]
    assert exact.abs().max() > 1e-3
    torch.testing.assert_close(fixed, exact, rtol=1e-7, atol=1e-10)
    assert (plain - exact).abs().max() > 1e-4  # the gradient alone is not


def test_the_qk_fix_brings_queries_and_keys_closer_to_exact_patching():
    """Averaged over random two-layer models with norms and MLPs, where it is an approximation."""
    errors = {"atp": 0.0, "atp*": 0.0}
    for seed in range(3):
        model = tiny_model("gpt2", seed=seed)
        spec = GraphSpec.from_model(model)
        keep = spec.edge_mask & query_key_columns(spec)[None, :]
        exact = scores_of(model, "exact")[keep]
        errors["atp"] += (scores_of(model, "eap")[keep] - exact).abs().mean().item()
        errors["atp*"] += (scores_of(model, "atp-star", grad_drop=False)[keep] - exact).abs().mean().item()
    assert errors["atp*"] < 0.8 * errors["atp"], errors


def dropped_gradients(model, spec, prepared, layer: int) -> dict[str, torch.Tensor]:
    """{reader: dL/d(its input)} with layer ``layer``'s attention and MLP outputs detached."""
    kept = {}

    def keep(x, hook):
        x.retain_grad()
        kept[hook.name] = x

    def leaf(x, hook):
        return x.detach().clone().requires_grad_(True)

    hooks = [("blocks.0.hook_resid_pre", leaf)]
    hooks += [(f"blocks.{layer}.hook_{kind}_out", lambda x, hook: x.detach()) for kind in ("attn", "mlp")]
    hooks += [(name, keep) for name in dict.fromkeys(reader_hook(spec, r)[0] for r in spec.backward_names)]
    with torch.enable_grad():
        metric_of(model, prepared, model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks))[0].backward()
    found = {}
    for reader in spec.backward_names:
        name, slot = reader_hook(spec, reader)
        grad = kept[name].grad
        grad = torch.zeros_like(kept[name]) if grad is None else grad
        found[reader] = grad[0] if slot is None else grad[0, :, slot]
    return found


@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
def test_grad_drop_equals_its_equations(shape):
    model = tiny_model(shape, seed=3, n_layers=3)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    clean = writer_outputs(model, spec, prepared.clean_tokens)
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    reference = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64)
    for layer in range(spec.n_layers):
        gradients = dropped_gradients(model, spec, prepared, layer)
        for name, writer, reader in edges(spec):
            score = ((corrupted[writer] - clean[writer]) * gradients[reader]).sum()
            reference[spec.edge_position(name)] += score.abs() / (spec.n_layers - 1)
    ours = scores_of(model, "atp-star", qk_fix=False)
    assert reference.abs().max() > 1e-3
    torch.testing.assert_close(ours, reference, rtol=1e-7, atol=1e-10)


def hidden_activations(model, tokens) -> torch.Tensor:
    """Every MLP's hidden activation.  # [pos, n_layers, d_mlp]"""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return torch.stack([cache[f"blocks.{i}.mlp.hook_post"][0] for i in range(model.cfg.n_layers)], dim=1)


def hidden_gradients(model, prepared, dropped: int | None) -> torch.Tensor:
    """dL/d(every MLP's hidden activation), layer ``dropped``'s attention and MLP outputs detached
    (None: none).  # [pos, n_layers, d_mlp]"""
    kept = {}

    def keep(x, hook):
        x.retain_grad()
        kept[hook.name] = x

    names = [f"blocks.{i}.mlp.hook_post" for i in range(model.cfg.n_layers)]
    hooks = [("blocks.0.hook_resid_pre", lambda x, hook: x.detach().clone().requires_grad_(True))]
    if dropped is not None:
        hooks += [
            (f"blocks.{dropped}.hook_{kind}_out", lambda x, hook: x.detach()) for kind in ("attn", "mlp")
        ]
    hooks += [(name, keep) for name in names]
    with torch.enable_grad():
        metric_of(model, prepared, model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks))[0].backward()
    return torch.stack(
        [kept[n].grad[0] if kept[n].grad is not None else torch.zeros_like(kept[n][0]) for n in names], dim=1
    )


@pytest.mark.parametrize("grad_drop", [True, False])
@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
def test_atp_star_neuron_scores_follow_its_equations_and_their_circuit_is_patched(shape, grad_drop):
    """With neurons on, a neuron scores as an edge does: sum_l |sum_p (a' - a) . dL/da with layer l's
    outputs cut| / (L - 1) under GradDrop, the plain gradient's product without; the edges do not
    change; the neuron circuit's metric is the clean run with every other neuron patched by hand."""
    model = tiny_model(shape, seed=3, n_layers=3)
    prepared = prepare_task(model, IOI_TASK)
    clean = hidden_activations(model, prepared.clean_tokens)
    corrupted = hidden_activations(model, prepared.corrupted_tokens)
    n_layers, d_mlp = model.cfg.n_layers, model.cfg.d_mlp
    if grad_drop:
        expected = sum(
            ((corrupted - clean) * hidden_gradients(model, prepared, layer)).sum(0).abs()
            for layer in range(n_layers)
        ) / (n_layers - 1)
    else:
        expected = ((corrupted - clean) * hidden_gradients(model, prepared, None)).sum(0)
    assert expected.abs().max() > 1e-3
    settings = {"qk_fix": shape == "gpt2", "grad_drop": grad_drop}
    method = get_method("atp-star")
    result = method.run_on(model, IOI_TASK, {**settings, "neurons": True, "neuron_top_k": d_mlp}, budgets=[1])
    assert_neuron_scores(result, expected)
    assert torch.equal(result.scores, method.run_on(model, IOI_TASK, settings, budgets=[1]).scores)
    assert_neuron_circuit_at_4(model, prepared, result, expected, corrupted)


def test_atp_star_says_its_neuron_scores_are_sizes_under_grad_drop():
    model = tiny_model("gpt2", seed=3, n_layers=3)
    method = get_method("atp-star")
    dropped = method.run_on(model, IOI_TASK, {"qk_fix": False, "neurons": True}, budgets=[1]).details
    plain = method.run_on(
        model, IOI_TASK, {"qk_fix": False, "grad_drop": False, "neurons": True}, budgets=[1]
    )
    assert "a size, not the metric's change" in dropped.scores_note
    assert all(n["score"] >= 0 for n in dropped.neurons)
    assert "a size" not in plain.details.scores_note
