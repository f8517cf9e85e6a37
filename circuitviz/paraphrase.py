"""Where paraphrases of a prompt and their corruptions come from, and how each pair is checked.

Best-of-N (Query Circuits) scores the prompt q and p paraphrases q_1..q_p, each with its own
corrupted version q_i', keeps the candidate circuit most faithful on q. Every pair must keep q's
answer and foils. Three sources yield such pairs:

- user-given: a JSONL/JSON/CSV file, or a list typed in the app (``parse_paraphrases``);
- templates: built-in families for the task kinds we ship examples of (indirect object
  identification, arithmetic, factual recall, multiple choice) that recognise a prompt, rewrite
  it and corrupt it offline and deterministically from a seed (``template_paraphrases``); the
  same recognition proposes a corrupted prompt for a typed one (``propose_corruption``);
- an LLM behind any OpenAI-compatible endpoint (``llm_paraphrases``).

Every pair is checked against the model (``validate_pairs``): paraphrase and corruption of the
same token length, the answer one token, and the model's top-1 next token on the paraphrase the
same as on the original. Pairs that fail are kept, flagged with the reason, and left out of
Best-of-N by default.
"""

from __future__ import annotations

import csv
import difflib
import io
import itertools
import json
import os
import random
import re
import string
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import torch

from .tasks import PromptTask, TaskError, prepare_task

SOURCES = ("template", "openai", "file")
DEFAULT_LLM_MODEL = "gpt-4o-mini"
# a corruption whose metric moves less than this fraction of the original's move is flagged
_WEAK_CORRUPTION = 0.05


class ParaphraseError(ValueError):
    """A paraphrase source cannot give pairs; the message is one sentence that says what to do."""


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
        if self.answer_matches is False:
            reasons.append(
                f"the model answers {self.model_answer!r} here, neither the answer {self.answer!r} nor "
                f"its answer on the original prompt ({self.original_answer!r})"
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


def _record_pair(record: dict, task: PromptTask, source: str, where: str) -> ParaphrasePair:
    """One record (a JSON object or CSV row) as a pair; the task's answer and foils by default."""
    if not isinstance(record, dict):
        raise ParaphraseError(f"{where} is not an object with 'clean' and 'corrupted' fields.")
    clean = next((record[k] for k in _CLEAN_KEYS if record.get(k) not in (None, "")), None)
    corrupted = record.get("corrupted")
    if not isinstance(clean, str) or not clean.strip():
        raise ParaphraseError(f"{where} has no paraphrase; give it as 'clean' (or 'paraphrase').")
    if not isinstance(corrupted, str) or not corrupted.strip():
        raise ParaphraseError(
            f"{where} has no 'corrupted' prompt; give the paraphrase with its key fact replaced."
        )
    answer = record.get("answer") or task.answer
    foils = record.get("foils", None)
    if foils in (None, "", []):
        foils = task.foils
    elif isinstance(foils, str):
        foils = tuple(f for f in foils.split("|") if f != "")
    elif not isinstance(foils, list) or not all(isinstance(f, str) for f in foils):
        raise ParaphraseError(f"{where}: 'foils' must be a list of strings (or one string with '|').")
    pair = ParaphrasePair(
        clean, corrupted, str(answer), tuple(foils), str(record.get("source") or source), task.metric
    )
    if pair.answer != task.answer or tuple(pair.foils) != tuple(task.foils):
        pair.problems.append(
            f"its answer/foils ({pair.answer!r} vs {list(pair.foils)}) differ from the prompt's "
            f"({task.answer!r} vs {list(task.foils)}); every paraphrase must keep them"
        )
    return pair


def pairs_from_records(
    records: Sequence[dict], task: PromptTask, source: str = "file"
) -> list[ParaphrasePair]:
    """Pairs from plain records, e.g. rows of the app's editable table."""
    return [_record_pair(r, task, source, f"Row {i + 1}") for i, r in enumerate(records)]


def parse_paraphrases(text: str, task: PromptTask, source: str = "file") -> list[ParaphrasePair]:
    """Pairs from text: JSONL, a JSON list, CSV with a header, or typed lines.

    Text the parsers themselves choke on (JSON nested too deeply, a CSV field over the csv
    module's size limit) is refused with a ParaphraseError too, never another exception.
    """
    try:
        return _parse_paraphrases(text, task, source)
    except RecursionError:
        raise ParaphraseError(
            "The paraphrase list is nested too deeply to be read; give flat JSON objects or lines."
        ) from None
    except csv.Error as error:
        raise ParaphraseError(f"The paraphrase CSV cannot be read ({str(error)[:80]}).") from None


def _parse_paraphrases(text: str, task: PromptTask, source: str) -> list[ParaphrasePair]:
    """Pairs from text: JSONL, a JSON list, CSV with a header, or typed lines.

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
    if stripped.startswith("["):
        try:
            records = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise ParaphraseError(
                f"The paraphrase list is not valid JSON ({error.msg} at line {error.lineno})."
            ) from None
        if not isinstance(records, list):
            raise ParaphraseError("A JSON paraphrase list must be a list of objects.")
        return [_record_pair(r, task, source, f"Item {i + 1}") for i, r in enumerate(records)]
    if stripped.startswith("{"):
        pairs = []
        for number, line in enumerate(cleaned.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ParaphraseError(
                    f"Line {number} of the paraphrase file is not valid JSON ({error.msg}); each line "
                    'must be an object like {"clean": "...", "corrupted": "..."}.'
                ) from None
            pairs.append(_record_pair(record, task, source, f"Line {number}"))
        return pairs
    first = stripped.splitlines()[0]
    header = [name.strip().lower() for name in next(csv.reader([first]))]
    if "corrupted" in header and any(key in header for key in _CLEAN_KEYS):
        reader = csv.DictReader(io.StringIO(stripped))
        reader.fieldnames = [name.strip().lower() for name in reader.fieldnames or []]
        return [_record_pair(row, task, source, f"CSV row {i + 1}") for i, row in enumerate(reader)]
    pairs = []
    for number, line in enumerate(cleaned.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t") if "\t" in line else line.split(" || ")
        if len(parts) != 2:
            raise ParaphraseError(
                f"Line {number} is not 'paraphrase<TAB>corrupted' or 'paraphrase || corrupted': {line[:60]!r}."
            )
        pairs.append(_record_pair({"clean": parts[0], "corrupted": parts[1]}, task, source, f"Line {number}"))
    return pairs


def load_paraphrases(path, task: PromptTask) -> list[ParaphrasePair]:
    """Pairs from a file (see ``parse_paraphrases`` for the formats)."""
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as error:
        raise ParaphraseError(f"Cannot read the paraphrase file {path} ({error.strerror}).") from None
    except UnicodeDecodeError as error:
        raise ParaphraseError(
            f"The paraphrase file {path} is not UTF-8 text (byte {error.start + 1}); save it as UTF-8."
        ) from None
    return parse_paraphrases(text, task, source="file")


# ----- checking pairs against the model -------------------------------------------------------
def token_count(model, text: str) -> int:
    """Tokens of a prompt as the model runs it (with its BOS token when it prepends one)."""
    return int(model.to_tokens(text).shape[1])


def token_text(model, token_id: int) -> str:
    """One token id as text (decoded alone)."""
    return model.tokenizer.decode([int(token_id)])


@torch.no_grad()
def _last_position(model, prepared, tokens: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Metric and top-1 token at the last position for a batch of equal-length prompts.

    tokens: [batch, pos]. Returns (metrics [batch] or None without ``prepared``, top-1 ids [batch]).
    """
    from .activations import final_residual, metric_from_residual, model_device

    residual = final_residual(model, tokens.to(model_device(model)), [])  # [batch, d_model]
    metrics = None if prepared is None else metric_from_residual(model, prepared, residual).float().cpu()
    x = residual[:, None, :]
    if model.cfg.normalization_type is not None:
        x = model.ln_final(x)
    logits = x[:, 0] @ model.W_U + model.b_U  # [batch, d_vocab]; a soft cap keeps the argmax
    return metrics, logits.argmax(-1).cpu()


def _grouped_by_length(tokens: list[torch.Tensor]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for index, row in enumerate(tokens):
        groups.setdefault(int(row.shape[1]), []).append(index)
    return groups


def validate_pairs(
    model,
    task: PromptTask,
    pairs: Sequence[ParaphrasePair],
    max_tokens: int = 256,
    batch_size: int = 16,
) -> list[ParaphrasePair]:
    """Check every pair against the model and fill its flags; returns new pair objects.

    The original prompt must itself be valid (TaskError otherwise). Per pair: clean and
    corrupted of the same token length, answer and foils one token each and equal to the
    prompt's, not a copy of the prompt or of an earlier pair, and the model's top-1 token the
    same as on the original or the stated answer itself. A pair whose source is "original" (the prompt itself, candidate 0
    of Best-of-N) is checked the same way but is never a copy. Prompts of equal length run in
    shared batches.
    """
    prepared = prepare_task(model, task, max_tokens=max_tokens)
    original_metrics, original_top = _last_position(
        model, prepared, torch.cat([prepared.clean_tokens, prepared.corrupted_tokens])
    )
    original_answer = token_text(model, int(original_top[0]))
    checked: list[ParaphrasePair] = []
    seen: set[str] = set()
    runs: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    for pair in pairs:
        pair = replace(pair, problems=list(pair.problems), warnings=list(pair.warnings))
        pair.answer_single_token = True  # the task's answer passed prepare_task
        clean_tokens = model.to_tokens(pair.clean)
        corrupted_tokens = model.to_tokens(pair.corrupted)
        pair.n_tokens, pair.corrupted_n_tokens = int(clean_tokens.shape[1]), int(corrupted_tokens.shape[1])
        pair.same_length = pair.n_tokens == pair.corrupted_n_tokens
        if not pair.same_length:
            pair.problems.append(
                f"the paraphrase has {pair.n_tokens} tokens and its corruption {pair.corrupted_n_tokens}"
            )
        if pair.n_tokens > max_tokens:
            pair.problems.append(f"the paraphrase is {pair.n_tokens} tokens, over the limit of {max_tokens}")
        if pair.answer != task.answer or tuple(pair.foils) != tuple(task.foils):
            if not any("answer/foils" in p for p in pair.problems):
                pair.problems.append("its answer or foils differ from the prompt's")
        is_original = pair.source == "original"
        if not is_original and pair.clean.strip() in seen | {task.clean.strip()}:
            pair.problems.append("it repeats the prompt or an earlier paraphrase")
        seen.add(pair.clean.strip())
        if pair.clean.strip() == pair.corrupted.strip():
            pair.problems.append("its corrupted version is the paraphrase itself")
        if pair.same_length and pair.n_tokens <= max_tokens:
            runs.append((len(checked), clean_tokens, corrupted_tokens))
        checked.append(pair)

    sequences = [t for _, clean, corrupted in runs for t in (clean, corrupted)]
    owners = [(index, kind) for index, _, _ in runs for kind in ("clean", "corrupted")]
    for _, members in sorted(_grouped_by_length(sequences).items()):
        for start in range(0, len(members), batch_size):
            chunk = members[start : start + batch_size]
            metrics, top = _last_position(model, prepared, torch.cat([sequences[i] for i in chunk]))
            for row, member in enumerate(chunk):
                index, kind = owners[member]
                pair = checked[index]
                if kind == "clean":
                    pair.metric_clean = float(metrics[row])
                    pair.model_answer = token_text(model, int(top[row]))
                    pair.original_answer = original_answer
                    # the same top-1 as on the prompt, or the stated answer itself
                    pair.answer_matches = int(top[row]) in (int(original_top[0]), prepared.answer_id)
                else:
                    pair.metric_corrupted = float(metrics[row])
    original_move = abs(float(original_metrics[0] - original_metrics[1]))
    for pair in checked:
        if pair.metric_clean is None or pair.metric_corrupted is None:
            continue
        move = abs(pair.metric_clean - pair.metric_corrupted)
        if original_move > 0 and move < _WEAK_CORRUPTION * original_move:
            pair.warnings.append("its corruption barely moves the metric, so its scores carry little signal")
    return checked


def model_answer(model, prompt: str) -> str:
    """The model's top-1 next token after ``prompt``, as text."""
    _, top = _last_position(model, None, model.to_tokens(prompt))
    return token_text(model, int(top[0]))


# ----- template families ----------------------------------------------------------------------
@dataclass(frozen=True)
class FamilyMatch:
    """A prompt recognised by a template family: its slots and the answer the family expects.

    ``answer`` is the answer word as it appears in text (no leading space), or None when the
    family cannot know it (a multiple-choice prompt's correct letter).
    """

    family: str
    label: str
    slots: dict
    answer: str | None


_NAME = r"[A-Z][a-z]+"
_WORD = r"[a-z]+"


def _template_regex(template: str, slots: dict[str, str]) -> re.Pattern:
    """A template with ``{slot}`` fields as an anchored regex; repeated slots must repeat.

    Punctuation followed by a space may be written with a space before it too ("store , John"),
    as word-level tokenizers need.
    """
    pattern, used = "", set()
    for literal, name, _, _ in string.Formatter().parse(template):
        for character in literal:
            if character in ",.?!:;":
                pattern += r"\s?" + re.escape(character)
            else:
                pattern += re.escape(character)
        if name:
            if name in used:
                pattern += f"(?P={name})"
            else:
                pattern += f"(?P<{name}>{slots[name]})"
                used.add(name)
    return re.compile("^" + pattern + "$")


def _spaced(text: str) -> bool:
    """Whether punctuation is written as separate words ("store , John")."""
    return bool(re.search(r"\w\s[,.?!:;](\s|$)", text))


def _render(template: str, values: dict, spaced: bool) -> str:
    text = template.format(**values)
    if spaced:
        text = re.sub(r"(?<=\w)([,.?!:;])(?=\s|$)", r" \1", text)
    return text


def _split_trailing(text: str) -> tuple[str, str]:
    body = text.rstrip()
    return body, text[len(body) :]


class TemplateFamily:
    """A family of prompts that share a task: recognise, rewrite keeping the answer, corrupt."""

    name: str = ""
    label: str = ""

    def match(self, prompt: str) -> FamilyMatch | None:
        raise TypeError(f"{type(self).__name__} does not recognise prompts")

    def variants(self, found: FamilyMatch, rng: random.Random) -> list[tuple[str, FamilyMatch]]:
        """Rewrites of the prompt that keep its answer, in a seeded order, each with its slots."""
        raise TypeError(f"{type(self).__name__} has no rewrites")

    def corruptions(self, found: FamilyMatch, rng: random.Random | None, answer: str | None) -> Iterator[str]:
        """Corrupted versions of a matched prompt, most preferred first (rng None: fixed order)."""
        raise TypeError(f"{type(self).__name__} has no corruptions")


# -- indirect object identification --
IOI_TEMPLATES = (
    "When {A} and {B} went to the {place}, {B} gave a {object} to",
    "When {B} and {A} went to the {place}, {B} gave a {object} to",
    "After {A} and {B} went to the {place}, {B} gave a {object} to",
    "Then, {A} and {B} went to the {place}. {B} gave a {object} to",
    "While {A} and {B} were working at the {place}, {B} gave a {object} to",
    "When {A} and {B} arrived at the {place}, {B} handed a {object} to",
    "{A} and {B} went to the {place}, and {B} gave a {object} to",
    "After lunch, {A} and {B} went to the {place}. {B} gave a {object} to",
    "When {B} and {A} got to the {place}, {B} gave a {object} to",
    "Yesterday {A} and {B} went to the {place}, and {B} gave a {object} to",
    "As {A} and {B} walked to the {place}, {B} passed a {object} to",
)
IOI_PLACES = (
    "store",
    "park",
    "school",
    "office",
    "beach",
    "restaurant",
    "hospital",
    "station",
    "market",
    "library",
)
IOI_OBJECTS = ("drink", "ball", "book", "gift", "letter", "flower", "key", "bag", "snack", "ticket")
# corruption names, in the order a proposal tries them ("Alice, Bob, Carl" is the README example)
IOI_NAMES = (
    "Alice", "Bob", "Carl", "Dan", "Emma", "Frank", "Grace", "Henry", "Kate", "Lisa", "Mark", "Nick",
    "Paul", "Rose", "Sam", "Tom", "Anna", "Jack", "Laura", "Mike", "Sarah", "David", "James", "Maria",
)  # fmt: skip
_IOI_LOOSE = re.compile(
    r"^(?P<head>.*?)\b(?P<X>[A-Z][a-z]+) and (?P<Y>[A-Z][a-z]+)\b(?P<body>.*)\b(?P<S>[A-Z][a-z]+)(?P<tail>[^A-Z]*)$",
    re.DOTALL,
)


class IOIFamily(TemplateFamily):
    """Two people are introduced, one of them (the subject) repeats, the other is the answer."""

    name = "ioi"
    label = "indirect object identification"
    _slots = {"A": _NAME, "B": _NAME, "place": _WORD, "object": _WORD}

    def __init__(self):
        self._regexes = [_template_regex(t, self._slots) for t in IOI_TEMPLATES]

    def match(self, prompt):
        body, trailing = _split_trailing(prompt)
        for index, regex in enumerate(self._regexes):
            found = regex.match(body)
            if found and found["A"] != found["B"]:
                slots = dict(found.groupdict(), template=index, trailing=trailing, spaced=_spaced(body))
                return FamilyMatch(self.name, self.label, slots, found["A"])
        loose = _IOI_LOOSE.match(body)
        if loose and loose["X"] != loose["Y"] and loose["S"] in (loose["X"], loose["Y"]):
            io = loose["Y"] if loose["S"] == loose["X"] else loose["X"]
            spans = {key: loose.span(key) for key in ("X", "Y", "S")}
            place = re.search(r"\bthe ([a-z]+)\b", loose["body"])
            obj = re.search(r"\ban? ([a-z]+)\b", loose["body"])
            slots = {
                "A": io,
                "B": loose["S"],
                "place": place.group(1) if place else IOI_PLACES[0],
                "object": obj.group(1) if obj else IOI_OBJECTS[0],
                "template": None,
                "trailing": trailing,
                "spaced": _spaced(body),
                "text": body,
                "spans": spans,
            }
            return FamilyMatch(self.name, self.label, slots, io)
        return None

    def variants(self, found, rng):
        slots = found.slots
        combos = [
            (t, place, obj)
            for t in range(len(IOI_TEMPLATES))
            for place in IOI_PLACES
            for obj in IOI_OBJECTS
            if (t, place, obj) != (slots["template"], slots["place"], slots["object"])
        ]
        rng.shuffle(combos)
        # vary the wording first: one combination per template before any template repeats
        by_template: dict[int, list] = {}
        for combo in combos:
            by_template.setdefault(combo[0], []).append(combo)
        ordered = []
        while any(by_template.values()):
            for t in sorted(by_template, key=lambda k: rng.random()):
                if by_template[t]:
                    ordered.append(by_template[t].pop())
        out = []
        for t, place, obj in ordered:
            values = {"A": slots["A"], "B": slots["B"], "place": place, "object": obj}
            text = _render(IOI_TEMPLATES[t], values, slots["spaced"]) + slots["trailing"]
            new = dict(slots, template=t, place=place, object=obj, text=None, spans=None)
            out.append((text, FamilyMatch(self.name, self.label, new, slots["A"])))
        return out

    def corruptions(self, found, rng, answer):
        """ABC corruption: the two introduced names and the repeated subject become three others."""
        slots = found.slots
        names = [n for n in IOI_NAMES if n not in (slots["A"], slots["B"])]
        if rng is not None:
            rng.shuffle(names)
        for offset in range(len(names) - 2):
            c, d, e = names[offset], names[offset + 1], names[offset + 2]
            if slots.get("spans"):
                text = slots["text"]
                pieces, last = [], 0
                x_is_io = text[slice(*slots["spans"]["X"])] == slots["A"]
                replacement = {"X": c if x_is_io else d, "Y": d if x_is_io else c, "S": e}
                for key in sorted(slots["spans"], key=lambda k: slots["spans"][k][0]):
                    start, end = slots["spans"][key]
                    pieces.append(text[last:start] + replacement[key])
                    last = end
                yield "".join(pieces) + text[last:] + slots["trailing"]
                continue
            template = IOI_TEMPLATES[slots["template"]]
            # first B (in the introduction) -> d, the repeated B (the subject) -> e
            values = {"A": c, "B": d, "place": slots["place"], "object": slots["object"]}
            text = _render(template, values, slots["spaced"])
            subject = text.rfind(d)
            yield text[:subject] + e + text[subject + len(d) :] + slots["trailing"]


# -- arithmetic --
ARITHMETIC_TEMPLATES = {
    "+": (
        "{a} + {b} =", "{a}+{b}=", "{a} plus {b} equals", "{a} plus {b} is", "The sum of {a} and {b} is",
        "What is {a} plus {b}? The answer is", "{b} + {a} =", "Add {a} and {b}. The result is",
        "Calculate {a} + {b} =", "If you add {a} and {b}, you get", "Question: {a} + {b} = ? Answer:",
        "Solve: {a} + {b} =", "The result of {a} + {b} is",
    ),
    "-": (
        "{a} - {b} =", "{a}-{b}=", "{a} minus {b} equals", "{a} minus {b} is",
        "The difference between {a} and {b} is", "What is {a} minus {b}? The answer is",
        "Subtract {b} from {a}. The result is", "Calculate {a} - {b} =",
        "If you subtract {b} from {a}, you get", "Question: {a} - {b} = ? Answer:", "Solve: {a} - {b} =",
        "The result of {a} - {b} is",
    ),
    "*": (
        "{a} * {b} =", "{a}*{b}=", "{a} times {b} equals", "{a} times {b} is", "The product of {a} and {b} is",
        "What is {a} times {b}? The answer is", "{b} * {a} =", "{a} x {b} =", "Multiply {a} by {b}. The result is",
        "Calculate {a} * {b} =", "Question: {a} * {b} = ? Answer:", "Solve: {a} * {b} =",
        "The result of {a} * {b} is",
    ),
}  # fmt: skip
NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
)  # fmt: skip
_NUMBER = r"\d+|(?i:" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"
_ARITHMETIC_LOOSE = re.compile(
    rf"^(?P<head>.*?)(?<!\w)(?P<a>{_NUMBER})\s*(?P<op>\+|-|\*|x|×|plus|minus|times)\s*(?P<b>{_NUMBER})(?P<tail>[^\w]*\s*(?:=|equals|is|:)?)$",
    re.DOTALL,
)
_OPERATORS = {"+": "+", "plus": "+", "-": "-", "minus": "-", "*": "*", "x": "*", "×": "*", "times": "*"}
_SENTENCE_END = re.compile(r"(?<=[.?!\n])\s+")


def _apply(op: str, a: int, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _number_value(text: str) -> int:
    return int(text) if text.isdigit() else NUMBER_WORDS.index(text.lower())


def _number_text(value: int, like: str) -> str:
    """``value`` written as ``like`` is (digits, or a word with the same capitalisation)."""
    if like.isdigit() or not 0 <= value < len(NUMBER_WORDS):
        return str(value)
    word = NUMBER_WORDS[value]
    return word.capitalize() if like[:1].isupper() else word


def _in_words(template: str) -> bool:
    """Whether a template reads naturally with numbers in words (no symbols)."""
    return not re.search(r"[+\-*=]|\bx\b", template)


class ArithmeticFamily(TemplateFamily):
    """Addition, subtraction and multiplication of whole numbers, in digits or words, optionally
    after worked examples ("one plus one is two. one plus two is")."""

    name = "arithmetic"
    label = "arithmetic"

    def __init__(self):
        self._regexes = [
            (op, index, _template_regex(t, {"a": _NUMBER, "b": _NUMBER}))
            for op, templates in ARITHMETIC_TEMPLATES.items()
            for index, t in enumerate(templates)
        ]

    def _match_template(self, problem: str) -> dict | None:
        for op, index, regex in self._regexes:
            found = regex.match(problem)
            if found and found["a"].isdigit() == found["b"].isdigit():
                if not found["a"].isdigit() and not _in_words(ARITHMETIC_TEMPLATES[op][index]):
                    continue
                return {"op": op, "a": found["a"], "b": found["b"], "template": index}
        return None

    @staticmethod
    def _match_loose(problem: str) -> dict | None:
        loose = _ARITHMETIC_LOOSE.match(problem)
        if loose and loose["a"].isdigit() == loose["b"].isdigit() and re.search(r"(=|equals|is|:)$", problem):
            cut = len(loose["head"])  # the words before the problem are kept as they are
            spans = {
                "a": (loose.start("a") - cut, loose.end("a") - cut),
                "b": (loose.start("b") - cut, loose.end("b") - cut),
            }
            return {"op": _OPERATORS[loose["op"]], "a": loose["a"], "b": loose["b"], "template": None,
                    "text": problem[cut:], "spans": spans, "head": loose["head"]}  # fmt: skip
        return None

    def match(self, prompt):
        body, trailing = _split_trailing(prompt)
        # a template on the whole prompt or on its last sentences (after worked examples), else
        # the loose pattern the same way
        starts = [0] + [m.end() for m in _SENTENCE_END.finditer(body)]
        for matcher in (self._match_template, self._match_loose):
            for start in starts:
                slots = matcher(body[start:])
                if slots is None:
                    continue
                slots.update(
                    prefix=body[:start] + slots.pop("head", ""), trailing=trailing, spaced=_spaced(body)
                )
                value = _apply(slots["op"], _number_value(slots["a"]), _number_value(slots["b"]))
                return FamilyMatch(self.name, self.label, slots, _number_text(value, slots["a"]))
        return None

    def _render(self, slots: dict, index: int, a: str, b: str) -> str:
        template = ARITHMETIC_TEMPLATES[slots["op"]][index]
        text = _render(template, {"a": a, "b": b}, slots["spaced"])
        if slots["prefix"] and not a.isdigit() and slots["a"][:1].islower():
            text = text[:1].lower() + text[1:]  # after worked examples in lower case, stay lower case
        return slots["prefix"] + text + slots["trailing"]

    def variants(self, found, rng):
        slots = found.slots
        words = not slots["a"].isdigit()
        # inside a sentence ("..., so 3 - 1 =") only templates that start with the first operand fit
        inside = bool(slots["prefix"]) and not re.search(r"[.?!\n]\s*$", slots["prefix"])
        templates = ARITHMETIC_TEMPLATES[slots["op"]]
        indices = [
            i
            for i in range(len(templates))
            if i != slots["template"]
            and (not words or _in_words(templates[i]))
            and (not inside or templates[i].startswith("{a}"))
        ]
        rng.shuffle(indices)
        out = []
        for index in indices:
            text = self._render(slots, index, slots["a"], slots["b"])
            new = dict(slots, template=index, text=None, spans=None)
            out.append((text, FamilyMatch(self.name, self.label, new, found.answer)))
        return out

    def corruptions(self, found, rng, answer):
        """Operands of the same form (digit count, or words) whose result is written differently
        from its first character on."""
        slots = found.slots
        a, b, op = slots["a"], slots["b"], slots["op"]
        result = found.answer or ""
        words = not a.isdigit()

        def numbers(like: str) -> list[int]:
            if not like.isdigit():
                return list(range(len(NUMBER_WORDS)))
            low = 0 if len(like) == 1 else 10 ** (len(like) - 1)
            return list(range(low, 10 ** len(like)))

        order = random.Random(0) if rng is None else rng
        firsts, seconds = numbers(a), numbers(b)
        order.shuffle(firsts)
        order.shuffle(seconds)
        tried = 0
        for value_a in firsts:
            for value_b in seconds[:20]:
                value = _apply(op, value_a, value_b)
                new_a, new_b = _number_text(value_a, a), _number_text(value_b, b)
                written = _number_text(value, a)
                if value < 0 or (words and value >= len(NUMBER_WORDS)) or (new_a, new_b) == (a, b):
                    continue
                if (written.lower() == result.lower()) if words else (written[:1] == result[:1]):
                    continue
                tried += 1
                if slots.get("spans"):
                    text = slots["text"]
                    (a0, a1), (b0, b1) = slots["spans"]["a"], slots["spans"]["b"]
                    problem = text[:a0] + new_a + text[a1:b0] + new_b + text[b1:]
                    yield slots["prefix"] + problem + slots["trailing"]
                else:
                    yield self._render(slots, slots["template"], new_a, new_b)
                if tried > 200:
                    return


# -- factual recall --
FACT_RELATIONS = {
    "capital": (
        {
            "France": "Paris", "Italy": "Rome", "Germany": "Berlin", "Spain": "Madrid", "Japan": "Tokyo",
            "China": "Beijing", "Russia": "Moscow", "Egypt": "Cairo", "Greece": "Athens", "England": "London",
            "Poland": "Warsaw", "Portugal": "Lisbon", "Austria": "Vienna", "Ireland": "Dublin", "Norway": "Oslo",
            "Sweden": "Stockholm", "Canada": "Ottawa", "Kenya": "Nairobi", "Peru": "Lima", "Cuba": "Havana",
        },
        (
            "The capital of {X} is", "The capital city of {X} is", "{X}'s capital is", "{X}'s capital city is",
            "The capital of the country {X} is", "In {X}, the capital city is", "The seat of government of {X} is in",
            "{X} has its capital in", "The capital of {X} is the city of", "Q: What is the capital of {X}? A:",
            "The name of the capital of {X} is", "The government of {X} sits in the city of",
        ),
    ),
    "language": (
        {
            "France": "French", "Italy": "Italian", "Germany": "German", "Spain": "Spanish", "Japan": "Japanese",
            "China": "Chinese", "Russia": "Russian", "Greece": "Greek", "Portugal": "Portuguese", "Poland": "Polish",
            "Sweden": "Swedish", "Norway": "Norwegian", "Turkey": "Turkish", "Netherlands": "Dutch",
            "Finland": "Finnish", "Korea": "Korean",
        },
        (
            "The official language of {X} is", "People in {X} speak", "In {X}, people speak",
            "The language spoken in {X} is", "The main language of {X} is", "Most people in {X} speak",
            "In {X}, the official language is", "The national language of {X} is", "The people of {X} speak",
            "Q: What language do people speak in {X}? A:", "The primary language in {X} is",
            "Most people who live in {X} speak",
        ),
    ),
    "landmark": (
        {
            "Eiffel Tower": "Paris", "Colosseum": "Rome", "Big Ben": "London", "Brandenburg Gate": "Berlin",
            "Kremlin": "Moscow", "Acropolis": "Athens", "Sagrada Familia": "Barcelona", "Forbidden City": "Beijing",
            "Little Mermaid statue": "Copenhagen", "Leaning Tower": "Pisa",
        },
        (
            "The {X} is located in the city of", "The {X} is in the city of", "You can see the {X} in the city of",
            "The {X} can be found in the city of", "Tourists visit the {X} in the city of",
            "The famous {X} stands in the city of", "The city where the {X} stands is",
            "Q: In which city is the {X}? A:", "The {X} is a landmark in the city of",
            "To see the {X}, you travel to the city of",
        ),
    ),
}  # fmt: skip
_ENTITY = r"[A-Z][\w'-]*(?: [A-Za-z][\w'-]*)*?"


class FactualFamily(TemplateFamily):
    """Facts about a named subject (capital, language, a landmark's city): the subject is the key."""

    name = "factual"
    label = "factual recall"

    def __init__(self):
        self._regexes = [
            (relation, index, _template_regex(t, {"X": _ENTITY}))
            for relation, (_, templates) in FACT_RELATIONS.items()
            for index, t in enumerate(templates)
        ]

    def match(self, prompt):
        body, trailing = _split_trailing(prompt)
        for relation, index, regex in self._regexes:
            found = regex.match(body)
            if found:
                table = FACT_RELATIONS[relation][0]
                slots = {"relation": relation, "X": found["X"], "template": index}
                slots.update(trailing=trailing, spaced=_spaced(body))
                return FamilyMatch(self.name, self.label, slots, table.get(found["X"]))
        return None

    def variants(self, found, rng):
        slots = found.slots
        templates = FACT_RELATIONS[slots["relation"]][1]
        indices = [i for i in range(len(templates)) if i != slots["template"]]
        rng.shuffle(indices)
        out = []
        for index in indices:
            text = _render(templates[index], {"X": slots["X"]}, slots["spaced"]) + slots["trailing"]
            out.append((text, FamilyMatch(self.name, self.label, dict(slots, template=index), found.answer)))
        return out

    def corruptions(self, found, rng, answer):
        """Another subject of the same relation, whose answer differs."""
        slots = found.slots
        table, templates = FACT_RELATIONS[slots["relation"]]
        subjects = [x for x in table if x != slots["X"] and table[x] != found.answer]
        if rng is not None:
            rng.shuffle(subjects)
        for subject in subjects:
            yield _render(templates[slots["template"]], {"X": subject}, slots["spaced"]) + slots["trailing"]


# -- multiple choice --
_OPTION = re.compile(r"^(?P<open>\(?)(?P<letter>[A-Z])(?P<close>[.)])\s+(?P<text>\S.*)$")
MCQ_HEADERS = ("Question: ", "Q: ", "")
MCQ_STYLES = ("A.", "A)", "(A)")
MCQ_FOOTERS = ("Answer:", "The answer is", "Correct answer:")


def _option_label(letter: str, style: str) -> str:
    return style.replace("A", letter)


class MultipleChoiceFamily(TemplateFamily):
    """A question, lettered options (A. / A) / (A)) on their own lines, then an answer cue."""

    name = "multiple-choice"
    label = "multiple choice"

    def match(self, prompt):
        body, trailing = _split_trailing(prompt)
        lines = body.split("\n")
        first = next((i for i, line in enumerate(lines) if _OPTION.match(line.strip())), None)
        if first is None or first == 0:
            return None
        options, index = [], first
        while index < len(lines) and _OPTION.match(lines[index].strip()):
            options.append(_OPTION.match(lines[index].strip()))
            index += 1
        letters = [o["letter"] for o in options]
        if len(options) < 2 or letters != [chr(ord("A") + i) for i in range(len(options))]:
            return None
        footer = "\n".join(lines[index:]).strip()
        if not footer or "\n" in footer:
            return None
        question = "\n".join(lines[:first])
        header = next((h for h in MCQ_HEADERS if h and question.startswith(h)), "")
        style = "(A)" if options[0]["open"] else "A" + options[0]["close"]
        slots = {
            "header": header,
            "question": question[len(header) :],
            "style": style,
            "options": [o["text"] for o in options],
            "footer": footer,
            "trailing": trailing,
        }
        return FamilyMatch(self.name, self.label, slots, None)

    @staticmethod
    def render(slots: dict) -> str:
        letters = [chr(ord("A") + i) for i in range(len(slots["options"]))]
        lines = [slots["header"] + slots["question"]]
        lines += [
            f"{_option_label(letter, slots['style'])} {text}"
            for letter, text in zip(letters, slots["options"])
        ]
        return "\n".join(lines + [slots["footer"]]) + slots["trailing"]

    @staticmethod
    def correct_option(slots: dict, answer: str | None) -> tuple[int, bool]:
        """(index of the correct option, whether the answer is its letter rather than its text);
        index -1 when the answer is neither an option's letter nor an option's text."""
        text = (answer or "").strip()
        count = len(slots["options"])
        if len(text) == 1 and text.isupper() and 0 <= ord(text) - ord("A") < count:
            return ord(text) - ord("A"), True
        if text and text in slots["options"]:
            return slots["options"].index(text), False
        return -1, True

    def variants(self, found, rng, answer: str | None = None):
        """Other headers, label styles and answer cues; the wrong options reordered (a letter
        answer keeps its letter) or all options reordered (a model that answers with the
        option's text keeps that text)."""
        slots = found.slots
        correct, by_letter = self.correct_option(slots, answer or found.answer)
        if correct < 0:
            return []
        count = len(slots["options"])
        moved = [i for i in range(count) if i != correct] if by_letter else list(range(count))
        orders = list(itertools.permutations(moved))
        combos = [
            (h, s, f, order) for h in MCQ_HEADERS for s in MCQ_STYLES for f in MCQ_FOOTERS for order in orders
        ]
        rng.shuffle(combos)
        out, seen = [], {self.render(slots)}
        for header, style, footer, order in combos:
            options = list(slots["options"])
            for slot, source in zip(moved, order):
                options[slot] = slots["options"][source]
            new = dict(slots, header=header, style=style, footer=footer, options=options)
            text = self.render(new)
            if text not in seen:
                seen.add(text)
                out.append((text, FamilyMatch(self.name, self.label, new, found.answer)))
        return out

    def corruptions(self, found, rng, answer):
        """The correct option's text swapped with a wrong option's: the key fact moves letter.
        (For an answer given as the option's text there is none: the question must change.)"""
        slots = found.slots
        correct, by_letter = self.correct_option(slots, answer or found.answer)
        count = len(slots["options"])
        if correct < 0 or not by_letter:
            return
        wrong = [i for i in range(count) if i != correct]
        if rng is not None:
            rng.shuffle(wrong)
        for other in wrong:
            options = list(slots["options"])
            options[correct], options[other] = options[other], options[correct]
            yield self.render(dict(slots, options=options))


# -- multiple choice on one line, after answered examples --
_INLINE_BLOCK = re.compile(
    r"^(?P<header>Q:|Question:)\s+(?P<question>[^?]+\?)\s+(?P<options>.+?)(?P<end>\.?)\s+"
    r"(?P<footer>Answer:|The answer is)(?:\s+(?P<given>[A-H])\.)?$",
    re.DOTALL,
)
_INLINE_LABEL = re.compile(r"(?:^|\s)(?P<open>\(?)(?P<letter>[A-H])(?P<close>[.)])\s+")
INLINE_HEADERS = ("Q:", "Question:")
INLINE_FOOTERS = ("Answer:", "The answer is")


class InlineChoiceFamily(TemplateFamily):
    """Questions with their options on one line ("Q: Is fire hot? A) yes B) no. Answer:"),
    possibly after answered examples of the same form."""

    name = "inline-choice"
    label = "multiple choice (inline)"

    @staticmethod
    def _block(text: str) -> dict | None:
        found = _INLINE_BLOCK.match(text.strip())
        if not found:
            return None
        labels = list(_INLINE_LABEL.finditer(found["options"]))
        letters = [label["letter"] for label in labels]
        if len(labels) < 2 or letters != [chr(ord("A") + i) for i in range(len(labels))] or labels[0].start():
            return None
        texts = [
            found["options"][label.end() : labels[i + 1].start() if i + 1 < len(labels) else None].strip()
            for i, label in enumerate(labels)
        ]
        style = "(A)" if labels[0]["open"] else "A" + labels[0]["close"]
        return {
            "header": found["header"], "question": found["question"], "options": texts, "style": style,
            "end": found["end"], "footer": found["footer"], "given": found["given"],
        }  # fmt: skip

    def match(self, prompt):
        body, trailing = _split_trailing(prompt)
        pieces = re.split(r"(?<=\.)\s+(?=Q:|Question:)", body)
        blocks = [self._block(piece) for piece in pieces]
        if not blocks or any(block is None for block in blocks) or blocks[-1]["given"]:
            return None
        if any(not block["given"] for block in blocks[:-1]):
            return None
        return FamilyMatch(self.name, self.label, {"blocks": blocks, "trailing": trailing}, None)

    @staticmethod
    def render(slots: dict) -> str:
        parts = []
        for block in slots["blocks"]:
            options = " ".join(
                f"{_option_label(chr(ord('A') + i), block['style'])} {text}"
                for i, text in enumerate(block["options"])
            )
            text = f"{block['header']} {block['question']} {options}{block['end']} {block['footer']}"
            parts.append(text + (f" {block['given']}." if block["given"] else ""))
        return " ".join(parts) + slots["trailing"]

    def variants(self, found, rng, answer: str | None = None):
        """Other headers, label styles and answer cues, the same in every block; the final
        question's wrong options reordered."""
        blocks = found.slots["blocks"]
        final = blocks[-1]
        letter = (answer or "").strip()
        count = len(final["options"])
        if not (len(letter) == 1 and 0 <= ord(letter) - ord("A") < count):
            return []
        correct = ord(letter) - ord("A")
        wrong = [i for i in range(count) if i != correct]
        combos = [
            (h, s, f, order)
            for h in INLINE_HEADERS
            for s in MCQ_STYLES
            for f in INLINE_FOOTERS
            for order in itertools.permutations(wrong)
        ]
        rng.shuffle(combos)
        out, seen = [], {self.render(found.slots)}
        for header, style, footer, order in combos:
            options = list(final["options"])
            for slot, source in zip(wrong, order):
                options[slot] = final["options"][source]
            new_blocks = [dict(b, header=header, style=style, footer=footer) for b in blocks]
            new_blocks[-1]["options"] = options
            new = dict(found.slots, blocks=new_blocks)
            text = self.render(new)
            if text not in seen:
                seen.add(text)
                out.append((text, FamilyMatch(self.name, self.label, new, None)))
        return out

    def corruptions(self, found, rng, answer):
        """The correct option's text swapped with another's in every block (an example whose
        answer was one of the two follows it), so the right letter changes."""
        blocks = found.slots["blocks"]
        letter = (answer or "").strip()
        count = len(blocks[-1]["options"])
        if not (len(letter) == 1 and 0 <= ord(letter) - ord("A") < count):
            return
        correct = ord(letter) - ord("A")
        others = [i for i in range(count) if i != correct]
        if rng is not None:
            rng.shuffle(others)
        for other in others:
            swapped = []
            for block in blocks:
                options = list(block["options"])
                if max(correct, other) < len(options):
                    options[correct], options[other] = options[other], options[correct]
                given = block["given"]
                names = {
                    chr(ord("A") + correct): chr(ord("A") + other),
                    chr(ord("A") + other): chr(ord("A") + correct),
                }
                swapped.append(
                    dict(block, options=options, given=names.get(given, given) if given else given)
                )
            yield self.render(dict(found.slots, blocks=swapped))


# -- an occupation and the pronoun that follows (gender bias) --
OCCUPATIONS = (
    "nurse", "receptionist", "librarian", "maid", "nanny", "housekeeper", "secretary", "hairdresser",
    "engineer", "mechanic", "carpenter", "plumber", "pilot", "surgeon", "firefighter", "soldier",
    "programmer", "farmer", "doctor", "teacher", "lawyer", "chef", "cashier", "dancer",
)  # fmt: skip
NEUTRAL_PEOPLE = ("person", "worker", "adult", "individual", "employee", "resident")
OCCUPATION_TEMPLATES = (
    "The {X} said that",
    "Yesterday the {X} explained that",
    "After the meeting, the {X} announced that",
    "The {X} was late because",
    "When the {X} came home,",
    "The {X} told everyone that",
    "This morning the {X} mentioned that",
    "The {X} called and said that",
    "Everyone agreed that the {X} was right, because",
    "Before leaving, the {X} wrote that",
)


class OccupationFamily(TemplateFamily):
    """An occupation followed by a place where a pronoun comes next ("The nurse said that"): the
    occupation is the key fact; the corruption replaces it with a neutral word ("person")."""

    name = "gender-bias"
    label = "occupation and pronoun"

    def __init__(self):
        entity = "|".join(OCCUPATIONS)
        self._regexes = [_template_regex(t, {"X": rf"(?i:{entity})"}) for t in OCCUPATION_TEMPLATES]

    def match(self, prompt):
        body, trailing = _split_trailing(prompt)
        for index, regex in enumerate(self._regexes):
            found = regex.match(body)
            if found:
                slots = {"X": found["X"], "template": index, "trailing": trailing, "spaced": _spaced(body)}
                return FamilyMatch(self.name, self.label, slots, None)
        return None

    def variants(self, found, rng):
        slots = found.slots
        indices = [i for i in range(len(OCCUPATION_TEMPLATES)) if i != slots["template"]]
        rng.shuffle(indices)
        return [
            (
                _render(OCCUPATION_TEMPLATES[i], {"X": slots["X"]}, slots["spaced"]) + slots["trailing"],
                FamilyMatch(self.name, self.label, dict(slots, template=i), None),
            )
            for i in indices
        ]

    def corruptions(self, found, rng, answer):
        slots = found.slots
        for word in NEUTRAL_PEOPLE:
            values = {"X": word}
            yield (
                _render(OCCUPATION_TEMPLATES[slots["template"]], values, slots["spaced"]) + slots["trailing"]
            )


# factual templates are anchored sentences; IOI's loose pattern comes last so it cannot take them
FAMILIES: tuple[TemplateFamily, ...] = (
    MultipleChoiceFamily(),
    InlineChoiceFamily(),
    ArithmeticFamily(),
    FactualFamily(),
    OccupationFamily(),
    IOIFamily(),
)

# One example per family that Gemma-3-270M answers correctly (top-1), for the app and benchmarks.
EXAMPLE_TASKS: dict[str, PromptTask] = {
    "ioi": PromptTask(
        "When Mary and John went to the store, John gave a drink to",
        "When Alice and Bob went to the store, Carl gave a drink to",
        " Mary",
        (" John",),
    ),
    "factual": PromptTask(
        "The official language of France is", "The official language of Italy is", " French", (" Italian",)
    ),
    "arithmetic": PromptTask("14 + 23 = ", "54 + 23 = ", "3", ("7",)),
}


def recognise(prompt: str) -> FamilyMatch | None:
    """The template family a prompt belongs to, with its slots, or None."""
    for family in FAMILIES:
        found = family.match(prompt)
        if found is not None:
            return found
    return None


def family(name: str) -> TemplateFamily:
    for candidate in FAMILIES:
        if candidate.name == name:
            return candidate
    raise ParaphraseError(
        f"Unknown template family {name!r}; choose one of {', '.join(f.name for f in FAMILIES)}."
    )


def _first_fitting(model, clean: str, corruptions: Iterable[str], limit: int = 200) -> str | None:
    """The first corruption whose token count equals the clean prompt's."""
    target = token_count(model, clean)
    for tried, corrupted in enumerate(corruptions):
        if tried >= limit:
            return None
        if corrupted != clean and token_count(model, corrupted) == target:
            return corrupted
    return None


_TOKEN = re.compile(r"\w+|[^\w\s]")


def transfer_corruption(clean: str, corrupted: str, text: str) -> str | None:
    """Apply the prompt's own corruption to a rewrite of it: every word or phrase the corrupted
    prompt replaces ("France" -> "Italy") is replaced wherever it stands alone in ``text``.
    None when the corruption inserts or deletes words, or nothing in ``text`` is replaced."""
    old_tokens = list(_TOKEN.finditer(clean))
    new_tokens = list(_TOKEN.finditer(corrupted))
    matcher = difflib.SequenceMatcher(None, [t.group() for t in old_tokens], [t.group() for t in new_tokens])
    substitutions = []
    for operation, i1, i2, j1, j2 in matcher.get_opcodes():
        if operation == "equal":
            continue
        if operation != "replace":
            return None
        old = clean[old_tokens[i1].start() : old_tokens[i2 - 1].end()]
        new = corrupted[new_tokens[j1].start() : new_tokens[j2 - 1].end()]
        substitutions.append((old, new))
    result = text
    for old, new in substitutions:
        result = re.sub(r"(?<!\w)" + re.escape(old) + r"(?!\w)", lambda _, new=new: new, result)
    return result if substitutions and result != text else None


def propose_corruption(model, prompt: str, answer: str | None = None) -> str | None:
    """A corrupted prompt of the same token length for a prompt a template family recognises.

    Indirect object: the three names become others (ABC); arithmetic: operands whose result
    starts differently; factual recall: another subject; multiple choice: the correct option's
    text swapped with another's (the correct letter is ``answer``, else the model's top-1).
    Returns None when no family recognises the prompt or no same-length corruption exists.
    """
    found = recognise(prompt)
    if found is None:
        return None
    if found.family in ("multiple-choice", "inline-choice") and not answer:
        answer = model_answer(model, prompt)
    chosen = family(found.family)
    return _first_fitting(model, prompt, chosen.corruptions(found, None, answer))


def propose_answer(prompt: str) -> str | None:
    """The answer a family expects for a recognised prompt (as text, e.g. 'Mary'), or None."""
    found = recognise(prompt)
    return found.answer if found else None


def template_paraphrases(
    model,
    task: PromptTask,
    n: int = 9,
    seed: int = 0,
    max_tokens: int = 256,
    fill: bool = True,
) -> list[ParaphrasePair]:
    """n paraphrase pairs of a recognised prompt, generated offline from a seed and checked.

    Rewrites keep the prompt's answer (names, subject, operands or correct option), each with a
    corruption of equal token length: the family's own, else the prompt's corruption carried
    over (``transfer_corruption``). With ``fill``, pairs the model answers differently are
    kept (flagged) and more are drawn until n usable ones exist or the family runs out, so the
    list can be longer than n. Raises ParaphraseError when no family recognises the prompt.
    """
    if n < 0:
        raise ParaphraseError(f"The number of paraphrases must be 0 or more, not {n}.")
    found = recognise(task.clean)
    if found is None:
        raise ParaphraseError(
            "The prompt matches none of the built-in template families (indirect object, arithmetic, "
            "factual recall, multiple choice); give paraphrases in a file or use the openai source."
        )
    chosen = family(found.family)
    rng = random.Random(seed)
    if isinstance(chosen, (MultipleChoiceFamily, InlineChoiceFamily)):
        variants = chosen.variants(found, rng, answer=task.answer)
        if not variants and isinstance(chosen, InlineChoiceFamily):
            raise ParaphraseError(
                f"The answer {task.answer!r} is not one of the options' letters; give the correct "
                "option's letter as the answer, e.g. ' A'."
            )
        if not variants:
            raise ParaphraseError(
                f"The answer {task.answer!r} is neither an option's letter nor an option's text; "
                "give the correct option's letter (' B') or its text as the answer."
            )
    else:
        variants = chosen.variants(found, rng)
    source = f"template:{found.family}"
    candidates = iter(variants)
    result: list[ParaphrasePair] = []

    def draw(count: int) -> list[ParaphrasePair]:
        drawn = []
        for text, variant in candidates:
            corruption_rng = random.Random(f"{seed}:{text}")
            answer = task.answer if found.family in ("multiple-choice", "inline-choice") else None
            own = chosen.corruptions(variant, corruption_rng, answer)
            carried = (
                [transfer_corruption(task.clean, task.corrupted, text)] if task.corrupted.strip() else []
            )
            corrupted = _first_fitting(model, text, itertools.chain(own, filter(None, carried)))
            if corrupted is None:
                continue
            drawn.append(ParaphrasePair(text, corrupted, task.answer, task.foils, source, task.metric))
            if len(drawn) == count:
                break
        return drawn

    batch = draw(n)
    while batch:
        result += validate_pairs(model, task, batch, max_tokens=max_tokens)
        usable = sum(pair.usable() for pair in result)
        if not fill or usable >= n or len(result) >= 4 * max(n, 1):
            break
        batch = draw(n - usable)
    return result


# ----- an LLM through an OpenAI-compatible endpoint ------------------------------------------
_SYSTEM_PROMPT = (
    "You write paraphrases of prompts for interpretability experiments on a language model. "
    "Reply with JSON only, no prose and no code fence."
)


def _llm_request(task: PromptTask, n: int) -> str:
    return (
        f"Prompt: {json.dumps(task.clean)}\n"
        f"The model's next token should be {json.dumps(task.answer)}"
        + (f" rather than {json.dumps(list(task.foils))}" if task.foils else "")
        + ".\n"
        f"Write {n} paraphrases of the prompt. Each must keep the meaning, end where the prompt ends so "
        f"that the same next token {json.dumps(task.answer)} is still the right continuation, and use "
        "different wording from the prompt and from each other. For each paraphrase also write a "
        "corrupted version that replaces the key fact (a name, number, subject or the correct option) "
        "with a different one of the same length, so that the right next token changes; change "
        "nothing else.\n"
        'Reply exactly as: {"pairs": [{"paraphrase": "...", "corrupted": "..."}, ...]}'
    )


_FENCE = re.compile(r"^```(?:json)?\s*\n(?P<body>.*)\n```$", re.DOTALL)


def parse_llm_reply(content: str | None, task: PromptTask, n: int, source: str) -> list[ParaphrasePair]:
    """The LLM's reply as pairs. Strict: the whole reply is one JSON object (at most wrapped in
    one ```json fence) with a list ``pairs`` of objects holding strings ``paraphrase`` and
    ``corrupted``; anything else is a ParaphraseError. Items past n are dropped."""
    text = (content or "").strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced["body"].strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ParaphraseError(
            f"The LLM's reply is not the JSON asked for ({error.msg}); try again or choose another model."
        ) from None
    items = data.get("pairs") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ParaphraseError("The LLM's reply has no list 'pairs'; try again or choose another model.")
    pairs = []
    for number, item in enumerate(items[:n], start=1):
        clean = item.get("paraphrase") if isinstance(item, dict) else None
        corrupted = item.get("corrupted") if isinstance(item, dict) else None
        pair = ParaphrasePair(
            clean if isinstance(clean, str) else "",
            corrupted if isinstance(corrupted, str) else "",
            task.answer,
            task.foils,
            source,
            task.metric,
        )
        if not isinstance(item, dict) or not isinstance(clean, str) or not isinstance(corrupted, str):
            pair.problems.append(f"the LLM's item {number} lacks a 'paraphrase' or 'corrupted' string")
        elif not clean.strip() or not corrupted.strip():
            pair.problems.append(f"the LLM's item {number} has an empty paraphrase or corruption")
        pairs.append(pair)
    return pairs


def llm_settings(
    llm_model: str | None = None, base_url: str | None = None, api_key: str | None = None
) -> tuple[str, str | None, str]:
    """(model, base URL, key) from the arguments, else OPENAI_BASE_URL / OPENAI_API_KEY /
    CIRCUITVIZ_LLM_MODEL; ParaphraseError when no key is set."""
    key = api_key or os.environ.get("OPENAI_API_KEY", "")
    if not key:
        raise ParaphraseError(
            "No OpenAI API key is set; set OPENAI_API_KEY (and OPENAI_BASE_URL for another "
            "OpenAI-compatible endpoint), or use the template or file source."
        )
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    name = llm_model or os.environ.get("CIRCUITVIZ_LLM_MODEL") or DEFAULT_LLM_MODEL
    return name, url, key


def llm_paraphrases(
    model,
    task: PromptTask,
    n: int = 9,
    seed: int = 0,
    llm_model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 120.0,
    max_tokens: int = 256,
) -> list[ParaphrasePair]:
    """n paraphrase pairs written by an LLM behind an OpenAI-compatible chat endpoint, checked.

    The endpoint, key and model come from the arguments or OPENAI_BASE_URL, OPENAI_API_KEY and
    CIRCUITVIZ_LLM_MODEL (default gpt-4o-mini). Errors (no key, unreachable endpoint, refused
    key, unknown model, a reply that is not the JSON asked for) are one ParaphraseError sentence.
    """
    import openai

    name, url, key = llm_settings(llm_model, base_url, api_key)
    client = openai.OpenAI(api_key=key, base_url=url, timeout=timeout, max_retries=1)
    where = url or "api.openai.com"
    try:
        response = client.chat.completions.create(
            model=name,
            messages=[
                {"role": "system", "content": _SYSTEM_PROMPT},
                {"role": "user", "content": _llm_request(task, n)},
            ],
            seed=seed,
            temperature=0.7,
        )
    except openai.AuthenticationError:
        raise ParaphraseError(
            f"The LLM endpoint {where} refused the API key; check OPENAI_API_KEY."
        ) from None
    except openai.NotFoundError:
        raise ParaphraseError(
            f"The LLM endpoint {where} has no model {name!r} (or no chat API there); choose a model it serves."
        ) from None
    except openai.APIConnectionError as error:
        raise ParaphraseError(
            f"Could not reach the LLM endpoint {where} ({error}); check OPENAI_BASE_URL or use the template source."
        ) from None
    except openai.APIStatusError as error:
        raise ParaphraseError(
            f"The LLM endpoint {where} answered with an error ({error.status_code}); try again later."
        ) from None
    choices = getattr(response, "choices", None) or []
    content = choices[0].message.content if choices else None
    pairs = parse_llm_reply(content, task, n, f"openai:{name}")
    return validate_pairs(model, task, pairs, max_tokens=max_tokens)


# ----- one entry point -----------------------------------------------------------------------
def gather_paraphrases(
    model,
    task: PromptTask,
    source: str = "template",
    n: int = 9,
    seed: int = 0,
    text: str = "",
    llm_model: str | None = None,
    max_tokens: int = 256,
    progress: Callable[[str, float], None] | None = None,
) -> list[ParaphrasePair]:
    """Checked pairs from one source: 'template', 'openai' or 'file' (``text`` holds the pairs)."""
    if source not in SOURCES:
        raise ParaphraseError(f"Unknown paraphrase source {source!r}; choose one of {', '.join(SOURCES)}.")
    if progress:
        progress("paraphrases", 0.0)
    if source == "template":
        pairs = template_paraphrases(model, task, n, seed, max_tokens=max_tokens)
    elif source == "openai":
        pairs = llm_paraphrases(model, task, n, seed, llm_model=llm_model or None, max_tokens=max_tokens)
    else:
        if not text.strip():
            raise ParaphraseError(
                "The file source needs paraphrases; give a file (--paraphrases FILE) or type them in."
            )
        pairs = validate_pairs(model, task, parse_paraphrases(text, task), max_tokens=max_tokens)
    if progress:
        progress("paraphrases", 1.0)
    return pairs


def check_task(model, task: PromptTask, max_tokens: int = 256) -> None:
    """TaskError for an unusable prompt, with a proposed corruption when the prompt lacks one."""
    if not task.corrupted.strip() and task.clean.strip():
        proposal = propose_corruption(model, task.clean, task.answer)
        if proposal is not None:
            raise TaskError(
                f"The corrupted prompt is empty; give the prompt with its key fact replaced, for example {proposal!r}."
            )
    prepare_task(model, task, max_tokens=max_tokens)
