"""The paper's knockout check: remove the signals ACC++ found, or as many random ones, and measure.

Removing a signal subtracts its clean-run value from the query (or keys) the head scores with:
a query signal (c, k) of decision (head, d, s) takes ``alpha_c[k] sigma_k B[:, k]`` off the
head's rotated query at d; a key signal takes ``beta_c[j, k] sigma_k A[:, k]`` off its rotated
key at every source j (see ``svd.py``). A signal found by several decisions is removed once.
Later layers then run on the changed outputs, so the knockout measures the whole model's
answer, not just the decisions' rows.

Measured, for the found signals and for ``n_random`` draws of random candidates (same decision,
same side, same count): the traced attention weights, the task's metric, and the final residual
at the last position against the clean run (cosine similarity and norm ratio; the paper reports
these to show a knockout changes little besides what it targets).

Without a corrupted prompt the engine's faithfulness curve has no reference point; ACC++ then
measures the curve within its own circuit: at budget N it keeps the signals of the top-N
engine edges and knocks out all other found signals. Knocking out every found signal plays the
corrupted run (NDF 0), the clean run is the full circuit (NDF 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..acc.edits import run_with_qk_edits
from ..core.curves import Baseline, CurvePoint, ndf, nfs
from ..core.graph import GraphSpec
from ..engine.metric import metric_from_residual
from .svd import HeadSVD, compute_dtype
from .trace import Signal, Trace, TracedDecision

# sequences of one knockout batch; bounds memory for long prompts
_CHUNK = 16


def _edit_key(decision: TracedDecision, signal: Signal) -> tuple:
    component = (signal.component.name, signal.component.source)
    position = decision.destination if signal.side == "q" else -1
    return (decision.layer, decision.head, signal.side, position, component, signal.direction)


def build_edits(
    model, svd: HeadSVD, sets: Sequence[Sequence[tuple[TracedDecision, Signal]]], n_positions: int
) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    """Query and key edits that remove each set's signals, one batch element per set.

    Returns ({layer: [batch, pos, n_heads, d_head]} for queries, the same for keys).
    """
    cfg = model.cfg
    dtype = compute_dtype(model)
    device = next(model.parameters()).device
    # rows of each edit: (element, position, head, direction) and the coefficient, per side/layer
    rows: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
    values: dict[tuple[str, int], list[torch.Tensor]] = {}
    for element, signals in enumerate(sets):
        seen: set[tuple] = set()
        for decision, signal in signals:
            key = _edit_key(decision, signal)
            if signal.side == "q":
                positions = [decision.destination]
            else:  # a key signal found by decisions with different source ranges: each source once
                positions = list(decision.sources)
            keep = [i for i, position in enumerate(positions) if (key, position) not in seen]
            if not keep:
                continue
            seen.update((key, positions[i]) for i in keep)
            group = (signal.side, decision.layer)
            rows.setdefault(group, []).extend(
                (element, positions[i], decision.head, signal.direction) for i in keep
            )
            values.setdefault(group, []).append(signal.coefficients[keep].to(device=device, dtype=dtype))
    q_edits: dict[int, torch.Tensor] = {}
    k_edits: dict[int, torch.Tensor] = {}
    for (side, layer), index in rows.items():
        a, b, sigma = (t[layer].to(device=device, dtype=dtype) for t in (svd.a, svd.b, svd.sigma))
        element, position, head, direction = (torch.tensor(column, device=device) for column in zip(*index))
        # query direction of k in head space: sigma_k B[:, k]; key direction: sigma_k A[:, k]
        basis = b if side == "q" else a  # [H, R, R]
        directions = basis[head, :, direction] * sigma[head, direction][:, None]  # [N, R]
        deltas = -torch.cat(values[(side, layer)])[:, None] * directions
        target = q_edits if side == "q" else k_edits
        edits = torch.zeros(len(sets), n_positions, cfg.n_heads, cfg.d_head, dtype=dtype, device=device)
        edits.index_put_((element, position, head), deltas, accumulate=True)
        target[layer] = edits
    return q_edits, k_edits


def run_knockouts(model, svd: HeadSVD, trace: Trace, prepared, sets, check=None) -> dict:
    """Metric, traced weights and final residual of the clean run and of each set knocked out
    (``check``: called before each block of each pass, a run's progress report).

    Returns {"metric": [1 + n_sets], "weights": [1 + n_sets, n_decisions],
    "cosine": [1 + n_sets], "norm_ratio": [1 + n_sets]} (index 0 the clean run) as lists.
    """
    n = int(prepared.clean_tokens.shape[1])
    layers = sorted({d.layer for d in trace.decisions})
    all_sets = [[]] + list(sets)
    metrics, weights, residuals = [], [], []
    for start in range(0, len(all_sets), _CHUNK):
        chunk = all_sets[start : start + _CHUNK]
        q_edits, k_edits = build_edits(model, svd, chunk, n)
        tokens = prepared.clean_tokens.expand(len(chunk), -1)
        residual, patterns = run_with_qk_edits(model, tokens, q_edits, k_edits, layers, check)
        metrics.append(metric_from_residual(model, prepared, residual).double().cpu())
        residuals.append(residual.double().cpu())
        if trace.decisions:
            weights.append(
                torch.stack(
                    [
                        patterns[d.layer][:, d.head, d.destination, d.source].double().cpu()
                        for d in trace.decisions
                    ],
                    dim=1,
                )
            )
        else:
            weights.append(torch.zeros(len(chunk), 0))
    residual = torch.cat(residuals)
    clean = residual[0]
    return {
        "metric": torch.cat(metrics).tolist(),
        "weights": torch.cat(weights).tolist(),
        "cosine": torch.nn.functional.cosine_similarity(residual, clean[None], dim=-1).tolist(),
        "norm_ratio": (residual.norm(dim=-1) / clean.norm().clamp(min=1e-12)).tolist(),
    }


def _found(trace: Trace, keep=lambda decision, signal: False):
    return [
        (decision, signal)
        for decision in trace.decisions
        for side in "qk"
        for signal in decision.signals.get(side, [])
        if not keep(decision, signal)
    ]


def _summary(values: dict, index: int, n_decisions: int) -> dict:
    clean_weights = values["weights"][0]
    weights = values["weights"][index]
    drops = [c - w for c, w in zip(clean_weights, weights)]
    return {
        "metric": values["metric"][index],
        "metric_drop": values["metric"][0] - values["metric"][index],
        "mean_weight": sum(weights) / n_decisions if n_decisions else math.nan,
        "mean_weight_drop": sum(drops) / n_decisions if n_decisions else math.nan,
        "cosine": values["cosine"][index],
        "norm_ratio": values["norm_ratio"][index],
    }


def _mean_std(records: list[dict], key: str) -> tuple[float, float]:
    values = [r[key] for r in records]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    spread = (
        math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)) if len(values) > 1 else 0.0
    )
    return mean, spread


def knockout_check(
    model,
    spec: GraphSpec,
    svd: HeadSVD,
    trace: Trace,
    prepared,
    budget_masks: Sequence[tuple[int, torch.Tensor]] = (),
    check=None,
) -> tuple[dict, list[CurvePoint], Baseline]:
    """The paper's knockout (found vs random signals) and the within-circuit faithfulness curve.

    budget_masks: (budget, engine circuit mask) pairs; at each, the signals of the mask's edges
    are kept and the other found signals knocked out. Returns (report, curve, baseline) where
    the baseline's "corrupted" value is the metric with every found engine-edge signal removed.
    """
    found = _found(trace)
    n_random = max((len(d.controls.get(side, [])) for d in trace.decisions for side in "qk"), default=0)
    random_sets = [
        [
            (decision, signal)
            for decision in trace.decisions
            for side in "qk"
            if draw < len(decision.controls.get(side, []))
            for signal in decision.controls[side][draw]
        ]
        for draw in range(n_random)
    ]

    def engine_edge(decision: TracedDecision, signal: Signal) -> tuple[int, int] | None:
        if signal.component.kind == "bias":
            return None
        column = spec.head_backward(decision.layer, signal.side).start + decision.head
        return signal.component.forward_index, column

    def kept_by(mask: torch.Tensor | None):
        def keep(decision: TracedDecision, signal: Signal) -> bool:
            edge = engine_edge(decision, signal)
            if edge is None:
                return True  # constants are not engine edges: always kept
            return mask is not None and bool(mask[edge])

        return keep

    # budgets past the circuit's size give the same mask: knock each distinct circuit out once
    distinct: dict[bytes, int] = {}
    slot_of = [distinct.setdefault(mask.numpy().tobytes(), len(distinct)) for _, mask in budget_masks]
    masks = {slot: mask for (_, mask), slot in zip(budget_masks, slot_of)}
    curve_sets = [_found(trace, kept_by(None))] + [
        _found(trace, kept_by(masks[i])) for i in range(len(masks))
    ]
    values = run_knockouts(model, svd, trace, prepared, [found, *random_sets, *curve_sets], check)
    n_decisions = len(trace.decisions)
    found_summary = _summary(values, 1, n_decisions)
    random_summaries = [_summary(values, 2 + i, n_decisions) for i in range(n_random)]
    random_summary = {}
    for key in ("metric", "metric_drop", "mean_weight", "mean_weight_drop", "cosine", "norm_ratio"):
        mean, spread = _mean_std(random_summaries, key)
        random_summary[key] = mean
        random_summary[f"{key}_std"] = spread
    report = {
        "n_signals": len(found),
        "n_random_draws": n_random,
        "clean": {
            "metric": values["metric"][0],
            "mean_weight": _summary(values, 0, n_decisions)["mean_weight"],
        },
        "found": found_summary,
        "random": random_summary,
        "random_draws": random_summaries,
        "decision_weights": {
            "clean": values["weights"][0],
            "found": values["weights"][1],
            "random_mean": [
                sum(values["weights"][2 + i][j] for i in range(n_random)) / n_random if n_random else math.nan
                for j in range(n_decisions)
            ],
        },
    }
    offset = 2 + n_random
    baseline = Baseline(clean=values["metric"][0], corrupted=values["metric"][offset])
    curve = [
        CurvePoint(
            budget=int(budget),
            n_edges=int(mask.sum()),
            metric=values["metric"][offset + 1 + slot],
            nfs=nfs(values["metric"][offset + 1 + slot], baseline),
            ndf=ndf(values["metric"][offset + 1 + slot], baseline),
        )
        for (budget, mask), slot in zip(budget_masks, slot_of)
    ]
    report["curve_baseline"] = {"clean": baseline.clean, "all_signals_removed": baseline.corrupted}
    return report, curve, baseline
