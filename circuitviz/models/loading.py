"""Load a model as a HookedTransformer ready for circuit discovery.

Every source (an embedded GGUF, a local checkpoint, an official TransformerLens name) ends
in the same three things: a TransformerLens config, a tokenizer and a state dict. They are
assembled once, here, on the chosen device and dtype, without any folding or centring of
weights, so hooked activations are the model's own numbers.
"""

from __future__ import annotations

import functools
import gc
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

import circuitviz.models.cache as cache
from circuitviz.core.text import first_sentence, shown
from circuitviz.models.adapter import adapter_of, register
from circuitviz.models.bridge_loading import (
    HubModel,
    choose_backend,
    device_placement,
    load_bridge,
    looks_like_hub_id,
    placement_name,
)
from circuitviz.models.catalog import EMBEDDED_MODEL, EMBEDDED_MODELS, looks_like_path
from circuitviz.models.checkpoints import (
    LocalCheckpoint,
    inspect_local_checkpoint,
    read_hf_model,
    read_tokenizer,
    require_complete,
    saved_tokenizer_loader,
)
from circuitviz.models.conversion import hf_config_dict, moved_config_field, tl_config, tl_state_dict
from circuitviz.models.devices import resolve_device, resolve_dtype
from circuitviz.models.embedded import EmbeddedGguf, embedded_gguf, is_embedded
from circuitviz.models.errors import USE_THE_BRIDGE, ConversionRefused, ModelLoadError
from circuitviz.models.layout import use_linear_layout

_LOADS = itertools.count(1)  # numbers each load, so two loads of one model are two cache keys

if TYPE_CHECKING:
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


class _InMemoryWeights:
    """A converted state dict in memory; each group is dropped as soon as it is handed over."""

    def __init__(self, state_dict: dict[str, torch.Tensor]):
        self._state_dict = state_dict

    def names(self) -> list[str]:
        return list(self._state_dict)

    def take(self, names: list[str]) -> dict[str, torch.Tensor]:
        return {name: self._state_dict.pop(name) for name in names}


@dataclass
class _Parts:
    """What every source produces before assembly into a HookedTransformer.

    tokenizer None means HookedTransformer loads it from cfg.tokenizer_name (hub models).
    """

    cfg: HookedTransformerConfig
    tokenizer: PreTrainedTokenizerBase | None
    weights: _InMemoryWeights | cache.CachedWeights


def _embedded_list() -> str:
    return ", ".join(EMBEDDED_MODELS)


def _official_name(model: str) -> str | None:
    """The official TransformerLens name for model (or one of its aliases, any case), or None if
    it is not one of them. Read from TransformerLens's own list of names without importing the
    package (``official_names``): refusing ``--model nonsense`` took 6.3 s, 4.0 of them importing
    TransformerLens to look the name up."""
    return official_names().get(model.lower())


@functools.cache
def official_names() -> dict[str, str]:
    """{alias or official name, lower case: official name} as TransformerLens's
    ``get_official_model_name`` reads them, from the two literals of its ``supported_models.py``
    read as data (``ast.literal_eval``: nothing of it runs; 4 ms against 4 s to import the
    package); the package's own lists where the file does not hold them as literals."""
    import ast
    import importlib.util

    found = importlib.util.find_spec("transformer_lens")
    lists: dict = {}
    try:
        source = (Path(found.origin).parent / "supported_models.py").read_text(encoding="utf-8")
        for node in ast.parse(source).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in (
                        "OFFICIAL_MODEL_NAMES",
                        "MODEL_ALIASES",
                    ):
                        lists[target.id] = ast.literal_eval(node.value)
        official, aliases = list(lists["OFFICIAL_MODEL_NAMES"]), dict(lists["MODEL_ALIASES"])
    except Exception:  # noqa: BLE001  (moved or built otherwise in another version: ask the package)
        from transformer_lens.supported_models import MODEL_ALIASES, OFFICIAL_MODEL_NAMES

        official, aliases = list(OFFICIAL_MODEL_NAMES), dict(MODEL_ALIASES)
    table = {}
    for name in official:  # as make_model_alias_map builds it: aliases, then the name itself
        table.update({alias.lower(): name for alias in aliases.get(name, [])})
        table[name.lower()] = name
    return table


def _exists(path: Path) -> bool:
    """Whether something is at ``path``; a name too long to be a path (ENAMETOOLONG) is not."""
    try:
        return path.exists()
    except OSError:
        return False


def resolve_source(model: str, local: bool = True) -> EmbeddedGguf | LocalCheckpoint | HubModel:
    """Decide where model's weights come from: embedded ids first, then paths, then names
    (``local`` False: never a path of this machine, whether or not one exists there)."""
    name = model.strip()
    if not name:
        raise ModelLoadError(f"No model was given; use one of the embedded models ({_embedded_list()}).")
    if is_embedded(name):
        return embedded_gguf(name)
    path = Path(name).expanduser()
    if local and _exists(path):
        return inspect_local_checkpoint(path)
    if looks_like_path(name) and not local:
        raise ModelLoadError(f"{shown(name, 80)} is a path, and this server loads models by hub id only.")
    if looks_like_path(name):
        raise ModelLoadError(
            f"Nothing exists at {shown(name, 80)}; give the path of a folder holding a Hugging Face "
            "checkpoint or of a .gguf file."
        )
    official = _official_name(name)
    if official is not None:
        return HubModel(official, local=local)
    if looks_like_hub_id(name):
        return HubModel(name, official=False, local=local)
    folder = ", or the path of a local checkpoint folder" if local else ""
    raise ModelLoadError(
        f"Unknown model {shown(name, 40)}; use an embedded model ({_embedded_list()}), a Hugging "
        f"Face hub id such as Qwen/Qwen3-0.6B or an official TransformerLens name such as gpt2{folder}."
    )


def check_model_name(model: str, local: bool = True) -> None:
    """ModelLoadError, in ``resolve_source``'s sentence, for a model ``load_model`` refuses by its
    name or path alone; reads no weights and assembles no embedded file (that is the load's
    work). Checked before a command says "loading <model> ...": a mistyped ``--model`` was said
    as loading before the sentence that it is unknown."""
    if not is_embedded(model.strip()):
        resolve_source(model, local)


@dataclass
class ConvertedCheckpoint:
    """A checkpoint converted to TransformerLens, before any device or dtype is chosen."""

    hf_config: dict
    tokenizer: PreTrainedTokenizerBase
    state_dict: dict[str, torch.Tensor]  # TransformerLens names, float32, on the CPU


def convert_checkpoint(
    checkpoint: LocalCheckpoint, hf_model: PreTrainedModel | None = None
) -> ConvertedCheckpoint:
    """Read a checkpoint with transformers and convert it to TransformerLens, in float32.

    A caller that already holds the transformers model (a test comparing against it) passes
    it as hf_model and keeps it; otherwise it is read here and freed before returning.
    """
    owned = hf_model is None
    if hf_model is None:
        hf_model = read_hf_model(checkpoint)
    tokenizer = read_tokenizer(checkpoint, model_type=getattr(hf_model.config, "model_type", None))
    hf_config = hf_config_dict(hf_model)
    conversion_cfg = tl_config(hf_config, torch.device("cpu"), torch.float32)
    state_dict = tl_state_dict(hf_model, conversion_cfg, hf_config)
    del conversion_cfg
    if owned:
        # Many converted tensors are views of the transformers weights; those storages live
        # on through the views, everything else the transformers model held is returned now.
        del hf_model
        gc.collect()
    return ConvertedCheckpoint(hf_config, tokenizer, state_dict)


def gguf_cache_entry(checkpoint: LocalCheckpoint, slug: str) -> cache.CacheEntry:
    """The cache entry that holds (or will hold) this GGUF file's converted weights."""
    return cache.cache_entry(slug, cache.source_fingerprint(checkpoint.gguf_path))


def _gguf_parts(
    checkpoint: LocalCheckpoint,
    slug: str,
    device: torch.device,
    dtype: torch.dtype,
    verify: Callable[[], None],
) -> _Parts:
    """A GGUF checkpoint's parts, converting on the first load and reading the cache after.

    A fresh conversion is read back from the cache too, so first and later loads build the
    model from the same files (and the tokenizer names the cache folder, which keeps
    TransformerLens from ever re-reading the GGUF for it).
    """
    entry = gguf_cache_entry(checkpoint, slug)
    if not cache.entry_is_sound(entry):  # absent, partial, truncated or altered: converted again
        with cache.converting(entry):  # another process converting it: wait, then read its entry
            if not cache.entry_is_sound(entry):
                cache.remove_entry(entry)
                logger.info(
                    "Converting %s once (half a minute to minutes); later loads read %s.", slug, entry.folder
                )
                verify()
                converted = convert_checkpoint(checkpoint)
                written = cache.write_entry(
                    entry, converted.hf_config, converted.tokenizer, converted.state_dict
                )
                if not written:
                    return _Parts(
                        tl_config(converted.hf_config, device, dtype),
                        converted.tokenizer,
                        _InMemoryWeights(converted.state_dict),
                    )
                del converted  # read back from disk instead, so peak memory holds one copy
                gc.collect()
    logger.info("Loading %s from the conversion cache %s.", slug, entry.folder)
    # the tokenizer builds in a thread beside the config's lookup in tl_config (the tokenizers
    # library 0.23 holds the GIL while it parses the file, so the two take turns rather than
    # overlap: docs/models.md); its classes are imported here first, as two threads importing
    # one transformers module at once can see it half made
    load_tokenizer = saved_tokenizer_loader(entry.folder)
    with ThreadPoolExecutor(1, thread_name_prefix="tokenizer") as pool:
        tokenizer = pool.submit(load_tokenizer)
        cfg = tl_config(cache.read_config(entry), device, dtype)
        return _Parts(cfg, tokenizer.result(), cache.CachedWeights(entry.weights_path))


def _dense_parts(checkpoint: LocalCheckpoint, device: torch.device, dtype: torch.dtype) -> _Parts:
    """A safetensors or .bin checkpoint's parts; converting these is fast, so nothing is cached."""
    converted = convert_checkpoint(checkpoint)
    return _Parts(
        tl_config(converted.hf_config, device, dtype),
        converted.tokenizer,
        _InMemoryWeights(converted.state_dict),
    )


def _require_hub_files(official_name: str) -> None:
    """Refuse early, with the fix, a hub model that is neither cached nor downloadable."""
    from huggingface_hub import is_offline_mode, try_to_load_from_cache

    if not is_offline_mode():
        return
    if isinstance(try_to_load_from_cache(official_name, "config.json"), str):
        return
    raise ModelLoadError(
        f"{official_name} is not available offline (it is not in the Hugging Face cache and "
        f"HF_HUB_OFFLINE is set); use an embedded model ({_embedded_list()}) or download it "
        "once with network access and HF_HUB_OFFLINE=0."
    )


def _hub_parts(official_name: str, device: torch.device, dtype: torch.dtype) -> _Parts:
    """An official model's parts, through TransformerLens's own config and converters."""
    from transformer_lens import loading_from_pretrained as loading

    _require_hub_files(official_name)
    with moved_config_field("PhiForCausalLM" if "phi-" in official_name.lower() else ""):  # Phi-1, 2
        cfg = loading.get_pretrained_model_config(
            official_name, fold_ln=False, device=str(device), dtype=dtype
        )
    cfg.ungroup_grouped_query_attention = True
    hf_model = _checked_hub_model(official_name, cfg, dtype)
    state_dict = loading.get_pretrained_state_dict(official_name, cfg, hf_model, dtype=dtype)
    del hf_model
    return _Parts(cfg, None, _InMemoryWeights(state_dict))


# official names whose weights TransformerLens reads from its own .pth files, not from_pretrained
_OWN_FILES = ("NeelNanda", "ArthurConmy", "Baidicoot")


def _checked_hub_model(official_name: str, cfg: HookedTransformerConfig, dtype: torch.dtype):
    """The ``transformers`` model TransformerLens would read for ``official_name`` with a plain
    ``AutoModelForCausalLM.from_pretrained``, read here with its loading report instead, so a
    weight the hub cache lacks or holds in another shape is refused in one sentence
    (``require_complete``) rather than left random, as transformers does and says only in its
    log. None where TransformerLens reads the weights otherwise (its own .pth files, training
    checkpoints, remote code, quantised or multimodal releases): it reads those itself."""
    from transformer_lens import loading_from_pretrained as loading
    from transformers import AutoModelForCausalLM

    if (
        cfg.from_checkpoint
        or official_name.startswith(_OWN_FILES)
        or official_name.startswith(tuple(loading.NEED_REMOTE_CODE_MODELS))
        or official_name in loading.NON_HF_HOSTED_MODEL_NAMES
        or any(kind in official_name for kind in ("hubert", "wav2vec2", "bert", "t5"))
        or cfg.original_architecture == "Gemma3ForConditionalGeneration"
        or getattr(cfg, "quantization_method", None) is not None
    ):
        return None
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            official_name, dtype=dtype, output_loading_info=True, ignore_mismatched_sizes=True
        )
    except AttributeError as error:  # an older config without pad_token_id: TransformerLens mends it
        if "pad_token_id" in str(error):
            return None
        raise
    return require_complete(model, info, official_name)


def _hub_error(official_name: str, error: BaseException) -> ModelLoadError:
    """One sentence for a hub model that failed to download or read."""
    detail = first_sentence(error, 200)
    return ModelLoadError(
        f"{official_name} could not be loaded from the Hugging Face hub ({detail}); check the "
        f"network and HF_TOKEN, or use an embedded model ({_embedded_list()})."
    )


def _assemble(parts: _Parts, device: torch.device) -> HookedTransformer:
    """Build the HookedTransformer from its parts, with no weight processing, on device."""
    from transformer_lens import HookedTransformer

    hooked = HookedTransformer(parts.cfg, tokenizer=parts.tokenizer, move_to_device=False)
    try:
        _load_unprocessed_weights(hooked, parts.weights)
    except RuntimeError as error:  # its converter's shapes are not its model's (GPT-Neo's d_mlp)
        if "size mismatch" not in str(error):
            raise
        detail = next(line.strip() for line in str(error).splitlines() if "size mismatch" in line)
        raise ConversionRefused(
            f"TransformerLens's converted weights do not fit its own model ({detail[:160]}); "
            f"{USE_THE_BRIDGE}.",
            f"its converted weights do not fit its model: {detail[:120]}",
        ) from error
    hooked.cfg.device = str(device)
    hooked.move_model_modules_to_device()
    return hooked


def _weight_groups(names: list[str]) -> list[list[str]]:
    """Split weight names into per-block groups ("blocks.3.*") and per-module groups ("embed.*")."""
    groups: dict[str, list[str]] = {}
    for name in names:
        parts = name.split(".")
        key = ".".join(parts[:2]) if parts[0] == "blocks" else parts[0]
        groups.setdefault(key, []).append(name)
    return list(groups.values())


def _load_unprocessed_weights(
    hooked: HookedTransformer, weights: _InMemoryWeights | cache.CachedWeights
) -> None:
    """Copy the converted weights in as they are: no folding, centring or bias merging.

    This is what load_and_process_state_dict does with every processing flag off, but one
    load_state_dict call per block rather than per tensor (each call walks every module; per
    tensor that was most of a cached Gemma load), and reading one block at a time so peak
    memory is the model plus one block, not two copies of the model. Missing weight matrices
    still fail loudly through TransformerLens's fill_missing_keys.
    """
    names = weights.names()
    with_defaults = hooked.fill_missing_keys(dict.fromkeys(names))
    defaults = {name: value for name, value in with_defaults.items() if value is not None}
    hooked.load_state_dict(defaults, strict=False)
    dtypes = {name: tensor.dtype for name, tensor in hooked.state_dict(keep_vars=True).items()}
    for group in _weight_groups(names):
        taken = {
            name: tensor if dtypes.get(name, tensor.dtype) == tensor.dtype else tensor.to(dtypes[name])
            for name, tensor in weights.take(group).items()
        }
        # assign: the loaded tensors become the parameters (in the model's dtypes), instead of
        # being copied into the randomly initialised ones: 1.1 s of a 5 s cached Gemma load.
        # Each group goes to its own module ("blocks.3", "embed"): load_state_dict walks every
        # module below the one it is called on, and 22 walks of the whole model were 1.3 s.
        module, prefix = _group_module(hooked, group[0])
        result = module.load_state_dict(
            {name.removeprefix(prefix): tensor for name, tensor in taken.items()}, strict=False, assign=True
        )
        if result.unexpected_keys:
            logger.debug("Ignored weights the model has no place for: %s", result.unexpected_keys)


def _group_module(hooked: HookedTransformer, name: str) -> tuple[torch.nn.Module, str]:
    """(the module a weight group loads into, the prefix its names lose there): ``blocks.3`` for
    "blocks.3.attn.W_Q", ``embed`` for "embed.W_E"; the model itself for a name without a module."""
    parts = name.split(".")
    depth = 2 if parts[0] == "blocks" else 1
    if len(parts) <= depth:
        return hooked, ""
    path = ".".join(parts[:depth])
    try:
        return hooked.get_submodule(path), path + "."
    except AttributeError:
        return hooked, ""


def _require_ungrouped_attention(model: HookedTransformer) -> None:
    """Refuse grouped-query attention left grouped: K/V hooks would span several heads."""
    cfg = model.cfg
    grouped = cfg.n_key_value_heads is not None and cfg.n_key_value_heads != cfg.n_heads
    if grouped and not cfg.ungroup_grouped_query_attention:
        raise ModelLoadError(
            f"{cfg.model_name} shares {cfg.n_key_value_heads} key/value heads among "
            f"{cfg.n_heads} query heads and was not ungrouped; load it with load_model(), "
            "which sets cfg.ungroup_grouped_query_attention=True."
        )


def prepare_for_circuits(model: HookedTransformer) -> HookedTransformer:
    """Switch on the hooks circuit discovery reads, lay out the weights the way TransformerLens
    multiplies them (``layout.py``), and freeze the model. Idempotent.

    Per-head Q/K/V inputs (hook_q_input, hook_k_input, hook_v_input) and the MLP input
    (hook_mlp_in) give every head and MLP its own reader; parameters never need gradients, only
    activations do. Per-head outputs are computed by the engine from attn.hook_z, so
    use_attn_result stays off: TransformerLens computes that hook through a broadcast product
    of [batch, pos, heads, d_head, d_model] floats, which made every run several times slower.
    """
    _require_ungrouped_attention(model)
    model.set_use_attn_result(False)
    model.set_use_split_qkv_input(True)
    model.set_use_hook_mlp_in(True)
    model.eval()
    model.requires_grad_(False)
    use_linear_layout(model)  # no copy of each weight in every forward pass (layout.py)
    adapter_of(model)  # its lock, key, spec and tokenising (adapter.py)
    return model


def load_model(
    model: str = EMBEDDED_MODEL,
    device: str | None = None,
    dtype: str | None = None,
    backend: str | None = None,
    device_map: str | dict | None = None,
    n_devices: int | None = None,
    max_memory: dict | None = None,
    local: bool = True,
):
    """Load model as a HookedTransformer on device in dtype, ready for circuit discovery.

    model is an embedded id (gemma-3-270m, smollm2-135m), an official TransformerLens name
    (from the Hugging Face cache when offline), or the path of a local checkpoint folder or
    .gguf file, or (through the bridge) any Hugging Face hub id the bridge supports. device None
    or "auto" picks the best available; dtype defaults to float32. ``backend`` "bridge" boots
    TransformerLens's TransformerBridge, "hooked" assembles a HookedTransformer; None picks
    ``choose_backend``'s default. ``device_map`` / ``n_devices`` / ``max_memory`` split the model
    over several devices (bridge only); ``local`` False never reads a path of this machine (a
    shared server's pages, ``CIRCUITVIZ_BROWSER_PATHS=0``). The result has grouped-query attention ungrouped, the
    circuit hooks on, and cfg.model_name set to the string given, so callers can key caches by it.
    """
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    placement = device_placement(torch_device, device_map, n_devices, max_memory)
    source = resolve_source(model, local)
    chosen = choose_backend(source, backend, placement)
    if chosen == "hooked" and backend is None and isinstance(source, LocalCheckpoint):
        try:
            return _require_runnable(_load_hooked(source, model, torch_device, torch_dtype), model, source)
        except ConversionRefused as refused:  # the bridge needs no converter: it runs the model itself
            if not refused.bridge_may_load:  # nor an adapter: one sentence, not a warning before it
                raise
            logger.warning(
                "HookedTransformer cannot load %s (%s); booting it through the TransformerBridge.",
                model,
                refused.reason,
            )
            chosen = "bridge"
    if chosen == "bridge":
        bridge = load_bridge(source, model, torch_dtype, placement)
        register(bridge, f"{model} on {placement_name(torch_device, placement)}, load {next(_LOADS)}")
        return _require_runnable(bridge, model, source)
    return _require_runnable(_load_hooked(source, model, torch_device, torch_dtype), model, source)


PROBE_TEXT = "When Mary and John went to the store, John gave a drink to"
PROBE_PASS_TOKENS = 6  # the pass's cost is mostly the unembedding, per token


def _require_runnable(loaded, model: str, source):
    """``loaded`` when its tokenizer reads text into ids the model has embeddings for and, for a
    checkpoint the user gave (a folder or a .gguf file), the model gives finite logits on that
    text; else one sentence at load, not a traceback or NaN figures in the middle of a run (a
    tokenizer_config.json naming a class transformers does not know loads a bare tokenizer whose
    <bos> has id 43 of a 43-token model; ``max_position_embeddings: 0`` fails the first pass;
    ``rms_norm_eps: NaN`` makes every logit NaN). The tokenizing takes about a millisecond; the
    pass over its first six tokens 0.27 s for Gemma-3-270M on one CPU thread (0.35 s over all 15)."""
    adapter = adapter_of(loaded)
    try:
        tokens = adapter.to_tokens(PROBE_TEXT)
    except Exception as error:  # noqa: BLE001  (a damaged tokenizer raises anything)
        # TransformerLens pads with the end-of-text token, '<|endoftext|>' when none is named
        bare = getattr(adapter.tokenizer, "pad_token_id", 0) is None
        why = (
            "it names no padding or end-of-text token its vocabulary holds" if bare else first_sentence(error)
        )
        raise ModelLoadError(
            f"The tokenizer of {shown(model)} cannot read text ({why}); use the tokenizer files of "
            "the model's release."
        ) from error
    special = getattr(adapter.tokenizer, "all_special_ids", None) or []
    known = adapter.cfg.d_vocab
    beyond = [token for token in [*tokens.flatten().tolist(), *special] if not 0 <= int(token) < known]
    if beyond:
        raise ModelLoadError(
            f"The tokenizer of {shown(model)} gives token id {beyond[0]} "
            f"({adapter.tokenizer.convert_ids_to_tokens(int(beyond[0]))!r}) where the model has "
            f"{known:,} token embeddings; use the tokenizer files of the model's release."
        )
    if isinstance(source, LocalCheckpoint):
        try:
            with torch.no_grad():
                finite = bool(torch.isfinite(adapter.logits(tokens[:, :PROBE_PASS_TOKENS])).all())
        except Exception as error:  # noqa: BLE001  (a config of impossible sizes raises anything)
            raise ModelLoadError(
                f"{shown(model)} loaded but cannot run a sentence ({first_sentence(error)}); check "
                "its config.json against the model's release."
            ) from error
        if not finite:
            raise ModelLoadError(
                f"{shown(model)} loaded but gives logits that are not finite (NaN or infinity) on "
                "a plain sentence; check its config.json (a norm's epsilon) and weights against "
                "the model's release."
            )
    return loaded


def _load_hooked(source, model: str, torch_device: torch.device, torch_dtype: torch.dtype):
    """A HookedTransformer from ``source``, ready for circuits."""
    if isinstance(source, EmbeddedGguf):
        parts = _gguf_parts(source.checkpoint, source.model_id, torch_device, torch_dtype, source.verify)
        hooked = _assemble(parts, torch_device)
    elif isinstance(source, LocalCheckpoint) and source.weights == "gguf":
        slug = cache.slug_for(f"local-{source.gguf_path.stem}-{_path_tag(source.gguf_path)}")
        parts = _gguf_parts(source, slug, torch_device, torch_dtype, verify=lambda: None)
        hooked = _assemble(parts, torch_device)
    elif isinstance(source, LocalCheckpoint):
        hooked = _assemble(_dense_parts(source, torch_device, torch_dtype), torch_device)
    else:
        hooked = _load_from_hub(source.official_name, torch_device, torch_dtype)
    hooked.cfg.model_name = model
    prepare_for_circuits(hooked)
    register(hooked, f"{model} on {torch_device}, load {next(_LOADS)}")  # names it in cache keys
    return hooked


def _load_from_hub(official_name: str, device: torch.device, dtype: torch.dtype) -> HookedTransformer:
    """Load an official model, turning download and cache failures into one sentence."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        return _assemble(_hub_parts(official_name, device, dtype), device)
    except (OSError, HfHubHTTPError) as error:
        raise _hub_error(official_name, error) from error


def _path_tag(path: Path) -> str:
    """A short stable tag for a file's absolute path, so equal file names don't collide."""
    import hashlib

    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
