"""Tiny random-weight models of real architectures, built offline from a ``transformers`` config.

``random_family_model(family)`` makes a 2-layer model of one family of ``FAMILIES`` (Llama 3,
Qwen 2 and 3, Gemma 1 to 3, GPT-2, GPT-NeoX, OLMo 1 to 3, Mistral, Phi-3, the mixtures of experts
Mixtral, Qwen 2 and 3 MoE, OLMoE and gpt-oss, StableLM, StarCoder 2, SmolLM 3, GLM-4,
Apertus, Seed-OSS, Nemotron, Granite, StarCoder's GPT-BigCode, Falcon-7B, Cohere 1 and 2, MPT,
Falcon-RW, Arcee, ERNIE 4.5, Ministral 3, GLM, BitNet, GLM-4.5 MoE, Jais 2) with ``transformers``'s
own random initialisation and the word tokenizer of ``toy_models``, and boots it through TransformerLens's ``TransformerBridge``
(``circuitviz.models.bridge``). ``CANDIDATE_FAMILIES`` are the families the command line was
tried on that the bridge refuses or only HookedTransformer converts (``benchmarks/cli_families.py``).
Nothing is downloaded.
"""

from __future__ import annotations

import torch

from .toy_models import word_tokenizer

DROP = object()  # a common config field this family's config has no place for
NORM_SCALE = 0.2  # the spread of the norms' weights and biases around their initial 1 and 0

# family -> (transformers model type, config fields beyond the common ones)
FAMILIES: dict[str, tuple[str, dict]] = {
    "llama3": ("llama", {"num_key_value_heads": 2, "rope_theta": 500000.0}),
    "qwen2": ("qwen2", {"num_key_value_heads": 2}),
    "qwen3": ("qwen3", {"num_key_value_heads": 2}),
    "gemma2": (
        "gemma2",
        {
            "num_key_value_heads": 2,
            "sliding_window": 4,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            "query_pre_attn_scalar": 8,
        },
    ),
    "gemma3": (
        "gemma3_text",
        {
            "num_key_value_heads": 2,
            "sliding_window": 4,
            "query_pre_attn_scalar": 8,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "gpt2": ("gpt2", {}),
    "gpt_neox": ("gpt_neox", {"rotary_pct": 0.5, "use_parallel_residual": True}),
    "olmo2": ("olmo2", {"num_key_value_heads": 4}),
    "mistral": ("mistral", {"num_key_value_heads": 2, "sliding_window": None}),
    "phi3": ("phi3", {"num_key_value_heads": 4}),
    "gemma": ("gemma", {"num_key_value_heads": 1}),
    "olmo": ("olmo", {}),
    "olmo3": (
        "olmo3",
        {
            "num_key_value_heads": 2,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "stablelm": ("stablelm", {"num_key_value_heads": 4, "partial_rotary_factor": 0.5}),
    "mixtral": ("mixtral", {"num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen2_moe": (
        "qwen2_moe",
        {
            "num_key_value_heads": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 64,
        },
    ),
    "qwen3_moe": (
        "qwen3_moe",
        {"num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    ),
    "olmoe": ("olmoe", {"num_experts": 4, "num_experts_per_tok": 2}),
    "starcoder2": ("starcoder2", {"num_key_value_heads": 2, "sliding_window": None}),
    "smollm3": ("smollm3", {"num_key_value_heads": 2}),
    "glm4": ("glm4", {"num_key_value_heads": 2}),
    "apertus": ("apertus", {"num_key_value_heads": 2}),
    "seed_oss": ("seed_oss", {"num_key_value_heads": 2}),
    "nemotron": ("nemotron", {"num_key_value_heads": 2}),
    "gpt_oss": (
        "gpt_oss",
        {
            "num_key_value_heads": 2,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    # Granite's three multipliers, folded into the weights at boot (none a power of two, so the
    # fold rounds), and an unembedding tied to the embedding as Granite 3's is
    "granite": (
        "granite",
        {
            "num_key_value_heads": 2,
            "embedding_multiplier": 12.0,
            "residual_multiplier": 0.7,
            "attention_multiplier": 0.2,
            "logits_scaling": 1.5,
            "tie_word_embeddings": True,
        },
    ),
    "gpt_bigcode": ("gpt_bigcode", {}),  # StarCoder's multi-query attention
    # Falcon-7B: multi-query attention, parallel blocks whose attention and MLP read one norm
    "falcon": ("falcon", {"head_dim": DROP}),
    # Cohere (Command-R) and Cohere 2: parallel blocks whose attention and MLP read one norm,
    # rotary embeddings that rotate adjacent pairs (Cohere 2's global layers none)
    "cohere": ("cohere", {"num_key_value_heads": 2}),
    "cohere2": (
        "cohere2",
        {
            "num_key_value_heads": 2,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "mpt": ("mpt", {}),  # ALiBi, a fused q/k/v projection, no key/value cache
    # Falcon-RW (the RefinedWeb models): ALiBi, a fused q/k/v projection of one head each, serial blocks
    "falcon_rw": ("falcon", {"head_dim": DROP, "alibi": True, "multi_query": False, "parallel_attn": False}),
    # added 2026-12-07 (docs/models.md, "39 more families"): Arcee (an MLP of squared ReLUs
    # without a gate), ERNIE 4.5, Ministral 3, GLM (its rotation of adjacent pairs over half of
    # each head), BitNet (a norm over all heads' outputs before the output projection, one inside
    # the MLP), GLM-4.5's mixture of experts, Jais 2
    "arcee": ("arcee", {"num_key_value_heads": 2}),
    "ernie4_5": ("ernie4_5", {"num_key_value_heads": 2}),
    "ministral3": ("ministral3", {"num_key_value_heads": 2}),
    "glm": ("glm", {"num_key_value_heads": 2}),
    "bitnet": ("bitnet", {"num_key_value_heads": 2}),
    "glm4_moe": (
        "glm4_moe",
        {
            "num_key_value_heads": 2,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    "jais2": ("jais2", {"num_key_value_heads": 2}),
    # EXAONE 4 and FlexOlmo: OLMo 2's layout (a norm on attention's and the MLP's own outputs,
    # none before them), refused at load on 2026-12-07 until circuitviz/models/architectures.py
    # named them with OLMo 2; FlexOlmo also normalises whole query and key vectors and routes
    # experts, EXAONE 4 rotates only its sliding-window layers (its global layers take none)
    "exaone4": (
        "exaone4",
        {
            "num_key_value_heads": 2,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "flex_olmo": ("flex_olmo", {"num_key_value_heads": 4, "num_experts": 4, "num_experts_per_tok": 2}),
}

# families tried through the command line (benchmarks/cli_families.py) that the bridge refuses
# (or that only HookedTransformer converts), so tests/test_bridge_families.py cannot check them
# through it; docs/models.md has what each gave
CANDIDATE_FAMILIES: dict[str, tuple[str, dict]] = {
    "phi": ("phi", {"partial_rotary_factor": 0.5}),
    "gptj": ("gptj", {"rotary_dim": 4}),
    "codegen": ("codegen", {"rotary_dim": 4}),
    "opt": ("opt", {"ffn_dim": 64, "word_embed_proj_dim": 32}),
    "bloom": ("bloom", {}),
    "gpt_neo": ("gpt_neo", {"attention_types": [[["global", "local"], 1]], "window_size": 4}),
    "xglm": ("xglm", {"ffn_dim": 64}),
    "deepseek_v3": (
        "deepseek_v3",
        {
            "num_key_value_heads": 4,
            "head_dim": DROP,
            "q_lora_rank": 16,
            "kv_lora_rank": 16,
            "qk_rope_head_dim": 4,
            "qk_nope_head_dim": 4,
            "v_head_dim": 8,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_group": 1,
            "topk_group": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
        },
    ),
    # TransformerLens's HookedTransformer converts these (Llama's layout)
    "exaone": ("exaone", {"num_key_value_heads": 2}),
    "internlm3": ("internlm3", {"num_key_value_heads": 2}),
    # refused at load since 2026-12-07 (circuitviz/models/bridge_checks.py), each with its reason:
    # the bridge's HunYuan normalises queries and keys before the rotation (HunYuan after);
    # MiniMax-M2 normalises the whole query and key vectors; Falcon-H1 adds a Mamba mixer beside attention; LFM2, Jamba, Bamba, Qwen3-Next have
    # blocks without attention; VaultGemma has no compatibility mode; Gemma 4 layers of two shapes
    "hunyuan_v1_dense": ("hunyuan_v1_dense", {"num_key_value_heads": 2}),
    "minimax_m2": (
        "minimax_m2",
        {"num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2},
    ),
    "falcon_h1": ("falcon_h1", {"num_key_value_heads": 2}),
    "lfm2": ("lfm2", {"num_key_value_heads": 2, "layer_types": ["conv", "full_attention"]}),
    "jamba": (
        "jamba",
        {
            "num_key_value_heads": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "attn_layer_period": 2,
            "attn_layer_offset": 1,
            "expert_layer_period": 2,
            "expert_layer_offset": 1,
        },
    ),
    "vaultgemma": ("vaultgemma", {"num_key_value_heads": 2, "sliding_window": 4}),
    "gemma4_text": ("gemma4_text", {"num_key_value_heads": 2, "sliding_window": 4}),
    "qwen3_next": (
        "qwen3_next",
        {
            "num_key_value_heads": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "layer_types": ["linear_attention", "full_attention"],
        },
    ),
    "bamba": (
        "bamba",
        {
            "num_key_value_heads": 2,
            "mamba_n_heads": 4,
            "mamba_d_head": 16,
            "mamba_d_state": 8,
            "mamba_chunk_size": 4,
            "attn_layer_indices": [1],
        },
    ),
    "mamba": ("mamba", {}),
    "recurrent_gemma": ("recurrent_gemma", {}),
    # refused before 2026-12-07 too, each in one sentence: TransformerLens has no adapter or converter
    "helium": ("helium", {"num_key_value_heads": 2}),
    "ministral": (
        "ministral",
        {
            "num_key_value_heads": 2,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "persimmon": ("persimmon", {"head_dim": DROP}),
    "biogpt": ("biogpt", {"head_dim": DROP}),
    "phimoe": ("phimoe", {"num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2}),
    "granitemoeshared": (
        "granitemoeshared",
        {
            "num_key_value_heads": 2,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "shared_intermediate_size": 32,
        },
    ),
    "cwm": ("cwm", {"num_key_value_heads": 2}),
    "doge": ("doge", {"num_key_value_heads": 2}),
    "diffllama": ("diffllama", {"num_key_value_heads": 2}),
    "dots1": (
        "dots1",
        {
            "num_key_value_heads": 2,
            "n_shared_experts": 1,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    # the bridge has no per-head q/k/v inputs for their attention (Llama 4's chunked attention,
    # DeepSeek-V2's latent attention, ...), or shares key/value heads in a fused projection (JetMoE),
    # or cannot run it (GPT-1: no final norm), or Granite's multipliers in a mixture of experts
    "llama4_text": (
        "llama4_text",
        {
            "num_key_value_heads": 2,
            "num_local_experts": 4,
            "num_experts_per_tok": 1,
            "intermediate_size_mlp": 64,
        },
    ),
    "deepseek_v2": (
        "deepseek_v2",
        {
            "num_key_value_heads": 4,
            "head_dim": DROP,
            "q_lora_rank": 16,
            "kv_lora_rank": 16,
            "qk_rope_head_dim": 4,
            "qk_nope_head_dim": 4,
            "v_head_dim": 8,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
        },
    ),
    "afmoe": (
        "afmoe",
        {"num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    ),
    "nanochat": ("nanochat", {"num_key_value_heads": 2}),
    "jetmoe": (
        "jetmoe",
        {"num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2, "kv_channels": 8},
    ),
    "openai_gpt": ("openai-gpt", {}),
    "granitemoe": (
        "granitemoe",
        {
            "num_key_value_heads": 2,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "embedding_multiplier": 12.0,
            "residual_multiplier": 0.7,
            "attention_multiplier": 0.2,
            "logits_scaling": 1.5,
        },
    ),
}

D_MODEL, N_HEADS, D_HEAD, N_LAYERS, D_MLP = 32, 4, 8, 2, 64


def family_config(family: str, n_layers: int = N_LAYERS, vocab_size: int | None = None):
    """The ``transformers`` config of a tiny model of ``family`` (one of ``FAMILIES`` or
    ``CANDIDATE_FAMILIES``), for ``toy_models``' word tokenizer unless ``vocab_size`` is given."""
    from transformers import AutoConfig

    model_type, extra = FAMILIES[family] if family in FAMILIES else CANDIDATE_FAMILIES[family]
    vocab = vocab_size or len(word_tokenizer())
    if model_type == "gpt2":
        fields = dict(
            vocab_size=vocab,
            n_embd=D_MODEL,
            n_layer=n_layers,
            n_head=N_HEADS,
            n_positions=64,
            n_inner=D_MLP,
            bos_token_id=0,
            eos_token_id=0,
        )
    else:
        fields = dict(
            vocab_size=vocab,
            hidden_size=D_MODEL,
            intermediate_size=D_MLP,
            num_hidden_layers=n_layers,
            num_attention_heads=N_HEADS,
            head_dim=D_HEAD,
            max_position_embeddings=64,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=1,
        )
    fields.update(extra)
    fields = {key: value for key, value in fields.items() if value is not DROP}
    if "layer_types" in fields:  # the family's pattern of local and global layers, repeated
        pattern = fields["layer_types"]
        fields["layer_types"] = [pattern[index % len(pattern)] for index in range(n_layers)]
    if model_type == "gpt_neox":
        fields.pop("head_dim")
    config = AutoConfig.for_model(model_type, **fields)
    built = (getattr(config, "hidden_size", None), getattr(config, "num_hidden_layers", None))
    if built != (D_MODEL, n_layers):  # a field under another name: never build a full-size model
        raise ValueError(f"{model_type}'s config came out {built} (width, layers), not {(D_MODEL, n_layers)}")
    return config


def random_hf_model(family: str, seed: int = 0, n_layers: int = N_LAYERS, dtype=torch.float64):
    """A ``transformers`` model of ``family`` with random weights (eager attention), on the CPU
    (float64 by default, for exact comparisons)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(
        family_config(family, n_layers), attn_implementation="eager", experts_implementation="eager"
    )  # eager experts: transformers' grouped matmul takes no float64
    model = model.to(dtype)
    perturb_norms(model, seed + 1)
    return model.eval()


@torch.no_grad()
def perturb_norms(model, seed: int, scale: float = NORM_SCALE) -> int:
    """Add ``scale`` * N(0, 1) to every weight and bias of ``model``'s norms (q/k-norms included),
    as transformers initialises them at exactly 1 and 0 (Gemma's at 0, read as 1 + 0): a check on
    such a model passes with a norm's weight ignored or a norm applied at the wrong site (HunYuan's
    queries normalised before the rotation ran unnoticed so). A norm is a module whose class name
    says so (LayerNorm, RMSNorm, LayerNorm1P, ...); its parameters are named ``*norm*`` or
    ``ln_*`` in every family here. Returns the number of tensors changed."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    changed = 0
    for module in model.modules():
        if "norm" not in type(module).__name__.lower():
            continue
        for parameter in module.parameters(recurse=False):
            noise = torch.randn(parameter.shape, generator=generator, device="cpu", dtype=torch.float32)
            parameter.add_((scale * noise).to(parameter.device, parameter.dtype))
            changed += 1
    return changed


def random_family_model(family: str, seed: int = 0, n_layers: int = N_LAYERS, dtype=torch.float64):
    """A tiny random model of ``family`` booted through the bridge, ready for circuit discovery."""
    from ..models.bridge import bridge_from_hf

    hf_model = random_hf_model(family, seed, n_layers, dtype)
    return bridge_from_hf(hf_model, word_tokenizer(), name=f"random-{family}")


def split_map(hf_model, devices: list) -> dict:
    """A ``device_map`` that spreads ``hf_model``'s blocks in equal runs over ``devices``, the way
    ``transformers`` balances a model over several GPUs: the embeddings with the first blocks,
    the final norm and the unembedding with the last (an unembedding tied to the embedding stays
    with it, as ``accelerate`` keeps tied weights together). {module name: device}"""
    blocks = next(
        name for name, module in hf_model.named_modules() if isinstance(module, torch.nn.ModuleList)
    )
    base = blocks.rsplit(".", 1)[0]
    n_blocks = len(hf_model.get_submodule(blocks))
    per_device = -(-n_blocks // len(devices))
    embedding = hf_model.get_input_embeddings().weight
    placement = {}
    for name, module in hf_model.get_submodule(base).named_children():
        path = f"{base}.{name}" if base else name
        if path == blocks:
            for index in range(n_blocks):
                placement[f"{blocks}.{index}"] = devices[index // per_device]
        else:
            placement[path] = devices[0] if isinstance(module, torch.nn.Embedding) else devices[-1]
    for name, module in hf_model.named_children():
        if name != base:
            tied = any(parameter is embedding for parameter in module.parameters())
            placement[name] = devices[0] if tied else devices[-1]
    return placement
