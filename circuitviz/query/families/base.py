"""What every template family shares: the match record, the family interface, template regexes.

A family recognises prompts of one task (``match``), rewrites a recognised prompt keeping its
answer (``variants``) and corrupts it so the answer changes (``corruptions``). Templates are
format strings whose ``{slot}`` fields become named regex groups; prompts written with
punctuation as separate words ("store , John", as word-level tokenizers need) match too and
are rewritten the same way.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass

NAME = r"[A-Z][a-z]+"
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
