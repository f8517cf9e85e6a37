"""What every template family shares: the match record, the family interface, template regexes.

A family recognises prompts of one task (``match``), rewrites a recognised prompt keeping its
answer (``variants``) and corrupts it so the answer changes (``corruptions``). Templates are
format strings whose ``{slot}`` fields become named regex groups; prompts written with
punctuation as separate words ("store , John", as word-level tokenizers need) match too and
are rewritten the same way.
"""

from __future__ import annotations

import difflib
import random
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass

# the letters of names written in Latin script ("José", "María", "Zoë", "Łukasz"), capital and small:
# the ASCII ones alone left "When José and María went to the market, María gave a book to" unread
_LATIN = [chr(code) for code in (*range(0xC0, 0x100), *range(0x100, 0x180)) if chr(code) not in "×÷"]
UPPER = "A-Z" + "".join(letter for letter in _LATIN if letter.isupper())
LOWER = "a-z" + "".join(letter for letter in _LATIN if letter.islower())
NAME = rf"[{UPPER}][{LOWER}]+"
WORD = r"[a-z]+"


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
    # the prompt as typed, when it was recognised single-spaced (``single_spaced``): its own
    # corruptions are written back with its white space (``respaced``)
    typed: str | None = None


class TemplateFamily:
    """A family of prompts that share a task: recognise, rewrite keeping the answer, corrupt.

    ``needs_answer``: the family cannot tell the answer from the prompt (which option is
    correct), so its rewrites and corruptions take the task's answer.
    """

    name: str = ""
    label: str = ""
    needs_answer: bool = False
    # a rewrite's first corruption is the prompt's own, carried over (``prompt_corruption``): the
    # rewrite's metric then contrasts the answer with the foil the prompt's corruption leads to
    keeps_prompt_corruption: bool = False

    def match(self, prompt: str) -> FamilyMatch | None:
        raise TypeError(f"{type(self).__name__} does not recognise prompts")

    def variants(
        self, found: FamilyMatch, rng: random.Random, answer: str | None = None
    ) -> list[tuple[str, FamilyMatch]]:
        """Rewrites of the prompt that keep its answer, in a seeded order, each with its slots."""
        raise TypeError(f"{type(self).__name__} has no rewrites")

    def corruptions(self, found: FamilyMatch, rng: random.Random | None, answer: str | None) -> Iterator[str]:
        """Corrupted versions of a matched prompt, most preferred first (rng None: fixed order)."""
        raise TypeError(f"{type(self).__name__} has no corruptions")

    def prompt_corruption(
        self, found: FamilyMatch, corrupted: FamilyMatch | None, carried: str | None
    ) -> str | None:
        """The rewrite ``found`` corrupted as the prompt is: by default the prompt's substitutions
        carried over word for word (``carried``); ``corrupted`` is the corrupted prompt recognised."""
        return carried

    def unusable_answer(self, answer: str) -> str:
        """The sentence for a task answer no rewrite can keep (families that need the answer)."""
        return f"The {self.label} templates cannot keep the answer {answer!r}."


def template_regex(template: str, slots: dict[str, str]) -> re.Pattern:
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


def is_spaced(text: str) -> bool:
    """Whether punctuation is written as separate words ("store , John")."""
    return bool(re.search(r"\w\s[,.?!:;](\s|$)", text))


def fill_template(template: str, values: dict, spaced: bool) -> str:
    """A template's text with its slots filled, punctuation spaced out when the prompt's is."""
    text = template.format(**values)
    if spaced:
        text = re.sub(r"(?<=\w)([,.?!:;])(?=\s|$)", r" \1", text)
    return text


def split_trailing(text: str) -> tuple[str, str]:
    """(the text without trailing white space, that white space)."""
    body = text.rstrip()
    return body, text[len(body) :]


_WHITE = re.compile(r"\s+")


def single_spaced(text: str) -> str:
    """``text`` with its white space as the templates write it: none before the first word, one
    space between words (a line break, a tab, two spaces or a no-break space read as one); the
    white space after the last word is kept, as every family keeps it."""
    body, trailing = split_trailing(text)
    return _WHITE.sub(" ", body.lstrip()) + trailing


def respaced(typed: str, text: str) -> str:
    """``text``, a version of ``single_spaced(typed)`` with some words replaced, written with
    ``typed``'s own white space: each word it keeps has the white space after it that it has in
    ``typed``, each replacement the white space after the words it replaces (one space inside a
    replacement of several words), so a corrupted prompt differs from the typed one in its words
    alone."""
    body, trailing = split_trailing(typed)
    if trailing and text.endswith(trailing):
        text = text[: -len(trailing)]
    lead = body[: len(body) - len(body.lstrip())]
    old, gaps = body.split(), _WHITE.findall(body.strip())
    new = text.split()
    words, after = [], []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for operation, i1, i2, j1, j2 in matcher.get_opcodes():
        if operation == "delete":
            if after and i2 - 1 < len(gaps):
                after[-1] = gaps[i2 - 1]
            continue
        for offset, j in enumerate(range(j1, j2)):
            words.append(new[j])
            if operation == "equal":
                index = i1 + offset
            else:  # the gap after the last replaced word follows the last new one
                index = i2 - 1 if j == j2 - 1 and i2 > i1 else None
            after.append(gaps[index] if index is not None and index < len(gaps) else " ")
    return lead + "".join(word + gap for word, gap in zip(words, after[:-1] + [""])) + trailing
