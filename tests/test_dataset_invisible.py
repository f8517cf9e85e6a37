"""A dataset file's tasks whose texts hold invisible characters (a direction override, a zero-width
space, NUL) ran unsaid through `circuitviz batch --dataset` and the Dataset page's upload (which runs
the command), while the same prompt typed in Explore or given to `discover` is named: the batch says
one line naming them now (2026-12-06)."""

from __future__ import annotations

import json

from circuitviz.batch.command import read_file_tasks
from circuitviz.batch.dataset import invisible_line, parse_dataset


def _line(clean: str, answer: str = " Mary") -> str:
    return json.dumps(
        {
            "clean": clean,
            "corrupted": "When Alice and Bob went, Carl gave to",
            "answer": answer,
            "foil": " John",
        }
    )


def test_the_batch_names_the_tasks_with_invisible_characters(tmp_path):
    path = tmp_path / "tasks.jsonl"
    rows = [
        _line("When Mary and John went\u202e, John gave to"),
        _line("When Mary and John went, John gave to"),
        _line("When Mary and\u200b John went, John gave to"),
        _line("When Mary and John went, John gave to", answer=" Ma\x00ry"),
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    said: list[str] = []
    tasks, problems, _ = read_file_tasks(path, strict=False, n=None, say=said.append)
    assert len(tasks) == 4 and not problems
    assert said == [
        "3 tasks of 4 hold invisible characters (U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE, "
        "U+0000 CONTROL CHARACTER; line 1, line 3, line 4): the model reads them, but a table shows nothing "
        "for them or the text around them reordered; they run as written."
    ]


def test_a_dataset_of_plain_text_says_nothing():
    loaded = parse_dataset(_line("When Mary and John went, John gave to") + "\n", "jsonl")
    assert invisible_line(loaded.tasks) is None
