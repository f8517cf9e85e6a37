"""The batch's one line, and its manifest's record, for the tasks whose answer the model barely
predicts after the clean prompt (``proposals.barely_predicts``, the check behind discover's
sentence). Such tasks still run: the validity check alone decides which are refused."""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path

from ..core.text import chance_text, cut, json_given, shown, shown_token
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
        f"{_where(tasks, index)}: {shown_token(tasks[index].task.answer)} {chance_text(chance)} "
        f"(top {shown_token(top)} {chance_text(top_chance)})"
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


# what each task of the record holds, as ``unlikely_record`` writes it: text, or a share from 0 to 1
_TEXTS, _SHARES = ("task_id", "answer", "top"), ("chance", "top_chance")


def _share(value) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= 1
    )


def unlikely_problem(manifest: dict) -> str | None:
    """One sentence when the manifest's ``dataset.unlikely_answers`` is there but not as the batch
    writes it (a threshold or a task's chance that is no share from 0 to 1, a task that is no
    object, a missing answer), naming the field; None when it is readable or absent. A hand-edited
    record raised on the page (a threshold of "x": Python's "could not convert string to float")
    and a missing chance read as 0.0%."""
    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    if "unlikely_answers" not in dataset:
        return None
    record, fault = dataset["unlikely_answers"], None
    if not isinstance(record, dict):
        fault = f"it is {json_given(record)}, not an object with a threshold and tasks"
    elif not _share(record.get("threshold", UNLIKELY)):
        fault = f"its threshold is {json_given(record.get('threshold'))}, not a share from 0 to 1"
    elif not isinstance(record.get("tasks"), list):
        fault = f"its tasks are {json_given(record.get('tasks'))}, not a list"
    else:
        for number, entry in enumerate(record["tasks"], 1):
            if not isinstance(entry, dict):
                fault = f"its task {number:,} is {json_given(entry)}, not an object"
            else:
                fault = next(
                    (
                        f"its task {number:,}'s {key} is {json_given(entry.get(key))}, not {what}"
                        for keys, what, fits in (
                            (_TEXTS, "text", lambda value: isinstance(value, str)),
                            (_SHARES, "a share from 0 to 1", _share),
                        )
                        for key in keys
                        if not fits(entry.get(key))
                    ),
                    None,
                )
            if fault:
                break
    if fault is None:
        return None
    return (
        f"The manifest's dataset.unlikely_answers cannot be read ({fault}), so the tasks whose answer the "
        "model barely predicts are not listed here; running the batch again on its folder writes it afresh."
    )


def unlikely_summary(manifest: dict) -> tuple[str, list[str]] | None:
    """(one sentence, a line per task) for the Dataset page: the manifest's tasks whose answer the
    model barely predicts (``dataset.unlikely_answers``), or None when there is none, the batch
    predates the record or the record cannot be read (``unlikely_problem`` says why). A task's id
    is cut at 40 characters, as the page's other sentences quote a typed text."""
    if unlikely_problem(manifest):
        return None
    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    record = dataset.get("unlikely_answers")
    found = record.get("tasks") if isinstance(record, dict) else None
    if not isinstance(found, list) or not found:
        return None
    threshold = float(record.get("threshold", UNLIKELY))
    total = dataset.get("n_tasks")
    of = f" of {total:,}" if isinstance(total, int) and not isinstance(total, bool) else ""
    one = len(found) == 1
    sentence = (
        f"The model gives the answer under {100 * threshold:g}% after the prompt, and not as its most likely "
        f"next token, in {len(found):,}{of} task{'' if one and not of else 's'}: "
        f"{'its circuit explains' if one else 'their circuits explain'} little of what the model does. "
        f"{'It counts' if one else 'They count'} in the figures (the validity check alone refuses tasks)."
    )
    lines = [
        f"{cut(entry['task_id'], 40)}: {shown_token(entry['answer'])} {chance_text(entry['chance'])} "
        f"(top {shown_token(entry['top'])} {chance_text(entry['top_chance'])})"
        for entry in found
    ]
    return sentence, lines
