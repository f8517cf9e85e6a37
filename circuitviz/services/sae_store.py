"""The SAE store: sae-lens SAEs from a folder, the embedded set or the hub, loaded once each.

An SAE folder is anything ``sae_lens.SAE.load_from_disk`` reads: ``cfg.json`` beside the weights,
as ``SAE.save_model`` writes it. Where an SAE reads the model comes from its hook name, parsed
here once for every user (``hook_position``: ``blocks.6.hook_resid_post`` is layer 6, after the
MLP; ``residual_layer``: the block after which a residual-stream SAE reads). Loaded SAEs are
kept in one cache keyed by folder (its resolved path and its cfg.json's modification time),
dtype and device, and are read-only (eval mode, no gradients): SAE labels, steering and
CircuitLasso's feature mode share them.

Sources: any local folder; the embedded SAEs shipped in ``assets/saes/<model id>/`` (an
``index.json`` lists them with their quality figures); sae-lens's pretrained directory on the
Hugging Face hub, or offline from the hub's local cache (``HF_HOME``, ~/.cache/huggingface) where
an earlier download left the SAE there; one not cached is refused offline in one sentence.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path

import torch

from ..core.text import first_sentence, json_given
from . import assets


class SaeUnavailable(ValueError):
    """An SAE cannot be loaded or used here; the message is one sentence saying why and what to do."""


class NoSaesShip(SaeUnavailable):
    """No SAE ships for the model: a state of the model, not a fault (the page says it as an info)."""


# ----- hook names -------------------------------------------------------------------------------
_HOOK_RE = re.compile(r"^blocks\.(\d+)\.(.+)$")
# where in a block a hook sits, so features of one layer are ordered pre < mid < post
_STAGES = {"hook_resid_pre": 0, "attn.hook_z": 1, "hook_attn_out": 2, "hook_resid_mid": 3, "hook_mlp_out": 4}
_LAST_STAGE = 5  # hook_resid_post and anything else inside the block


def _parse_hook(hook_name: str) -> tuple[int, str] | None:
    match = _HOOK_RE.match(hook_name or "")
    return (int(match.group(1)), match.group(2)) if match else None


def hook_position(hook_name: str) -> tuple[int, int]:
    """(layer, stage) of a hook name; SaeUnavailable when it is not inside a block."""
    parsed = _parse_hook(hook_name)
    if parsed is None:
        raise SaeUnavailable(
            f"The SAE's hook {hook_name!r} is not inside a transformer block (blocks.N....)."
        )
    layer, point = parsed
    return layer, _STAGES.get(point, _LAST_STAGE)


def residual_layer(hook_name: str) -> int:
    """The block after which a residual-stream SAE reads (resid_pre of l is resid_post of l-1)."""
    parsed = _parse_hook(hook_name)
    if parsed is None or parsed[1] not in ("hook_resid_post", "hook_resid_pre"):
        raise SaeUnavailable(
            f"circuitviz labels nodes with residual-stream SAEs (blocks.N.hook_resid_post or "
            f"hook_resid_pre); this SAE reads {hook_name or 'an unnamed hook'}."
        )
    layer, point = parsed
    if point == "hook_resid_pre":
        if layer == 0:
            raise SaeUnavailable(
                "An SAE on blocks.0.hook_resid_pre reads the embeddings; use one on a later layer."
            )
        layer -= 1
    return layer


def hook_name_of(sae) -> str:
    """The hook a loaded sae-lens SAE reads."""
    return str(sae.cfg.metadata.hook_name or "")


# ----- loading and saving -----------------------------------------------------------------------
_CACHE: OrderedDict[tuple[str, float, str, str], object] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 32  # SAEs kept loaded; the least recently used goes first


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def load_sae(folder: Path | str, device: torch.device | str = "cpu", dtype: str | None = None):
    """An SAE from a folder on ``device``, computing in ``dtype`` (None: as stored), loaded once.

    SaeUnavailable when the folder holds no SAE or sae-lens cannot read it.
    """
    from sae_lens import SAE

    folder = Path(folder).expanduser()
    config = folder / "cfg.json"
    if not config.is_file():
        raise SaeUnavailable(
            f"{folder} holds no SAE (no cfg.json); give a folder written by sae-lens's save_model."
        )
    # the weights' version too: an SAE retrained into the same folder kept its cfg.json's time
    versions = tuple(
        (path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else None
        for path in (config, folder / "sae_weights.safetensors")
    )
    key = (str(folder.resolve()), versions, dtype or "", str(device))
    with _CACHE_LOCK:
        sae = _CACHE.get(key)
        if sae is None:
            _require_config_kinds(config)
            _require_float_file(folder / "sae_weights.safetensors")
            try:
                sae = SAE.load_from_disk(str(folder), device=str(device), dtype=dtype)
            except Exception as error:  # sae-lens raises many kinds; the user needs one sentence
                raise SaeUnavailable(
                    f"sae-lens could not read the SAE in {folder} ({_reason(error)})."
                ) from None
            _read_only(sae)
            _require_working(sae, folder)
            _CACHE[key] = sae
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(key)
    return sae


def _reason(error: BaseException) -> str:
    """sae-lens's or torch's reason in one clause: torch's "Error(s) in loading state_dict for
    TopKSAE:" says what is wrong on its second line ('Missing key(s) in state_dict: "b_dec"')."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return first_sentence(ValueError(lines[1]), 160)
    return first_sentence(error, 160)


# cfg.json fields sae-lens reads at every encode, by the kind each must be (absent ones take
# sae-lens's defaults): a wrong kind loaded and raised at the first prompt, or encoded NaN
_CONFIG_KINDS = {
    "d_in": "whole", "d_sae": "whole", "k": "whole",
    "apply_b_dec_to_input": "bool", "rescale_acts_by_decoder_norm": "bool",
    "normalize_activations": "text", "architecture": "text", "dtype": "text", "reshape_activations": "text",
    "metadata": "object",
}  # fmt: skip
_KIND_WORDS = {
    "whole": "a whole number from 1",
    "bool": "true or false",
    "text": "a name",
    "object": "an object",
}


def _require_config_kinds(config: Path) -> None:
    """SaeUnavailable naming the first field of ``config`` (cfg.json) of the wrong kind."""
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SaeUnavailable(
            f"{config} is not JSON ({first_sentence(error)}); write it again with sae-lens."
        ) from None
    if not isinstance(values, dict):
        raise SaeUnavailable(f"{config} holds {type(values).__name__} where an SAE's settings belong.")
    checks = {
        "whole": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        "bool": lambda v: isinstance(v, bool),
        "text": lambda v: isinstance(v, str),
        "object": lambda v: isinstance(v, dict),
    }
    for name, kind in _CONFIG_KINDS.items():
        if name in values and not checks[kind](values[name]):
            raise SaeUnavailable(
                f"{config} gives {name} {json_given(values[name])} where {_KIND_WORDS[kind]} belongs; check "
                "it against the settings the SAE was trained with."
            )


def _require_float_file(weights: Path) -> None:
    """SaeUnavailable when the weight file stores a tensor in an integer type: sae-lens would copy
    it into its float weights, every small weight rounded to 0, and load (no feature then fired).
    Read from the file's header alone; a file that does not read is left to sae-lens to name."""
    from safetensors import safe_open

    try:
        with safe_open(str(weights), "pt") as stored:
            kinds = {name: stored.get_slice(name).get_dtype() for name in stored.keys()}
    except Exception:  # noqa: BLE001  (absent, cut short: sae-lens says which)
        return
    wrong = next((name for name, kind in kinds.items() if kind not in ("F16", "BF16", "F32", "F64")), None)
    if wrong is not None:
        raise SaeUnavailable(
            f"{weights} stores {wrong} as {kinds[wrong]} where floating-point weights belong; copy "
            "the weights again from where the SAE was trained."
        )


def _require_working(sae, folder: Path) -> None:
    """SaeUnavailable when ``sae``'s weights hold NaN or it cannot encode and decode a vector
    into finite values: a cfg.json of the wrong kinds (``apply_b_dec_to_input: null``, ``k: "x"``)
    loaded, then raised at the first prompt; NaN weights or ``apply_b_dec_to_input: NaN`` left
    every feature silent. (A bias of -inf, a feature switched off, is an SAE's own choice: float16
    stores -1e6 so.)"""
    for name, parameter in sae.named_parameters():  # an infinite bias may mean a dead feature; NaN never
        if bool(torch.isnan(parameter.sum())) and bool(torch.isnan(parameter).any()):
            raise SaeUnavailable(
                f"The SAE in {folder} holds NaN values in {name}; copy its weights again from where "
                "it was trained."
            )
    try:
        with torch.no_grad():
            # not zeros: constant_norm_rescale divides by the input's norm
            ramp = torch.linspace(
                -1.0, 1.0, int(sae.cfg.d_in), device=sae.W_enc.device, dtype=sae.W_enc.dtype
            )
            probe = torch.stack([ramp, ramp.flip(0)])
            encoded = sae.encode(probe)
            finite = bool(torch.isfinite(encoded).all() and torch.isfinite(sae.decode(encoded)).all())
    except Exception as error:  # noqa: BLE001  (a config of the wrong kinds raises anything)
        raise SaeUnavailable(
            f"The SAE in {folder} cannot encode a vector ({first_sentence(error)}); check its "
            "cfg.json against the settings it was trained with."
        ) from None
    if not finite:  # apply_b_dec_to_input: NaN multiplies the decoder bias into every input
        raise SaeUnavailable(
            f"The SAE in {folder} encodes a plain vector into values that are not finite; check "
            "its cfg.json against the settings it was trained with."
        )


def _read_only(sae) -> None:
    sae.eval()
    for parameter in sae.parameters():
        parameter.requires_grad_(False)


def save_sae(sae, folder: Path | str, dtype: torch.dtype = torch.float16) -> Path:
    """Save an SAE with sae-lens (inference form for a training SAE), weights cast to ``dtype``."""
    from safetensors.torch import load_file, save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if hasattr(sae, "save_inference_model"):
        weights_path, cfg_path = sae.save_inference_model(str(folder))
    else:
        weights_path, cfg_path = sae.save_model(str(folder))
    weights = {name: tensor.to(dtype).contiguous() for name, tensor in load_file(str(weights_path)).items()}
    save_file(weights, str(weights_path))
    config = json.loads(Path(cfg_path).read_text())
    config["dtype"] = dtype_name(dtype)
    config["device"] = "cpu"
    Path(cfg_path).write_text(json.dumps(config))
    return folder


# ----- finding SAEs on disk ---------------------------------------------------------------------
def embedded_index(model_id: str) -> dict | None:
    """The shipped SAEs' manifest for ``model_id`` (corpus, quality figures), or None."""
    path = assets.saes_dir(model_id) / "index.json"
    return json.loads(path.read_text()) if path.is_file() else None


def embedded_sae_folders(model_id: str) -> list[Path]:
    index = embedded_index(model_id)
    if index is None:
        return []
    return [assets.saes_dir(model_id) / entry["path"] for entry in index["saes"]]


def _search_dirs(sae_dir: str, model_name: str) -> list[Path]:
    """The given folder, else the embedded SAEs of the model, else every embedded SAE."""
    if sae_dir:
        folder = Path(sae_dir).expanduser()
        if not folder.is_dir():
            raise ValueError(
                f"The SAE folder {str(folder)!r} does not exist; give a folder of sae-lens SAEs."
            )
        return [folder]
    root = assets.saes_dir()
    if not root.is_dir():
        return []
    own = root / model_name if model_name else None
    return [own] if own is not None and own.is_dir() else [root]


def _short_name(name: str) -> str:
    """'google/gemma-3-270m' and 'gemma-3-270m' name the same model."""
    return str(name or "").rsplit("/", 1)[-1].strip().lower()


def find_saes(sae_dir: str, d_model: int, model_name: str = "") -> dict[int, list[tuple[int, Path, str]]]:
    """{layer: [(stage, folder, hook name), ...]} of the SAEs under a folder that read this model.

    Folders are searched recursively under ``sae_dir``, or, when none is given, under the
    embedded SAEs of ``model_name`` (else all embedded SAEs). An SAE qualifies when its input
    width is d_model and, if its metadata names a model, that model is ``model_name`` (an SAE of
    another model of the same width would be read silently).
    """
    found: dict[int, list[tuple[int, Path, str]]] = {}
    for root in _search_dirs(sae_dir, model_name):
        for config_path in sorted(root.rglob("cfg.json")):
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if not isinstance(config, dict):  # a cfg.json that is no SAE's: not one of ours to read
                continue
            metadata = config.get("metadata") if isinstance(config.get("metadata"), dict) else {}
            hook = metadata.get("hook_name") or config.get("hook_name") or ""
            if config.get("d_in") != d_model or not isinstance(hook, str):
                continue
            trained_on = metadata.get("model_name") or config.get("model_name")
            if trained_on and model_name and _short_name(str(trained_on)) != _short_name(model_name):
                continue
            try:
                layer, stage = hook_position(hook)
            except SaeUnavailable:
                continue
            found.setdefault(layer, []).append((stage, config_path.parent, hook))
    return found


def default_search_dir() -> str:
    """The folder ``find_saes`` searches when given none, as messages name it."""
    return assets.shown_path(assets.saes_dir())


# ----- the hub --------------------------------------------------------------------------------
def hub_unavailable_reason() -> str | None:
    """One sentence saying why hub SAEs cannot be downloaded here, or None when they may be (offline,
    those already in the Hugging Face cache still load: ``hub_sae_cached``)."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return (
            "Downloading SAEs from the Hugging Face hub is off because this machine works offline "
            "(HF_HUB_OFFLINE is set); copy the SAE's folder here and load it as a local folder instead."
        )
    return None


def hub_not_cached_sentence(release: str, sae_id: str) -> str:
    """That a hub SAE is not in the Hugging Face cache on a machine working offline."""
    return (
        f"{release}/{sae_id} is not in the Hugging Face cache and this machine works offline "
        "(HF_HUB_OFFLINE is set); download it once with HF_HUB_OFFLINE=0 where it reaches "
        "huggingface.co, or copy its folder here and load it as a local folder instead."
    )


def hub_sae_cached(release: str, sae_id: str) -> bool:
    """Whether the Hugging Face cache (``HF_HOME``, ~/.cache/huggingface) holds a file of a hub SAE,
    in the snapshot its repository's main branch pointed at when it was downloaded: offline, what
    the hub's own functions read (a file they need and lack is Load's one sentence)."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name
    from sae_lens.loading.pretrained_saes_directory import get_repo_id_and_folder_name

    try:
        repo_id, folder = get_repo_id_and_folder_name(release, sae_id)
        repo = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
        revision = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
    except (ValueError, OSError, UnicodeDecodeError):
        return False
    base = repo / "snapshots" / revision / folder  # a folder of files, or (clt) a file's stem
    if base.is_dir():
        return any(path.is_file() for path in base.rglob("*"))
    return base.parent.is_dir() and any(path.is_file() for path in base.parent.glob(f"{base.name}.*"))


def cached_hub_saes(releases: dict[str, list[str]]) -> dict[str, list[str]]:
    """``releases`` ({release: [sae ids]}) cut to the SAEs in the Hugging Face cache, in order;
    releases with none left out."""
    cached = {release: [i for i in ids if hub_sae_cached(release, i)] for release, ids in releases.items()}
    return {release: ids for release, ids in cached.items() if ids}


def _cached_shapes_first() -> None:
    """Make sae-lens read a hub file's tensor shapes from the Hugging Face cache where it holds the
    file: its Gemma Scope 2 loader reads them with HTTP range requests even when the weights are
    cached, so a cached SAE failed offline (ConnectionError). Installed once; otherwise as before."""
    from sae_lens.loading import pretrained_sae_loaders as loaders

    remote = getattr(loaders, "get_safetensors_tensor_shapes", None)
    if remote is None or getattr(remote, "reads_cache", False):
        return

    def shapes(repo_id: str, filename: str) -> dict[str, list[int]]:
        from huggingface_hub import try_to_load_from_cache
        from safetensors import safe_open

        cached = try_to_load_from_cache(repo_id, filename)
        if not isinstance(cached, str):
            return remote(repo_id, filename)
        with safe_open(cached, framework="pt") as handle:
            return {name: list(handle.get_slice(name).get_shape()) for name in handle.keys()}

    shapes.reads_cache = True
    loaders.get_safetensors_tensor_shapes = shapes


def hub_releases(model_id: str) -> dict[str, list[str]]:
    """{release: [sae ids]} of sae-lens's pretrained directory for this model (read offline)."""
    from sae_lens.loading.pretrained_saes_directory import get_pretrained_saes_directory

    wanted = model_id.split("/")[-1].lower()
    out = {}
    for release, entry in get_pretrained_saes_directory().items():
        if entry.model.split("/")[-1].lower() == wanted:
            out[release] = list(entry.saes_map)
    return out


# what a hub release's SAEs read, told by the words of its name and of its SAEs' ids and paths in
# sae-lens's directory ('gemma-scope-2-270m-pt-att', 'attn_out/layer_5_width_16k_l0_big',
# 'blocks.3.hook_resid_pre'); the first that matches says it (resid_mid before the residual stream)
_NOT_RESIDUAL = (
    ("MLP transcoders", lambda words: bool(words & {"transcoder", "transcoders", "clt"})),
    (
        "the residual stream in the middle of a block",
        lambda words: "mid" in words and bool(words & {"res", "resid"}),
    ),
    ("attention outputs", lambda words: bool(words & {"att", "attn"}) or {"hook", "z"} <= words),
    ("MLP outputs", lambda words: "mlp" in words),
)


def _release_words(release: str) -> set[str]:
    """The words of a hub release's name and of its SAEs' ids and paths in sae-lens's directory."""
    from sae_lens.loading.pretrained_saes_directory import get_pretrained_saes_directory

    entry = get_pretrained_saes_directory().get(release)
    names = [release, *((entry.saes_map.keys() | set(entry.saes_map.values())) if entry else ())]
    return {word for name in names for word in re.split(r"[^a-z0-9]+", name.lower()) if word}


def hub_release_reads(release: str) -> str | None:
    """What the SAEs of a hub ``release`` read where it is not the residual stream between blocks
    (``blocks.N.hook_resid_post`` or ``hook_resid_pre``, the only SAEs that label nodes): "attention
    outputs", "MLP outputs", "MLP transcoders" or the middle of a block; None for the residual
    stream, and for a release whose names say neither (it stays offered: Load tells)."""
    words = _release_words(release)
    return next((what for what, says in _NOT_RESIDUAL if says(words)), None)


def residual_releases(releases: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The Steer page's hub releases: (those whose SAEs may label nodes, the residual-stream ones
    first and then those whose names do not say, each by name; {release: what it reads} for the
    rest, by name). The box opened on gemma-scope-2-270m-pt-att, the first by name, whose SAEs
    read attention outputs: Load downloaded it, then refused it."""
    reads = {release: hub_release_reads(release) for release in sorted(releases)}
    unsaid = {
        release
        for release, what in reads.items()
        if what is None and not _release_words(release) & {"res", "resid"}
    }
    kept = sorted(
        (release for release, what in reads.items() if what is None), key=lambda r: (r in unsaid, r)
    )
    left_out = {release: what for release, what in reads.items() if what is not None}
    return {release: releases[release] for release in kept}, left_out


def load_hub_sae(release: str, sae_id: str, device: torch.device | str, dtype: str):
    """An SAE from the hub by sae-lens release and id (offline, from the Hugging Face cache);
    SaeUnavailable offline when it is not cached, or on failure."""
    offline = hub_unavailable_reason() is not None
    if offline and not hub_sae_cached(release, sae_id):
        raise SaeUnavailable(hub_not_cached_sentence(release, sae_id))
    from sae_lens import SAE

    key = (f"hub:{release}/{sae_id}", (), dtype or "", str(device))  # loaded once, as a folder's is
    with _CACHE_LOCK:
        sae = _CACHE.get(key)
        if sae is None:
            _cached_shapes_first()
            try:
                sae = SAE.from_pretrained(release, sae_id, device=str(device), dtype=dtype)
            except Exception as error:
                if offline:  # a file it needs missing from the cache, most likely
                    raise SaeUnavailable(
                        f"Could not load {release}/{sae_id} from the Hugging Face cache "
                        f"({type(error).__name__}) and this machine works offline (HF_HUB_OFFLINE is "
                        "set); download it again with HF_HUB_OFFLINE=0 where it reaches huggingface.co."
                    ) from None
                raise SaeUnavailable(
                    f"Could not load {release}/{sae_id} from the hub ({type(error).__name__}); check the "
                    "release and id, and that this machine can reach huggingface.co."
                ) from None
            _read_only(sae)
            _CACHE[key] = sae
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(key)
    return sae
