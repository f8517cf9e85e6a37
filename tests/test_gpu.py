"""Every method, a position run (unit patching), neurons, CD-T's corrupted baseline, the evaluator's
curves of several tasks with necessity, the API and Best-of-N's variants on a real CUDA device
against the CPU: what tests/test_device.py simulates, on the hardware. Marked ``gpu``: skipped
without CUDA (conftest.py); on a GPU machine, ``pytest -m gpu``.

Tiny float64 models: scores, curves (metric, NDF, necessity) equal to 1e-9, every budget's
circuit identical. ``CIRCUITVIZ_GPU_TEST_DEVICE=cpu pytest -m gpu tests/test_gpu.py`` runs the
same comparisons with both runs on the CPU, which checks the tests themselves on a machine
without a GPU (it proves nothing about CUDA).
"""

from __future__ import annotations

import math
import os

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, compare_results, rounding_band, tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.methods import available_methods, get_method

DEVICE = os.environ.get("CIRCUITVIZ_GPU_TEST_DEVICE", "cuda")
SHAPES = ("gpt2", "gemma", "llama")
BUDGETS = (3, 8, 20, 60)
TOLERANCE = 1e-9
OTHER_TASK = PromptTask(
    "When John and Mary went to the park , Mary gave a ball to",
    "When Alice and Bob went to the park , Carl gave a ball to",
    " John",
    (" Mary",),
)


def on_device(shape: str, seed: int = 0):
    return tiny_model(shape, seed=seed).to(DEVICE)


def assert_same_points(device_points, host_points) -> None:
    """Two curves' points: the same fields, numbers within TOLERANCE, everything else equal."""
    assert len(device_points) == len(host_points)
    for mine, theirs in zip(device_points, host_points):
        mine = mine if isinstance(mine, dict) else mine.to_dict()
        theirs = theirs if isinstance(theirs, dict) else theirs.to_dict()
        assert mine.keys() == theirs.keys()
        for key, value in theirs.items():
            if isinstance(value, float) and not math.isnan(value):
                assert mine[key] == pytest.approx(value, abs=TOLERANCE), (key, mine, theirs)
            elif not isinstance(value, float):
                assert mine[key] == value, (key, mine, theirs)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(available_methods()))
def test_every_method_on_cuda_equals_the_cpu(shape, name):
    method = get_method(name)
    fields = set(method.Config.__dataclass_fields__)
    config = method.make_config({"cache_scores": False} if "cache_scores" in fields else {})
    on_host = method.run_on(tiny_model(shape, seed=0), IOI_TASK, config, budgets=BUDGETS)
    result = method.run_on(on_device(shape), IOI_TASK, config, budgets=BUDGETS)
    assert result.device.startswith(DEVICE)
    gap = compare_results(result, on_host)
    if not method.scores_are_exact and not (gap["circuits_equal"] and gap["metrics"] <= TOLERANCE):
        # an optimisation's hard decisions turn on the last bit: on the Gemma shape a CPU run with
        # the weights changed by 1e-15 moves Edge Pruning's and paraphrase pruning's circuits as far
        band = rounding_band(method, shape, config, BUDGETS)
        assert band["circuits_move"], (gap, band)
        assert gap["metrics"] <= band["metrics"] + TOLERANCE, (gap, band)  # its scores are not held
        return
    assert gap["circuits_equal"], gap
    assert gap["metrics"] <= TOLERANCE, gap
    if method.scores_are_exact:  # Edge Pruning's scores are where its optimisation ended
        assert gap["scores"] <= TOLERANCE, gap


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["eap", "eap-ig", "eap-ig-activations"])
def test_a_position_run_on_cuda_equals_the_cpu(name):
    """Unit patching: each (position, component) is a node of its own; its scores, curve and
    circuits are the CPU's, and the attribution graph of a budget is built from the device run."""
    from circuitviz.export.neuronpedia import to_neuronpedia
    from circuitviz.positions.present import readable_position_budget, result_attribution_graph

    method = get_method(name)
    config = method.make_config({"positions": True, **({"ig_steps": 3} if name != "eap" else {})})
    on_host = method.run_on(tiny_model("gemma", seed=0), IOI_TASK, config, budgets=(10, 60))
    result = method.run_on(on_device("gemma"), IOI_TASK, config, budgets=(10, 60))
    assert result.position_scores.device.type == "cpu"  # stored and drawn on the host
    torch.testing.assert_close(result.position_scores, on_host.position_scores, rtol=0, atol=TOLERANCE)
    assert_same_points(result.curve, on_host.curve)
    for point in on_host.curve:
        assert torch.equal(
            result.position_circuit(point.budget).cpu(), on_host.position_circuit(point.budget).cpu()
        )
    graph = result_attribution_graph(result, readable_position_budget(result).budget)
    assert to_neuronpedia(graph)["nodes"]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["gemma", "llama"])
def test_neurons_on_cuda_equal_the_cpu(shape):
    settings = {"neurons": True, "neuron_top_k": 4, "ig_steps": 3}
    host = get_method("eap-ig").run_on(tiny_model(shape, seed=0), IOI_TASK, settings, budgets=[5])
    result = get_method("eap-ig").run_on(on_device(shape), IOI_TASK, settings, budgets=[5])
    assert [(n["layer"], n["neuron"]) for n in result.details.neurons] == [
        (n["layer"], n["neuron"]) for n in host.details.neurons
    ]
    assert_same_points(result.details.curve, host.details.curve)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["gemma", "llama"])
def test_cdt_with_the_corrupted_baseline_on_cuda_equals_the_cpu(shape):
    settings = {"baseline": "corrupted"}
    host = get_method("cd-t").run_on(tiny_model(shape, seed=0), IOI_TASK, settings, budgets=[5])
    result = get_method("cd-t").run_on(on_device(shape), IOI_TASK, settings, budgets=[5])
    torch.testing.assert_close(result.scores, host.scores, rtol=1e-9, atol=1e-12)
    assert_same_points(result.curve, host.curve)


@pytest.mark.gpu
def test_curves_and_necessity_of_several_tasks_on_cuda_equal_the_cpu():
    """The evaluator's batched pass over several prompts at once, and each point's necessity."""
    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.tasks import prepare_task
    from circuitviz.measure.evaluate import curves_of_tasks, evaluators_of_tasks

    def curves(model):
        spec = GraphSpec.from_model(model)
        generator = torch.Generator(device="cpu").manual_seed(0)
        circuits = torch.rand((2, 3, *spec.edge_mask.shape), generator=generator, device="cpu") < 0.4
        circuits &= spec.edge_mask.cpu()
        tasks = [prepare_task(model, task) for task in (IOI_TASK, OTHER_TASK)]
        evaluators = evaluators_of_tasks(model, spec, tasks)
        device = next(model.parameters()).device
        return curves_of_tasks(evaluators, circuits.to(device), [1, 2, 3])

    host = curves(tiny_model("llama", seed=2))
    found = curves(on_device("llama", seed=2))
    for mine, theirs in zip(found, host, strict=True):
        assert_same_points(mine, theirs)
        assert all(0.0 <= point.to_dict()["necessity"] <= 1.0 for point in mine)


@pytest.mark.gpu
def test_discover_and_evaluate_through_the_api_on_cuda(tmp_path):
    from circuitviz.entry.api import discover, evaluate_circuits
    from circuitviz.services.store import ResultStore

    host_model, model = tiny_model("gemma", seed=1), on_device("gemma", seed=1)
    host, _ = discover(host_model, IOI_TASK, "eap-ig", budgets=BUDGETS, store=ResultStore(tmp_path / "a"))
    _, host_curve = evaluate_circuits(host_model, IOI_TASK, [host.circuit(8), host.circuit(20)])
    result, cached = discover(model, IOI_TASK, "eap-ig", budgets=BUDGETS, store=ResultStore(tmp_path / "b"))
    baseline, curve = evaluate_circuits(model, IOI_TASK, [result.circuit(8), result.circuit(20)])
    assert not cached and result.scores.device.type == "cpu"
    gap = compare_results(result, host)
    assert gap["circuits_equal"] and gap["scores"] <= TOLERANCE and gap["metrics"] <= TOLERANCE, gap
    assert_same_points(curve, host_curve)
    for name in ("clean", "corrupted"):
        assert getattr(baseline, name) == pytest.approx(getattr(host.baseline, name), abs=TOLERANCE)


@pytest.mark.gpu
def test_best_of_n_variants_at_new_budgets_on_cuda(tmp_path):
    from circuitviz.details.query import variant_circuit

    method = get_method("ibon")
    config = method.make_config({"cache_scores": False, "n_paraphrases": 3})
    host = method.run_on(tiny_model("llama", seed=2), IOI_TASK, config, budgets=BUDGETS)
    result = method.run_on(on_device("llama", seed=2), IOI_TASK, config, budgets=BUDGETS)
    for variant in ("single", "average", "ibon", "bon-csm"):
        for budget in (5, 40):
            assert torch.equal(
                variant_circuit(result, budget, variant).cpu(), variant_circuit(host, budget, variant).cpu()
            )
    gap = compare_results(result, host)
    assert gap["circuits_equal"] and gap["metrics"] <= TOLERANCE, gap
