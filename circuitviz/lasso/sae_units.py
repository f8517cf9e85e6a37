"""SAEs for CircuitLasso's feature mode: one sae-lens SAE per chosen layer, from the SAE store.

The project's SAE store (``circuitviz.services.sae_store``) finds the SAE folders under the given directory
(or the embedded SAEs) that read this model, parses their hook names and loads each once; here
one SAE is chosen per layer and its features are turned into regression units.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..core.text import parse_whole_numbers, shown_number
from ..services.sae_store import default_search_dir, find_saes
from .units import SAEUnits


def parse_layers(text: str, n_layers: int) -> list[int]:
    """'2,6,10' -> [2, 6, 10]; ValueError with the fix for anything else."""
    return parse_whole_numbers(
        text,
        "Layer {part} is not a whole number; write layers as 2,6,10.",
        refuse=lambda layer: (
            None
            if 0 <= layer < n_layers
            else f"Layer {shown_number(layer)} does not exist; this model has layers 0 to {n_layers - 1}."
        ),
        empty="SAE mode needs layers, e.g. layers=2,6,10 (--layers 2,6,10).",
    )


def choose_saes(
    layers: list[int], sae_dir: str, d_model: int, model_name: str = ""
) -> list[tuple[int, Path, str]]:
    """One SAE per layer, preferring the residual stream after the block; ValueError if missing."""
    found = find_saes(sae_dir, d_model, model_name)
    chosen = []
    where = sae_dir or default_search_dir()
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
