"""A prompt task: what the model is asked, what it should answer, and how the answer is scored.

A task is the clean query, a corrupted query of the same token length (the key fact or name
replaced), the answer token and one or more foil tokens. ``prepare_task`` checks it against a
model's tokenizer and turns every problem a user can cause into one clear sentence with the fix;
nothing is truncated or guessed silently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from ..models.adapter import adapter_of
from ..models.control_tokens import control_token_ids
from ..models.tokens import BYTE_PIECE
from .refusals import (
    EMPTY_CORRUPTED,
    EMPTY_PROMPT,
    NO_FOIL,
    foil_is_answer,
    prompt_over_context,
    prompt_over_limit,
    unequal_lengths,
)
from .text import given, shown, shown_token

METRICS = ("logit_diff", "logprob", "prob")
DEFAULT_MAX_TOKENS = 256


class TaskError(ValueError):
    """A task the user gave cannot be run; the message is one sentence that says how to fix it."""


@dataclass(frozen=True)
class PromptTask:
    """What the user asks: plain strings, serialisable, hashable into cache keys."""

    clean: str
    corrupted: str
    answer: str
    foils: tuple[str, ...] = ()
    metric: str = "logit_diff"

    def __post_init__(self):
        for name in ("clean", "corrupted", "answer", "metric"):
            if not isinstance(getattr(self, name), str):
                raise TaskError(f"The task's {name} is text, not {given(getattr(self, name))}.")
        foils = self.foils
        if isinstance(foils, str):  # tuple(' John') would be five one-character foils
            raise TaskError(
                f"The task's foils are a list of tokens: give [{given(foils)}], not {given(foils)}."
            )
        if not isinstance(foils, (list, tuple)) or not all(isinstance(foil, str) for foil in foils):
            raise TaskError(f"The task's foils are a list of tokens' text, not {given(foils)}.")
        object.__setattr__(self, "foils", tuple(foils))

    def to_dict(self) -> dict:
        data = asdict(self)
        data["foils"] = list(self.foils)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> PromptTask:
        return cls(
            clean=data["clean"],
            corrupted=data.get("corrupted", ""),
            answer=data["answer"],
            foils=tuple(data.get("foils", ())),
            metric=data.get("metric", "logit_diff"),
        )


@dataclass
class PreparedTask:
    """A task checked against a tokenizer, ready to run."""

    task: PromptTask
    clean_tokens: torch.Tensor  # [1, pos]
    corrupted_tokens: torch.Tensor  # [1, pos]
    answer_id: int
    foil_ids: tuple[int, ...]
    clean_str_tokens: list[str] = field(default_factory=list)
    corrupted_str_tokens: list[str] = field(default_factory=list)

    @property
    def n_positions(self) -> int:
        return int(self.clean_tokens.shape[1])


def str_tokens(model, ids) -> list[str]:
    """Each token id decoded on its own (what a user sees as the tokenisation)."""
    return [adapter_of(model).decode([int(token)]) for token in ids]


def _str_tokens(model, text: str, prepend_bos: bool) -> list[str]:
    return str_tokens(
        model, adapter_of(model).to_tokens(text, prepend_bos=prepend_bos, on_device=False)[0].tolist()
    )


def _quote_tokens(tokens: list[str], limit: int = 8) -> str:
    """Every token quoted briefly when there are at most ``limit``; else the first ``limit`` and how
    many more (the count of all is said once, by the caller)."""
    shown_tokens = " | ".join(shown_token(token, 12) for token in tokens[:limit])
    rest = len(tokens) - limit
    return shown_tokens + (f" | … and {rest:,} more" if rest > 0 else "")


def _first_difference(first: list[str], second: list[str]) -> str:
    """Where two tokenisations part, quoted briefly: 'at token 5: ' Mary' vs ' Ma''."""
    index = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
    mine = shown(first[index], 16) if index < len(first) else "nothing"
    theirs = shown(second[index], 16) if index < len(second) else "nothing"
    return f"they part at token {index + 1}: {mine} vs {theirs}"


# what each role's token is, for the sentence refusing an empty one: the foil is the wrong answer,
# and '--foil ""' was asked for "the token the model should predict" (the answer's wording)
_WANTED = {
    "answer": "the token the model should predict, e.g. ' Mary'",
    "foil": "a wrong answer the model could give instead, e.g. ' John'",
}


def single_token_id(model, text: str, role: str) -> int:
    """The vocabulary id of a one-token answer or foil; TaskError saying how it splits otherwise."""
    wanted = _WANTED.get(role, _WANTED["answer"])
    if text == "":
        raise TaskError(f"The {role} is empty; give {wanted}.")
    ids = adapter_of(model).to_tokens(text, prepend_bos=False, truncate=False, on_device=False)[0].tolist()
    if not ids:
        raise TaskError(
            f"The {role} {shown_token(text, 60)} gives no token (only characters the tokenizer drops); "
            f"give {wanted}."
        )
    if len(ids) != 1 and BYTE_PIECE.fullmatch(text.strip()):  # a byte token's name: no first piece helps
        raise TaskError(
            f"The {role} {shown_token(text, 30)} names a byte of a character, a token with no text of its "
            f"own, which typed text cannot give; give {wanted}."
        )
    if len(ids) != 1 and (trimmed := _without_typed_white_space(model, text)):
        spaced = " " + trimmed  # 'Paris ' after a prompt ending in a word: ' Paris' is the likelier
        also = (
            f" (or {shown(spaced, 30)}, one token with its leading space)"
            if not trimmed.startswith(" ") and adapter_of(model).token_count(spaced, prepend_bos=False) == 1
            else ""
        )
        raise TaskError(
            f"The {role} {shown_token(text, 30)} is {len(ids)} tokens "
            f"({_quote_tokens(_str_tokens(model, text, prepend_bos=False))}), not one: the white space typed "
            f"around the word is read as tokens of its own; use {shown_token(trimmed, 30)}{also}."
        )
    if len(ids) != 1:
        pieces = _str_tokens(model, text, prepend_bos=False)
        # neither white space alone (' ' of ' 🍕') nor a byte of a character (SmolLM2's ' <0xF0><0x9F>'
        # of ' 🍕', several tokens once typed) is a token to offer
        first = next((piece for piece in pieces if piece.strip() and not BYTE_PIECE.search(piece)), None)
        if first is None:
            raise TaskError(
                f"The {role} {shown_token(text, 30)} is {len(ids)} tokens ({_quote_tokens(pieces)}): this model has "
                f"no token for it (its tokens are bytes of its characters); give {wanted}."
            )
        spaced = " " + text
        one_with_space = (
            not text.startswith(" ")
            and len(ids) <= 4
            and adapter_of(model).token_count(spaced, prepend_bos=False) == 1
        )
        hint = f" (or {shown(spaced, 30)}, one token with its leading space)" if one_with_space else ""
        raise TaskError(
            f"The {role} {shown_token(text, 30)} is {len(ids)} tokens ({_quote_tokens(pieces)}), not one; "
            f"use a single token such as {shown_token(first, 16)}{hint}."
        )
    if ids == [_unknown_id(model)]:  # ' Tokyo' and ' Madrid' both read '<unk>': "the answer is a foil"
        raise TaskError(
            f"The {role} {shown_token(text, 30)} is not in this model's vocabulary (its tokenizer reads it as "
            f"{_unknown_piece(model)!r}); use a token the model knows."
        )
    if len(ids) == 1 and ids[0] in control_token_ids(model):  # '<start_of_image>', '<eos>': not text
        raise TaskError(
            f"The {role} {shown_token(text, 30)} names a control token of this model (it marks a turn, an image "
            f"or the end of a text, not text); give {wanted}."
        )
    return int(ids[0])


def _without_typed_white_space(model, text: str) -> str | None:
    """The word of ``text`` as one token, written with one leading space where ``text`` begins with
    white space and none where it does not (the other way where only that is one token), when
    ``text`` holds white space beyond that ('  Paris', 'Paris ', '\tParis', 'Paris\n'); else None.
    Such an answer was told to use its first piece: '␣␣' (2 spaces) for '  Paris', '\t' for a tab."""
    word = text.strip()
    if not word or text in (word, " " + word) or any(character.isspace() for character in word):
        return None
    count = adapter_of(model).token_count
    tries = (" " + word, word) if text[0].isspace() else (word, " " + word)
    return next((candidate for candidate in tries if count(candidate, prepend_bos=False) == 1), None)


def prepare_task(
    model, task: PromptTask, max_tokens: int = DEFAULT_MAX_TOKENS, need_corrupted: bool = True
) -> PreparedTask:
    """Tokenise and validate a task for ``model``; raise TaskError with one fixing sentence."""
    if task.metric not in METRICS:
        raise TaskError(f"Unknown metric {shown(task.metric, 30)}; choose one of {', '.join(METRICS)}.")
    if not task.clean.strip():
        raise TaskError(EMPTY_PROMPT)
    clean_tokens = adapter_of(model).to_tokens(task.clean, truncate=False)
    if clean_tokens.shape[1] > max_tokens:
        raise TaskError(prompt_over_limit(clean_tokens.shape[1], max_tokens, "(--max-tokens)"))
    context = getattr(model.cfg, "n_ctx", None)
    if context and clean_tokens.shape[1] > context:
        raise TaskError(prompt_over_context(clean_tokens.shape[1], context))
    corrupted_tokens = clean_tokens
    if need_corrupted or task.corrupted:
        if not task.corrupted.strip():
            raise TaskError(EMPTY_CORRUPTED)
        corrupted_tokens = adapter_of(model).to_tokens(task.corrupted, truncate=False)
        if corrupted_tokens.shape != clean_tokens.shape:
            clean_pieces = _str_tokens(model, task.clean, prepend_bos=True)
            corrupted_pieces = _str_tokens(model, task.corrupted, prepend_bos=True)
            where = _first_difference(clean_pieces, corrupted_pieces)
            raise TaskError(unequal_lengths(len(clean_pieces), len(corrupted_pieces), where))
    answer_id = single_token_id(model, task.answer, "answer")
    if task.metric == "logit_diff" and not task.foils:
        raise TaskError(NO_FOIL)
    foil_ids = tuple(single_token_id(model, foil, "foil") for foil in task.foils)
    if answer_id in foil_ids:
        raise TaskError(foil_is_answer(task.answer))
    return PreparedTask(
        task=task,
        clean_tokens=clean_tokens,
        corrupted_tokens=corrupted_tokens,
        answer_id=answer_id,
        foil_ids=foil_ids,
        clean_str_tokens=_str_tokens(model, task.clean, prepend_bos=True),
        corrupted_str_tokens=_str_tokens(model, task.corrupted, prepend_bos=True) if task.corrupted else [],
    )


def _unknown_id(model) -> int | None:
    """The tokenizer's unknown-token id (a word-level tokenizer reads every word outside its
    vocabulary as it), or None."""
    tokenizer = adapter_of(model).tokenizer
    unknown = getattr(tokenizer, "unk_token_id", None) if tokenizer is not None else None
    return unknown if isinstance(unknown, int) else None


def _unknown_piece(model) -> str:
    return str(getattr(adapter_of(model).tokenizer, "unk_token", None) or "<unk>")


def unknown_words(model, text: str) -> list[str]:
    """The words of ``text`` (split on white space) the model's tokenizer reads as its unknown token,
    each once, in order; [] for a tokenizer that has none or knows them all (byte-level ones)."""
    unknown = _unknown_id(model)
    if unknown is None or not text.strip():
        return []
    adapter = adapter_of(model)
    if unknown not in adapter.to_tokens(text, prepend_bos=False, truncate=False, on_device=False)[0].tolist():
        return []
    found = []
    for word in dict.fromkeys(text.split()):
        ids = adapter.to_tokens(" " + word, prepend_bos=False, truncate=False, on_device=False)[0].tolist()
        if unknown in ids:
            found.append(word)
    return found


def _quote_words(words: list[str]) -> str:
    quoted = ", ".join(shown(word, 20) for word in list(dict.fromkeys(words))[:6])
    return quoted + (f" and {len(set(words)) - 6} more" if len(set(words)) > 6 else "")


def unknown_words_note(model, task: PromptTask) -> str | None:
    """One sentence when the prompt or the corrupted prompt holds words the tokenizer does not know
    (the run goes on: each reads as the unknown token, which a user may not expect), else None."""
    parts = []
    for text, what in ((task.clean, "the prompt"), (task.corrupted, "the corrupted prompt")):
        words = unknown_words(model, text)
        if words:
            parts.append(f"{_quote_words(words)} of {what}")
    if not parts:
        return None
    adapter = adapter_of(model)
    same = task.corrupted and adapter.to_tokens(task.clean, truncate=False).equal(
        adapter.to_tokens(task.corrupted, truncate=False)
    )  # 'Japan' for 'Spain', both '<unk>': a difference of +0 and NaN figures, unexplained
    outcome = (
        "so the prompt and the corrupted prompt are the same tokens and nothing is corrupted; change a word "
        "the model knows"
        if same
        else "so the circuit sees that token there"
    )
    return (
        f"This model's tokenizer does not know {' and '.join(parts)}: it reads each as "
        f"{_unknown_piece(model)!r}, {outcome}."
    )
