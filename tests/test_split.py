"""A model split block by block over two devices, on a CPU-only machine: every method equals the host.

``load_model(..., device_map=...)`` / ``n_devices=`` load a model through the bridge with its
blocks spread over several GPUs; a tensor of block 3's device meeting one of block 20's raises on
CUDA. ``SimulatedDevice(kind="xpu", n_devices=2)`` (tests/simulated_device.py) keeps those books
on the CPU: ``split`` spreads a tiny random model of a real family over xpu:0 and xpu:1 with the
map ``split_map`` makes (the map ``benchmarks/gpu_bridge_check.py`` loads on two GPUs), moving
each module's inputs to its device as ``accelerate``'s hooks do. Every method must then give
exactly what it gives on the host: the same scores, curve (metric, NDF, necessity) and circuits.

Both runs take each head's q/k/v input gradient from one shared input per layer
(``CIRCUITVIZ_GRADIENT_INPUTS=shared``, what an accelerator does by default), so the comparison is
exact; tests/test_device.py checks that shared and split inputs agree.
"""

from __future__ import annotations

import pytest
import torch
from simulated_device import HOST, DeviceMixError, SimulatedDevice, assert_same_result, light_config

from circuitviz.bench.toy_families import random_hf_model, split_map
from circuitviz.bench.toy_models import IOI_TASK, word_tokenizer
from circuitviz.measure.evaluate import forget_prompt_runs
from circuitviz.methods import available_methods, get_method
from circuitviz.models.adapter import adapter_of
from circuitviz.models.bridge import bridge_from_hf

BUDGETS = (3, 8, 20)
N_LAYERS = 4  # two blocks on each device
FAMILIES = ("llama3", "gemma3", "gpt2")  # rotary + grouped heads; post-norms + local layers; tied, LayerNorm


@pytest.fixture(autouse=True)
def shared_inputs(monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_GRADIENT_INPUTS", "shared")


def split_model(family: str, seed: int = 1):
    """(the bridge, its transformers model, the two-device map) of a tiny random ``family`` model."""
    hf_model = random_hf_model(family, seed=seed, n_layers=N_LAYERS)
    device_map = split_map(hf_model, [0, 1])
    return bridge_from_hf(hf_model, word_tokenizer(), name=f"split-{family}"), hf_model, device_map


def test_the_simulated_devices_refuse_what_cuda_refuses_across_devices():
    first, second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    with SimulatedDevice(kind="xpu", n_devices=2) as device:
        device.adopt(first, 0)
        device.adopt(second, 1)
        a, b = first.weight, second.weight
        assert a.device == torch.device("xpu", 0) and b.device == torch.device("xpu", 1)
        with pytest.raises(DeviceMixError, match="xpu:0, xpu:1"):
            a + b
        with pytest.raises(DeviceMixError):
            a @ b.sum()  # a zero-dimensional tensor of another device is no scalar to CUDA
        with pytest.raises(DeviceMixError, match="host"):
            a + torch.zeros(4, 4)  # made without a device: on the host, as on CUDA
        with pytest.raises(DeviceMixError):
            a[torch.tensor([0, 1], device=b.device)]  # indices of another device
        with pytest.raises(DeviceMixError):
            a[torch.tensor([0, 1], device="cpu")] = b[:2]  # a value of another device through index tensors
        with pytest.raises(TypeError, match="numpy"):
            b.numpy()
        # what CUDA allows: moves, copies, host indices and scalars, slices of another device
        moved = b.to(a.device)
        assert device.place(moved) == 0 and torch.equal(moved.cpu(), b.detach().cpu())
        assert device.place(torch.zeros(4, device=b.device) + b[0]) == 1
        assert device.place(a * torch.tensor(2.0, device="cpu")) == 0
        assert a[torch.tensor([0, 2], device="cpu")].shape == (2, 4)
        target = torch.zeros(4, 4, device=a.device)
        target[:2] = b[:2]
        target.copy_(b)
        assert device.place(target) == 0
        assert device.place(b.cpu()) == HOST and b.detach().cpu().numpy().shape == (4, 4)
        # gradients land on the device of what they are taken at
        x = torch.ones(2, 4, device=a.device, requires_grad=True)
        hidden = first(x)
        out = second(hidden.to(b.device)).sum()
        grads = torch.autograd.grad(out, [x, hidden])
        assert [device.place(g) for g in grads] == [0, 0]
        later = second(first(x).to(b.device))  # [2, 4] on the second device
        assert device.place(later) == 1
        assert device.place(torch.autograd.grad(later.sum(), [x])[0]) == 0


def test_the_split_map_spreads_the_blocks_and_keeps_tied_weights_together():
    llama = random_hf_model("llama3", n_layers=N_LAYERS)
    assert split_map(llama, [0, 1]) == {
        "model.embed_tokens": 0,
        **{f"model.layers.{i}": i // 2 for i in range(N_LAYERS)},
        "model.norm": 1,
        "model.rotary_emb": 1,
        "lm_head": 1,
    }
    gpt2 = random_hf_model("gpt2", n_layers=N_LAYERS)
    placed = split_map(gpt2, ["cuda:0", "cuda:1"])
    assert placed["lm_head"] == "cuda:0"  # tied to the embedding
    assert [placed[f"transformer.h.{i}"] for i in range(N_LAYERS)] == ["cuda:0"] * 2 + ["cuda:1"] * 2


def test_a_split_model_reads_its_layers_devices_and_runs_across_them():
    model, hf_model, device_map = split_model("llama3")
    tokens = adapter_of(model).to_tokens(IOI_TASK.clean)
    on_host = adapter_of(model).logits(tokens)
    hooks_before = sum(len(module._forward_pre_hooks) for module in hf_model.modules())
    with SimulatedDevice(kind="xpu", n_devices=2) as device:
        device.split(hf_model, device_map)
        adapter = adapter_of(model)
        assert [adapter.layer_device(layer).index for layer in range(N_LAYERS)] == [0, 0, 1, 1]
        logits = adapter.logits(tokens.to(adapter.device))
        assert logits.device == adapter.device  # back where the tokens went in
    assert (0, 1) in device.moves  # the residual crossed from the first device to the second
    assert torch.equal(logits, on_host)
    assert sum(len(module._forward_pre_hooks) for module in hf_model.modules()) == hooks_before


# the fast set: three methods on three families (a few seconds each at load 6). `make test`: every
# method on one family, the families taken in turn, so each family meets a third of the methods
# (all 60 pairs took 14.5 min of the suite at load 5-8; a tensor on the wrong device fails on any
# family, while what differs between families, their norms, tied weights and layer patterns, is
# met by the methods each family gets). ACDC on GPT-2 only: its passes over every edge are the
# longest runs here (268 s on Gemma 3 against 101 s on GPT-2 at load 5-8).
FAST = {("eap", "gpt2"), ("eap-ig", "gemma3"), ("acc++", "llama3")}


def _one_family_each(methods: list[str]) -> list[tuple[str, str]]:
    pairs = {
        (name, "gpt2" if name == "acdc" else FAMILIES[i % len(FAMILIES)]) for i, name in enumerate(methods)
    }
    return sorted(pairs | FAST)


CASES = [
    pytest.param(name, family, marks=[] if (name, family) in FAST else [pytest.mark.slow])
    for name, family in _one_family_each(sorted(available_methods()))
]


def test_the_split_cases_cover_every_method_and_every_family():
    methods = sorted(available_methods())
    pairs = _one_family_each(methods)
    assert {name for name, _ in pairs} == set(methods)
    for family in FAMILIES:
        assert len({name for name, f in pairs if f == family}) >= len(methods) // len(FAMILIES)


@pytest.mark.parametrize("name, family", CASES)
def test_every_method_on_a_split_model_equals_the_host(name, family):
    model, hf_model, device_map = split_model(family)
    method = get_method(name)
    config = light_config(method)
    on_host = method.run_on(model, IOI_TASK, config, budgets=BUDGETS)
    forget_prompt_runs(model)  # the split run makes its own plain passes
    with SimulatedDevice(kind="xpu", n_devices=2) as device:
        device.split(hf_model, device_map)
        split = method.run_on(model, IOI_TASK, config, budgets=BUDGETS)
    assert device.moves  # the run did cross devices
    assert_same_result(split, on_host)


@pytest.mark.parametrize("name", [pytest.param("eap", marks=pytest.mark.slow), "eap-ig"])
def test_a_position_run_on_a_split_model_equals_the_host(name):
    model, hf_model, device_map = split_model("gemma3")
    method = get_method(name)
    config = method.make_config({"positions": True, **({"ig_steps": 2} if name != "eap" else {})})
    on_host = method.run_on(model, IOI_TASK, config, budgets=(10, 60))
    forget_prompt_runs(model)
    with SimulatedDevice(kind="xpu", n_devices=2) as device:
        device.split(hf_model, device_map)
        split = method.run_on(model, IOI_TASK, config, budgets=(10, 60))
    assert torch.equal(split.position_scores, on_host.position_scores)
    assert [p.to_dict() for p in split.curve] == [p.to_dict() for p in on_host.curve]


def test_curves_and_necessity_of_several_tasks_on_a_split_model(tmp_path):
    """The evaluator's batched pass of several tasks (one pass, several prompts) and a curve's
    necessity, through the API, against the host."""
    from circuitviz.core.tasks import PromptTask, prepare_task
    from circuitviz.measure.evaluate import curves_of_tasks, evaluators_of_tasks

    model, hf_model, device_map = split_model("llama3", seed=2)
    spec = adapter_of(model).spec
    other = PromptTask(
        "When John and Mary went to the park , Mary gave a ball to",
        "When Alice and Bob went to the park , Carl gave a ball to",
        " John",
        (" Mary",),
    )
    generator = torch.Generator(device="cpu").manual_seed(0)
    circuits = torch.rand((2, 3, *spec.edge_mask.shape), generator=generator, device="cpu") < 0.4
    circuits &= spec.edge_mask

    def curves():
        tasks = [prepare_task(model, task) for task in (IOI_TASK, other)]
        evaluators = evaluators_of_tasks(model, spec, tasks)
        found = curves_of_tasks(evaluators, circuits.to(adapter_of(model).device), [1, 2, 3])
        return [[p.to_dict() for p in points] for points in found]

    on_host = curves()
    forget_prompt_runs(model)
    with SimulatedDevice(kind="xpu", n_devices=2) as device:
        device.split(hf_model, device_map)
        split = curves()
    assert split == on_host
    assert all(0.0 <= point["necessity"] <= 1.0 for points in split for point in points)


def test_a_split_models_batches_fit_the_device_with_the_least_room(monkeypatch):
    """A batch runs through every device of a split model, so chunks (and the pairs a scoring
    group holds) are sized from the device with the least free memory, not from the first."""
    from circuitviz.measure.chunks import chunk_size
    from circuitviz.models import devices

    model, hf_model, device_map = split_model("llama3")
    free = {0: 8e9, 1: 1e9}  # the second device, holding the last blocks and the unembedding, is full
    monkeypatch.setattr(devices, "free_memory_bytes", lambda device: free[torch.device(device).index])
    with SimulatedDevice(kind="xpu", n_devices=2) as device:
        device.split(hf_model, device_map)
        assert {p.device.index for p in model.parameters()} == {0, 1}
        least = devices.ACCELERATOR_SHARE * free[1]
        assert devices.model_working_memory_bytes(model) == least
        assert chunk_size(model, "evaluate", 10, 1e6) == int(least // 1e7)  # 60, not the first device's 480


def test_a_model_offloaded_to_the_cpu_beside_a_gpu_is_refused_in_one_sentence():
    """``device_map="auto"`` on GPUs too small for the model puts its last blocks on the CPU; the
    bridge refuses such a map with its own error, so the load says what to change first."""
    from circuitviz.models import ModelLoadError

    hf_model = random_hf_model("llama3", seed=0, n_layers=2)
    hf_model.hf_device_map = {
        "model.embed_tokens": 0,
        "model.layers.0": 0,
        "model.layers.1": "cpu",
        "lm_head": "cpu",
    }
    with pytest.raises(ModelLoadError, match=r"does not fit the GPU memory.*2 of its 4 parts.*n_devices"):
        bridge_from_hf(hf_model, word_tokenizer(), name="big-model")
    hf_model.hf_device_map = {"": "cpu"}  # a model wholly on the CPU is no offload
    assert bridge_from_hf(hf_model, word_tokenizer(), name="big-model").cfg.n_layers == 2
