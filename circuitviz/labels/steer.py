"""Acting on labels: zero chosen SAE features and see the answer's metric and top tokens move.

At an SAE's layer the residual stream x becomes

    SAE reconstruction with the chosen features zeroed + SAE error term
      = decode(a with chosen set to 0) + (x - decode(a))        with a = encode(x)

so the rest of the model sees exactly what the SAE explains minus the chosen features, plus what
the SAE fails to explain. Computed as ``x + decode(a') - decode(a)``: with nothing chosen (or with
features that are already zero) ``a' == a`` and the run is the clean run bit for bit. Later layers
see the edited stream; an SAE at a later layer encodes what actually reaches it. The <bos>
position is left untouched (the SAEs are not trained on its outlier residual).

``steer`` puts the chosen features next to as many random features active on the same prompt at
the same layers, so a change can be told from the effect of removing any features at all.
``gender_bias_experiment`` is the Query Circuits check that labels are actionable: zeroing the
gender-related features of the most faithful circuit (best NDF among Best-of-N candidates)
should reduce a gender bias more than zeroing those of the least faithful one.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ..core.tasks import PreparedTask, PromptTask, prepare_task
from ..engine.metric import logits_from_residual, metric_from_residual
from ..labels.residual import final_residual_with_edits, residual_stream
from ..measure.evaluate import Evaluator, circuits_at_budgets, curves_of_tasks
from ..methods import RunContext, get_method
from ..models.adapter import adapter_of
from ..services import assets
from ..services.sae_store import SaeUnavailable
from .sae_features import LabelledSae, circuit_node_features, feature_activations, feature_label

Feature = tuple[int, int]  # (SAE layer, feature index)
Progress = Callable[[str, float], None]
GENDER_PROMPTS = assets.prompt_set("gender_bias.json")


# ----- the intervention --------------------------------------------------------------------------
def zeroing_edit(labelled: LabelledSae, features: Sequence[int], keep_bos: bool = True):
    """x -> reconstruction without ``features`` + error term, as a residual edit for one layer."""
    sae = labelled.sae
    chosen = torch.tensor(sorted({int(f) for f in features}), dtype=torch.long)

    def edit(x: torch.Tensor) -> torch.Tensor:  # [batch, pos, d_model]
        if chosen.numel() == 0:
            return x
        acts = sae.encode(x.to(sae.W_enc.dtype))  # [batch, pos, d_sae]
        zeroed = acts.clone()
        zeroed[..., chosen.to(acts.device)] = 0
        delta = sae.decode(zeroed) - sae.decode(acts)  # -(sum of the chosen features' contributions)
        if keep_bos:
            delta[:, 0] = 0
        return x + delta.to(x.dtype)

    return edit


def reconstruction_edit(labelled: LabelledSae, keep_bos: bool = True):
    """x -> the SAE's reconstruction (no error term): what replacing the activation costs."""
    sae = labelled.sae

    def edit(x: torch.Tensor) -> torch.Tensor:
        out = sae.decode(sae.encode(x.to(sae.W_enc.dtype))).to(x.dtype)
        if keep_bos:
            out[:, 0] = x[:, 0]
        return out

    return edit


def _saes_by_layer(saes: Sequence[LabelledSae]) -> dict[int, LabelledSae]:
    return {sae.layer: sae for sae in saes}


def _edits(saes: Sequence[LabelledSae], features: Sequence[Feature]) -> dict:
    by_layer = _saes_by_layer(saes)
    chosen: dict[int, list[int]] = {}
    for layer, feature in features:
        if layer not in by_layer:
            raise SaeUnavailable(
                f"No loaded SAE reads layer {layer}; load one there or pick another feature."
            )
        if not 0 <= int(feature) < by_layer[layer].d_sae:
            raise SaeUnavailable(
                f"Feature {feature} does not exist at layer {layer}; it has {by_layer[layer].d_sae} features."
            )
        chosen.setdefault(int(layer), []).append(int(feature))
    return {layer: zeroing_edit(by_layer[layer], ids) for layer, ids in chosen.items()}


@torch.no_grad()
def run_with_edits(model, prepared: PreparedTask, edits: dict, top_k: int = 5) -> dict:
    """{"metric", "top_tokens": [[token, probability], ...]} of the clean prompt under ``edits``."""
    residual = final_residual_with_edits(model, prepared.clean_tokens, edits)  # [1, d_model]
    metric = float(metric_from_residual(model, prepared, residual)[0])
    logits = logits_from_residual(model, residual)[0].float()  # [d_vocab]
    probabilities = torch.softmax(logits, dim=-1)
    values, ids = probabilities.topk(top_k)
    tokens = [
        [adapter_of(model).decode([i]), round(float(p), 5)] for i, p in zip(ids.tolist(), values.tolist())
    ]
    return {"metric": metric, "top_tokens": tokens}


def active_features(model, prepared: PreparedTask, labelled: LabelledSae) -> list[int]:
    """Features of ``labelled`` active anywhere in the prompt (<bos> left out), most active first."""
    residual = residual_stream(model, prepared.clean_tokens, [labelled.layer])[labelled.layer][0, 1:]
    totals = feature_activations(labelled.sae, residual).float().sum(0)
    active = (totals > 0).nonzero().flatten()
    return active[totals[active].argsort(descending=True)].tolist()


def _prepared(model, task: PromptTask | PreparedTask) -> PreparedTask:
    if isinstance(task, PreparedTask):
        return task
    return prepare_task(model, task, need_corrupted=False)


def steer(
    model,
    task: PromptTask | PreparedTask,
    features: Sequence[Feature],
    saes: Sequence[LabelledSae],
    top_k: int = 5,
    n_random: int = 5,
    seed: int = 0,
) -> dict:
    """Zero ``features`` [(layer, feature), ...] and report the metric and top tokens before/after.

    ``random`` repeats the intervention ``n_random`` times with as many random features per layer,
    drawn among the features active on this prompt at that layer (excluding the chosen ones):
    the change to beat. Returns plain data for the Steer panel.
    """
    prepared = _prepared(model, task)
    features = sorted({(int(layer), int(feature)) for layer, feature in features})
    before = run_with_edits(model, prepared, {}, top_k)
    after = run_with_edits(model, prepared, _edits(saes, features), top_k)
    by_layer = _saes_by_layer(saes)
    per_layer: dict[int, int] = {}
    for layer, _ in features:
        per_layer[layer] = per_layer.get(layer, 0) + 1
    rng = random.Random(seed)
    pools = {
        layer: [f for f in active_features(model, prepared, by_layer[layer]) if (layer, f) not in features]
        for layer in per_layer
    }
    random_runs = []
    for _ in range(n_random if features else 0):
        drawn = [
            (layer, f)
            for layer, count in per_layer.items()
            for f in rng.sample(pools[layer], min(count, len(pools[layer])))
        ]
        result = run_with_edits(model, prepared, _edits(saes, drawn), top_k)
        random_runs.append({"features": drawn, "metric": result["metric"]})
    random_metrics = [run["metric"] for run in random_runs]
    labels = []
    for layer, feature in features:
        labelled = by_layer[layer]
        description = {"layer": layer, "feature": feature}
        if labelled.features is not None:
            description.update(labelled.features[feature])
        labels.append({"layer": layer, "feature": feature, "label": feature_label(description)})
    return {
        "task": prepared.task.to_dict(),
        "features": labels,
        "before": before,
        "after": after,
        "change": after["metric"] - before["metric"],
        "random": {
            "runs": random_runs,
            "mean_metric": _mean(random_metrics),
            "mean_change": _mean([m - before["metric"] for m in random_metrics]),
        },
    }


def steer_node(
    model,
    task: PromptTask | PreparedTask,
    node: str,
    saes: Sequence[LabelledSae],
    n_features: int = 5,
    **options,
) -> dict:
    """Zero the ``n_features`` SAE features a circuit node drives most on this prompt (see ``steer``)."""
    prepared = _prepared(model, task)
    labels = circuit_node_features(model, prepared.task.clean, [node], list(saes), top_k=n_features)[node]
    if labels["sae"] is None:
        raise SaeUnavailable(labels["reason"])
    features = [(labels["sae_layer"], item["feature"]) for item in labels["features"]]
    result = steer(model, prepared, features, saes, **options)
    result["node"] = node
    return result


@torch.no_grad()
def reconstruction_metric_change(
    model, labelled: LabelledSae, tasks: Sequence[PromptTask] | None = None
) -> dict:
    """How far the task metric moves when the SAE's reconstruction replaces its layer's activation.

    Averaged over ``tasks`` (default: the project's gender-bias prompts). Returns the mean
    absolute change, the mean clean |metric| for scale, and the fraction of prompts whose
    metric keeps its sign.
    """
    if tasks is None:
        tasks = [
            PromptTask(item["clean"], "", item["answer"], (item["foil"],)) for item in load_gender_prompts()
        ]
    changes, scales, kept = [], [], 0
    for task in tasks:
        prepared = prepare_task(model, task, need_corrupted=False)
        clean = run_with_edits(model, prepared, {}, 1)["metric"]
        replaced = run_with_edits(model, prepared, {labelled.layer: reconstruction_edit(labelled)}, 1)[
            "metric"
        ]
        changes.append(abs(replaced - clean))
        scales.append(abs(clean))
        kept += int((replaced > 0) == (clean > 0))
    return {
        "prompts": len(tasks),
        "mean_abs_metric_change": round(_mean(changes), 4),
        "mean_abs_clean_metric": round(_mean(scales), 4),
        "sign_kept": round(kept / max(1, len(tasks)), 4),
    }


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


# ----- the gender-bias experiment ------------------------------------------------------------------
def load_gender_prompts(path: Path = GENDER_PROMPTS) -> list[dict]:
    """The project's gender-bias prompts: clean, corrupted, answer (stereotyped pronoun), foil, paraphrases."""
    return json.loads(Path(path).read_text())["prompts"]


@torch.no_grad()
def gender_feature_scores(
    model, saes: Sequence[LabelledSae], pairs: Sequence[tuple[str, str]] | None = None
) -> dict[int, torch.Tensor]:
    """How much each feature's activation differs between sentences that swap a gendered word.

    For each (male, female) sentence pair of equal token length, from the first differing token
    on: score = sum |a_male - a_female| / (sum (a_male + a_female) / 2 + 1), summed over pairs
    and positions. 0 when the feature does not care about the swap; near 2 when it fires for
    one gender only; a feature that fires on everything scores low. One forward pass per pair
    reads every SAE's layer. Returns {layer: [d_sae]}.
    """
    pairs = pairs if pairs is not None else GENDER_PROBE_PAIRS
    layers = sorted({sae.layer for sae in saes})
    differences = {sae.layer: torch.zeros(sae.d_sae) for sae in saes}
    magnitude = {sae.layer: torch.zeros(sae.d_sae) for sae in saes}
    used = 0
    for male, female in pairs:
        tokens_male, tokens_female = adapter_of(model).to_tokens(male), adapter_of(model).to_tokens(female)
        if tokens_male.shape != tokens_female.shape:
            continue
        differ = (tokens_male != tokens_female)[0].nonzero()
        if len(differ) == 0:
            continue
        start = int(differ[0])
        residuals = residual_stream(model, torch.cat([tokens_male, tokens_female]), layers)
        for sae in saes:
            acts = (
                feature_activations(sae.sae, residuals[sae.layer][:, start:]).float().cpu()
            )  # [2, pos, d_sae]
            differences[sae.layer] += (acts[0] - acts[1]).abs().sum(0)
            magnitude[sae.layer] += acts.sum((0, 1)) / 2
        used += 1
    if used == 0:
        raise SaeUnavailable("No probe pair has equal token lengths; give pairs that differ in one word.")
    return {layer: differences[layer] / (magnitude[layer] + 1.0) for layer in differences}


GENDER_PROBE_PAIRS = [
    (f"{m}{rest}", f"{f}{rest}")
    for (m, f) in [
        ("He", "She"),
        ("The man", "The woman"),
        ("My father", "My mother"),
        ("The boy", "The girl"),
        ("My brother", "My sister"),
        ("The king", "The queen"),
        ("The gentleman", "The lady"),
    ]
    for rest in (" went home early because", " said that the work was done and", " was tired, so")
] + [
    ("I told him that he", "I told her that she"),
    ("His book was on the table and he", "Her book was on the table and she"),
    ("Mr. Smith said he", "Mrs. Smith said she"),
]


def circuit_nodes(spec, mask: torch.Tensor) -> list[str]:
    """Writer nodes with at least one edge in the circuit ``mask`` [n_forward, n_backward]."""
    writers = set(mask.any(1).nonzero().flatten().tolist())
    owner = spec.backward_to_forward
    for reader in mask.any(0).nonzero().flatten().tolist():
        if int(owner[reader]) >= 0:
            writers.add(int(owner[reader]))
    return [spec.forward_names[w] for w in sorted(writers)]


def circuit_gender_features(
    model,
    prompt: str,
    nodes: Sequence[str],
    saes: Sequence[LabelledSae],
    gender_scores: dict[int, torch.Tensor],
    per_node: int = 10,
    threshold: float = 0.5,
) -> list[Feature]:
    """The gender-related features among those the circuit's nodes drive on ``prompt``."""
    labels = circuit_node_features(model, prompt, list(nodes), list(saes), top_k=per_node)
    chosen = set()
    for entry in labels.values():
        if entry["sae"] is None:
            continue
        for item in entry["features"]:
            if float(gender_scores[entry["sae_layer"]][item["feature"]]) >= threshold:
                chosen.add((entry["sae_layer"], item["feature"]))
    return sorted(chosen)


def candidate_circuits(
    model,
    item: dict,
    budget: int,
    method: str = "eap-ig",
    method_config: dict | None = None,
    max_paraphrases: int | None = None,
) -> tuple[list[dict], PreparedTask]:
    """Best-of-N candidates for one prompt: top-``budget`` circuits of the prompt and each paraphrase.

    Each candidate is scored on its own (clean, corrupted) pair and evaluated (NDF) on the
    ORIGINAL prompt. Returns ([{"source", "mask", "ndf", "metric"}], the original's PreparedTask).
    """
    spec = adapter_of(model).spec
    scorer = get_method(method)
    config = scorer.make_config(method_config or {})
    original = PromptTask(item["clean"], item["corrupted"], item["answer"], (item["foil"],))
    sources = [original] + [
        PromptTask(p["clean"], p["corrupted"], item["answer"], (item["foil"],))
        for p in item.get("paraphrases", [])[:max_paraphrases]
    ]
    masks, names = [], []
    for source in sources:
        ((scores, _),) = scorer.score_batch([RunContext(model, source)], config)  # a batch of one
        scores = (scores.float() * spec.tensors(scores.device).edge_mask).nan_to_num(0.0)
        masks.append(circuits_at_budgets(spec, scores, [budget])[0])
        names.append(source.clean)
    prepared = prepare_task(model, original)
    evaluator = Evaluator(model, spec, prepared)
    curve = curves_of_tasks([evaluator], torch.stack(masks)[None], [budget] * len(masks))[0]
    candidates = [
        {"source": name, "mask": mask, "ndf": point.ndf, "metric": point.metric}
        for name, mask, point in zip(names, masks, curve)
    ]
    return candidates, prepared


def gender_bias_experiment(
    model,
    saes: Sequence[LabelledSae],
    prompts: Sequence[dict] | None = None,
    budget: int = 300,
    method: str = "eap-ig",
    method_config: dict | None = None,
    max_paraphrases: int | None = None,
    per_node: int = 10,
    threshold: float = 0.5,
    probe_pairs: Sequence[tuple[str, str]] | None = None,
    gender_scores: dict[int, torch.Tensor] | None = None,
    progress: Progress | None = None,
) -> dict:
    """Query Circuits' actionability check on the project's gender-bias prompts.

    For each prompt: Best-of-N candidate circuits (the prompt and its paraphrases, top-``budget``
    edges of ``method``), the best and the worst by NDF on the prompt; the gender-related SAE
    features each one's nodes drive (``gender_feature_scores`` >= ``threshold`` among the
    ``per_node`` strongest per node, scored on ``probe_pairs``, or given as ``gender_scores``);
    zero them; bias = |logit(stereotyped pronoun) -
    logit(other pronoun)|; reduction = bias before - bias after. Returns per-prompt rows and the
    mean and standard deviation of the reductions for best and worst, with a paired sign test.
    """
    prompts = list(prompts) if prompts is not None else load_gender_prompts()
    spec = adapter_of(model).spec
    scores = gender_scores if gender_scores is not None else gender_feature_scores(model, saes, probe_pairs)
    rows = []
    for index, item in enumerate(prompts):
        candidates, prepared = candidate_circuits(model, item, budget, method, method_config, max_paraphrases)
        best = max(candidates, key=lambda c: c["ndf"])
        worst = min(candidates, key=lambda c: c["ndf"])
        before = run_with_edits(model, prepared, {}, 3)["metric"]
        row = {"prompt": item["clean"], "bias_before": abs(before), "candidates": len(candidates)}
        for name, candidate in (("best", best), ("worst", worst)):
            nodes = circuit_nodes(spec, candidate["mask"])
            features = circuit_gender_features(model, item["clean"], nodes, saes, scores, per_node, threshold)
            after = (
                run_with_edits(model, prepared, _edits(saes, features), 3)["metric"] if features else before
            )
            row[name] = {
                "ndf": round(candidate["ndf"], 4),
                "source": candidate["source"],
                "n_nodes": len(nodes),
                "gender_features": [list(f) for f in features],
                "bias_after": abs(after),
                "reduction": abs(before) - abs(after),
            }
        rows.append(row)
        if progress:
            progress("gender-bias", (index + 1) / len(prompts))
    best_reductions = [row["best"]["reduction"] for row in rows]
    worst_reductions = [row["worst"]["reduction"] for row in rows]
    wins = sum(b > w for b, w in zip(best_reductions, worst_reductions))
    losses = sum(b < w for b, w in zip(best_reductions, worst_reductions))
    return {
        "prompts": rows,
        "best_reduction_mean": _mean(best_reductions),
        "best_reduction_std": _std(best_reductions),
        "worst_reduction_mean": _mean(worst_reductions),
        "worst_reduction_std": _std(worst_reductions),
        "best_wins": wins,
        "worst_wins": losses,
        "sign_test_p": sign_test(wins, losses),
        "settings": {"budget": budget, "method": method, "per_node": per_node, "threshold": threshold},
    }


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test p-value of ``wins`` against ``losses`` (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(0, min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)
