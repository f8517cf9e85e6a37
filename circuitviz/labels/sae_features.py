"""SAE labels: what the sparse-autoencoder features at a circuit node's layer mean.

An SAE (sae-lens) reads the residual stream after one block. A feature is described by its
top-activating contexts in a corpus (the token where it fires marked) and by the tokens its
decoder direction promotes through the unembedding. A circuit node is labelled with the features
it drives at the first SAE layer at or after it: for each feature, the part of its activation the
node's own output accounts for (its linear share of the pre-activation, clipped to the
activation), summed over the prompt's positions. So a node is labelled by the features it writes,
not by whatever happens to be active at its layer.

Sources (loaded through the project's SAE store, ``circuitviz.services.sae_store``): the embedded SAEs in
``assets/saes/<model>/`` (trained by ``scripts/train_saes.py``, with precomputed descriptions),
any local folder that ``SAE.load_from_disk`` reads, and the Hugging Face hub by release and id
(e.g. Gemma Scope 2) when the network allows.

Everything returned is plain data (lists, dicts, str, float, int). Token strings come from
untrusted prompts and corpus text: render them with ``render.context_html``/``html.escape``,
never raw.
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..core.graph import GraphSpec
from ..core.text import first_sentence, json_given, shown
from ..engine import sites
from ..engine.capture import observe
from ..labels.residual import residual_stream
from ..models.adapter import adapter_of
from ..services import assets
from ..services.sae_store import (
    NoSaesShip,
    SaeUnavailable,
    dtype_name,
    embedded_index,
    embedded_sae_folders,
    hook_name_of,
    load_sae,
    residual_layer,
)
from ..services.sae_store import load_hub_sae as load_hub_module

CONTEXT_BEFORE = 12  # tokens kept before the marked token of a stored context
CONTEXT_AFTER = 3
DEFAULT_TOP_FEATURES = 5
_UNEMBED_CHUNK = 256  # feature directions unembedded at once: bounds [chunk, d_vocab] in memory


@dataclass
class LabelledSae:
    """An sae-lens SAE, the residual layer it reads, and (when precomputed) its feature descriptions.

    ``layer`` is the block after which it reads the residual stream. ``features[i]`` holds feature
    i's ``contexts`` (each: ``tokens``, ``target`` index, ``activation``), ``promotes``,
    ``suppresses``, ``frequency`` and ``max_activation``; ``random_contexts`` are control contexts
    for the LLM judge.
    """

    sae: object
    layer: int
    hook_name: str
    source: str
    features: list[dict] | None = None
    random_contexts: list[dict] = field(default_factory=list)
    quality: dict = field(default_factory=dict)

    @property
    def d_sae(self) -> int:
        return int(self.sae.cfg.d_sae)

    @property
    def name(self) -> str:
        return f"{self.source} (layer {self.layer}, {self.d_sae} features)"

    @classmethod
    def load(cls, folder: Path | str, model=None, dtype: str | None = None) -> LabelledSae:
        """An SAE folder from the store, plus its ``features.json.gz`` descriptions when present.

        The weights are computed in ``dtype`` (default: the model's dtype, else float32) whatever
        dtype they are stored in (the embedded ones are float16), on the model's device.
        """
        folder = Path(folder).expanduser()
        if dtype is None:
            dtype = dtype_name(next(model.parameters()).dtype) if model is not None else "float32"
        device = str(next(model.parameters()).device) if model is not None else "cpu"
        sae = load_sae(folder, device, dtype)
        layer = residual_layer(hook_name_of(sae))
        features, random_contexts = None, []
        described = folder / "features.json.gz"
        if described.is_file():
            features, random_contexts, layer_from_file = _descriptions(
                str(described), described.stat().st_mtime
            )
            if layer_from_file is not None and layer_from_file != layer:
                raise SaeUnavailable(
                    f"{described} describes layer {layer_from_file}, but the SAE reads layer {layer}."
                )
            if features is not None and len(features) != int(sae.cfg.d_sae):
                raise SaeUnavailable(
                    f"{described} describes {len(features):,} features, but the SAE has "
                    f"{int(sae.cfg.d_sae):,}; write the descriptions again for this SAE, or remove the file."
                )
        if model is not None:
            check_fits(sae, model)
        return cls(sae, layer, sites.resid_post(layer), assets.shown_path(folder), features, random_contexts)


@functools.lru_cache(maxsize=16)
def _descriptions(path: str, modified: float) -> tuple[list | None, list, int | None]:
    """(features, random contexts, layer) of a ``features.json.gz``, read once per version."""
    fix = "write the descriptions again for this SAE, or remove the file"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            payload = json.load(handle)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as error:  # not gzip, cut short, not JSON
        raise SaeUnavailable(
            f"{path} does not read as feature descriptions ({first_sentence(error)}); {fix}."
        ) from None
    payload = payload if isinstance(payload, dict) else {"features": payload}
    features, contexts, layer = (
        payload.get("features"),
        payload.get("random_contexts", []),
        payload.get("layer"),
    )
    problem = (
        "its features are not a list of objects"
        if features is not None
        and not (isinstance(features, list) and all(isinstance(f, dict) for f in features))
        else "its random contexts are not a list of objects"
        if not (isinstance(contexts, list) and all(isinstance(c, dict) for c in contexts))
        else f"its layer is {json_given(layer)}, not a layer number"
        if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int))
        else next(filter(None, map(_feature_problem, range(len(features or [])), features or [])), None)
    )
    if problem:
        raise SaeUnavailable(f"{path} does not read as feature descriptions ({problem}); {fix}.")
    return features, contexts, layer


def _texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _feature_problem(index: int, feature: dict) -> str | None:
    """Why feature ``index``'s stored description cannot be shown (a clause), or None: contexts of
    tokens with a target among them, promoted and suppressed tokens, numbers or nothing."""
    contexts = feature.get("contexts", [])
    if not isinstance(contexts, list) or not all(
        isinstance(context, dict)
        and _texts(context.get("tokens"))
        and isinstance(context.get("target"), int)
        and not isinstance(context.get("target"), bool)
        and 0 <= context["target"] < len(context["tokens"])
        for context in contexts
    ):
        return f"feature {index}'s contexts are not token lists with a target among them"
    if not (_texts(feature.get("promotes", [])) and _texts(feature.get("suppresses", []))):
        return f"feature {index}'s promoted or suppressed tokens are not a list of texts"
    for name in ("frequency", "max_activation"):
        value = feature.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"feature {index}'s {name} is {json_given(value)}, not a number"
    return None


def check_fits(sae, model) -> None:
    """SaeUnavailable when ``sae`` cannot read ``model``'s residual stream."""
    if int(sae.cfg.d_in) != int(model.cfg.d_model):
        raise SaeUnavailable(
            f"The SAE reads vectors of size {sae.cfg.d_in}, but this model's residual stream has "
            f"{model.cfg.d_model}; pick an SAE trained on this model."
        )
    layer = residual_layer(hook_name_of(sae))
    if layer >= model.cfg.n_layers:
        raise SaeUnavailable(f"The SAE reads layer {layer}, but this model has {model.cfg.n_layers} layers.")


# ----- where SAEs come from ---------------------------------------------------------------------
def no_saes_sentence(model_id: str, sources: tuple[str, ...] | None = None) -> str:
    """That no SAE ships for ``model_id``, and the ways to SAEs: the other ``sources`` the page
    offers above it (Steer's; a shared server offers no local folder), or, with None, a folder's."""
    ways = ""
    if sources is None:
        ways = "load one from a local folder, or "
    elif sources:
        ways = f"choose {' or '.join(repr(source) for source in sources)} above to load one, or "
    return f"No SAEs ship for {model_id}; {ways}train one with scripts/train_saes.py."


def load_embedded_saes(model, model_id: str) -> list[LabelledSae]:
    """The SAEs shipped for ``model_id`` (the store loads each once); SaeUnavailable if none ship."""
    folders = embedded_sae_folders(model_id)
    if not folders:
        raise NoSaesShip(no_saes_sentence(model_id))
    index = embedded_index(model_id) or {}
    quality = {entry["layer"]: entry for entry in index.get("saes", [])}
    saes = []
    for folder in folders:
        loaded = LabelledSae.load(folder, model)
        loaded.quality = quality.get(loaded.layer, {})
        saes.append(loaded)
    return sorted(saes, key=lambda item: item.layer)


def load_local_sae(path: str, model) -> LabelledSae:
    """An SAE from a local folder (``SAE.load_from_disk``); SaeUnavailable with the reason."""
    folder = Path(path).expanduser()
    if not folder.exists():
        raise SaeUnavailable(f"Nothing exists at {path}; give the folder that holds the SAE's cfg.json.")
    return LabelledSae.load(folder, model)


def load_hub_sae(release: str, sae_id: str, model) -> LabelledSae:
    """An SAE from the hub by sae-lens release and id; SaeUnavailable offline or on failure."""
    parameter = next(model.parameters())
    sae = load_hub_module(release, sae_id, parameter.device, dtype_name(parameter.dtype))
    check_fits(sae, model)
    layer = residual_layer(hook_name_of(sae))
    return LabelledSae(sae, layer, sites.resid_post(layer), f"hub:{release}/{sae_id}")


# ----- features ---------------------------------------------------------------------------------
def feature_activations(sae, residual: torch.Tensor) -> torch.Tensor:
    """sae-lens's own encode.  residual [..., d_model] -> [..., d_sae]"""
    with torch.no_grad():
        return sae.encode(residual.to(sae.W_enc.dtype))


def _pre_activation(sae, residual: torch.Tensor) -> torch.Tensor:
    """The encoder's affine pre-activation (before the sparsifying nonlinearity).  [..., d_sae]"""
    pre = sae.process_sae_in(residual) @ sae.W_enc + sae.b_enc
    if getattr(sae.cfg, "rescale_acts_by_decoder_norm", False):
        pre = pre * sae.W_dec.norm(dim=-1)
    return pre


def node_shares(sae, residual: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """Each feature's activation that one writer's ``output`` accounts for.  [..., d_sae]

    The writer's linear share of the pre-activation, pre(x) - pre(x - output), clipped to
    [0, activation]: a feature that is off gets nothing, and no writer gets more than all of it.
    """
    with torch.no_grad():
        residual = residual.to(sae.W_enc.dtype)
        output = output.to(sae.W_enc.dtype)
        acts = sae.encode(residual)
        share = _pre_activation(sae, residual) - _pre_activation(sae, residual - output)
        return torch.minimum(share.clamp(min=0), acts)


def unembed_directions(model, directions: torch.Tensor) -> torch.Tensor:
    """Logits that residual directions [n, d_model] add, read through the final norm's weight.  [n, d_vocab]"""
    W_U, _ = adapter_of(model).unembedding
    directions = directions.to(W_U.dtype)
    if model.cfg.normalization_type is not None and model.cfg.normalization_type.startswith("LN"):
        directions = directions - directions.mean(-1, keepdim=True)
    weight = adapter_of(model).final_norm_weight
    if weight is not None:
        directions = directions * weight
    return directions @ W_U


def promoted_tokens(model, directions: torch.Tensor, top_k: int = 8) -> list[dict[str, list[str]]]:
    """For each direction [n, d_model]: the ``top_k`` tokens it promotes and suppresses most."""
    out = []
    with torch.no_grad():
        for start in range(0, directions.shape[0], _UNEMBED_CHUNK):
            logits = unembed_directions(model, directions[start : start + _UNEMBED_CHUNK].float())
            up = logits.topk(top_k, dim=-1).indices.tolist()
            down = (-logits).topk(top_k, dim=-1).indices.tolist()
            for ups, downs in zip(up, down):
                out.append(
                    {
                        "promotes": [adapter_of(model).decode([i]) for i in ups],
                        "suppresses": [adapter_of(model).decode([i]) for i in downs],
                    }
                )
    return out


def top_contexts_from_activations(
    sae,
    activations: torch.Tensor,
    rows: torch.Tensor,
    strings,
    n_top: int = 10,
    before: int = CONTEXT_BEFORE,
    after: int = CONTEXT_AFTER,
    lengths: list[int] | None = None,
    valid: torch.Tensor | None = None,
) -> tuple[list[dict], torch.Tensor]:
    """Each feature's top contexts, one per row at most (so the examples differ), over a corpus.

    activations: [rows, pos, d_model] residual stream; rows: [rows, pos] token ids, <bos> first
    (position 0 is left out: the SAEs are not trained on it); strings maps an id to its text;
    lengths: each row's real length when rows are padded (positions past it are never read);
    valid: [rows, pos] bool, False where a position must be left out (e.g. a value a float16
    cache saturated).
    Returns (per-feature dicts with contexts, frequency and max_activation; firing counts [d_sae]).
    """
    n_rows, length = rows.shape
    d_sae = int(sae.cfg.d_sae)
    row_max = torch.zeros(n_rows, d_sae)
    row_arg = torch.zeros(n_rows, d_sae, dtype=torch.long)
    fired = torch.zeros(d_sae)
    lengths = lengths or [length] * n_rows
    for row in range(n_rows):
        acts = feature_activations(
            sae, activations[row, 1 : lengths[row]].float()
        ).float()  # [pos - 1, d_sae]
        if valid is not None:
            acts[~valid[row, 1 : lengths[row]]] = 0
        fired += (acts > 0).float().sum(0)
        values, positions = acts.max(0)
        row_max[row] = values
        row_arg[row] = positions + 1
    n_tokens = max(1, sum(lengths) - n_rows)
    if valid is not None:
        n_tokens = max(1, int(sum(valid[row, 1 : lengths[row]].sum() for row in range(n_rows))))
    features = []
    top_values, top_rows = row_max.topk(min(n_top, n_rows), dim=0)  # [n_top, d_sae]
    for feature in range(d_sae):
        contexts = []
        for value, row in zip(top_values[:, feature].tolist(), top_rows[:, feature].tolist()):
            if value <= 0:
                break
            position = int(row_arg[row, feature])
            lo, hi = max(1, position - before), min(lengths[row], position + after + 1)
            contexts.append(
                {
                    "tokens": [strings[int(t)] for t in rows[row, lo:hi].tolist()],
                    "target": position - lo,
                    "activation": round(float(value), 3),
                }
            )
        features.append(
            {
                "frequency": round(float(fired[feature]) / n_tokens, 6),
                "max_activation": round(float(top_values[0, feature]), 3),
                "contexts": contexts,
            }
        )
    return features, fired


def describe_features_on_texts(
    model, labelled: LabelledSae, texts: list[str], n_top: int = 10
) -> LabelledSae:
    """Compute ``labelled.features`` (top contexts, promoted tokens) on ``texts``; for SAEs that ship none.

    One forward pass per text, stopped after the SAE's layer. Fills and returns ``labelled``.
    """
    if not texts:
        raise SaeUnavailable(
            "No texts were given to find the features' top contexts in; give a few paragraphs."
        )
    token_rows = [adapter_of(model).to_tokens(text)[0] for text in texts]
    length = max(len(row) for row in token_rows)
    pad = adapter_of(model).pad_token_id
    pad = 0 if pad is None else pad
    rows = torch.full((len(token_rows), length), pad, dtype=torch.long)
    for index, row in enumerate(token_rows):
        rows[index, : len(row)] = row
    activations = torch.zeros(len(token_rows), length, model.cfg.d_model)
    for index, row in enumerate(token_rows):
        activations[index, : len(row)] = residual_stream(model, row[None], [labelled.layer])[labelled.layer][
            0
        ]
    strings = {int(i): adapter_of(model).decode([int(i)]) for i in rows.unique().tolist()}
    lengths = [len(row) for row in token_rows]
    features, _ = top_contexts_from_activations(
        labelled.sae, activations, rows, strings, n_top, lengths=lengths
    )
    for feature, tokens in zip(features, promoted_tokens(model, labelled.sae.W_dec.detach())):
        feature.update(tokens)
    labelled.features = features
    return labelled


def feature_description(model, labelled: LabelledSae, feature: int, n_contexts: int = 5) -> dict:
    """One feature's description: contexts (marked token), promoted/suppressed tokens, frequency."""
    if not 0 <= feature < labelled.d_sae:
        raise SaeUnavailable(
            f"Feature {feature} does not exist; this SAE has features 0 to {labelled.d_sae - 1}."
        )
    if labelled.features is not None:
        stored = labelled.features[feature]
        return {
            "sae": labelled.name,
            "layer": labelled.layer,
            "feature": feature,
            "contexts": stored["contexts"][:n_contexts],
            "promotes": stored.get("promotes", []),
            "suppresses": stored.get("suppresses", []),
            "frequency": stored.get("frequency"),
            "max_activation": stored.get("max_activation"),
        }
    tokens = promoted_tokens(model, labelled.sae.W_dec[feature : feature + 1].detach())[0]
    return {
        "sae": labelled.name,
        "layer": labelled.layer,
        "feature": feature,
        "contexts": [],
        **tokens,
        "frequency": None,
        "max_activation": None,
    }


def context_text(
    context: dict, target: tuple[str, str] = ("<<", ">>"), source: tuple[str, str] = ("[[", "]]")
) -> str:
    """A stored context as plain text, the target token between ``<< >>`` (source, if any, ``[[ ]]``)."""
    parts = []
    for index, token in enumerate(context["tokens"]):
        if index == context.get("source"):
            token = f"{source[0]}{token}{source[1]}"
        if index == context.get("target"):
            token = f"{target[0]}{token}{target[1]}"
        parts.append(token)
    return "".join(parts)


def feature_label(description: dict, max_tokens: int = 3) -> str:
    """A one-line plain-text label: the marked tokens of its top contexts and what it promotes."""
    fired_on = []
    for context in description.get("contexts", []):
        token = context["tokens"][context["target"]].strip()
        if token and token not in fired_on:
            fired_on.append(token)
    promotes = [token.strip() for token in description.get("promotes", []) if token.strip()]
    pieces = []
    if fired_on:
        pieces.append("fires on " + ", ".join(repr(token) for token in fired_on[:max_tokens]))
    if promotes:
        pieces.append("promotes " + ", ".join(repr(token) for token in promotes[:max_tokens]))
    return f"L{description['layer']}/{description['feature']}: " + ("; ".join(pieces) or "no description")


# ----- circuit nodes -------------------------------------------------------------------------------
def sae_for_layer(saes: list[LabelledSae], layer: int) -> LabelledSae | None:
    """The SAE that first reads what a writer of ``layer`` wrote: the lowest SAE layer >= ``layer``."""
    candidates = [sae for sae in saes if sae.layer >= layer]
    return min(candidates, key=lambda sae: sae.layer) if candidates else None


def unknown_nodes_sentence(spec: GraphSpec, nodes: list[str]) -> str | None:
    """One sentence naming every node of ``nodes`` that is not a writer of this model's graph (and
    how the model's nodes are written), or None when all of them are."""
    unknown = [node for node in nodes if node != "logits" and node not in spec.forward_names]
    if not unknown:
        return None
    quoted = [shown(node, 24) for node in unknown[:8]]
    if len(unknown) > 8:
        quoted.append(f"{len(unknown) - 8} more")
    named = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    what = "is not a node" if len(unknown) == 1 else "are not nodes"
    last = spec.n_layers - 1
    mlps = f", or an MLP m0 to m{last}" if "m0" in spec.forward_names else ""
    return (
        f"{named} {what} that write{'s' if len(unknown) == 1 else ''} to this model's residual stream: "
        f"use input, a head a0.h0 to a{last}.h{spec.n_heads - 1} (layer, then head){mlps}."
    )


def circuit_node_features(
    model,
    prompt: str,
    nodes: list[str],
    saes: list[LabelledSae],
    top_k: int = DEFAULT_TOP_FEATURES,
) -> dict[str, dict]:
    """SAE labels of circuit nodes on one prompt, from one forward pass.

    For each node: the SAE that first reads it, and its ``top_k`` features ranked by the
    activation the node's output accounts for, summed over the prompt's positions (<bos> left
    out). Each feature carries its description (``feature_description``), the share, the
    activation, and the position where the node drives it most. Nodes with no SAE at or after
    their layer get ``{"sae": None, "reason": ...}``.
    """
    if not saes:
        raise SaeUnavailable("No SAE is loaded; load the embedded SAEs or one from a folder first.")
    spec = adapter_of(model).spec
    problem = unknown_nodes_sentence(spec, nodes)
    if problem:  # every unknown node named at once, before any pass
        raise SaeUnavailable(problem)
    tokens = adapter_of(model).to_tokens(prompt)  # [1, pos]
    str_tokens = [adapter_of(model).decode([int(t)]) for t in tokens[0].tolist()]
    layers = sorted({sae.layer for sae in saes})
    writers, captured, _ = observe(
        model, spec, tokens, hook_names=[sites.resid_post(layer) for layer in layers]
    )
    writers = writers[0, 1:]  # [pos - 1, n_forward, d_model]
    # group the nodes by the SAE that reads them: one batched share computation per SAE
    groups: dict[int, list[tuple[str, int]]] = {}
    labels: dict[str, dict] = {}
    for node in nodes:
        if node == "logits":
            continue
        writer = spec.forward_names.index(node)  # every node checked above
        node_layer = int(spec.forward_layer[writer])
        labelled = sae_for_layer(saes, max(node_layer, 0))
        if labelled is None:
            labels[node] = {
                "sae": None,
                "reason": f"No loaded SAE reads layer {node_layer} or later.",
                "features": [],
            }
            continue
        groups.setdefault(labelled.layer, []).append((node, writer))
    by_layer = {sae.layer: sae for sae in saes}
    for layer, members in groups.items():
        labelled = by_layer[layer]
        residual = captured[sites.resid_post(layer)][0, 1:]  # [pos - 1, d_model]
        outputs = writers[:, [writer for _, writer in members]].transpose(0, 1)  # [nodes, pos - 1, d_model]
        shares = node_shares(labelled.sae, residual[None], outputs)  # [nodes, pos - 1, d_sae]
        acts = feature_activations(labelled.sae, residual).float()  # [pos - 1, d_sae]
        for (node, _), node_shares_ in zip(members, shares):
            totals = node_shares_.sum(0)
            count = min(top_k, int((totals > 0).sum()))
            features = []
            for feature in totals.topk(count).indices.tolist():
                position = int(node_shares_[:, feature].argmax()) + 1
                description = feature_description(model, labelled, feature, n_contexts=3)
                features.append(
                    {
                        **description,
                        "share": round(float(totals[feature]), 4),
                        "activation": round(float(acts[:, feature].sum()), 4),
                        "position": position,
                        "token": str_tokens[position],
                        "label": feature_label(description),
                    }
                )
            labels[node] = {"sae": labelled.name, "sae_layer": layer, "features": features}
    return {node: labels[node] for node in nodes if node in labels}


def reconstruction_quality(sae, activations: torch.Tensor, batch: int = 4096) -> dict:
    """Explained variance, L0 and relative MSE of ``sae`` on ``activations`` [tokens, d_model]."""
    squared_error = 0.0
    l0 = 0.0
    total = activations.shape[0]
    mean = activations.float().mean(0)
    variance = float((activations.float() - mean).pow(2).sum())
    with torch.no_grad():
        for start in range(0, total, batch):
            x = activations[start : start + batch].float()
            acts = sae.encode(x)
            squared_error += float((sae.decode(acts) - x).pow(2).sum())
            l0 += float((acts > 0).float().sum())
    return {
        "explained_variance": round(1 - squared_error / variance, 4),
        "l0": round(l0 / total, 2),
        "tokens": int(total),
    }


def hover_labels(
    model, prompt: str, nodes: list[str], saes: list[LabelledSae], top_k: int = 3
) -> dict[str, list[str]]:
    """{node: up to ``top_k`` one-line plain-text feature labels} for graph hovers (escape when rendering)."""
    labels = circuit_node_features(model, prompt, nodes, saes, top_k=top_k)
    return {
        node: [f"{item['label']} (at {item['token']!r}, {item['share']:.2f})" for item in entry["features"]]
        for node, entry in labels.items()
    }
