"""The bridge against HookedTransformer, the bridge's loader and its conversion cache.

A tiny random model of each family both backends can read is saved as a ``transformers``
checkpoint folder and loaded twice through ``load_model``: as a HookedTransformer and through
the bridge. Exact patching and EAP give the same edge scores on both (float32 rounding).
"""

from __future__ import annotations

import pytest
import torch

from circuitviz.batch.work import model_info
from circuitviz.bench.toy_families import random_hf_model
from circuitviz.bench.toy_models import IOI_TASK, word_tokenizer
from circuitviz.core.graph import GraphSpec
from circuitviz.entry.request import Request
from circuitviz.methods import get_method
from circuitviz.models import ModelLoadError, load_model
from circuitviz.models.bridge_adapter import is_bridge
from circuitviz.query.pool import prompt_key

pytestmark = pytest.mark.slow

# the families HookedTransformer can also build from a local folder of any size
BOTH = ["llama3", "qwen3", "gpt_neox", "mistral"]


def checkpoint_folder(family: str, folder) -> str:
    model = random_hf_model(family, seed=1, dtype=torch.float32)
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(str(folder))
    word_tokenizer().save_pretrained(str(folder))
    return str(folder)


def scores_result(model, method: str = "eap"):
    chosen = get_method(method)
    return chosen.run_on(model, IOI_TASK, chosen.make_config({}), budgets=[1])


def scores(model, method: str) -> torch.Tensor:
    return scores_result(model, method).scores.double()


def test_one_models_results_through_the_two_backends_are_stored_apart(tmp_path):
    """The same id, dtype, task and settings: the bridge's store keys differ from the hooked
    model's (their scores agree to about 1e-4, not to the bit), and the hooked key is the one a
    request without a model makes (so HookedTransformer's keys are as they were)."""
    folder = checkpoint_folder("llama3", tmp_path)
    hooked, bridge = (load_model(folder, backend=backend) for backend in ("hooked", "bridge"))
    requests = {
        name: Request.for_model(model, IOI_TASK, "eap", {}, [1, 2], model_id="m")
        for name, model in (("hooked", hooked), ("bridge", bridge))
    }
    assert requests["hooked"].backend == "hooked" and requests["bridge"].backend == "bridge"
    assert requests["hooked"].key != requests["bridge"].key
    plain = Request.of("eap", {}, model_id="m", dtype=requests["hooked"].dtype, task=IOI_TASK, budgets=[1, 2])
    assert plain.key == requests["hooked"].key
    driver = Request.of(
        "eap", {}, model_id="m", dtype=plain.dtype, task=IOI_TASK, budgets=[1, 2], backend="bridge"
    )
    assert driver.key == requests["bridge"].key  # a batch's driver, told the backend by its worker
    assert model_info(bridge, "m").backend == "bridge" and model_info(hooked, "m").backend == "hooked"
    spec = GraphSpec.from_model(hooked)
    assert prompt_key("scores", hooked, "m", spec, IOI_TASK) != prompt_key(
        "scores", bridge, "m", spec, IOI_TASK
    )


@pytest.mark.parametrize("family", BOTH)
def test_the_bridge_gives_the_hooked_transformers_scores(family, tmp_path):
    folder = checkpoint_folder(family, tmp_path)
    hooked, bridge = (load_model(folder, backend=backend) for backend in ("hooked", "bridge"))
    assert is_bridge(bridge) and not is_bridge(hooked)
    for method in ("exact", "eap"):
        mine, theirs = scores(bridge, method), scores(hooked, method)
        largest = float(theirs.abs().max())
        assert largest > 1e-4
        assert float((mine - theirs).abs().max()) <= 1e-4 * largest, method


def test_a_hub_id_that_is_not_cached_offline_says_how_to_get_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="HF_HUB_OFFLINE"):
        load_model("circuitviz-test/not-a-model", backend="bridge")


def test_the_bridge_boots_a_short_name_under_its_hub_id_without_a_deprecation_warning():
    from circuitviz.models.bridge import official_name

    assert official_name("gemma-3-270m") == "google/gemma-3-270m"  # TransformerLens warned on every load
    assert official_name("my-own-checkpoint") == "my-own-checkpoint"


def test_the_hooked_backend_refuses_what_only_the_bridge_loads():
    with pytest.raises(ModelLoadError, match="backend='bridge'"):
        load_model("circuitviz-test/not-a-model", backend="hooked")


def test_the_hooked_backend_names_the_flag_that_loads_a_family_it_cannot_convert(tmp_path):
    """OLMo 2 has no HookedTransformer converter. ``--backend hooked`` on its folder read
    "TransformerLens cannot build a Olmo2ForCausalLM model (Olmo2ForCausalLM is not currently
    supported.); pick a model from the supported table": no table was named, and the folder
    loads without the flag (through the bridge)."""
    folder = str(tmp_path)
    random_hf_model("olmo2", dtype=torch.float32).save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    with pytest.raises(ModelLoadError) as refused:
        load_model(folder, backend="hooked")
    message = str(refused.value)
    assert "no converter for Olmo2ForCausalLM" in message
    assert "--backend bridge or no --backend" in message and "supported table" not in message


def test_an_unsupported_architecture_names_the_fix(tmp_path, caplog):
    """BioGPT is a transformers causal LM the bridge has no adapter for."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "biogpt",
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
    )
    config.architectures = ["BioGptForCausalLM"]
    AutoModelForCausalLM.from_config(config).save_pretrained(str(tmp_path))
    word_tokenizer().save_pretrained(str(tmp_path))
    with pytest.raises(ModelLoadError, match="no adapter for BioGptForCausalLM"):
        load_model(str(tmp_path), backend="bridge")
    # HookedTransformer's refusal does not send the user to the bridge, which refuses it too
    with pytest.raises(ModelLoadError) as refused:
        load_model(str(tmp_path), backend="hooked")
    assert "neither a converter nor a bridge adapter for BioGptForCausalLM" in str(refused.value)
    assert "--backend bridge" not in str(refused.value)
    # no backend: one sentence, where a warning 'booting it through the TransformerBridge' came first
    caplog.clear()
    with pytest.raises(ModelLoadError, match="neither a converter nor a bridge adapter"):
        load_model(str(tmp_path))
    assert not [record for record in caplog.records if "booting it through" in record.getMessage()]


def test_the_bridge_conversion_cache_is_read_back_and_a_damaged_entry_rebuilt(tmp_path, monkeypatch):
    """A GGUF is dequantised once; later loads read the cache; a truncated weights file is
    detected (its size is in the manifest) and the entry rebuilt, never used."""
    import circuitviz.models.bridge_loading as bridge_loading
    from circuitviz.models.checkpoints import LocalCheckpoint

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"stands in for a GGUF file")
    conversions = []

    def read_hf_model(checkpoint):
        conversions.append(checkpoint)
        return random_hf_model("llama3", seed=2, dtype=torch.float32)

    monkeypatch.setattr(bridge_loading, "read_hf_model", read_hf_model)
    monkeypatch.setattr(bridge_loading, "read_tokenizer", lambda checkpoint, **_: word_tokenizer())
    checkpoint = LocalCheckpoint(tmp_path, "gguf", "model.gguf")
    placement = {"device_map": {"": "cpu"}}  # the test's CPU

    def load():
        model, _ = bridge_loading.gguf_hf_model(checkpoint, "test", torch.float32, placement, lambda: None)
        return {name: tensor.clone() for name, tensor in model.state_dict().items()}  # not the mmapped file

    first = load()
    assert len(conversions) == 1
    second = load()
    assert len(conversions) == 1  # read from the cache
    assert all(torch.equal(first[name], second[name]) for name in first)
    (weights,) = (tmp_path / "cache").rglob("model.safetensors")
    weights.write_bytes(weights.read_bytes()[:-100])  # a write cut short
    third = load()
    assert len(conversions) == 2  # rebuilt
    assert all(torch.equal(first[name], third[name]) for name in first)


def test_the_memory_estimate_counts_a_local_checkpoints_weights(tmp_path):
    """Before loading: the parameters counted from config.json are the loaded bridge's."""
    from circuitviz.models import estimate_memory

    folder = checkpoint_folder("llama3", tmp_path)
    estimate = estimate_memory(folder)
    bridge = load_model(folder, backend="bridge")
    loaded = bridge.original_model.named_parameters()
    # (the bridge gives an unembedding without bias a zero one)
    assert estimate.n_parameters == sum(
        p.numel() for name, p in loaded if not ("lm_head" in name and "bias" in name)
    )
    assert estimate.weight_bytes == 4 * estimate.n_parameters
    assert estimate.n_edges == GraphSpec.from_model(bridge).n_edges
    assert "parameters" in estimate.sentence()
    with pytest.raises(ModelLoadError, match="config.json"):
        estimate_memory("circuitviz-test/not-a-model")


def test_a_phi3_with_longrope_scaling_loads_through_the_bridge_with_transformers_logits(tmp_path):
    """TransformerLens 3.9's Phi-3 converter reads no rope scaling: a Phi-3 with ``longrope``
    (Phi-3-mini-128k, Phi-4-mini) loaded as a HookedTransformer whose logits were 2.5e-3 of the
    largest off transformers'. HookedTransformer now refuses it in one sentence naming the bridge,
    and with no backend named it loads through the bridge, which rotates with the model's tables."""
    from transformers import AutoModelForCausalLM

    from circuitviz.bench.toy_families import family_config, perturb_norms
    from circuitviz.models.adapter import adapter_of

    config = family_config("phi3")
    config.rope_parameters = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": [1.0, 1.3, 1.7, 2.5],
        "long_factor": [1.5, 2.0, 3.0, 4.0],
        "original_max_position_embeddings": 16,
        "partial_rotary_factor": 1.0,
    }
    config.original_max_position_embeddings = 16
    torch.manual_seed(0)
    original = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    perturb_norms(original, 1)
    original.config.architectures = ["Phi3ForCausalLM"]
    original.save_pretrained(str(tmp_path))
    word_tokenizer().save_pretrained(str(tmp_path))
    with pytest.raises(ModelLoadError) as refused:
        load_model(str(tmp_path), backend="hooked")
    message = str(refused.value)
    assert "'longrope' rope scaling" in message and "backend='bridge'" in message
    assert len(message) <= 300 and message.count(". ") == 0
    model = load_model(str(tmp_path))
    assert is_bridge(model)
    tokens = torch.tensor([[5, 9, 13, 2, 7, 11, 4, 3]], device="cpu")
    with torch.no_grad():
        expected = original(tokens).logits
        got = adapter_of(model).logits(tokens)
    assert float((got - expected).abs().max()) <= 1e-5 * float(expected.abs().max())
