"""Which of an MMLU subject's questions a model's validity check keeps, checked in chunks and stored.

Explore's picker offers the questions the sidebar's model can explain first: those whose
corruption lowers the metric by at least 1 logit (``mmlu_tasks.question_verdicts``, the rule the
batch drawer and the picker's own refusal apply, with the picker's length limit: none). A
subject is checked in chunks of ``CHUNK`` questions, shortest first; each chunk's marks are
stored as soon as it is done, so a check stopped midway (the user picked something, the server
stopped) keeps what it found and goes on from there.

The marks of one model live in ``$CIRCUITVIZ_CACHE/mmlu/kept/<key>/<subject's hash>.json``; the
key holds the model id, its device kind, the question file's identity (path, size, modification
time), the check's settings (corruption, length limit, threshold) and the engine's digest
(``core.keys.content_key``: any change to the check's code makes a new key), so marks made by other
code, another file or another model are never read as this one's.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..core.keys import content_key, process_key
from ..services.assets import cache_dir
from .mmlu import MMLUQuestion, mmlu_path

CHUNK = 16  # questions per stored step of a subject's check (two forward passes of 16 prompts)
PICKER_MAX_TOKENS = 10**6  # the picker opens a question of any length; so its check has no limit
KEPT_FOLDER = "kept"  # in the cache's mmlu/ folder


def file_stamp() -> dict:
    """The installed question file's identity: its path, size and modification time."""
    source = mmlu_path()  # MMLUError saying how to install it when it is not
    stat = source.stat()
    return {"path": str(source), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def kept_key(
    model_id: str, device: str, stamp: dict, corruption: str, max_tokens: int, min_gap: float
) -> str:
    """The stored marks' key: the model, its device kind, the file, the check's settings and the
    engine's digest (the check's code)."""
    return content_key(
        what="mmlu-kept",
        model=model_id,
        device=str(device).split(":")[0],
        file=stamp,
        corruption=corruption,
        max_tokens=max_tokens,
        min_gap=min_gap if math.isfinite(min_gap) else "off",
    )


@dataclass(frozen=True)
class Mark:
    """One question's verdict as stored: kept or not, why not, and the letter the model prefers."""

    kept: bool
    reason: str | None = None
    letter: str | None = None  # None where no letter was measured (too long)


@dataclass(frozen=True)
class SubjectMarks:
    """A subject's questions (rows, in the file's order), the marks found so far, and its repeated
    questions (``copies``: {row: the row of the earlier copy}, ``mmlu.first_copies``): a copy is
    counted once, not checked, and shown with its first copy's mark."""

    subject: str
    rows: tuple[int, ...]
    marks: dict[int, Mark]
    copies: dict[int, int] = field(default_factory=dict)

    @property
    def distinct(self) -> list[int]:
        """The rows less the copies of an earlier one, in the file's order."""
        return [row for row in self.rows if row not in self.copies]

    @property
    def checked(self) -> int:
        return sum(row in self.marks for row in self.distinct)

    @property
    def kept(self) -> int:
        return sum(self.marks[row].kept for row in self.distinct if row in self.marks)

    @property
    def waiting(self) -> list[int]:
        """The rows not checked yet, in the file's order (a copy never: its first copy is)."""
        return [row for row in self.distinct if row not in self.marks]

    def shown(self) -> dict[int, Mark]:
        """Each row's mark as the list shows it, a copy's its first copy's (unchecked rows left out)."""
        found = {row: self.marks.get(self.copies.get(row, row)) for row in self.rows}
        return {row: mark for row, mark in found.items() if mark is not None}

    @property
    def done(self) -> bool:
        return not self.waiting


class KeptStore:
    """The stored marks of one model under one check (``kept_key``)."""

    def __init__(self, key: str, root: Path | None = None):
        self.key = key
        self.folder = (root or cache_dir("mmlu") / KEPT_FOLDER) / key

    def _path(self, subject: str) -> Path:
        return self.folder / f"{process_key(subject=subject)}.json"  # the file's text never names a file

    def read(self, subject: str) -> dict[int, Mark]:
        """The subject's stored marks ({} when none, or when the file is unreadable or not marks)."""
        try:
            stored = json.loads(self._path(subject).read_text(encoding="utf-8"))
            if stored["subject"] != subject:
                return {}
            return {
                int(row): Mark(bool(kept), reason, letter)
                for row, (kept, reason, letter) in stored["marks"].items()
            }
        except (OSError, ValueError, KeyError, TypeError):  # none yet, unreadable, or another shape
            return {}

    def add(self, subject: str, marks: dict[int, Mark]) -> dict[int, Mark]:
        """Store ``marks`` beside those stored (another session's included); the union, returned.
        Written whole or not at all; a read-only or full cache keeps them for this call only."""
        merged = {**self.read(subject), **marks}
        path = self._path(subject)
        written = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
                written = out.name
                json.dump(
                    {
                        "subject": subject,
                        "marks": {
                            str(row): [m.kept, m.reason, m.letter] for row, m in sorted(merged.items())
                        },
                    },
                    out,
                )
            os.replace(written, path)
        except OSError:
            if written is not None:
                Path(written).unlink(missing_ok=True)
        return merged


def check_order(model, questions: list[MMLUQuestion]) -> list[MMLUQuestion]:
    """The questions in the order the picker checks them: shortest prompt first (the file's order
    among equals), so each chunk's prompts are of about one length (little padding in a pass) and a
    stopped check has found the most questions for its time."""
    from ..models.adapter import adapter_of

    adapter = adapter_of(model)
    lengths = {
        q.row: adapter.to_tokens(q.prompt(), truncate=False, on_device=False).shape[1] for q in questions
    }
    return sorted(questions, key=lambda q: lengths[q.row])


def marks_of(verdicts) -> dict[int, Mark]:
    """``question_verdicts``' verdicts as marks, by row."""
    marks = {}
    for verdict in verdicts:
        letter = verdict.task.answer.strip() if verdict.task is not None else None
        marks[verdict.question.row] = Mark(verdict.kept, verdict.reason, letter)
    return marks


def check_chunk(
    model, store: KeptStore, subject: str, questions: list[MMLUQuestion], check=None
) -> dict[int, Mark]:
    """Check ``questions`` (one chunk) and store their marks; every mark of the subject, returned.
    ``check(model, questions)``: the verdicts (``question_verdicts`` with the picker's settings)."""
    if check is None:
        from .mmlu_tasks import question_verdicts

        def check(model, questions):
            return question_verdicts(model, questions, max_tokens=PICKER_MAX_TOKENS)

    return store.add(subject, marks_of(check(model, questions)))
