"""Transfer: how faithful a prompt's circuit stays on paraphrases of the prompt it never saw.

A circuit chosen on one sentence (Edge Pruning's learned mask, Best-of-N's pick by the prompt's
own NDF) can fit that sentence rather than the task. Its NDF on paraphrases of the prompt says
which, but only on paraphrases the method did not use: Best-of-N builds its candidates from the
paraphrases it scores, the bootstrap ensemble ranks edges by their stability over its
paraphrases, paraphrase pruning fits its mask on a share of them. ``held_out_transfer`` is the
one function every page, report and benchmark measures transfer with:

- the paraphrases are the template families' (``circuitviz.query`` families, each with its
  corruption, drawn in the order a seed gives), or a list given (the user's, an LLM's);
- each circuit is measured on the first ``count`` of them that its method never used to fit or to
  select (``seen``, by clean prompt; ``paraphrases_used`` reads it off a result), so two methods
  that used different paraphrases each get a held-out set disjoint from their own;
- a paraphrase counts only when it passes the template check (same token length as its
  corruption, the same answer from the model) and the meaningful-task check (``task_validity``);
- every circuit measured on one paraphrase goes through one batched evaluation (NDF only).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..core.tasks import PromptTask, TaskError, prepare_task
from ..core.text import counted, joined
from ..methods.paraphrase_pairs import template_tasks
from ..models.adapter import adapter_of
from ..query.pairs import PROMPT_ITSELF, left_out_note
from .evaluate import Evaluator, curves_of_tasks
from .task_validity import gap_problem

DEFAULT_PARAPHRASES = 5


@dataclass
class Transfer:
    """Each circuit's NDF on its held-out paraphrases.

    paraphrases: paraphrases drawn that passed the template check; valid: of those measured, how
        many passed the meaningful-task check too.
    ndf: {name: [NDF on each of its held-out paraphrases]}; texts: {name: [their clean prompts]};
        tasks: {name: [their tasks]}, each with the corrupted prompt, answer and foils it was measured on.
    excluded: {name: how many drawn paraphrases its method used, so were not held out}.
    note: why there are fewer than asked, in sentences ('' when there are as many).
    left_out: [(clean prompt, reason)] of every paraphrase a check refused (the note names the
        first few; this keeps them all).
    """

    paraphrases: int = 0
    valid: int = 0
    note: str = ""
    left_out: list = field(default_factory=list)
    ndf: dict = field(default_factory=dict)
    texts: dict = field(default_factory=dict)
    tasks: dict = field(default_factory=dict)
    excluded: dict = field(default_factory=dict)

    def mean(self, name: str) -> float:
        values = self.ndf.get(name, [])
        return statistics.fmean(values) if values else math.nan

    def count(self, name: str) -> int:
        return len(self.ndf.get(name, []))


def paraphrases_used(result) -> frozenset[str]:
    """The clean prompts of the paraphrases a result's method fitted to or selected on (empty for
    a method that never saw one): what a held-out set must leave out."""
    details = getattr(result, "details", None)
    return frozenset(details.paraphrases_used()) if details is not None else frozenset()


def held_out_transfer(
    model,
    task: PromptTask,
    circuits: Mapping[str, torch.Tensor],
    seen: Mapping[str, Collection[str]] | None = None,
    count: int = DEFAULT_PARAPHRASES,
    seed: int = 0,
    paraphrases: Sequence[PromptTask] | None = None,
    max_tokens: int = 256,
    left_out: Sequence[tuple[str, str]] = (),
    sought: str = "asked for",
) -> Transfer:
    """Each circuit's NDF on up to ``count`` valid paraphrases of ``task`` its method never used.
    ``sought``: how the shortfall note names ``count`` ("asked for"; "given" where the
    count is every pair the user gave, which nobody asked for by number).

    circuits: {name: [n_forward, n_backward] bool}; seen: {name: clean prompts its method used}
    (absent names used none). paraphrases: the candidates in order (default: template
    paraphrases drawn with ``seed``, as many more as the most any method used, so each can still
    get ``count``). The prompt itself is never a paraphrase. left_out: (text, reason) of the
    paraphrases given that the caller's own check refused (``entry.api.given_paraphrases``); the
    note names them with those this function's checks refuse.
    """
    seen = {name: frozenset(seen.get(name, ())) if seen else frozenset() for name in circuits}
    found = Transfer(
        ndf={name: [] for name in circuits},
        texts={name: [] for name in circuits},
        tasks={name: [] for name in circuits},
        excluded={name: 0 for name in circuits},
    )
    if not circuits or count <= 0:
        found.note = left_out_note(list(left_out), len(left_out))  # every pair given was refused
        found.left_out = list(left_out)
        return found
    notes: list[str] = []
    unchecked: list[tuple[str, str]] = []  # the template check's refusals (its note counts them)
    if paraphrases is None:
        wanted = count + max((len(used) for used in seen.values()), default=0)
        drawn, note = template_tasks(model, task, wanted, seed, max_tokens, refused=unchecked)
        if note:
            notes.append(note)
    else:
        drawn = list(paraphrases)
    candidates: list[PromptTask] = []
    for paraphrase in drawn:  # the prompt, and a repeat, are not paraphrases to hold out
        if paraphrase.clean != task.clean and all(paraphrase.clean != c.clean for c in candidates):
            candidates.append(paraphrase)
    found.paraphrases = len(candidates)
    refused = list(left_out)
    spec = adapter_of(model).spec
    for paraphrase in candidates:
        for name in circuits:
            if paraphrase.clean in seen[name]:
                found.excluded[name] += 1
        wanting = [
            name for name in circuits if paraphrase.clean not in seen[name] and len(found.ndf[name]) < count
        ]
        if not wanting:
            continue
        try:
            evaluator = Evaluator(model, spec, prepare_task(model, paraphrase, max_tokens))
        except TaskError as error:
            refused.append((paraphrase.clean, str(error)))
            continue
        weak = gap_problem(paraphrase, evaluator.baseline.clean, evaluator.baseline.corrupted, advice=False)
        if weak:
            refused.append((paraphrase.clean, weak))
            continue
        found.valid += 1
        stacked = torch.stack([circuits[name].bool() & spec.edge_mask for name in wanting])
        points = curves_of_tasks(
            [evaluator], stacked[None], [int(c.sum()) for c in stacked], with_necessity=False
        )[0]
        for name, point in zip(wanting, points):
            found.ndf[name].append(point.ndf)
            found.texts[name].append(paraphrase.clean)
            found.tasks[name].append(paraphrase)
    found.left_out = unchecked + refused  # the template check's too: they were kept in the JSON unsaid
    if found.left_out:
        notes.append(left_out_note(found.left_out, len(candidates) + len(left_out) + len(unchecked)))
    if drawn or refused:  # with nothing to check at all, the source's note says why
        itself = sum(reason == PROMPT_ITSELF for _, reason in found.left_out)  # a given pair: the prompt
        given = found.paraphrases + len(left_out) + len(unchecked) - itself
        short = shortfall_note(found, count, given=given, sought=sought, itself=itself)
        notes.append(short or used_note(found))
    found.note = " ".join(note for note in notes if note)
    return found


def shortfall_note(
    found: Transfer, count: int, given: int, sought: str = "asked for", itself: int = 0
) -> str:
    """Why some circuits were measured on fewer than ``count`` held-out paraphrases, in one
    sentence ('' when none was): how many the source gave besides the prompt (``given``, those a
    check refused included), how many failed a check, and how many each short circuit's method
    used to fit or select. Which paraphrases were refused, and why, is the note's other sentence.
    ``itself``: how many given pairs were the prompt (left out, counted apart: a file of six pairs,
    one the prompt, read "the source gave 6 besides the prompt; 5 failed a check")."""
    short = {name: n for name in found.ndf if (n := found.count(name)) < count}
    if not short:
        return ""
    low, high = min(short.values()), max(short.values())
    figure = f"{low}-{high}"
    some = len(short) < len(found.ndf) or low != high
    reasons = [f"the source gave {given} besides the prompt" + (" and the prompt itself" if itself else "")]
    if len(found.left_out) > itself:
        reasons.append(f"{len(found.left_out) - itself} failed a check")
    used = circuits_named({name: found.excluded[name] for name in short if found.excluded[name]})
    if len(used) == 1:
        ((n, who),) = used
        reasons.append(f"the method used {n} to fit or select ({who})")
    elif used:
        reasons.append(
            "the methods used some to fit or select (" + ", ".join(f"{n} {who}" for n, who in used) + ")"
        )
    measured = counted(high, "held-out paraphrase") if low == high else f"{figure} held-out paraphrases"
    opening = f"Some circuits were measured on {measured}" if some else f"Measured on {measured}"
    return f"{opening}, not the {count} {sought}: " + "; ".join(reasons) + "."


def used_note(found: Transfer) -> str:
    """The paraphrases that passed but were a method's own (fitted to or selected on), so never
    held out, in one sentence ('' when none was): "1 of 16 left out, 15 kept" stood beside "the mean
    over 5" with the 9 Best-of-N had used unsaid (an audit)."""
    used = {name: n for name, n in found.excluded.items() if n}
    if not used:
        return ""
    each = ", ".join(f"{n} by {who}" for n, who in circuits_named(used))
    return f"Not held out, as used to fit or select: {each}."


def circuits_named(counts: Mapping[str, int]) -> list[tuple[int, str]]:
    """(count, whose) for each circuit's count, a method's circuits of one count together: a circuit
    keyed ``method@budget`` (Compare's, a paraphrase file's on the command line) reads "method at
    budget 20" ("Not held out, as used to fit or select: 3 by paraphrase-pruning@20" stood under
    Compare's table, an audit of 2026-12-07)."""
    grouped: dict[tuple[str, int], list[int]] = {}
    for name, n in counts.items():
        method, at, budget = str(name).rpartition("@")
        mine = grouped.setdefault((method, n) if at and budget.isdigit() else (str(name), n), [])
        if at and budget.isdigit():
            mine.append(int(budget))
    named = []
    for (method, n), budgets in grouped.items():
        shown = joined([f"{b:,}" for b in budgets]) if budgets else ""
        named.append(
            (n, f"{method} at budget{'s' if len(budgets) > 1 else ''} {shown}" if budgets else method)
        )
    return named


def transfer_record(
    transfer: Transfer, names_to_budgets: Mapping[str, int], source: str = "template"
) -> dict:
    """A result's transfer as plain JSON data: per budget its held-out paraphrases and NDFs, and the
    task each NDF was measured on (``tasks``: the corrupted prompt, answer and foils beside the
    paraphrase, so ``evaluate --prompt ... --corrupted ...`` gives the same figure: a template
    paraphrase's corruption was kept nowhere, and one proposed anew can differ)."""
    budgets = {
        str(budget): {
            "paraphrases": transfer.texts.get(name, []),
            "ndf": transfer.ndf.get(name, []),
            "tasks": [task.to_dict() for task in transfer.tasks.get(name, [])],
            "mean_ndf": None if not transfer.ndf.get(name) else transfer.mean(name),
            "excluded_as_used": transfer.excluded.get(name, 0),
        }
        for name, budget in names_to_budgets.items()
    }
    left_out = [{"paraphrase": text, "reason": reason} for text, reason in transfer.left_out]
    return {"source": source, "note": transfer.note, "budgets": budgets, "left_out": left_out}
