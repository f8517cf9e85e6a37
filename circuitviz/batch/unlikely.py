"""The batch's one line, and its manifest's record, for the tasks whose answer the model barely
predicts after the clean prompt (``proposals.barely_predicts``, the check behind discover's
sentence). Such tasks still run: the validity check alone decides which are refused."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.text import shown, shown_token
from ..query.proposals import UNLIKELY
from .dataset import DatasetTask

SHOWN_TASKS = 3


def unlikely_line(tasks: list[DatasetTask], unlikely: dict[int, tuple], checked: int) -> str | None:
    """One line naming how many of the ``checked`` tasks have an answer the model barely predicts,
    and the first ``SHOWN_TASKS`` of them; ``unlikely``: {task index: (answer's probability, top
    token, its probability)}. None when there is none."""
    if not unlikely:
        return None
    rows = sorted(unlikely.items())
    named = "; ".join(
        f"{_where(tasks, index)}: {shown_token(tasks[index].task.answer)} {100 * chance:.1f}% "
        f"(top {shown_token(top)} {100 * top_chance:.1f}%)"
        for index, (chance, top, top_chance) in rows[:SHOWN_TASKS]
    )
    more = f"; and {len(rows) - SHOWN_TASKS:,} more" if len(rows) > SHOWN_TASKS else ""
    one = len(rows) == 1
    return (
        f"The model gives the answer under {100 * UNLIKELY:g}% after the prompt, and not as its most likely "
        f"next token, in {len(rows):,} of {checked:,} task{'' if checked == 1 else 's'} ({named}{more}): "
        f"{'its circuit explains' if one else 'their circuits explain'} little of what the model does. "
        f"{'It runs' if one else 'They run'} (the validity check alone refuses tasks); every such task "
        "is listed under dataset.unlikely_answers in manifest.json."
    )


def unlikely_record(
    tasks: list[DatasetTask], unlikely: dict[int, tuple], checked: set, earlier: Path
) -> dict:
    """The manifest's record: the threshold and each such task (index, id, answer, its probability,
    the top token and its). A resumed batch checks only the tasks it still runs: the others keep
    what the earlier manifest (``earlier``) recorded for them."""
    found = {}
    try:
        before = json.loads(earlier.read_text(encoding="utf-8"))["dataset"]["unlikely_answers"]["tasks"]
    except (OSError, ValueError, KeyError, TypeError):
        before = []
    for entry in before:
        index = entry.get("index") if isinstance(entry, dict) else None
        if isinstance(index, int) and index not in checked and index < len(tasks):
            found[index] = entry
    for index, (chance, top, top_chance) in unlikely.items():
        found[index] = {
            "index": index,
            "task_id": tasks[index].id,
            "answer": tasks[index].task.answer,
            "chance": chance,
            "top": top,
            "top_chance": top_chance,
        }
    return {"threshold": UNLIKELY, "tasks": [found[index] for index in sorted(found)]}


def _where(tasks: list[DatasetTask], index: int) -> str:
    item = tasks[index]
    return f"line {item.line}" if item.line else f"task {index + 1:,} ({shown(item.id, 20)})"


def unlikely_summary(manifest: dict) -> tuple[str, list[str]] | None:
    """(one sentence, a line per task) for the Dataset page: the manifest's tasks whose answer the
    model barely predicts (``dataset.unlikely_answers``), or None when there is none (or the batch
    predates the record)."""
    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    record = dataset.get("unlikely_answers")
    found = record.get("tasks") if isinstance(record, dict) else None
    if not isinstance(found, list) or not found:
        return None
    threshold = float(record.get("threshold", UNLIKELY))
    total = dataset.get("n_tasks")
    of = f" of {total:,}" if isinstance(total, int) else ""
    one = len(found) == 1
    sentence = (
        f"The model gives the answer under {100 * threshold:g}% after the prompt, and not as its most likely "
        f"next token, in {len(found):,}{of} task{'' if one and not of else 's'}: "
        f"{'its circuit explains' if one else 'their circuits explain'} little of what the model does. "
        f"{'It counts' if one else 'They count'} in the figures (the validity check alone refuses tasks)."
    )
    lines = [
        f"{entry.get('task_id', '')}: {shown_token(str(entry.get('answer', '')))} "
        f"{100 * float(entry.get('chance', 0)):.1f}% (top {shown_token(str(entry.get('top', '')))} "
        f"{100 * float(entry.get('top_chance', 0)):.1f}%)"
        for entry in found
        if isinstance(entry, dict)
    ]
    return sentence, lines
