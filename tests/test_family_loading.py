"""Local folders of families beyond the ten, as a user saves them with ``transformers`` 5: each
loads through the backend that can run it, or is refused with one sentence naming the fix
(``benchmarks/cli_families.py`` runs the command line on all of them; docs/models.md)."""

from __future__ import annotations

import re

import pytest
import torch
from sentences import assert_one_sentence

from circuitviz.bench.toy_families import random_hf_model
from circuitviz.bench.toy_models import IOI_TASK, word_tokenizer
from circuitviz.models import ModelLoadError, load_model
from circuitviz.models.adapter import adapter_of
from circuitviz.models.bridge import bridge_from_hf
from circuitviz.models.bridge_adapter import is_bridge

pytestmark = pytest.mark.slow


def saved(family: str, folder, **fields) -> tuple[str, torch.nn.Module]:
    """A random ``family`` model (its config's ``fields`` changed) saved in ``folder`` with the
    word tokenizer, and the model."""
    from transformers import AutoModelForCausalLM

    from circuitviz.bench.toy_families import family_config

    if fields:
        config = family_config(family)
        for name, value in fields.items():
            setattr(config, name, value)
        torch.manual_seed(1)
        model = AutoModelForCausalLM.from_config(config).eval()  # no dropout
    else:
        model = random_hf_model(family, seed=1, dtype=torch.float32)
    model.save_pretrained(str(folder))
    word_tokenizer().save_pretrained(str(folder))
    return str(folder), model


def assert_same_logits(model, hf_model) -> None:
    tokens = adapter_of(model).to_tokens(IOI_TASK.clean)
    with torch.no_grad():
        expected = hf_model(tokens).logits
        got = adapter_of(model).logits(tokens)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "family, older",
    [
        ("gpt2", False),
        ("gpt2", True),
        ("phi", False),
        ("gpt_neo", False),
        ("exaone", False),
        ("internlm3", False),
    ],
)
def test_a_folder_transformers_5_saved_converts_to_a_hooked_transformer(family, older, tmp_path):
    """transformers 5 writes no GPT-2 ``n_ctx`` and keeps Phi's ``partial_rotary_factor`` in its
    rope parameters; TransformerLens 3.9's converters read both (a traceback before). A config
    an older transformers wrote, with ``n_ctx``, reads as before."""
    import json

    # TransformerLens's GPT-2 and GPT-Neo converters take the MLP 4x wide, as the published models
    # are (else: the bridge, or a refusal)
    wide = {"gpt2": {"n_inner": None}, "gpt_neo": {"intermediate_size": None}}.get(family, {})
    folder, hf_model = saved(family, tmp_path, **wide)
    if older:
        config = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps({**config, "n_ctx": config["n_positions"]}))
    model = load_model(folder)
    assert not is_bridge(model)
    assert_same_logits(model, hf_model)


@pytest.mark.parametrize("family", ["gemma2", "olmo2", "olmo3", "gpt2"])
def test_a_folder_the_hooked_transformer_cannot_convert_boots_through_the_bridge(family, tmp_path, caplog):
    """Gemma in a size TransformerLens has no official name for, OLMo-2 (no converter), OLMo-3 with
    grouped keys (its key norm), GPT-2 with a non-default MLP width (its converter assumes 4x)."""
    folder, hf_model = saved(family, tmp_path)
    model = load_model(folder)
    assert is_bridge(model)
    assert "booting it through the TransformerBridge" in caplog.text
    assert_same_logits(model, hf_model)
    with pytest.raises(ModelLoadError) as refused:  # asked for, it is refused with the reason
        load_model(folder, backend="hooked")
    assert_one_sentence(str(refused.value))


@pytest.mark.parametrize(
    "family, fragment",
    [
        ("xglm", "no per-head query, key and value inputs"),
        ("deepseek_v3", "no per-head query, key and value inputs"),
        ("codegen", "no per-head query, key and value inputs"),  # computes q, k, v from one input
        ("phi", "one shared norm"),  # through the bridge; as a HookedTransformer it loads
        # until 2026-12-07 these booted, each giving wrong figures without a word (HunYuan's logits
        # 6 % off; Falcon-H1's Mamba mixer outside the graph) or a traceback (at load or in the
        # middle of a run; MiniMax-M2's a tensor size); EXAONE 4 and FlexOlmo, refused that day,
        # run since circuitviz.models.architectures names their norms after attention and the MLP
        ("hunyuan_v1_dense", "normalises each head's queries and keys before the rotation, HunYuan after"),
        ("falcon_h1", "has a 'mamba' beside its attention and MLP"),
        ("lfm2", "block 0 (Lfm2DecoderLayer) has no attention but a 'conv'"),
        ("jamba", "has no attention but a 'mixer'"),
        ("vaultgemma", "refuses its compatibility mode"),
        ("gemma4_text", "layers differ in shape"),
        ("minimax_m2", "whole query vector across its heads"),
        ("openai_gpt", "GPT-1 normalises the residual stream itself after each attention and MLP"),
    ],
)
def test_what_the_bridge_cannot_give_circuits_is_refused_in_one_sentence(family, fragment):
    """At load, with the reason and the fix, rather than a traceback or wrong figures."""
    hf_model = random_hf_model(family, seed=1, dtype=torch.float32)
    with pytest.raises(ModelLoadError, match=re.escape(fragment)) as refused:
        bridge_from_hf(hf_model, word_tokenizer(), name=f"random-{family}")
    assert_one_sentence(str(refused.value))


def test_a_model_that_keeps_no_key_value_cache_runs_its_prompts_whole():
    """MPT's attention fills no ``transformers`` cache, so continued runs would read nothing: its
    prompts run whole; Llama's do not."""
    for family, whole in (("mpt", True), ("llama3", False)):
        model = bridge_from_hf(random_hf_model(family, seed=1), word_tokenizer(), name=f"random-{family}")
        assert adapter_of(model).positions_inside_attention is whole, family


def test_a_bridge_whose_logits_or_writers_are_not_the_models_is_refused():
    """The checks every bridge load runs (``bridge_checks.require_faithful_graph``): logits other
    than ``transformers``' own, or writers that do not add up to the residual, are refused; the
    model's own logits pass."""
    from circuitviz.models.bridge_checks import probe_tokens, reference_logits, require_faithful_graph

    hf_model = random_hf_model("llama3", seed=1, dtype=torch.float32)
    tokens = probe_tokens(hf_model)
    expected = reference_logits(hf_model, tokens)
    model = bridge_from_hf(hf_model, word_tokenizer(), name="random-llama3")
    require_faithful_graph(model, tokens, expected)
    with pytest.raises(ModelLoadError, match="otherwise than transformers does") as refused:
        require_faithful_graph(model, tokens, expected * 1.01)  # 1 % off: over float32's rounding
    assert_one_sentence(str(refused.value))
    nan = expected.clone()
    nan[0, -1, 0] = float("nan")  # transformers' own NaN: the finite-logits check speaks instead
    require_faithful_graph(model, tokens, nan)


def test_norms_after_the_writers_that_circuitviz_does_not_know_are_refused(monkeypatch):
    """EXAONE 4 has OLMo 2's norms after attention and the MLP. Known by name
    (``architectures.NORMS_AFTER_WRITERS``) it loads with transformers' logits; unknown, as it was
    until 2026-12-07, its heads' outputs would be read unnormalised, and the load's sum check
    refuses it in one sentence."""
    from circuitviz.models import architectures

    hf_model = random_hf_model("exaone4", seed=1, dtype=torch.float32)
    model = bridge_from_hf(hf_model, word_tokenizer(), name="random-exaone4")
    tokens = torch.tensor([[3, 8, 1, 12, 5]], device="cpu")
    with torch.no_grad():
        expected = random_hf_model("exaone4", seed=1, dtype=torch.float32)(tokens).logits
        torch.testing.assert_close(adapter_of(model).logits(tokens), expected, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(architectures, "NORMS_AFTER_WRITERS", frozenset({"Olmo2ForCausalLM"}))
    with pytest.raises(ModelLoadError, match="add up to its residual stream only to within") as refused:
        bridge_from_hf(random_hf_model("exaone4", seed=1, dtype=torch.float32), word_tokenizer(), name="x")
    assert_one_sentence(str(refused.value))
