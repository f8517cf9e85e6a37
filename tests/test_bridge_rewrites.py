"""The rewrites the bridge boots Granite, Falcon-7B, GPT-BigCode, Cohere, Cohere 2 and MPT with
change no function: on tiny random float64 models the rewritten model's logits (and, where
``transformers``'s norms round to float32, its residual stream before the final norm) equal the
original's to float64 rounding, or through the bridge to that float32 rounding."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_families import family_config, random_hf_model
from circuitviz.bench.toy_models import word_tokenizer
from circuitviz.core.graph import QKV
from circuitviz.engine import sites
from circuitviz.models.adapter import adapter_of
from circuitviz.models.bridge import bridge_from_hf
from circuitviz.models.bridge_rewrites import (
    fold_logit_scale,
    fold_scalar_multipliers,
    fused_multi_query,
    mlp_norm_per_layer,
)
from circuitviz.models.errors import ModelLoadError

pytestmark = pytest.mark.slow

TOKENS = torch.tensor([[0, 5, 9, 3, 12, 7, 2], [0, 4, 4, 11, 6, 8, 10]], device="cpu")


def relative(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got - expected).abs().max() / expected.abs().max())


def logits_and_residual(hf_model, final_norm: torch.nn.Module):
    """The logits and the residual stream entering the final norm (Granite's RMSNorm computes in
    float32 even in a float64 model, so the logits alone would hide a fold's error below that)."""
    seen = {}
    handle = final_norm.register_forward_pre_hook(lambda module, args: seen.setdefault("x", args[0]))
    try:
        with torch.no_grad():
            logits = hf_model(TOKENS).logits
    finally:
        handle.remove()
    return logits, seen["x"]


def test_granite_multipliers_fold_into_the_weights_they_scale():
    original, folded = random_hf_model("granite", seed=1), random_hf_model("granite", seed=1)
    assert folded.lm_head.weight is folded.model.embed_tokens.weight  # tied, as Granite 3's are
    embedding = original.model.embed_tokens.weight.detach().clone()
    assert fold_scalar_multipliers(folded)
    expected_logits, expected_residual = logits_and_residual(original, original.model.norm)
    logits, residual = logits_and_residual(folded, folded.model.norm)
    assert relative(logits, expected_logits) <= 1e-10
    assert relative(residual, expected_residual) <= 1e-10
    assert relative(residual, expected_residual * 1.001) > 1e-5  # the comparison can fail
    config = folded.config
    assert (config.embedding_multiplier, config.residual_multiplier, config.logits_scaling) == (1.0, 1.0, 1.0)
    assert folded.model.embedding_multiplier == 1.0
    assert all(layer.residual_multiplier == 1.0 for layer in folded.model.layers)
    # untied first: each fold touched its own matrix only
    assert folded.lm_head.weight is not folded.model.embed_tokens.weight
    torch.testing.assert_close(folded.model.embed_tokens.weight, embedding * 12.0, rtol=0, atol=0)
    torch.testing.assert_close(folded.lm_head.weight, embedding / 1.5, rtol=1e-15, atol=0)
    assert not fold_scalar_multipliers(folded)  # nothing left to fold


# ``transformers`` 5.25's eager Falcon attention takes its softmax in float32 even in a float64
# model (earlier 5.x releases kept float64, and these comparisons held to 1e-12); the bridge keeps
# float64, so the two agree to that float32 rounding (1.3e-8 to 2.5e-8 measured), not to the bit.
FALCON_SOFTMAX_ROUNDING = 1e-6


def falcon(family: str = "falcon", **fields) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    config = family_config(family)
    for name, value in fields.items():
        setattr(config, name, value)
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():  # norms that are not exactly 1 and 0
        for name, parameter in model.named_parameters():
            if "layernorm" in name:
                parameter.add_(0.2 * torch.randn(parameter.shape, device="cpu"))
    return model.to(torch.float64).eval()


@pytest.mark.parametrize("fields", [{}, {"bias": True}], ids=["7b", "bias"])
def test_falcon_7b_gets_a_norm_per_sublayer_and_a_key_value_head_per_query_head(fields):
    """Falcon-7B's parallel blocks share one norm: switched to Falcon's newer decoder with one
    key/value group and two copies of the norm (``transformers``' own function, 0 difference),
    then the bridge's split key and value linears are repeated per query head."""
    original, rewritten = falcon(**fields), falcon(**fields)
    assert original.config.parallel_attn and original.config.multi_query
    assert fused_multi_query(rewritten)
    with torch.no_grad():
        expected, got = original(TOKENS).logits, rewritten(TOKENS).logits
    assert relative(got, expected) == 0.0  # the same operations on the same numbers
    layer = rewritten.transformer.h[0]
    assert layer.ln_mlp.weight is not layer.ln_attn.weight and not hasattr(layer, "input_layernorm")
    torch.testing.assert_close(layer.ln_mlp.weight, original.transformer.h[0].input_layernorm.weight)
    model = bridge_from_hf(falcon(**fields), word_tokenizer(), name="random-falcon")
    with torch.no_grad():
        through_bridge = adapter_of(model).logits(TOKENS)
    assert relative(through_bridge, expected) <= FALCON_SOFTMAX_ROUNDING
    assert relative(through_bridge, expected * 1.001) > 1e-4  # the comparison can fail
    assert model.cfg.n_key_value_heads == model.cfg.n_heads == 4
    assert "ln2" in model.blocks[0].submodules  # the MLP's own norm, so its own input


def test_a_sequential_multi_query_falcon_keeps_its_decoder():
    original = falcon(parallel_attn=False)
    model = bridge_from_hf(falcon(parallel_attn=False), word_tokenizer(), name="random-falcon")
    assert not model.original_model.config.new_decoder_architecture
    with torch.no_grad():
        expected, got = original(TOKENS).logits, adapter_of(model).logits(TOKENS)
    assert relative(got, expected) <= FALCON_SOFTMAX_ROUNDING
    assert model.cfg.n_key_value_heads == model.cfg.n_heads == 4


def test_falcon_with_alibi_forks_its_head_inputs_and_computes_the_same():
    """Falcon-RW's ALiBi attention: the bridge's ALiBi attention forks per-head query, key and value
    inputs (it never did: the model was refused), and the logits equal ``transformers``' to
    float64 rounding, the per-head inputs on or off. A parallel block of that layout (one norm
    for both sublayers, no multi-query rewrite to give the MLP its own) is refused in a sentence."""
    with pytest.raises(ModelLoadError, match="read one shared norm"):
        bridge_from_hf(falcon("falcon_rw", parallel_attn=True), word_tokenizer(), name="random-falcon")
    original = falcon("falcon_rw")
    assert original.config.alibi and not original.config.multi_query
    model = bridge_from_hf(falcon("falcon_rw"), word_tokenizer(), name="random-falcon")
    adapter = adapter_of(model)
    seen = []
    names = [sites.head_input(0, kind) for kind in QKV]
    with torch.no_grad():
        expected = original(TOKENS).logits
        with (
            adapter.split_attention_inputs(True),
            adapter.hooked([(n, lambda x, hook: seen.append(hook.name)) for n in names]),
        ):
            split = adapter.logits(TOKENS)
        with adapter.split_attention_inputs(False):
            joint = adapter.logits(TOKENS)
    assert sorted(set(seen)) == sorted(names)
    assert relative(split, expected) <= 1e-12 and relative(joint, expected) <= 1e-12


def test_gpt_bigcode_multi_query_is_ungrouped_in_the_bridge():
    """The bridge's adapter accepts GPT-BigCode's multi-query layout only and computes attention
    from the q/k/v linears it splits off ``c_attn``; their one key and value head is repeated.
    Equal to the bridge as TransformerLens boots it (one key/value head) to float64 rounding, and
    to ``transformers``'s model to its float32 softmax."""
    from transformer_lens.model_bridge import TransformerBridge

    plain_hf = random_hf_model("gpt_bigcode", seed=1)
    plain_hf.config.architectures = ["GPTBigCodeForCausalLM"]
    plain = TransformerBridge.boot_transformers(
        "random-gpt_bigcode", hf_model=plain_hf, tokenizer=word_tokenizer(), dtype=torch.float64
    )
    assert plain.cfg.n_key_value_heads == 1
    original = random_hf_model("gpt_bigcode", seed=1)
    model = bridge_from_hf(
        random_hf_model("gpt_bigcode", seed=1), word_tokenizer(), name="random-gpt_bigcode"
    )
    with torch.no_grad():
        multi_query, got = plain(TOKENS), adapter_of(model).logits(TOKENS)
        expected = original(TOKENS).logits
    assert relative(got, multi_query) <= 1e-12
    assert relative(got, expected) <= 1e-6  # transformers' softmax runs in float32
    attention = model.blocks[0].attn
    assert attention.k.original_component.out_features == attention.v.original_component.out_features == 32
    assert model.cfg.n_key_value_heads == model.cfg.n_heads == 4
    shapes = {}

    def seen(x, hook):
        shapes[hook.name] = tuple(x.shape)

    with adapter_of(model).hooked([(sites.head_projection(0, kind), seen) for kind in QKV]):
        adapter_of(model).blocks(TOKENS)
    assert set(shapes.values()) == {(2, 7, 4, 8)}  # a key and a value per query head, as hook_q
    assert model.original_model.transformer.h[0].attn.multi_query  # transformers' model untouched


def test_multipliers_in_a_layout_not_folded_are_still_refused_in_one_sentence():
    """GraniteMoE scales its experts' sum, which ``fold_scalar_multipliers`` does not fold."""
    from sentences import assert_one_sentence
    from transformers import AutoConfig, AutoModelForCausalLM

    from circuitviz.models.errors import ModelLoadError

    config = AutoConfig.for_model(
        "granitemoe",
        vocab_size=len(word_tokenizer()),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        embedding_multiplier=12.0,
        residual_multiplier=0.7,
        logits_scaling=1.5,
    )
    torch.manual_seed(1)
    hf_model = AutoModelForCausalLM.from_config(config).eval()
    assert not fold_scalar_multipliers(hf_model)
    with pytest.raises(ModelLoadError, match="only for dense Granite") as refused:
        bridge_from_hf(hf_model, word_tokenizer(), name="random-granitemoe")
    assert_one_sentence(str(refused.value))


@pytest.mark.parametrize("family", ["cohere", "cohere2"])
def test_cohere_mlp_norm_and_logit_scale_change_no_logit(family):
    """The MLP's own copy of the shared norm and the logit scale folded into the unembedding: the
    ``transformers`` model's own operations on the same numbers (its LayerNorm rounds to float32,
    so the residual before the final norm is compared too)."""
    original, rewritten = random_hf_model(family, seed=1), random_hf_model(family, seed=1)
    assert original.logit_scale == 0.0625
    assert mlp_norm_per_layer(rewritten) and fold_logit_scale(rewritten)
    expected_logits, expected_residual = logits_and_residual(original, original.model.norm)
    logits, residual = logits_and_residual(rewritten, rewritten.model.norm)
    assert relative(residual, expected_residual) == 0.0
    assert relative(logits, expected_logits) <= 1e-15  # the scale applied to the weights first
    layer = rewritten.model.layers[0]
    assert layer.ln_mlp.weight is not layer.input_layernorm.weight
    torch.testing.assert_close(layer.ln_mlp.weight, layer.input_layernorm.weight, rtol=0, atol=0)
    assert rewritten.lm_head.weight is not rewritten.model.embed_tokens.weight
    assert not fold_logit_scale(rewritten) and not mlp_norm_per_layer(rewritten)  # nothing left


@pytest.mark.parametrize("family", ["cohere", "cohere2"])
def test_cohere_through_the_bridge_rotates_as_cohere_does(family):
    """TransformerLens's bridge rotates Cohere's interleaved tables by halves (another function:
    1e-3 of the logits here); with each head's query and key dimensions reordered evens first,
    its logits and residual equal transformers' to the float32 rounding of Cohere's LayerNorm,
    and the MLP reads its own input (``hook_mlp_in``, the block's input in a parallel block)."""
    from transformer_lens.model_bridge import TransformerBridge

    original = random_hf_model(family, seed=1)
    expected, expected_residual = logits_and_residual(original, original.model.norm)
    plain_hf = random_hf_model(family, seed=1)
    plain_hf.config.architectures = [type(plain_hf).__name__]
    plain = TransformerBridge.boot_transformers(
        f"random-{family}", hf_model=plain_hf, tokenizer=word_tokenizer(), dtype=torch.float64
    )
    with torch.no_grad():
        assert relative(plain(TOKENS), expected) > 1e-4  # the bridge as booted: pairs rotated as halves
    model = bridge_from_hf(random_hf_model(family, seed=1), word_tokenizer(), name=f"random-{family}")
    adapter = adapter_of(model)
    seen = {}

    def keep(x, hook):
        seen[hook.name] = x.detach().clone()

    names = [sites.resid_pre(1), sites.mlp_in(1)]
    with torch.no_grad(), adapter.hooked([(name, keep) for name in names]):
        got, residual = adapter.logits(TOKENS), adapter.blocks(TOKENS)
    assert relative(got, expected) <= 1e-6
    assert relative(residual, expected_residual) <= 1e-6
    assert torch.equal(seen[sites.mlp_in(1)], seen[sites.resid_pre(1)])
    assert "ln2" in model.blocks[0].submodules and model.cfg.parallel_attn_mlp


def test_mpt_forks_per_head_inputs_without_changing_its_function():
    """MPT's ALiBi attention bridge, switched to fork per-head inputs: its logits with split inputs
    equal those without and transformers' (float64, no float32 norm), and each head input fires."""
    original = random_hf_model("mpt", seed=1)
    model = bridge_from_hf(random_hf_model("mpt", seed=1), word_tokenizer(), name="random-mpt")
    adapter = adapter_of(model)
    fired = set()

    def seen(x, hook):
        fired.add(hook.name)

    with torch.no_grad():
        expected = original(TOKENS).logits
        with adapter.split_attention_inputs(False):
            whole = adapter.logits(TOKENS)
        names = [sites.head_input(layer, kind) for layer in range(2) for kind in QKV]
        with adapter.split_attention_inputs(True), adapter.hooked([(name, seen) for name in names]):
            split = adapter.logits(TOKENS)
    assert relative(whole, expected) <= 1e-12
    assert relative(split, expected) <= 1e-12
    assert fired == set(names)


@pytest.mark.parametrize("family", ["olmo", "olmo2", "olmo3", "flex_olmo"])
def test_olmo_runs_in_bfloat16_through_the_bridge(family):
    """OLMo's rotary embeddings keep their tables in float32, which the bridge's rotation never
    cast back: in bfloat16 the load failed ("expected scalar type Float but found BFloat16").
    Now it loads, its logits are transformers' to bfloat16 rounding and EAP's scores are finite."""
    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.core.tasks import prepare_task
    from circuitviz.methods import get_method

    original = random_hf_model(family, seed=1, dtype=torch.bfloat16)
    bridge = bridge_from_hf(random_hf_model(family, seed=1, dtype=torch.bfloat16), word_tokenizer(), name="b")
    tokens = prepare_task(bridge, IOI_TASK).clean_tokens
    with torch.no_grad():
        expected = original(tokens).logits.float()
        got = adapter_of(bridge).logits(tokens).float()
    assert relative(got, expected) < 3e-2
    method = get_method("eap")
    scores = method.run_on(bridge, IOI_TASK, method.make_config({}), budgets=[4]).scores
    assert torch.isfinite(scores).all() and float(scores.abs().max()) > 0
