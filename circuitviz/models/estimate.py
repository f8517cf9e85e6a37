"""How much memory a model will take before it is loaded, from its config alone.

``estimate_memory(model_id)`` reads an embedded model's row of the catalog, or the
``config.json`` of a local folder or of a hub id in the Hugging Face cache, and counts the
weights as circuitviz holds them (grouped-query attention ungrouped: every query head its own
key and value projection). No torch and no model: the sidebar calls it as the user types.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from circuitviz.core.graph_shape import edge_count
from circuitviz.core.text import json_given, shown
from circuitviz.models.catalog import SUPPORTED_MODELS, looks_like_path, not_cached_offline
from circuitviz.models.errors import ModelLoadError

BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class MemoryEstimate:
    """A model's size as circuitviz would load it."""

    model_id: str
    n_parameters: int
    n_layers: int
    n_heads: int
    n_edges: int
    weight_bytes: int
    dtype: str

    def _amounts(self) -> tuple[str, str]:
        # a tiny model (a test checkpoint, a toy) in thousands and MB, not "0M parameters, 0.0 GB"
        parameters = (
            f"{self.n_parameters / 1e6:,.0f}M"
            if self.n_parameters >= 1e6
            else f"{self.n_parameters / 1e3:,.0f}K"
        )
        weights = (
            f"{self.weight_bytes / 1e9:.1f} GB"
            if self.weight_bytes >= 1e8
            else f"{self.weight_bytes / 1e6:.1f} MB"
        )
        return parameters, weights

    def sentence(self) -> str:
        parameters, weights = self._amounts()
        return (
            f"{shown(self.model_id, 60)}: about {parameters} parameters, "
            f"{weights} of weights in {self.dtype} plus working memory; "
            f"{self.n_layers} layers x {self.n_heads} heads, {self.n_edges:,} edges."
        )

    def loaded_sentence(self) -> str:
        """Of a model loaded (``loaded_size``): what its weights hold in memory, where an embedding
        tied to the unembedding in the file is held twice (SmolLM2-135M: 163M)."""
        parameters, weights = self._amounts()
        return (
            f"Loaded: {parameters} parameters in memory ({weights} in {self.dtype}); "
            f"{self.n_layers} layers x {self.n_heads} heads, {self.n_edges:,} edges."
        )


def _text_config(config) -> dict:
    """The language model's part of a config (a multimodal one nests it), which must be an object."""
    if not isinstance(config, dict):
        raise ValueError("it is not a JSON object")
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) and inner else config


def _config_dict(model_id: str, local: bool = True) -> dict:
    """The config of a local folder (``local``) or of a hub id in the Hugging Face cache."""
    folder = Path(model_id).expanduser()
    path = folder / "config.json" if local and folder.is_dir() else None
    if path is None:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model_id, "config.json")
        path = Path(found) if isinstance(found, str) else None
    if path is None or not path.is_file():
        raise ModelLoadError(
            f"No config.json is known for {shown(model_id, 60)} (not a local folder, not in the "
            "Hugging Face cache); its size is known once it is downloaded or loaded."
        )
    return _text_config(json.loads(path.read_text()))


LARGEST_SIZE = 10**7  # a width, a vocabulary or a count of layers beyond any model's: a broken config


def _first(config: dict, *names, default=None):
    for name in names:
        if config.get(name) is not None:
            return config[name]
    return default


def _size(value) -> int:
    """A config's size field as a whole number from 1; ValueError for anything else (true, 1e308,
    -5, "x": a 1e308 head count was drawn as a 300-digit number, then raised in the sentence)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= LARGEST_SIZE:
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"not a whole number: {value!r}")
    return int(value)


def parameters_of_config(config: dict) -> tuple[int, int, int, bool]:
    """(parameters with grouped-query attention ungrouped, layers, heads, parallel) of a config."""
    d = _size(_first(config, "hidden_size", "n_embd", "d_model"))
    layers = _size(_first(config, "num_hidden_layers", "n_layer", "num_layers"))
    heads = _size(_first(config, "num_attention_heads", "n_head", "num_heads"))
    head_dim = _size(_first(config, "head_dim", default=max(d // heads, 1)))
    mlp = _size(_first(config, "intermediate_size", "n_inner", default=None) or 4 * d)
    vocab = _size(_first(config, "vocab_size"))
    gated = config.get("model_type") not in ("gpt2", "gpt_neox", "gptj", "opt", "bloom", "phi")
    attention = 4 * d * heads * head_dim  # q, k, v (ungrouped) and o
    per_layer = attention + (3 if gated else 2) * d * mlp + 2 * d  # and two norm weights
    embeddings = vocab * d * (1 if config.get("tie_word_embeddings", True) else 2)
    parallel = bool(config.get("use_parallel_residual", False) or config.get("parallel_attn", False))
    return embeddings + layers * per_layer + d, layers, heads, parallel  # + the final norm


SIZE_FIELDS = (
    "num_hidden_layers", "n_layer", "num_layers", "hidden_size", "n_embd", "d_model",
    "num_attention_heads", "n_head", "num_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "n_inner", "vocab_size",
)  # fmt: skip
BEYOND_FILES = (
    4  # a config's count over the files': the estimate runs 0.39-1.35x the true count on 31 families
)


def numbers_in_files(folder: Path) -> int | None:
    """How many numbers ``folder``'s weight files hold: from the safetensors headers (read, not the
    weights), else the .bin files' bytes (at least one a number); None when there are none or they
    do not read (the loader then names the file)."""
    import math

    total = 0
    try:
        tensors = sorted(folder.glob("*.safetensors"))
        for path in tensors:
            with path.open("rb") as stream:
                length = int.from_bytes(stream.read(8), "little")
                if not 2 <= length <= path.stat().st_size - 8:
                    return None
                header = json.loads(stream.read(length))
            total += sum(
                math.prod(entry["shape"]) for name, entry in header.items() if name != "__metadata__"
            )
        if not tensors:
            pickled = list(folder.glob("pytorch_model*.bin"))
            if not pickled:  # no weights here (a .gguf beside the config, or none yet): unknown
                return None
            total = sum(path.stat().st_size for path in pickled)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return total


def size_problem(config: dict, folder: Path) -> str | None:
    """Why ``config`` cannot be the model whose weights ``folder`` holds (one clause), or None: a
    size beyond any model's, or a model several times the files' (``num_hidden_layers: 10**12``
    had transformers build layers until the memory ran out)."""
    text = _text_config(config)
    for name in SIZE_FIELDS:
        value = text.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > LARGEST_SIZE:
            return f"its config.json gives {name} {json_given(value)}, beyond any model's"
    try:
        claimed = parameters_of_config(text)[0]
    except ValueError:  # fields it does not read, or not sizes: transformers names them
        return None
    held = numbers_in_files(folder)
    if held is not None and claimed > BEYOND_FILES * held + 10**6:
        return (
            f"its config.json describes about {claimed:,} parameters where the weight files hold "
            f"{held:,} numbers"
        )
    return None


def loaded_size(model_id: str, model) -> MemoryEstimate:
    """The size of a model already loaded, counted from its weights (not estimated from a
    config): what the sidebar says once a GGUF file or a hub id it could not size is loaded."""
    weights = list(model.parameters())
    cfg = model.cfg
    layers, heads = int(cfg.n_layers), int(cfg.n_heads)
    dtype = str(weights[0].dtype).removeprefix("torch.") if weights else "float32"
    return MemoryEstimate(
        model_id.strip(),
        sum(weight.numel() for weight in weights),
        layers,
        heads,
        edge_count(layers, heads, bool(getattr(cfg, "parallel_attn_mlp", False))),
        sum(weight.numel() * weight.element_size() for weight in weights),
        dtype,
    )


def estimate_memory(model_id: str, dtype: str = "float32") -> MemoryEstimate:
    """The size of ``model_id`` (an embedded id, a local folder, or a hub id in the cache) as
    circuitviz would load it in ``dtype``; ModelLoadError with the fix when nothing is known."""
    name = model_id.strip()
    if dtype not in BYTES:
        raise ModelLoadError(f"Precision {shown(dtype, 20)} is not supported; use one of {', '.join(BYTES)}.")
    info = SUPPORTED_MODELS.get(name.lower())
    if info is not None:
        count, layers, heads, parallel = (
            info.approx_params,
            info.n_layers,
            info.n_heads,
            info.parallel_attn_mlp,
        )
    else:
        count, layers, heads, parallel = parameters_of_config(_config_dict(name))
    return MemoryEstimate(
        name, count, layers, heads, edge_count(layers, heads, parallel), count * BYTES[dtype], dtype
    )


HUB_ID = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}"
BARE_ID = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}"  # a hub name with no owner (the hub's old ids: gpt2)


@dataclass(frozen=True)
class FreeModelCheck:
    """What the sidebar knows of a typed model id before loading it: its size (``estimate``), or
    why it cannot be loaded (``problem``, one sentence with the fix), or what is not known yet
    (``note``: loading may still work)."""

    model_id: str
    estimate: MemoryEstimate | None = None
    problem: str | None = None
    note: str | None = None

    @property
    def loadable(self) -> bool:
        return self.problem is None


def _offline() -> bool:
    import os

    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _unsupported_architecture(config: dict) -> str | None:
    """The config's architecture when TransformerLens's bridge is known to have no adapter for it;
    None when it has one, or when TransformerLens is not imported yet (the load then says so:
    importing it here would hold the sidebar for seconds)."""
    import sys

    factory = sys.modules.get("transformer_lens.factories.architecture_adapter_factory")
    supported = getattr(factory, "SUPPORTED_ARCHITECTURES", None)
    names = config.get("architectures") or []
    names = [name for name in names if isinstance(name, str)] if isinstance(names, list) else []
    if not supported or not names:
        return None
    return None if any(name in supported for name in names) else str(names[0])


def check_free_model(model_id: str, dtype: str = "float32", local: bool = True) -> FreeModelCheck:
    """Check a model id typed by the user (a hub id or a local folder or .gguf file) without
    loading it or importing torch: its memory estimate, or one sentence saying why it cannot load
    and what to do instead."""
    import re

    name = model_id.strip()
    path = Path(name).expanduser()
    path_shaped = looks_like_path(name)
    try:  # ``local`` False: no path of this machine is read, nor said to exist (a shared server)
        exists = local and path.exists()
    except OSError:
        exists = False
    if exists and path.is_file():
        if path.suffix.lower() == ".gguf":
            return FreeModelCheck(
                name, note="A GGUF file: its size is known once it is converted (once, then cached)."
            )
        return FreeModelCheck(
            name, problem=f"{shown(name, 60)} is a single file; give a checkpoint folder or a .gguf file."
        )
    if exists:
        if not (path / "config.json").is_file():
            return FreeModelCheck(
                name,
                problem=f"{shown(name, 60)} holds no config.json; give a folder saved with "
                "save_pretrained (config.json and safetensors weights).",
            )
    elif path_shaped and not local:  # the same sentence whether or not it exists here
        return FreeModelCheck(
            name, problem=f"{shown(name, 60)} is a path, and this server loads models by hub id only."
        )
    elif path_shaped:
        return FreeModelCheck(
            name,
            problem=f"Nothing exists at {shown(name, 60)}; give the path of a checkpoint folder or of a .gguf file.",
        )
    elif name in SUPPORTED_MODELS:
        return FreeModelCheck(name, problem=f"{shown(name, 40)} is in the model list above; pick it there.")
    elif (listed := next((m for m in SUPPORTED_MODELS if m.lower() == name.lower()), None)) is not None:
        return FreeModelCheck(
            name, problem=f"{shown(name, 40)} is in the model list above as {listed!r}; pick it there."
        )
    elif re.fullmatch(BARE_ID, name):
        return FreeModelCheck(
            name,
            problem=f"{shown(name, 40)} names no owner; type its hub id as owner/name (gpt2's is "
            f"openai-community/gpt2){' or the path of a local folder' if local else ''}.",
        )
    elif re.fullmatch(HUB_ID, name) is None:
        return FreeModelCheck(
            name,
            problem=f"{shown(name, 40)} is neither a Hugging Face hub id (owner/name, such as "
            "Qwen/Qwen3-0.6B) nor a local folder; type one of those."
            if local
            else f"{shown(name, 40)} is not a Hugging Face hub id (owner/name, such as Qwen/Qwen3-0.6B); "
            "type one.",
        )
    try:
        config = _config_dict(name, local)
    except ModelLoadError:
        if _offline():
            return FreeModelCheck(name, problem=not_cached_offline(shown(name, 60), local))
        return FreeModelCheck(name, note="Not downloaded yet: its size is known once its config is fetched.")
    except (OSError, ValueError) as error:
        return FreeModelCheck(name, problem=f"The config.json of {shown(name, 60)} does not read ({error}).")
    beyond = size_problem(config, path) if exists else None  # a folder its config does not describe
    if beyond:
        return FreeModelCheck(name, problem=f"{shown(name, 60)} cannot load: {beyond}.")
    unsupported = _unsupported_architecture(config)
    if unsupported:
        return FreeModelCheck(
            name,
            problem=f"TransformerLens's bridge has no adapter for {shown(unsupported, 40)}; use a supported "
            "architecture (Llama, Qwen, Gemma, GPT-2, GPT-NeoX, OLMo, Mistral, Phi, ...) or a newer TransformerLens.",
        )
    try:
        count, layers, heads, parallel = parameters_of_config(config)
    except (TypeError, ValueError, ZeroDivisionError):
        return FreeModelCheck(name, note="Its config does not say its size; loading will tell.")
    estimate = MemoryEstimate(
        name, count, layers, heads, edge_count(layers, heads, parallel), count * BYTES[dtype], dtype
    )
    return FreeModelCheck(name, estimate=estimate)
