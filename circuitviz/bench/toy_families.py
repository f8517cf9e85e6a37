"""Tiny random-weight models of real architectures, built offline from a ``transformers`` config.

``random_family_model(family)`` makes a 2-layer model of one family (Llama 3, Qwen 2 and 3,
Gemma 2 and 3, GPT-2, GPT-NeoX, OLMo 2, Mistral, Phi-3) with ``transformers``'s own random
initialisation and the word tokenizer of ``toy_models``, and boots it through TransformerLens's
``TransformerBridge`` (``circuitviz.models.bridge``). Nothing is downloaded.
"""

from __future__ import annotations

import torch

from .toy_models import word_tokenizer

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
}

D_MODEL, N_HEADS, D_HEAD, N_LAYERS, D_MLP = 32, 4, 8, 2, 64


def family_config(family: str, n_layers: int = N_LAYERS):
    """The ``transformers`` config of a tiny model of ``family``."""
    from transformers import AutoConfig

    model_type, extra = FAMILIES[family]
    vocab = len(word_tokenizer())
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
    if "layer_types" in fields:  # the family's pattern of local and global layers, repeated
        pattern = fields["layer_types"]
        fields["layer_types"] = [pattern[index % len(pattern)] for index in range(n_layers)]
    if model_type == "gpt_neox":
        fields.pop("head_dim")
    return AutoConfig.for_model(model_type, **fields)


def random_hf_model(family: str, seed: int = 0, n_layers: int = N_LAYERS, dtype=torch.float64):
    """A ``transformers`` model of ``family`` with random weights (eager attention), on the CPU
    (float64 by default, for exact comparisons)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(family_config(family, n_layers), attn_implementation="eager")
    model = model.to(dtype)
    with torch.no_grad():  # norms that start at exactly 1 (or 0) would hide a misread norm weight
        generator = torch.Generator(device="cpu").manual_seed(seed + 1)
        for name, parameter in model.named_parameters():
            if "norm" in name or "ln_" in name:
                parameter.add_(0.2 * torch.randn(parameter.shape, generator=generator, device="cpu"))
    return model.eval()


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
