"""EAP-GP against a reference written from the paper's equations on TransformerLens's own hooks.

GradPath (Zhang et al. 2025): γ_0 = e (the clean input embedding),
γ_{j+1} = γ_j - η g_j / ||g_j|| with g_j the gradient at γ_j of the squared distance between the
model's logits there and on the corrupted prompt (last position, whole vocabulary), and
score(u -> v) = (z'_u - z_u) . mean over j = 1..m of dL/d(input of v) at γ_j.
"""

from __future__ import annotations

import pytest
import torch
from neuron_checks import assert_neuron_circuit_at_4, assert_neuron_scores
from reference_patching import edges, metric_of, reader_hook, writer_outputs

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.methods import RunContext, get_method


def reference_path(model, prepared, steps: int, length: float) -> list[torch.Tensor]:
    with torch.no_grad():
        target = model(prepared.corrupted_tokens)[0, -1]
    point = writer_outputs(model, GraphSpec.from_model(model), prepared.clean_tokens)["input"]
    path = []
    for _ in range(steps):
        leaf = point.clone().requires_grad_(True)
        with torch.enable_grad():
            logits = model.run_with_hooks(
                prepared.clean_tokens,
                fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook, leaf=leaf: leaf[None])],
            )
            ((logits[0, -1] - target) ** 2).sum().backward()
        point = (point - length * leaf.grad / leaf.grad.norm()).detach()
        path.append(point)
    return path


def reference_gradients(model, spec, prepared, embedding) -> dict[str, torch.Tensor]:
    kept = {}

    def keep(x, hook):
        x.retain_grad()
        kept[hook.name] = x

    hooks = [("blocks.0.hook_resid_pre", lambda x, hook: embedding[None].clone().requires_grad_(True))]
    hooks += [(name, keep) for name in dict.fromkeys(reader_hook(spec, r)[0] for r in spec.backward_names)]
    with torch.enable_grad():
        metric_of(model, prepared, model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks))[0].backward()
    found = {}
    for reader in spec.backward_names:
        name, slot = reader_hook(spec, reader)
        found[reader] = kept[name].grad[0] if slot is None else kept[name].grad[0, :, slot]
    return found


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
def test_eap_gp_equals_the_papers_equations(shape):
    model = tiny_model(shape, seed=4)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    method = get_method("eap-gp")
    config = method.make_config({"ig_steps": 4, "step_scale": 0.7, "backtrack": False})
    scores, path = method.score_with_path(RunContext(model, IOI_TASK), config)
    clean = writer_outputs(model, spec, prepared.clean_tokens)
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    length = 0.7 * float((corrupted["input"] - clean["input"]).norm()) / 4
    expected_path = reference_path(model, prepared, 4, length)
    torch.testing.assert_close(path, torch.stack(expected_path), rtol=1e-8, atol=1e-9)
    runs = [reference_gradients(model, spec, prepared, point) for point in expected_path]
    reference = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64)
    for name, writer, reader in edges(spec):
        gradient = sum(run[reader] for run in runs) / len(runs)
        reference[spec.edge_position(name)] = ((corrupted[writer] - clean[writer]) * gradient).sum()
    assert reference.abs().max() > 1e-3
    torch.testing.assert_close(scores.double(), reference, rtol=1e-7, atol=1e-9)


def _distances(model, prepared, points) -> list[float]:
    """The squared distance of the last position's logits at each point to the corrupted prompt's."""
    with torch.no_grad():
        target = model(prepared.corrupted_tokens)[0, -1]
        out = []
        for point in points:
            logits = model.run_with_hooks(
                prepared.clean_tokens,
                fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook, p=point: p[None])],
            )
            out.append(float(((logits[0, -1] - target) ** 2).sum()))
    return out


def test_the_path_starts_at_the_clean_input_and_descends_towards_the_corrupted_output():
    """Steps of the set length from the clean embedding; small steps bring the output closer to
    the corrupted one at every step (gradient descent), and the scores are the path's."""
    model = tiny_model("gpt2", seed=5)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    method = get_method("eap-gp")
    _, path = method.score_with_path(
        RunContext(model, IOI_TASK),
        method.make_config({"ig_steps": 6, "step_scale": 0.05, "backtrack": False}),
    )
    clean = writer_outputs(model, spec, prepared.clean_tokens)["input"]
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)["input"]
    length = 0.05 * float((corrupted - clean).norm()) / 6
    points = torch.cat([clean[None], path])
    steps = (points[1:] - points[:-1]).flatten(1).norm(dim=1)
    torch.testing.assert_close(steps, torch.full_like(steps, length), rtol=1e-9, atol=1e-12)
    distances = _distances(model, prepared, points)
    assert all(later < earlier for earlier, later in zip(distances, distances[1:])), distances


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
def test_a_step_that_would_climb_is_halved_until_the_path_descends(shape):
    """Fixed steps of the default length climb (the distance to the corrupted output rises
    somewhere on the path, on every tiny shape as on the embedded model);
    with backtracking (the default) every step lowers it or the point stays, and each step is the
    set length halved k times, k never falling along the path (the length found carries on)."""
    model = tiny_model(shape, seed=4)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    method = get_method("eap-gp")
    clean = writer_outputs(model, spec, prepared.clean_tokens)["input"]
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)["input"]
    settings = {"ig_steps": 5}  # the default step length: ||e - e'|| / 5
    length = float((corrupted - clean).norm()) / 5
    _, fixed = method.score_with_path(
        RunContext(model, IOI_TASK), method.make_config({**settings, "backtrack": False})
    )
    fixed_distances = _distances(model, prepared, torch.cat([clean[None], fixed]))
    assert any(b >= a for a, b in zip(fixed_distances, fixed_distances[1:])), fixed_distances
    _, path = method.score_with_path(RunContext(model, IOI_TASK), method.make_config(settings))
    points = torch.cat([clean[None], path])
    distances = _distances(model, prepared, points)
    halvings = []
    for earlier, later, before, after in zip(distances, distances[1:], points, points[1:]):
        size = float((after - before).norm())
        if size == 0:
            continue  # no halving lowered the distance: the point stayed
        assert later < earlier, distances
        found = [k for k in range(40) if abs(size - length / 2**k) <= 1e-6 * size]
        assert found, (size, length)
        halvings.append(found[0])
    assert halvings and halvings == sorted(halvings), halvings
    assert distances[-1] < distances[0]


def hidden(model, tokens) -> torch.Tensor:
    """Every MLP's hidden activation.  # [pos, n_layers, d_mlp]"""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return torch.stack([cache[f"blocks.{i}.mlp.hook_post"][0] for i in range(model.cfg.n_layers)], dim=1)


def hidden_gradients(model, prepared, embedding) -> torch.Tensor:
    """dL/d(every MLP's hidden activation) with the input embedding replaced.  # [pos, n_layers, d_mlp]"""
    kept = {}

    def keep(x, hook):
        x.retain_grad()
        kept[hook.name] = x

    names = [f"blocks.{i}.mlp.hook_post" for i in range(model.cfg.n_layers)]
    hooks = [("blocks.0.hook_resid_pre", lambda x, hook: embedding[None].clone().requires_grad_(True))]
    hooks += [(name, keep) for name in names]
    with torch.enable_grad():
        metric_of(model, prepared, model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks))[0].backward()
    return torch.stack([kept[name].grad[0] for name in names], dim=1)


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
def test_eap_gp_neuron_scores_follow_its_path_and_their_circuit_is_patched(shape):
    """With neurons on, each MLP neuron scores (a' - a) . mean over the path's points of dL/da (the
    path from the paper's equations, as the edges'); the edges do not change; and the neuron
    circuit's metric is the clean run with every other neuron patched by hand."""
    model = tiny_model(shape, seed=4)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    settings = {"ig_steps": 4, "step_scale": 0.7, "backtrack": False}
    clean_in = writer_outputs(model, spec, prepared.clean_tokens)["input"]
    corrupted_in = writer_outputs(model, spec, prepared.corrupted_tokens)["input"]
    path = reference_path(model, prepared, 4, 0.7 * float((corrupted_in - clean_in).norm()) / 4)
    gradient = sum(hidden_gradients(model, prepared, point) for point in path) / len(path)
    clean, corrupted = hidden(model, prepared.clean_tokens), hidden(model, prepared.corrupted_tokens)
    expected = ((corrupted - clean) * gradient).sum(0)  # [n_layers, d_mlp]
    assert expected.abs().max() > 1e-3
    d_mlp = model.cfg.d_mlp
    method = get_method("eap-gp")
    result = method.run_on(model, IOI_TASK, {**settings, "neurons": True, "neuron_top_k": d_mlp}, budgets=[1])
    assert_neuron_scores(result, expected)
    assert torch.equal(result.scores, method.run_on(model, IOI_TASK, settings, budgets=[1]).scores)
    assert_neuron_circuit_at_4(model, prepared, result, expected, corrupted)
