"""SAEs for CircuitLasso's feature mode: find sae-lens SAEs saved on disk, one per chosen layer.

An SAE folder is anything ``sae_lens.SAE.load_from_disk`` reads (``cfg.json`` beside the
weights, as ``SAE.save_model`` writes it). Its layer and position in the layer come from its
``hook_name`` (``blocks.6.hook_resid_post`` -> layer 6, after the MLP). Folders are searched
recursively under the given directory, or, when none is given, under the project's
``assets/saes/<model id>`` (where the labels' embedded SAEs live), else ``assets/saes``.
SAEs whose metadata names another model are skipped.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import torch

from .units import SAEUnits

DEFAULT_SAE_DIRS = ("assets/saes", "assets/sae")
_HOOK_RE = re.compile(r"^blocks\.(\d+)\.(.+)$")
# where in a block a hook sits, so features of one layer are ordered pre < mid < post
_STAGES = {"hook_resid_pre": 0, "attn.hook_z": 1, "hook_attn_out": 2, "hook_resid_mid": 3, "hook_mlp_out": 4}
_CACHE: dict[tuple[str, float, str], object] = {}
_CACHE_LOCK = threading.Lock()


def hook_position(hook_name: str) -> tuple[int, int]:
    """(layer, stage) of a hook name; ValueError when it is not inside a block."""
    match = _HOOK_RE.match(hook_name or "")
    if not match:
        raise ValueError(f"The SAE's hook {hook_name!r} is not inside a transformer block (blocks.N....).")
    return int(match.group(1)), _STAGES.get(match.group(2), 5)


def parse_layers(text: str, n_layers: int) -> list[int]:
    """'2,6,10' -> [2, 6, 10]; ValueError with the fix for anything else."""
    layers = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            layer = int(part)
        except ValueError:
            raise ValueError(f"Layer {part!r} is not a whole number; write layers as 2,6,10.") from None
        if not 0 <= layer < n_layers:
            raise ValueError(f"Layer {layer} does not exist; this model has layers 0 to {n_layers - 1}.")
        layers.append(layer)
    if not layers:
        raise ValueError("SAE mode needs layers, e.g. layers=2,6,10 (--layers 2,6,10).")
    return sorted(set(layers))


def _project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _search_dirs(sae_dir: str, model_name: str) -> list[Path]:
    if sae_dir:
        folder = Path(sae_dir).expanduser()
        if not folder.is_dir():
            raise ValueError(
                f"The SAE folder {str(folder)!r} does not exist; give a folder of sae-lens SAEs."
            )
        return [folder]
    roots = [_project_root() / name for name in DEFAULT_SAE_DIRS if (_project_root() / name).is_dir()]
    own = [root / model_name for root in roots if model_name and (root / model_name).is_dir()]
    return own or roots


def _short_name(name: str) -> str:
    """'google/gemma-3-270m' and 'gemma-3-270m' name the same model."""
    return str(name or "").rsplit("/", 1)[-1].strip().lower()


def find_saes(sae_dir: str, d_model: int, model_name: str = "") -> dict[int, list[tuple[int, Path, str]]]:
    """{layer: [(stage, folder, hook name), ...]} of the SAEs on disk that read this model.

    An SAE qualifies when its input width is d_model and, if its metadata names a model, that
    model is ``model_name`` (an SAE of another model of the same width would be read silently).
    """
    found: dict[int, list[tuple[int, Path, str]]] = {}
    for root in _search_dirs(sae_dir, model_name):
        for config_path in sorted(root.rglob("cfg.json")):
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            metadata = config.get("metadata") or {}
            hook = metadata.get("hook_name") or config.get("hook_name") or ""
            if int(config.get("d_in", -1)) != d_model:
                continue
            trained_on = metadata.get("model_name") or config.get("model_name")
            if trained_on and model_name and _short_name(trained_on) != _short_name(model_name):
                continue
            try:
                layer, stage = hook_position(hook)
            except ValueError:
                continue
            found.setdefault(layer, []).append((stage, config_path.parent, hook))
    return found


def choose_saes(
    layers: list[int], sae_dir: str, d_model: int, model_name: str = ""
) -> list[tuple[int, Path, str]]:
    """One SAE per layer, preferring the residual stream after the block; ValueError if missing."""
    found = find_saes(sae_dir, d_model, model_name)
    chosen = []
    where = sae_dir or " or ".join(DEFAULT_SAE_DIRS)
    for layer in layers:
        options = found.get(layer)
        if not options:
            have = ", ".join(str(layer) for layer in sorted(found)) or "none"
            raise ValueError(
                f"No sae-lens SAE for layer {layer} (d_in {d_model}) in {where} (layers with SAEs: "
                f"{have}); choose those layers, or give sae_dir= a folder of SAEs saved with SAE.save_model."
            )
        stage, folder, hook = max(options, key=lambda item: (item[0], str(item[1])))
        chosen.append((layer, folder, hook))
    return chosen


def load_sae(folder: Path, device: torch.device):
    """An SAE from disk (cached per folder, modification time and device)."""
    from sae_lens import SAE

    config = Path(folder) / "cfg.json"
    key = (str(Path(folder).resolve()), config.stat().st_mtime, str(device))
    with _CACHE_LOCK:
        sae = _CACHE.get(key)
        if sae is None:
            sae = SAE.load_from_disk(str(folder), device=str(device))
            sae.eval()
            _CACHE[key] = sae
    return sae


@torch.no_grad()
def sae_units(
    saes: list[tuple[int, object, str]],
    activations: dict[str, torch.Tensor],
    prompt_rows: torch.Tensor,
    max_features: int,
) -> SAEUnits:
    """Encode each chosen layer's observations and keep up to ``max_features`` features per layer.

    A feature is a candidate when it is active at some observation. Candidates are ranked by
    their mean activation on the prompt's own positions (``prompt_rows`` [M] bool), then by their
    variance over all observations, so the features the prompt uses come first.
    """
    layers, hooks, features, values, on_prompt, active_counts = [], [], [], [], [], []
    for layer, sae, hook in saes:
        inputs = activations[hook]
        dtype = next(sae.parameters()).dtype
        encoded = sae.encode(inputs.to(dtype)).float()  # [M, d_sae]
        active = (encoded > 0).any(0)
        candidates = active.nonzero(as_tuple=True)[0]
        prompt_mean = encoded[prompt_rows.to(encoded.device)][:, candidates].mean(0)
        variance = encoded[:, candidates].var(0, unbiased=False)
        by_variance = torch.argsort(variance, descending=True, stable=True)
        order = by_variance[torch.argsort(prompt_mean[by_variance], descending=True, stable=True)]
        keep = candidates[order[:max_features]].sort().values
        layers.append(layer)
        hooks.append(hook)
        features.append(keep.cpu())
        values.append(encoded[:, keep])
        on_prompt.append(encoded[prompt_rows.to(encoded.device)][:, keep].mean(0).cpu())
        active_counts.append(int(active.sum()))
    return SAEUnits(layers, hooks, features, values, on_prompt, active_counts)
