"""A dataset of prompt tasks: read from JSONL or CSV, checked row by row, written back as JSONL.

Each row is one task: ``clean`` (or ``prompt``), ``corrupted``, ``answer``, and ``foil`` or
``foils`` (a list, or one string with ``|`` between foils), optionally ``metric``, ``id`` and
``family``. A row that cannot be a task is reported with its line number and left out; the rest
of the file still runs. Whether a task fits the model (one-token answer, equal token lengths) is
checked when the batch runs, where each failing task is recorded with its reason.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..core import json_text
from ..core.tasks import METRICS, PromptTask
from ..core.text import counted, given, invisible_characters, invisible_kinds, shown

_CLEAN_KEYS = ("clean", "prompt")
MAX_PROBLEMS_SHOWN = 20


class DatasetError(ValueError):
    """The dataset cannot be read at all; the message says what to fix."""


@dataclass(frozen=True)
class DatasetTask:
    """One task of a dataset: its id, the task, the family it belongs to, where it came from."""

    id: str
    task: PromptTask
    family: str = ""
    line: int = 0  # line of the input file (1-based); 0 when generated

    def to_dict(self) -> dict:
        return {"id": self.id, "family": self.family, "line": self.line, **self.task.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> DatasetTask:
        return cls(
            id=str(data["id"]),
            task=PromptTask.from_dict(data),
            family=str(data.get("family") or ""),
            line=int(data.get("line") or 0),
        )


@dataclass
class Dataset:
    """The tasks read, and a sentence for every row that could not be one; ``summary``: what a
    generated source reports about its selection (MMLU: kept and refused per subject)."""

    tasks: list[DatasetTask]
    problems: list[str] = field(default_factory=list)
    source: str = ""
    summary: dict = field(default_factory=dict)

    def problem_summary(self, limit: int = MAX_PROBLEMS_SHOWN) -> list[str]:
        """The problems to print: the first ``limit``, then how many more there are."""
        lines = list(self.problems[:limit])
        if len(self.problems) > limit:
            lines.append(f"... and {len(self.problems) - limit} more rows left out.")
        return lines


def _foils(record: dict, where: str) -> tuple[str, ...]:
    value = record.get("foils", record.get("foil"))
    if value in (None, "", []):
        return ()
    if isinstance(value, str):
        return tuple(part for part in value.split("|") if part != "")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise DatasetError(f"{where}: 'foils' must be a list of strings, or one string with '|' between foils.")


def record_task(record, where: str, line: int, index: int) -> DatasetTask:
    """One row as a task; DatasetError in one sentence (starting with ``where``) when it is not one."""
    if not isinstance(record, dict):
        raise DatasetError(f"{where} is not an object with 'clean', 'corrupted', 'answer' and 'foil' fields.")
    clean = next((record[k] for k in _CLEAN_KEYS if record.get(k) not in (None, "")), None)
    for name, value in (("the prompt", clean), ("'answer'", record.get("answer"))):
        if value is not None and not isinstance(value, str):  # was said to be missing
            raise DatasetError(f"{where}: {name} must be text in quotes, not {given(value)}.")
    if not isinstance(clean, str) or not clean.strip():
        raise DatasetError(f"{where} has no prompt; give it as 'clean' (or 'prompt').")
    corrupted = record.get("corrupted") or ""
    if not isinstance(corrupted, str):
        raise DatasetError(f"{where}: 'corrupted' must be text.")
    answer = record.get("answer")
    if not isinstance(answer, str) or answer == "":
        raise DatasetError(f"{where} has no 'answer'; give the token the model should predict, e.g. ' Mary'.")
    metric = record.get("metric") or "logit_diff"
    if metric not in METRICS:
        raise DatasetError(
            f"{where}: unknown metric {shown(str(metric))}; choose one of {', '.join(METRICS)}."
        )
    foils = _foils(record, where)
    if metric == "logit_diff" and not foils:
        raise DatasetError(f"{where} has no 'foil'; the logit-difference metric needs a wrong answer.")
    identifier = record.get("id")
    # text or a whole number: JSON's 1e400 became the id 'inf', 1.5 '1.5', an object its repr
    if identifier is not None and (isinstance(identifier, bool) or not isinstance(identifier, (str, int))):
        raise DatasetError(f"{where}: 'id' must be text or a whole number, not {given(identifier)}.")
    identifier = str(identifier) if identifier not in (None, "") else f"row-{line or index + 1}"
    family = record.get("family") or ""
    if not isinstance(family, str):
        raise DatasetError(f"{where}: 'family' must be text, not {given(family)}.")
    task = PromptTask(clean=clean, corrupted=corrupted, answer=answer, foils=foils, metric=metric)
    return DatasetTask(id=identifier, task=task, family=str(family), line=line)


def _jsonl_records(text: str):
    """(line number, parsed object or the error sentence) for every non-blank line."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json_text.loads(line), None
        except json.JSONDecodeError as error:
            yield number, None, f"line {number} is not valid JSON ({error.msg} at column {error.colno})."
        except RecursionError:
            yield number, None, f"line {number} is nested too deeply to be a task."


def _csv_records(text: str):
    """(line, record, None) per row; the csv module's own errors (a field over its size limit, a
    bare carriage return in text given directly) are a DatasetError naming the line."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        yield from _csv_rows(reader)
    except csv.Error as error:
        raise DatasetError(f"The CSV file cannot be read at line {reader.line_num + 1:,}: {error}.") from None


def _csv_rows(reader: csv.DictReader):
    names = reader.fieldnames or []
    if not any(name in names for name in _CLEAN_KEYS) or "answer" not in names:
        raise DatasetError(
            "The CSV file needs a header row with at least 'clean' (or 'prompt') and 'answer' columns "
            f"(it has {', '.join(map(repr, names[:8])) or 'none'})."
        )
    for row in reader:
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue
        yield reader.line_num, {k: v for k, v in row.items() if k is not None}, None


def parse_dataset(text: str, fmt: str, origin: str = "the dataset") -> Dataset:
    """Tasks from the text of a JSONL or CSV file; every bad row is a problem sentence."""
    if fmt not in ("jsonl", "csv"):
        raise DatasetError(f"Unknown dataset format {fmt!r}; give a .jsonl or .csv file.")
    text = text.removeprefix("\ufeff")  # a byte-order mark (Excel, Windows tools) is no text
    if fmt == "jsonl" and text.lstrip().startswith("["):  # a .json file of one array: every line failed
        try:
            whole = json_text.loads(text)
        except (json.JSONDecodeError, RecursionError):
            whole = None
        if isinstance(whole, list):
            raise DatasetError(
                f"{origin} is one JSON array of {len(whole):,} items; write one task object a line "
                "(JSON Lines: the array's items without the brackets and commas between them)."
            )
    records = _jsonl_records(text) if fmt == "jsonl" else _csv_records(text)
    tasks: list[DatasetTask] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    seen_tasks: dict[PromptTask, int] = {}  # a task twice would be one result under one store key
    for number, record, error in records:
        if error is not None:
            problems.append(error)
            continue
        try:
            item = record_task(record, f"line {number}", number, len(tasks))
        except DatasetError as problem:
            problems.append(str(problem))
            continue
        if item.id in seen:
            problems.append(f"line {number}: id {shown(item.id)} is already used on line {seen[item.id]}.")
            continue
        if item.task in seen_tasks:
            problems.append(
                f"line {number} is the task of line {seen_tasks[item.task]} again (the same prompt, "
                "corruption, answer, foils and metric)."
            )
            continue
        seen[item.id] = number
        seen_tasks[item.task] = number
        tasks.append(item)
    if not tasks:
        first = f" ({problems[0].rstrip('.')})" if problems else ""  # one full stop, at the end
        raise DatasetError(f"{origin} holds no usable task{first}.")
    return Dataset(tasks=tasks, problems=problems, source=origin)


def read_dataset(path: str | Path) -> Dataset:
    """Tasks from a .jsonl (or .json lines) or .csv file, UTF-8 (a byte-order mark is skipped)."""
    path = Path(path)
    suffix = path.suffix.lower()
    fmt = "csv" if suffix == ".csv" else "jsonl" if suffix in (".jsonl", ".json", ".ndjson") else None
    if fmt is None:
        raise DatasetError(f"{path.name} is neither .jsonl nor .csv; give the tasks in one of those formats.")
    try:
        text = path.read_text(encoding="utf-8-sig")  # UTF-8, with or without a byte-order mark
    except FileNotFoundError:
        raise DatasetError(f"No dataset file at {path}.") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path.name} is not UTF-8 text.") from None
    return parse_dataset(text, fmt, origin=path.name)


def write_tasks(path: str | Path, tasks: list[DatasetTask]) -> None:
    """The tasks as JSONL (what a batch folder keeps, so it can be rerun and browsed)."""
    lines = [json.dumps(item.to_dict(), ensure_ascii=False) for item in tasks]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_tasks(path: str | Path) -> list[DatasetTask]:
    """The tasks a batch folder keeps (``write_tasks``)."""
    text = Path(path).read_text(encoding="utf-8")
    return [DatasetTask.from_dict(json.loads(line)) for line in text.splitlines() if line.strip()]


def invisible_line(tasks: list[DatasetTask]) -> str | None:
    """One line naming the tasks whose texts (prompt, corrupted prompt, answer, foils) hold invisible
    characters (``core.text.invisible_characters``: zero-width spaces, direction overrides, NUL...),
    the first three by line, or None. A dataset file's such tasks ran unsaid, while the same prompt
    typed in Explore or given to discover is named: the model reads them, a table shows nothing or
    the text around them reordered (2026-12-06)."""
    found = [
        (item, text)
        for item in tasks
        for text in [" ".join([item.task.clean, item.task.corrupted, item.task.answer, *item.task.foils])]
        if invisible_characters(text)
    ]
    if not found:
        return None
    named = ", ".join(
        f"line {item.line}" if item.line else f"task {shown(item.id, 20)}" for item, _ in found[:3]
    )
    more = f" and {len(found) - 3:,} more" if len(found) > 3 else ""
    kinds = invisible_kinds("".join(text for _, text in found))
    return (
        f"{counted(len(found), 'task')} of {len(tasks):,} hold invisible characters ({kinds}; {named}{more}): "
        "the model reads them, but a table shows nothing for them or the text around them reordered; "
        "they run as written."
    )
