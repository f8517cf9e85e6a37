"""Today's meaningful-task check over a stored batch table, read off the metrics the batch
stored (no model pass): a batch run before the check keeps tasks it now refuses, and the atlas
leaves them out of every aggregate (``atlas.BatchTable.rows(passing=True)``)."""

from __future__ import annotations

import pyarrow as pa

from ..core.tasks import PromptTask
from ..measure.task_validity import METRIC_WORDS, MIN_GAP, gap_problem, identical_prompts_problem

COLUMNS = ("clean", "corrupted", "answer", "foils", "metric", "clean_metric", "corrupted_metric")


def task_refusals(rows: pa.Table) -> list[str | None]:
    """Each row's sentence from today's meaningful-task check (``task_validity.gap_problem``), read
    off the clean and corrupted metrics the batch stored (no model pass); None where the task
    passes or the row has no metrics. A stored atlas built before the check holds tasks it now
    refuses (the corruption raising the answer's metric): the atlas leaves them out of its figures.
    A task with no corrupted prompt has no gap to check, as the batch runs it (``work._meaningful``):
    its corrupted metric is NDF's 0 of the method's own (ACC++'s signals knocked out, else the
    neutral prompt). Until 2026-12-06 that was checked here, and ACC++'s series on two SmolLM2
    prompts (knockout gaps 0.889 and 0.568) left the batch summary unsaid."""
    found = []
    for clean, corrupted, answer, foils, metric, clean_metric, corrupted_metric in zip(
        *(rows.column(name).to_pylist() for name in COLUMNS)
    ):
        if clean_metric is None or corrupted_metric is None or not corrupted:
            found.append(None)
            continue
        task = PromptTask(clean, corrupted, answer, tuple(foils or ()), metric)
        found.append(gap_problem(task, float(clean_metric), float(corrupted_metric)))
    return found


def refusal_kind(task: PromptTask, clean: float, corrupted: float) -> str:
    """A refused task's reason in a few words (the full sentence is ``gap_problem``'s)."""
    if identical_prompts_problem(task):
        return "the clean and corrupted prompts are the same"
    words = METRIC_WORDS[task.metric]
    if clean - corrupted < 0:
        return f"the corruption raises the answer's {words}"
    return f"the corruption lowers the answer's {words} by less than {MIN_GAP[task.metric]:g}"


def refusal_kinds(rows: pa.Table) -> dict[str, int]:
    """{reason in a few words: how many rows} of the rows the check refuses, most frequent first."""
    kinds: dict[str, int] = {}
    values = zip(*(rows.column(name).to_pylist() for name in COLUMNS))
    for why, (clean, corrupted, answer, foils, metric, clean_metric, corrupted_metric) in zip(
        task_refusals(rows), values
    ):
        if why is not None:
            task = PromptTask(clean, corrupted, answer, tuple(foils or ()), metric)
            kind = refusal_kind(task, float(clean_metric), float(corrupted_metric))
            kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items(), key=lambda item: -item[1]))


def validity(batch, label: str) -> dict:
    """How many of a series' finished tasks pass today's check, and why the others are refused:
    {"stored": N, "passing": n, "refused": {reason: count}} (reasons most frequent first)."""
    rows = batch.rows(label)
    return {
        "stored": rows.num_rows,
        "passing": batch.rows(label, passing=True).num_rows,
        "refused": refusal_kinds(rows),
        "checked": batch.checked,  # False: the batch skipped the check, and every task counts
    }


def validity_sentence(found: dict) -> str:
    """'n of N stored tasks pass the validity check; the figures are over those (k refused: why).'"""
    refused = sum(found["refused"].values())
    if found.get("checked") is False:  # run with --no-task-check: every task counts, refused or not
        one = found["stored"] == 1
        tasks = "its one stored task" if one else f"all {found['stored']:,} stored tasks"
        if not refused:
            return (
                f"The batch ran without the validity check (--no-task-check); {tasks} would pass it anyway."
            )
        reasons = "; ".join(f"{count:,} because {kind}" for kind, count in found["refused"].items())
        which = "which the check refuses" if one else f"{refused:,} of which the check refuses"
        return (
            f"The batch ran without the validity check (--no-task-check), so the figures are over "
            f"{tasks}, {which} ({reasons}): such a task's circuit explains little."
        )
    # in the number it takes: a batch of one question, run from the page, read '1 of 1 stored tasks pass'
    verb = "passes" if found["passing"] == 1 else "pass"
    head = f"{found['passing']:,} of {found['stored']:,} stored tasks {verb} the validity check"
    if found["stored"] == 1:
        head = f"The stored task {'passes' if found['passing'] else 'fails'} the validity check"
    refused = sum(found["refused"].values())
    if not refused:
        return head + "."
    reasons = "; ".join(f"{count:,} because {kind}" for kind, count in found["refused"].items())
    return f"{head}; the figures are over those ({refused:,} refused: {reasons})."
