"""MLP neurons as nodes for EAP and EAP-IG, against exact patching of single neurons and a
reference written from the definition with autograd on TransformerLens's own hooks (sharing no
code with circuitviz.engine), and the neuron circuits' metric against patching the same neurons by
hand."""

from __future__ import annotations

import pytest
import torch
from reference_patching import metric_of
from simulated_device import SimulatedDevice

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.curves import Baseline, ndf
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.engine.neurons import neuron_patched_metrics, top_neurons
from circuitviz.entry.limits import estimate_run
from circuitviz.methods import get_method
from circuitviz.methods.base import config_to_dict
from circuitviz.methods.eap import EAPConfig
from circuitviz.render import result_graph_html


def post_name(layer: int) -> str:
    return f"blocks.{layer}.mlp.hook_post"


def activations(model, tokens) -> torch.Tensor:
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return torch.stack([cache[post_name(layer)][0] for layer in range(model.cfg.n_layers)], dim=1)


def reference_scores(model, prepared, steps: int | None) -> torch.Tensor:
    """sum_p (a' - a) * mean_k dL/da at the k-th point of the input path (the clean run for EAP)."""
    clean, corrupted = (
        activations(model, prepared.clean_tokens),
        activations(model, prepared.corrupted_tokens),
    )
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(prepared.clean_tokens)
        _, corrupted_cache = model.run_with_cache(prepared.corrupted_tokens)
    e, e_corrupted = clean_cache["blocks.0.hook_resid_pre"], corrupted_cache["blocks.0.hook_resid_pre"]
    alphas = [1.0] if steps is None else [k / steps for k in range(1, steps + 1)]
    total = torch.zeros_like(clean)
    for alpha in alphas:
        kept = {}

        def embed(x, hook, alpha=alpha):
            return (e_corrupted + alpha * (e - e_corrupted)).detach().requires_grad_(True)

        def keep(x, hook, kept=kept):
            kept[hook.name] = x
            return x

        hooks = [("blocks.0.hook_resid_pre", embed)] + [
            (post_name(i), keep) for i in range(model.cfg.n_layers)
        ]
        with torch.enable_grad():
            logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks)
            names = [post_name(i) for i in range(model.cfg.n_layers)]
            grads = torch.autograd.grad(metric_of(model, prepared, logits).sum(), [kept[n] for n in names])
        total += torch.stack([g[0] for g in grads], dim=1)
    return ((corrupted - clean) * total / len(alphas)).sum(0)  # [n_layers, d_mlp]


def neuron_scores(result) -> dict[tuple[int, int], float]:
    return {(n["layer"], n["neuron"]): n["score"] for n in result.details.neurons}


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
@pytest.mark.parametrize("method,steps", [("eap", None), ("eap-ig", 4)])
def test_neuron_scores_equal_the_reference_from_their_definition(shape, method, steps):
    model = tiny_model(shape, seed=2)
    prepared = prepare_task(model, IOI_TASK)
    expected = reference_scores(model, prepared, steps)
    settings = {"neurons": True, "neuron_top_k": model.cfg.d_mlp}  # every neuron listed
    if steps:
        settings["ig_steps"] = steps
    result = get_method(method).run_on(model, IOI_TASK, settings, budgets=[5])
    found = neuron_scores(result)
    assert len(found) == model.cfg.n_layers * model.cfg.d_mlp
    for (layer, neuron), value in found.items():
        assert value == pytest.approx(expected[layer, neuron].item(), abs=1e-9)
    assert expected.abs().max() > 1e-3
    plain = get_method(method).run_on(model, IOI_TASK, {"ig_steps": steps} if steps else {}, budgets=[5])
    assert torch.equal(plain.scores, result.scores)  # the edges' scores do not change


def test_where_the_metric_is_linear_in_a_neuron_eap_is_its_exact_patching():
    """No final norm: the logits are linear in the last MLP's activations, so EAP's score of each
    of its neurons is exactly the metric's change when that neuron alone is patched."""
    model = tiny_model("gpt2", seed=5, normalization_type=None)
    prepared = prepare_task(model, IOI_TASK)
    corrupted = activations(model, prepared.corrupted_tokens)
    result = get_method("eap").run_on(model, IOI_TASK, {"neurons": True, "neuron_top_k": model.cfg.d_mlp})
    found = neuron_scores(result)
    last = model.cfg.n_layers - 1
    with torch.no_grad():
        clean = metric_of(model, prepared, model(prepared.clean_tokens))[0]
        for neuron in range(model.cfg.d_mlp):

            def patch(x, hook, neuron=neuron):
                x = x.clone()
                x[0, :, neuron] = corrupted[:, last, neuron]
                return x

            logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=[(post_name(last), patch)])
            exact = (metric_of(model, prepared, logits)[0] - clean).item()
            assert found[(last, neuron)] == pytest.approx(exact, abs=1e-9)


def test_the_neuron_circuit_metric_is_the_model_with_every_other_neuron_patched():
    model = tiny_model("llama", seed=1)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    corrupted = activations(model, prepared.corrupted_tokens)
    seeded = torch.Generator().manual_seed(0)
    scores = torch.randn(spec.n_layers, model.cfg.d_mlp, generator=seeded, device="cpu")
    kept = torch.stack([top_neurons(scores, 3), ~top_neurons(scores, 3)])
    assert kept[0].sum() == 3 * spec.n_layers
    found = neuron_patched_metrics(model, spec, prepared, kept, corrupted)
    for row in range(2):

        def patch(x, hook, row=row):
            layer = int(hook.name.split(".")[1])
            return torch.where(kept[row, layer], x, corrupted[None, :, layer])

        hooks = [(post_name(layer), patch) for layer in range(spec.n_layers)]
        with torch.no_grad():
            logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks)
        assert found[row].item() == pytest.approx(metric_of(model, prepared, logits)[0].item(), abs=1e-9)


def test_the_run_reports_the_neuron_curve_with_the_shared_ndf():
    model = tiny_model("gemma", seed=0)
    result = get_method("eap").run_on(model, IOI_TASK, {"neurons": True, "neuron_top_k": 5}, budgets=[5])
    details = result.details
    assert details.top_k == 5 and len(details.neurons) == 5 * model.cfg.n_layers
    baseline = Baseline(result.baseline.clean, result.baseline.corrupted)
    ks = [point["k"] for point in details.curve]
    assert 5 in ks and ks == sorted(ks)
    for point in details.curve:
        assert point["ndf"] == pytest.approx(ndf(point["metric"], baseline))
    assert details.curve[-1]["ndf"] == pytest.approx(1.0) or details.curve[-1]["k"] < model.cfg.d_mlp
    assert any("neuron circuits" in line for line in details.report_lines(result))


def test_neurons_cost_memory_in_the_estimate_and_refuse_positions():
    model = tiny_model("gpt2", seed=0)
    off = estimate_run(model, "eap-ig", {"ig_steps": 5}, n_tokens=12)
    on = estimate_run(model, "eap-ig", {"ig_steps": 5, "neurons": True}, n_tokens=12)
    assert on.memory_bytes > off.memory_bytes and on.seconds > off.seconds
    with pytest.raises(ValueError, match="neurons and positions cannot be combined"):
        EAPConfig(positions=True, neurons=True)
    with pytest.raises(ValueError, match="neuron_top_k"):
        EAPConfig(neurons=True, neuron_top_k=0)
    assert config_to_dict(EAPConfig()) == {}  # runs without neurons keep their keys


def test_the_drawing_puts_each_mlps_top_neurons_in_its_layer_row():
    model = tiny_model("llama", seed=1)
    result = get_method("eap").run_on(model, IOI_TASK, {"neurons": True, "neuron_top_k": 3}, budgets=[40])
    drawing = result_graph_html(result, 40)
    nodes = {node["id"]: node for node in drawing.vis.nodes}
    drawn_mlps = [name for name in nodes if name.startswith("m") and "." not in name]
    assert drawn_mlps
    for neuron in result.details.neurons:
        name = f"m{neuron['layer']}.n{neuron['neuron']}"
        mlp = nodes.get(f"m{neuron['layer']}")
        if mlp is None:
            assert name not in nodes  # an MLP outside the circuit draws no neurons
            continue
        assert nodes[name]["y"] == mlp["y"] and nodes[name]["x"] > mlp["x"]
        assert any(e["from"] == name and e["to"] == mlp["id"] for e in drawing.vis.edges)
    assert "top neurons" in drawing.vis.legend
    plain = get_method("eap").run_on(model, IOI_TASK, {}, budgets=[40])
    assert not any(".n" in node["id"] for node in result_graph_html(plain, 40).vis.nodes)


@pytest.mark.parametrize("shape", ["gemma", "llama"])
def test_neurons_run_on_a_simulated_device_and_equal_the_host(shape):
    model = tiny_model(shape, seed=0)
    settings = {"neurons": True, "neuron_top_k": 4, "ig_steps": 3}
    host = get_method("eap-ig").run_on(model, IOI_TASK, settings, budgets=[5])
    with SimulatedDevice(model):
        device = get_method("eap-ig").run_on(model, IOI_TASK, settings, budgets=[5])
    assert [(n["layer"], n["neuron"]) for n in device.details.neurons] == [
        (n["layer"], n["neuron"]) for n in host.details.neurons
    ]
    for a, b in zip(device.details.curve, host.details.curve):
        assert a["metric"] == pytest.approx(b["metric"], abs=1e-9)


def test_a_top_k_over_the_mlps_width_is_said_where_the_label_shows_the_width():
    """--neuron-top-k 4096 on Gemma (2,048 neurons an MLP) printed 'top 2048 a layer' beside a
    config of 4096, the clamp unsaid; the report names it."""
    model = tiny_model("gpt2")
    d_mlp = model.cfg.d_mlp
    result = get_method("eap").run_on(
        model, IOI_TASK, {"neurons": True, "neuron_top_k": 2 * d_mlp}, budgets=[5]
    )
    lines = result.details.report_lines(result)
    assert f"neuron_top_k {2 * d_mlp:,} is more than the {d_mlp:,} neurons of each MLP" in lines[-1]
    fitting = get_method("eap").run_on(model, IOI_TASK, {"neurons": True, "neuron_top_k": 3}, budgets=[5])
    assert not any("more than the" in line for line in fitting.details.report_lines(fitting))


@pytest.mark.parametrize("method", ["eap-ig-activations", "exact"])
def test_neurons_given_to_a_method_without_them_is_refused_naming_those_with_them(method):
    """``--neurons`` to EAP-IG (activations) (or a method that is no gradient method) said only 'has no setting neurons; its
    settings are ...'; the refusal names the methods that score neurons, from the registry."""
    from circuitviz.methods.registry import methods_with

    offered = methods_with("neurons_capable")
    assert {"eap", "eap-ig", "relp", "eap-gp", "atp-star"} <= set(offered) and method not in offered
    for settings in ({"neurons": True}, {"neurons": True, "neuron_top_k": 4}):
        with pytest.raises(ValueError) as refused:
            get_method(method).make_config(settings)
        message = str(refused.value)
        assert message.count(". ") == 0 and len(message) <= 300
        assert message.startswith(f"{method} does not score MLP neurons")
        assert all(name in message for name in offered) and "leave neurons out" in message
    with pytest.raises(ValueError, match="has no setting"):  # any other unknown setting: as before
        get_method(method).make_config({"neurons": True, "bogus": 1})


@pytest.mark.parametrize("method,settings", [("eap-ig", {"ig_steps": 5}), ("relp", {})])
def test_a_neuron_run_over_the_memory_limit_names_turning_neurons_off(method, settings):
    """The memory refusal said 'shorten the prompt, use fewer steps or paraphrases', never the
    neurons that took the memory; it names them, and turning them off when that would fit."""
    from circuitviz.entry.limits import LimitError, Limits, check_run

    model = tiny_model("gpt2", seed=0)
    on = estimate_run(model, method, {**settings, "neurons": True}, n_tokens=12)
    off = estimate_run(model, method, settings, n_tokens=12)
    assert on.neuron_bytes > 0 and off.neuron_bytes == 0
    assert on.memory_bytes == pytest.approx(off.memory_bytes + on.neuron_bytes)
    limit = Limits(max_memory_gb=(off.memory_gb + on.memory_gb) / 2)  # fits without the neurons only
    with pytest.raises(LimitError) as refused:
        check_run(on, limit)
    message = str(refused.value)
    assert "turn neurons off" in message and len(message) <= 300 and message.count("; ") == 1
    assert f"{on.neuron_bytes / 1e9:.1f} GB of it for the MLP neurons" in message
    assert ("fewer IG steps" in message) == (method == "eap-ig")
    check_run(off, limit)  # the way out it names is one
    with pytest.raises(LimitError) as plain:
        check_run(off, Limits(max_memory_gb=off.memory_gb / 2))
    assert "neurons" not in str(plain.value)


def test_a_neuron_curve_at_0_at_every_k_is_explained_on_the_command_line_and_the_page():
    """A neuron curve of NDF 0.000 at every k was printed with no word of why; the line beside it
    (the CLI's report and the app's notes) says what 0 means here, with the figures it rests on."""
    from circuitviz.details.neurons import NeuronDetails

    model = tiny_model("gemma", seed=0)
    result = get_method("eap").run_on(model, IOI_TASK, {"neurons": True, "neuron_top_k": 4}, budgets=[5])
    details = result.details
    baseline = Baseline(result.baseline.clean, result.baseline.corrupted)
    span = baseline.clean - baseline.corrupted
    # the same run's curve with every k's metric moved past the corrupted run: NDF 0 at every k
    flat_curve = [
        {
            **p,
            "metric": baseline.corrupted - 0.5 * span,
            "ndf": ndf(baseline.corrupted - 0.5 * span, baseline),
        }
        for p in details.curve
    ]
    assert all(p["ndf"] == 0 for p in flat_curve)
    flat = NeuronDetails(details.top_k, details.neurons, details.layer_mass, flat_curve, details.scores_note)
    sentence = flat.flat_note()
    last = flat_curve[-1]
    assert sentence.startswith("The neuron circuit's NDF is 0 at every k")
    assert f"top {last['k']:,} neurons of each MLP" in sentence and f"{last['metric']:.3g}" in sentence
    # true of the figures: that metric is at least the corruption's distance from the clean run
    assert abs(baseline.clean - last["metric"]) >= abs(span)
    assert sentence in flat.report_lines(result) and sentence in flat.page_notes()
    assert flat.page_notes()[0].startswith(
        "Neuron circuits (every other neuron patched): top 1 a layer: NDF 0.000"
    )
    # a curve that reads above 0 somewhere gets no such sentence, and its curve is on the page too
    assert any(round(p["ndf"], 3) != 0 for p in details.curve)
    assert details.flat_note() == "" and len(details.page_notes()) == 1
    assert not any("at every k" in line for line in details.report_lines(result))
