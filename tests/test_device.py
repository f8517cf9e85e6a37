"""Every method, label and estimate with the model on a second device, on a CPU-only machine.

A GPU run fails the moment a tensor made on the CPU meets one on the GPU; CI has no GPU, so
``SimulatedDevice`` (tests/simulated_device.py) keeps the same books on the CPU: the model's
tensors and everything computed from them count as on the device, tensors made without a
device count as on the host, and an operation that mixes the two raises as CUDA does. Every
registered method runs under it on GPT-2-, Gemma- and Llama-shaped tiny models and must give
exactly what it gives on the host. On the code before the device fixes, 8 of the 11 methods
failed here, in the places they failed on an H200.
"""

from __future__ import annotations

import pytest
import torch
from simulated_device import DeviceMixError, SimulatedDevice, assert_same_result, light_config

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.methods import available_methods, get_method

SHAPES = ("gpt2", "gemma", "llama")
BUDGETS = (3, 8, 20, 60)


# Fewer of what a method repeats (paraphrases, integration steps, optimisation steps): a tensor on
# the wrong device fails the first repeat as it would the last, and these were 60 % of the fast
# set's time (paraphrase-pruning alone 6.4 min at load 15 over three shapes).


def test_the_simulated_device_refuses_what_cuda_refuses():
    model = tiny_model("gpt2")
    with SimulatedDevice(model):
        weights = model.W_E[:4]  # [4, d_model] on the device
        with pytest.raises(DeviceMixError, match="same device"):
            torch.zeros(weights.shape) + weights
        with pytest.raises(DeviceMixError):
            scores = torch.zeros(4, device="cpu")  # the host's, meeting the device's weights
            scores += weights.sum(1)
        with pytest.raises(TypeError, match="numpy"):
            weights.numpy()
        # what CUDA allows: a device tensor made on the data's device, host indices, scalars, copies
        assert torch.equal(torch.zeros(weights.shape, device=weights.device) + weights, weights)
        assert weights[torch.tensor([0, 2])].shape == (2, model.cfg.d_model)
        assert (weights * torch.tensor(2.0)).shape == weights.shape
        assert weights.cpu().numpy().shape == tuple(weights.shape)
    # and the model is left as it was: its config names its real device again
    assert str(model.cfg.device) == "cpu" and model.to_tokens("When Mary").device.type == "cpu"


# `make test` runs every method on all three shapes; the fast set every method on one shape, the
# shapes in turn (a tensor made on the wrong device fails on any shape; 60 runs were a fifth of
# the fast set's CPU). ACDC, whose batched passes over every edge cost the most, on Llama.
def _fast_shape(index: int, name: str) -> str:
    return "llama" if name == "acdc" else SHAPES[index % len(SHAPES)]


CASES = [
    pytest.param(name, shape, marks=[] if shape == _fast_shape(index, name) else [pytest.mark.slow])
    for index, name in enumerate(sorted(available_methods()))
    for shape in SHAPES
]


@pytest.mark.parametrize("name, shape", CASES)
def test_every_method_runs_on_the_device_and_equals_the_host(shape, name, tmp_path):
    model = tiny_model(shape, seed=0)
    method = get_method(name)
    config = light_config(method)
    on_host = method.run_on(model, IOI_TASK, config, budgets=BUDGETS)
    with SimulatedDevice(model):
        on_device = method.run_on(model, IOI_TASK, config, budgets=BUDGETS)
    assert_same_result(on_device, on_host)


def test_discover_and_evaluate_through_the_api_on_the_device(tmp_path):
    from circuitviz.entry.api import discover, evaluate_circuits
    from circuitviz.services.store import ResultStore

    model = tiny_model("gemma", seed=1)
    host, _ = discover(model, IOI_TASK, "eap-ig", budgets=BUDGETS, store=ResultStore(tmp_path / "a"))
    # the same two circuits in one batch on the host (another batch size sums in another order)
    _, host_curve = evaluate_circuits(model, IOI_TASK, [host.circuit(8), host.circuit(20)])
    with SimulatedDevice(model):
        result, cached = discover(
            model, IOI_TASK, "eap-ig", budgets=BUDGETS, store=ResultStore(tmp_path / "b")
        )
        baseline, curve = evaluate_circuits(model, IOI_TASK, [result.circuit(8), result.circuit(20)])
    assert not cached
    assert_same_result(result, host)
    assert [p.metric for p in curve] == [p.metric for p in host_curve]
    assert [p.metric for p in curve] == pytest.approx(
        [host.point(8).metric, host.point(20).metric], abs=1e-12
    )
    assert baseline == host.baseline


def test_best_of_n_variants_at_new_budgets_on_the_device(tmp_path):
    from circuitviz.details.query import variant_circuit

    model = tiny_model("llama", seed=2)
    method = get_method("ibon")
    config = method.make_config({"cache_scores": False, "n_paraphrases": 3})
    host = method.run_on(model, IOI_TASK, config, budgets=BUDGETS)
    with SimulatedDevice(model):
        result = method.run_on(model, IOI_TASK, config, budgets=BUDGETS)
        for variant in ("single", "average", "ibon", "bon-csm"):
            for budget in (5, 40):
                assert torch.equal(
                    variant_circuit(result, budget, variant), variant_circuit(host, budget, variant)
                )
    assert_same_result(result, host)


def test_labels_steering_and_signals_on_the_device():
    from test_labels import make_sae

    from circuitviz.acc import svd as acc_svd
    from circuitviz.acc.ablation import run_knockouts
    from circuitviz.acc.forward import run_forward
    from circuitviz.acc.trace import Tracer, TraceSettings
    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.tasks import PromptTask, prepare_task
    from circuitviz.labels.logit_lens import logit_lens_labels, next_token_probabilities
    from circuitviz.labels.sae_features import LabelledSae, circuit_node_features, hover_labels
    from circuitviz.labels.steer import steer

    model = tiny_model("gemma", seed=3)
    spec = GraphSpec.from_model(model)
    task = PromptTask(IOI_TASK.clean, "", " Mary", (" John",))
    prepared = prepare_task(model, task, need_corrupted=False)
    sae = make_sae(model.cfg.d_model, 0, seed=1)
    saes = [LabelledSae(sae, 0, "blocks.0.hook_resid_post", "test")]
    nodes = ["input", "a0.h1", "m0", "a1.h0"]

    def everything():
        lens = logit_lens_labels(model, spec, prepared)
        top = next_token_probabilities(model, task.clean)
        features = circuit_node_features(model, task.clean, nodes, saes, top_k=3)
        hovers = hover_labels(model, task.clean, nodes, saes, top_k=2)
        steered = steer(model, task, [(0, 7), (0, 9)], saes, n_random=2, top_k=3)
        forward = run_forward(model, prepared.clean_tokens)
        svd = acc_svd.load_svd(model, use_disk=False)
        trace = Tracer(model, forward, svd, TraceSettings(k=1.5, n_random=0)).run(prepared)
        found = [(d, s) for d in trace.decisions for side in "qk" for s in d.signals[side]]
        knockout = run_knockouts(model, svd, trace, prepared, [found])
        return lens, top, features, hovers, steered, knockout

    on_host = everything()
    with SimulatedDevice(model, sae):
        on_device = everything()
    assert on_device[:4] == on_host[:4]
    assert on_device[4]["after"] == on_host[4]["after"] and on_device[4]["random"] == on_host[4]["random"]
    assert on_device[5] == on_host[5]


def test_estimates_read_the_model_on_the_device(monkeypatch):
    from circuitviz.engine import memory
    from circuitviz.entry.limits import estimate_request

    model = tiny_model("gpt2")
    # the host priced as an accelerator is (gradient passes' memory per unit differs by device)
    accelerator = memory.BACKWARD_BYTES_PER_UNIT["accelerator"]
    monkeypatch.setitem(memory.BACKWARD_BYTES_PER_UNIT, "cpu", accelerator)
    host = [estimate_request(model, IOI_TASK, name) for name in sorted(available_methods())]
    with SimulatedDevice(model):
        on_device = [estimate_request(model, IOI_TASK, name) for name in sorted(available_methods())]
    assert [e.memory_bytes for e in on_device] == [e.memory_bytes for e in host]
    assert {e.device for e in on_device} == {"meta"}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["eap", "eap-ig", "eap-ig-activations", "bon"])
def test_shared_and_split_attention_inputs_give_the_same_scores(shape, name, monkeypatch):
    """Gradient passes share one attention input per layer on accelerators and split it per head
    on the CPU (engine.gradients.shared_attention_inputs); the two must agree."""
    model = tiny_model(shape, seed=4)
    method = get_method(name)
    config = method.make_config({"cache_scores": False, "n_paraphrases": 2} if name == "bon" else {})
    results = {}
    for mode in ("split", "shared"):
        monkeypatch.setenv("CIRCUITVIZ_GRADIENT_INPUTS", mode)
        results[mode] = method.run_on(model, IOI_TASK, config, budgets=BUDGETS)
    assert torch.allclose(results["split"].scores, results["shared"].scores, rtol=1e-6, atol=1e-9)
    assert [p.budget for p in results["split"].curve] == [p.budget for p in results["shared"].curve]


@pytest.mark.parametrize("shape", ["gpt2", "gemma", "llama"])
def test_a_tiny_model_on_a_gpu_machine_still_says_it_is_on_the_cpu(shape, monkeypatch):
    """On a machine with a GPU, TransformerLens fills an unset config device with "cuda"; a tiny
    model built on the CPU must not believe it: its host run sent tokens to the GPU and every
    method failed on the H200 (2026-12-01) when a host run came first."""
    with monkeypatch.context() as patched:  # what TransformerLens's config sees on a GPU machine
        patched.setattr(torch.cuda, "is_available", lambda: True)
        model = tiny_model(shape)
    assert model.cfg.device == "cpu"
    assert model.to_tokens("When Mary and John").device.type == "cpu"
