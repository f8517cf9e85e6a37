"""The built-in template families: recognise a prompt's task, rewrite it, corrupt it, offline.

One module per family (indirect object identification, arithmetic, factual recall, MMLU
questions, multiple choice on lines or inline, any relation of a named subject, occupation
and pronoun); ``recognise`` tries them in order and
``family`` finds one by name. ``EXAMPLE_TASKS`` holds one prompt per family that Gemma-3-270M
answers correctly, for the app and the benchmarks.
"""

from __future__ import annotations

import dataclasses

from ...core.tasks import PromptTask
from ..pairs import ParaphraseError
from .arithmetic import ArithmeticFamily
from .base import FamilyMatch, TemplateFamily, single_spaced
from .factual import FactualFamily
from .inline_choice import InlineChoiceFamily
from .ioi import IOIFamily
from .mmlu import MMLUFamily
from .multiple_choice import MultipleChoiceFamily
from .occupation import OccupationFamily
from .relation import RelationFamily

# factual templates are anchored sentences; IOI's loose pattern comes last so it cannot take them;
# factual recall's known relations before the general relation of a named subject
# MMLU's prompts (a subject preamble first) before the general multiple-choice family
FAMILIES: tuple[TemplateFamily, ...] = (
    MMLUFamily(),
    MultipleChoiceFamily(),
    InlineChoiceFamily(),
    ArithmeticFamily(),
    FactualFamily(),
    RelationFamily(),
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

__all__ = ["EXAMPLE_TASKS", "FAMILIES", "FamilyMatch", "TemplateFamily", "family", "recognise"]


def recognise(prompt: str) -> FamilyMatch | None:
    """The template family a prompt belongs to, with its slots, or None. A prompt no family
    recognises as typed is tried single-spaced (``base.single_spaced``): "The capital of France
    is" pasted over two lines, or with a space before it, is factual recall, its match keeping
    the typed prompt (``FamilyMatch.typed``); the templates wrote one space between words, and
    such a prompt was told it matched none."""
    for text in dict.fromkeys((prompt, single_spaced(prompt))):
        for candidate in FAMILIES:
            found = candidate.match(text)
            if found is not None:
                return found if text == prompt else dataclasses.replace(found, typed=prompt)
    return None


def family(name: str) -> TemplateFamily:
    """The family called ``name``; ParaphraseError naming the others when there is none."""
    for candidate in FAMILIES:
        if candidate.name == name:
            return candidate
    raise ParaphraseError(
        f"Unknown template family {name!r}; choose one of {', '.join(f.name for f in FAMILIES)}."
    )
