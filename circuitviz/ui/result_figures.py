"""The figures of one circuit as the metrics row shows them, as text: NDF, necessity, completeness
(when measured), NFS, its size, and its NDF on held-out paraphrases with the sentence naming them.
Plain functions of a result; no widget."""

from __future__ import annotations

import math
import statistics

from ..core.text import counted, percent_text, score_text, shown
from ..details.base import NEUTRAL_PROMPT, NEUTRAL_PROMPT_WORDS, reference_name
from ..render.opening import OpeningView, opening_view


def opening_of(result, good_ndf: float) -> OpeningView | None:
    """Where ``result``'s first view opens and why, its NDF 0 named as its run measured it (a run
    with no corrupted prompt said "the corruption" of its neutral prompt)."""
    if not result.curve:
        return None
    return opening_view(result.curve, good_ndf=good_ndf, reference=reference_name(result))


def metric_values(result, point) -> dict[str, str]:
    """The metrics row's values exactly as shown: {label: text}."""
    values = {
        "clean L(M(q))": f"{result.baseline.clean:+.3f}",
        reference_label(result): f"{result.baseline.corrupted:+.3f}",
    }
    if point is not None:
        share = 100 * point.n_edges / result.graph.n_edges
        values["NDF"] = score_text(point.ndf)
        values["necessity"] = "-" if math.isnan(point.necessity) else score_text(point.necessity)
        if not math.isnan(point.completeness):  # measured on request (``measure_offers``)
            values["completeness"] = score_text(point.completeness)
        values["NFS"] = score_text(point.nfs)
        values["edges kept"] = f"{point.n_edges:,} ({percent_text(share)})"
        held = [value for _, value in held_out_at(result, point.budget)]
        if held:
            values["NDF held out"] = score_text(statistics.fmean(held))
    return values


def reference_label(result) -> str:
    """The label of the figure NDF's 0 is: the corrupted prompt's metric, or, for a task with none,
    what the run measured it on (a key of ``METRIC_HELP``)."""
    name = reference_name(result)
    return "corrupted L(M(q'))" if name == "corrupted" else f"{name} L"


def held_out_at(result, budget: int) -> list[tuple[str, float]]:
    """(paraphrase, NDF) of the circuit at ``budget`` on paraphrases of the prompt its method never
    fitted to nor selected on: the method's own held-out share (paraphrase pruning), else what was
    measured on request (Compare, the command line: ``result.transfer``); [] when neither."""
    own = result.details.held_out_figures(budget) if result.details is not None else []
    entry = transfer_entry(result, budget) or {}
    measured = list(zip(entry.get("paraphrases") or [], entry.get("ndf") or []))
    return measured if len(measured) > len(own) else own  # the one that rests on more paraphrases


def transfer_entry(result, budget: int) -> dict | None:
    """The transfer measured on request at ``budget`` (``result.transfer``), or None when none was."""
    return ((result.transfer or {}).get("budgets") or {}).get(str(int(budget)))


def held_out_caption(result, budget: int) -> str:
    """The sentence under the metrics naming the held-out paraphrases and each one's NDF."""
    held = held_out_at(result, budget)
    if not held:
        return ""
    each = ", ".join(f"{shown(text)} {score_text(value)}" for text, value in held)
    return (
        f"NDF held out: the mean over {counted(len(held), 'paraphrase')} of the prompt that this "
        f"method never fitted to nor selected on: {each}."
    )


METRIC_HELP = {
    "clean L(M(q))": "the metric of the clean prompt",
    "corrupted L(M(q'))": "the metric of the corrupted prompt",
    f"{NEUTRAL_PROMPT} L": f"no corrupted prompt was given: the metric of {NEUTRAL_PROMPT_WORDS}, NDF's 0",
    "signals knocked out L": "no corrupted prompt was given: the metric of the prompt with every signal ACC++ "
    "found knocked out of the queries and keys, NDF's 0",
    "NDF": "normalised deviation faithfulness: 1 = the circuit reproduces the model, 0 = it deviates as much as the corruption",
    "necessity": "the model with only the circuit's edges corrupted: 1 = removing the circuit removes the whole clean-corrupted difference or more (capped at 1), 0 = it changes nothing",
    "completeness": "a random half of the circuit removed from the circuit and from the whole model (8 halves): "
    "1 = both respond alike, so the model holds no route the circuit lacks; necessity is near 1 for every "
    "circuit holding the few edges everything passes through, completeness is not",
    "NFS": "the older normalised faithfulness score (unbounded: above 1 overshoots)",
    "edges kept": "after pruning edges on no input-to-logits path",
    "NDF held out": "the same circuit's mean NDF on paraphrases of the prompt that its method never fitted to nor selected on (named below the figures): 1 = it carries over to wordings it never saw",
}
