"""Paraphrase pairs: a rewrite of the prompt with its corrupted version, and their file formats.

Best-of-N scores the prompt q and paraphrases q_1..q_p, each against its own corrupted version
q_i'. A ``ParaphrasePair`` holds one such pair and what checking it against the model found
(``checks.validate_pairs`` fills it in). Users give pairs as JSONL, a JSON list, CSV with a
header, or typed lines (``parse_paraphrases``, ``load_paraphrases``); ``to_jsonl`` writes the
format back for downloads and edits.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..core import json_text
from ..core.tasks import PromptTask
from ..core.text import after_colon, counted, read_user_file, shown, shown_token

# a given pair that is the prompt: left out, and not counted among the paraphrases "besides the
# prompt" a held-out sentence says the source gave (``measure.transfer.shortfall_note``)
PROMPT_ITSELF = "it repeats the prompt itself"


class ParaphraseError(ValueError):
    """A paraphrase source cannot give pairs; the message is one sentence that says what to do."""


class _NotJSON(ParaphraseError):
    """Text that began like JSON and does not decode as JSON (it may be typed lines)."""


# ----- pairs ------------------------------------------------------------------------------------
@dataclass
class ParaphrasePair:
    """A paraphrase of the prompt, its corrupted version, and what checking it found.

    ``problems`` are reasons the pair cannot be scored at all (unequal token lengths, another
    answer); ``answer_matches`` is False when the model's top-1 token on the paraphrase differs
    from its top-1 on the original prompt: such pairs are excluded by default, with the reason.
    """

    clean: str
    corrupted: str
    answer: str
    foils: tuple[str, ...]
    source: str
    metric: str = "logit_diff"
    n_tokens: int | None = None
    corrupted_n_tokens: int | None = None
    same_length: bool | None = None
    answer_single_token: bool | None = None
    model_answer: str | None = None
    original_answer: str | None = None
    answer_matches: bool | None = None
    metric_clean: float | None = None
    metric_corrupted: float | None = None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.foils = tuple(self.foils)

    @property
    def checked(self) -> bool:
        """Whether ``validate_pairs`` has run on this pair."""
        return self.same_length is not None

    def usable(self, include_mismatched: bool = False) -> bool:
        """Whether Best-of-N may score this pair."""
        if self.problems or not self.checked:
            return False
        return include_mismatched or self.answer_matches is not False

    @property
    def reason(self) -> str:
        """Why the pair is left out ('' when it is used by default)."""
        reasons = list(self.problems)
        if self.answer_matches is False and self.original_answer == self.answer:
            # "neither the answer ' Mary' nor its answer on the original prompt (' Mary')" named
            # one token twice, as though they were two
            reasons.append(
                f"the model answers {shown_token(self.model_answer, 30)} here, not the answer "
                f"{shown_token(self.answer, 30)} it gives on the original prompt"
            )
        elif self.answer_matches is False:
            reasons.append(
                f"the model answers {shown_token(self.model_answer, 30)} here, neither the answer "
                f"{shown_token(self.answer, 30)} nor its answer on the original prompt "
                f"({shown_token(self.original_answer, 30)})"
            )
        return "; ".join(reasons)

    def task(self) -> PromptTask:
        return PromptTask(self.clean, self.corrupted, self.answer, self.foils, self.metric)

    def to_dict(self) -> dict:
        return {
            "clean": self.clean,
            "corrupted": self.corrupted,
            "answer": self.answer,
            "foils": list(self.foils),
            "source": self.source,
            "metric": self.metric,
            "n_tokens": self.n_tokens,
            "corrupted_n_tokens": self.corrupted_n_tokens,
            "same_length": self.same_length,
            "answer_single_token": self.answer_single_token,
            "model_answer": self.model_answer,
            "original_answer": self.original_answer,
            "answer_matches": self.answer_matches,
            "metric_clean": self.metric_clean,
            "metric_corrupted": self.metric_corrupted,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ParaphrasePair:
        names = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in names}
        values["foils"] = tuple(values.get("foils", ()))
        values["problems"] = list(values.get("problems", []))
        values["warnings"] = list(values.get("warnings", []))
        return cls(**values)


def original_pair(task: PromptTask) -> ParaphrasePair:
    """The prompt itself as candidate 0."""
    return ParaphrasePair(task.clean, task.corrupted, task.answer, task.foils, "original", task.metric)


# the reason ``ParaphrasePair.reason`` gave before it named a token the model gives on the prompt
# once: a result stored then (the Gallery's IOI and arithmetic examples) keeps that sentence
_NAMED_TWICE = re.compile(
    r"the model answers (.+?) here, neither the answer (.+?) nor its answer on the original prompt \(\2\)"
)


# and a weak corruption's reason began with its capital after the paraphrase's colon
_CAPITAL_AFTER_COLON = re.compile(r": The corruption (lowers|raises) the ")


def reason_as_now(text: str) -> str:
    """``text`` with every reason a stored result gave in the older words ("neither the answer
    ' Mary' nor its answer on the original prompt (' Mary')", one token named twice as though two)
    in today's ("not the answer ' Mary' it gives on the original prompt"), and a weak
    corruption's reason after its paraphrase's colon in lower case, as ``left_out_note`` writes it."""
    text = _NAMED_TWICE.sub(
        r"the model answers \1 here, not the answer \2 it gives on the original prompt", text
    )
    return _CAPITAL_AFTER_COLON.sub(r": the corruption \1 the ", text)


LEFT_OUT_SHOWN = 5  # the left-out paraphrases a note names; the count always covers all of them


def left_out_note(left_out: Sequence[tuple[str, str]], total: int) -> str:
    """One sentence naming the paraphrases left out and why: ``left_out`` is (clean text, reason)
    pairs, ``total`` how many paraphrases there were ('' when none was left out). The first
    ``LEFT_OUT_SHOWN`` are named, and the sentence says when there are more."""
    if not left_out:
        return ""
    # a reason that is a sentence of its own ("The corruption lowers ...") follows the colon in lower case
    named = "; ".join(f"{shown(clean)}: {after_colon(reason)}" for clean, reason in left_out[:LEFT_OUT_SHOWN])
    more = len(left_out) - LEFT_OUT_SHOWN
    kept = f", {total - len(left_out):,} kept" if total > len(left_out) else ""  # beside the count asked for
    return f"{len(left_out)} of {counted(total, 'paraphrase')} left out{kept}: {named}" + (
        f"; and {more} more." if more > 0 else "."
    )


def warned_note(pairs: Sequence[dict], candidates: Sequence[int]) -> str:
    """The candidate pairs whose check warned, each with its warning and how far its corruption
    moves the metric beside the prompt's ('' when none did): a pair corrupting 'zoo' into 'bar' (the
    logit difference 5.50 -> 5.25, the prompt's 5.29 -> -0.51) was scored and drawn as a candidate
    like any other, its "barely moves the metric" warning kept in the result and said nowhere.
    ``pairs``: a result's pair dicts, the prompt first; ``candidates``: the pair indices scored."""
    prompt = pairs[0] if pairs else {}

    def move(pair: dict) -> str:
        clean, corrupted = pair.get("metric_clean"), pair.get("metric_corrupted")
        return "" if clean is None or corrupted is None else f"{abs(clean - corrupted):.2f}"

    named = []
    for index in candidates:
        pair = pairs[index] if 0 < index < len(pairs) else None
        if not pair or not pair.get("warnings"):
            continue
        moved, against = move(pair), move(prompt)
        by = (
            f" (it moves the metric by {moved}, the prompt's corruption by {against})"
            if moved and against
            else ""
        )
        named.append(f"p{index} {shown(str(pair.get('clean', '')))}: {'; '.join(pair['warnings'])}{by}")
    if not named:
        return ""
    return (
        f"{'A candidate was' if len(named) == 1 else f'{len(named)} candidates were'} scored despite a "
        f"warning: {'; '.join(named)}."
    )


def unusable_note(pairs: Sequence[ParaphrasePair], include_mismatched: bool = False) -> str:
    """``left_out_note`` of the checked pairs a method may not use, with each one's reason."""
    left_out = [(pair.clean, pair.reason) for pair in pairs if not pair.usable(include_mismatched)]
    return left_out_note(left_out, len(pairs))


def to_jsonl(pairs: Iterable[ParaphrasePair]) -> str:
    """Pairs as JSONL, the format ``parse_paraphrases`` reads back (for downloads and edits)."""
    lines = []
    for pair in pairs:
        lines.append(
            json.dumps(
                {
                    "clean": pair.clean,
                    "corrupted": pair.corrupted,
                    "answer": pair.answer,
                    "foils": list(pair.foils),
                    "source": pair.source,
                },
                ensure_ascii=False,
            )
        )
    return "\n".join(lines) + ("\n" if lines else "")


# ----- user-given pairs -----------------------------------------------------------------------
_CLEAN_KEYS = ("clean", "paraphrase", "prompt")


@dataclass(frozen=True)
class ParaphraseRecord:
    """A paraphrase pair as a user gave it, before any task or model sees it: the paraphrase,
    its corrupted version, and the answer and foils when the record names them (None: the
    prompt's). Best-of-N's ``paraphrases`` setting holds a tuple of these, parsed once at the
    boundary (``paraphrase_records``)."""

    clean: str
    corrupted: str
    answer: str | None = None
    foils: tuple[str, ...] | None = None
    source: str = "file"

    def __post_init__(self):
        if self.foils is not None:
            object.__setattr__(self, "foils", tuple(self.foils))

    def pair(self, task: PromptTask) -> ParaphrasePair:
        """This record as a pair of ``task`` (its answer and foils unless the record names its own,
        which must then be the prompt's)."""
        answer = self.answer or task.answer
        foils = self.foils if self.foils else task.foils
        pair = ParaphrasePair(self.clean, self.corrupted, str(answer), tuple(foils), self.source, task.metric)
        if pair.answer != task.answer or tuple(pair.foils) != tuple(task.foils):
            pair.problems.append(
                f"its answer/foils ({pair.answer!r} vs {list(pair.foils)}) differ from the prompt's "
                f"({task.answer!r} vs {list(task.foils)}); every paraphrase must keep them"
            )
        return pair


def _record(record: dict, source: str, where: str) -> ParaphraseRecord:
    """One JSON object or CSV row as a record; ParaphraseError naming ``where`` when it is not one."""
    if not isinstance(record, dict):
        raise ParaphraseError(f"{where} is not an object with 'clean' and 'corrupted' fields.")
    key = next((k for k in _CLEAN_KEYS if record.get(k) not in (None, "")), None)
    clean = None if key is None else record[key]
    corrupted = record.get("corrupted")
    for name, value in ((key, clean), ("corrupted", corrupted), ("answer", record.get("answer"))):
        if value is not None and not isinstance(value, str):  # a number or a list is not guessed at
            given = json.dumps(value, ensure_ascii=False, default=str)
            raise ParaphraseError(
                f"{where}: '{name}' must be text in quotes, not {given[:60]}{'…' if len(given) > 60 else ''}."
            )
    if clean is None or not clean.strip():
        raise ParaphraseError(f"{where} has no paraphrase; give it as 'clean' (or 'paraphrase').")
    if corrupted is None or not corrupted.strip():
        raise ParaphraseError(
            f"{where} has no 'corrupted' prompt; give the paraphrase with its key fact replaced."
        )
    answer = record.get("answer") or None
    foils = record.get("foils", None)
    if foils in (None, "", []):
        foils = None
    elif isinstance(foils, str):
        foils = tuple(f for f in foils.split("|") if f != "")
    elif not isinstance(foils, (list, tuple)) or not all(isinstance(f, str) for f in foils):
        raise ParaphraseError(f"{where}: 'foils' must be a list of strings (or one string with '|').")
    return ParaphraseRecord(
        clean, corrupted, None if answer is None else str(answer), foils, str(record.get("source") or source)
    )


def paraphrase_records(value, source: str = "file") -> tuple[ParaphraseRecord, ...]:
    """The ``paraphrases`` setting from what a boundary gives: text (JSONL, a JSON list, CSV with a
    header, or typed lines), a list of record dicts (JSON of a stored result or a URL), or records.
    Text the parsers themselves choke on (JSON nested too deeply, a CSV field over the csv
    module's size limit) is refused with a ParaphraseError too, never another exception."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        try:
            return tuple(_parse_records(value, source))
        except RecursionError:
            raise ParaphraseError(
                "The paraphrase list is nested too deeply to be read; give flat JSON objects or lines."
            ) from None
        except csv.Error as error:
            raise ParaphraseError(f"The paraphrase CSV cannot be read ({str(error)[:80]}).") from None
    if not isinstance(value, (list, tuple)):
        raise ParaphraseError("The paraphrases must be text or a list of pairs.")
    return tuple(
        item if isinstance(item, ParaphraseRecord) else _record(item, source, f"Pair {index + 1}")
        for index, item in enumerate(value)
    )


def records_text(records) -> str:
    """Records as JSONL, which ``paraphrase_records`` reads back (a text area edits this)."""
    lines = []
    for record in records:
        row = {"clean": record.clean, "corrupted": record.corrupted}
        if record.answer:
            row["answer"] = record.answer
        if record.foils:
            row["foils"] = list(record.foils)
        lines.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(lines)


def parse_paraphrases(text: str, task: PromptTask, source: str = "file") -> list[ParaphrasePair]:
    """Pairs of ``task`` from text (see ``paraphrase_records`` for the formats)."""
    records = paraphrase_records(text, source)
    if not records:
        raise ParaphraseError(
            "The paraphrase list is empty; give one paraphrase and its corrupted version per line."
        )
    return [record.pair(task) for record in records]


def _parse_records(text: str, source: str) -> list[ParaphraseRecord]:
    """Records from text: JSONL, a JSON list, CSV with a header, or typed lines.

    JSON objects and CSV rows have ``clean`` (or ``paraphrase``/``prompt``) and ``corrupted``,
    optionally ``answer`` and ``foils`` (a list, or '|'-separated in CSV); missing ones take the
    prompt's. Typed lines are ``paraphrase<TAB>corrupted`` or ``paraphrase || corrupted``;
    lines starting with '#' are comments. Raises ParaphraseError naming the first bad line.
    """
    # comment lines ('#') may precede or separate the pairs in every format; blanking them keeps
    # the line numbers of error messages right
    cleaned = "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())
    stripped = cleaned.strip()
    if not stripped:
        raise ParaphraseError(
            "The paraphrase list is empty; give one paraphrase and its corrupted version per line."
        )
    if stripped.startswith(("[", "{")):
        try:
            return (
                _json_list_records(stripped, source)
                if stripped[0] == "["
                else _jsonl_records(cleaned, source)
            )
        except _NotJSON:  # typed lines whose first paraphrase begins with '[' or '{' ("[Narrator] When ...")
            if not _typed_line(stripped.splitlines()[0]):  # were refused as "not valid JSON"
                raise
    header = [name.strip().lower() for name in next(csv.reader([stripped.splitlines()[0]]))]
    if "corrupted" in header and any(key in header for key in _CLEAN_KEYS):
        return _csv_records(stripped, source)
    return _typed_records(cleaned, source)


def _json_list_records(text: str, source: str) -> list[ParaphraseRecord]:
    try:
        records = json_text.loads(text)
    except json.JSONDecodeError as error:
        raise _NotJSON(
            f"The paraphrase list is not valid JSON ({error.msg} at line {error.lineno})."
        ) from None
    if not isinstance(records, list):
        raise ParaphraseError("A JSON paraphrase list must be a list of objects.")
    return [_record(r, source, f"Item {i + 1}") for i, r in enumerate(records)]


def _jsonl_records(text: str, source: str) -> list[ParaphraseRecord]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            record = json_text.loads(line)
        except json.JSONDecodeError as error:
            raise _NotJSON(
                f"Line {number} of the paraphrase file is not valid JSON ({error.msg}); each line "
                'must be an object like {"clean": "...", "corrupted": "..."}.'
            ) from None
        records.append(_record(record, source, f"Line {number}"))
    return records


def _csv_records(text: str, source: str) -> list[ParaphraseRecord]:
    reader = csv.DictReader(io.StringIO(text))
    reader.fieldnames = [name.strip().lower() for name in reader.fieldnames or []]
    return [_record(row, source, f"CSV row {i + 1}") for i, row in enumerate(reader)]


def _typed_line(line: str) -> bool:
    """Whether ``line`` reads as a typed pair ('paraphrase<TAB>corrupted' or 'paraphrase || corrupted'),
    not as the start of a JSON object (whose text may hold ' || ')."""
    if "".join(line.split())[:2] in ('{"', "[{", '["'):
        return False
    parts = line.split("\t") if "\t" in line else line.split(" || ")
    return len(parts) == 2 and all(part.strip() for part in parts)


def _typed_records(text: str, source: str) -> list[ParaphraseRecord]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t") if "\t" in line else line.split(" || ")
        if len(parts) != 2:
            raise ParaphraseError(
                f"Line {number} is not 'paraphrase<TAB>corrupted' or 'paraphrase || corrupted': {shown(line)}."
            )
        records.append(_record({"clean": parts[0], "corrupted": parts[1]}, source, f"Line {number}"))
    return records


def read_pairs_text(path) -> str:
    """The text of a paraphrase file; ParaphraseError in one sentence when it cannot be read. A
    byte-order mark (Notepad, Excel) is no text: the first paraphrase began with an invisible
    U+FEFF the model read (2026-12-06)."""
    text = read_user_file(path, "the paraphrase file", ParaphraseError, "save it as UTF-8")
    return text.removeprefix("\ufeff")


def load_paraphrases(path, task: PromptTask) -> list[ParaphrasePair]:
    """Pairs from a file (see ``parse_paraphrases`` for the formats)."""
    return parse_paraphrases(read_pairs_text(path), task, source="file")
