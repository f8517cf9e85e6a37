"""Top contexts of an ACC++ signal, ready for an LLM description (``llm.LLMLabeler.describe``).

An ACC++ signal of head (layer, head) is a destination-side residual direction p paired with a
source-side direction q (the paper's ``q* = Omega^T p / |Omega^T p|``; for singular direction k
of the head's query-key form these are its k-th left and right singular vectors,
``acc.residual_directions``). How strongly a pair of positions (d, s) of a text carries the
signal is

    score(d, s) = (x_d . p) (q . x_s),        s <= d,

with x the residual stream entering the layer, normalised as the head's input norm does (the
norm's weight is folded into the directions by ``acc.svd``). The top-scoring pairs over a set of
texts, with the destination marked ``<< >>`` and the source ``[[ ]]``, are what the LLM
describes. <bos> is left out on both sides: as a source it is an attention sink that every
head uses, not a pattern.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import torch

from ..engine import sites
from ..engine.capture import observe
from ..models.adapter import adapter_of
from ..services import assets
from .sae_features import CONTEXT_AFTER, CONTEXT_BEFORE


def corpus_sample(model_id: str = "gemma-3-270m") -> list[str]:
    """Texts of the embedded SAEs' corpus shipped with them (for on-demand top contexts); [] if none."""
    path = assets.corpus_sample_path(model_id)
    if not path.is_file():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)["texts"]


def _normalised_input(model, residual: torch.Tensor) -> torch.Tensor:
    """The residual as the layer's input norm sees it, without the norm's weight.  [pos, d_model]"""
    norm = model.cfg.normalization_type
    if norm is None:
        return residual
    if norm.startswith("LN"):
        residual = residual - residual.mean(-1, keepdim=True)
    return residual / (residual.pow(2).mean(-1, keepdim=True) + model.cfg.eps).sqrt()


def signal_top_contexts(
    model,
    layer: int,
    destination_direction: torch.Tensor,
    source_direction: torch.Tensor,
    texts: list[str],
    n_top: int = 20,
    before: int = CONTEXT_BEFORE,
    after: int = CONTEXT_AFTER,
) -> list[dict]:
    """The ``n_top`` (text, d, s) pairs with the largest score, one per text, as marked contexts.

    destination_direction, source_direction: [d_model]. Each context: ``tokens``, ``target`` (d),
    ``source`` (s) indices into ``tokens``, and ``score``. The window runs from a few tokens
    before the source (or before the destination, whichever is earlier) to a few after d.
    """
    if not 0 <= layer < model.cfg.n_layers:
        raise ValueError(
            f"Layer {layer} does not exist; this model has layers 0 to {model.cfg.n_layers - 1}."
        )
    spec = adapter_of(model).spec
    hook = sites.resid_pre(layer)
    p = destination_direction.flatten().float()
    q = source_direction.flatten().float()
    found = []
    for text in texts:
        tokens = adapter_of(model).to_tokens(text)  # [1, pos]
        if tokens.shape[1] < 3:
            continue
        _, captured, _ = observe(model, spec, tokens, hook_names=[hook], keep_writers=False)
        x = _normalised_input(model, captured[hook][0].float())  # [pos, d_model]
        scores = torch.outer(x @ p.to(x.device), x @ q.to(x.device))  # [d, s]
        scores[0, :] = float("-inf")
        scores[:, 0] = float("-inf")
        allowed = torch.ones_like(scores, dtype=torch.bool).tril()  # s <= d
        scores = scores.masked_fill(~allowed, float("-inf"))
        best = int(scores.argmax())
        destination, source = divmod(best, scores.shape[1])
        found.append((float(scores[destination, source]), tokens[0].tolist(), destination, source))
    found.sort(key=lambda item: item[0], reverse=True)
    contexts = []
    for score, ids, destination, source in found[:n_top]:
        lo = max(1, min(source - 1, destination - before))
        hi = min(len(ids), destination + after + 1)
        contexts.append(
            {
                "tokens": [adapter_of(model).decode([t]) for t in ids[lo:hi]],
                "target": destination - lo,
                "source": source - lo,
                "score": round(score, 4),
            }
        )
    return contexts


def write_corpus_sample(texts: list[str], folder: Path, count: int = 400, seed: int = 0) -> Path:
    """Ship ``count`` texts of the corpus (shuffled with ``seed``) next to the embedded SAEs."""
    import random

    chosen = list(texts)
    random.Random(seed).shuffle(chosen)
    path = Path(folder) / assets.CORPUS_SAMPLE
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump({"texts": chosen[:count]}, handle, ensure_ascii=False)
    return path
