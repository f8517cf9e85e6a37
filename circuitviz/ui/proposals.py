"""What the inputs propose for a new prompt: answer, foil and corrupted prompt, each with why.

The answer is the model's own top next token (a circuit explains what the model does); the foil
is, for a task the templates recognise as indirect object identification, the other name, else
the model's next most likely token. The corrupted prompt comes from the template family that
recognises the prompt; when none does, a word the templates know (a name, a country, a
landmark) is swapped for another of the same token length, and the note says which; when
nothing fits, the note says so and how to write one. The paraphrase templates are imported here
only, so the rest of the app does not depend on where they live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Proposal:
    """Values for a new prompt and the sentences that say where they came from."""

    answer: str
    foil: str
    corrupted: str
    corrupted_note: str
    foil_note: str = ""


def _templates():
    """The template families and their word lists, imported on first use (they import torch)."""
    from types import SimpleNamespace

    from ..query import templates
    from ..query.families import factual, ioi, recognise

    return SimpleNamespace(
        recognise=recognise,
        propose_corruption=templates.propose_corruption,
        IOI_NAMES=ioi.IOI_NAMES,
        FACT_RELATIONS=factual.FACT_RELATIONS,
    )


def _single_token(model, text: str) -> bool:
    from ..models.adapter import adapter_of  # torch is loaded once a model is

    return int(adapter_of(model).to_tokens(text, prepend_bos=False, truncate=False).shape[1]) == 1


def _token_count(model, text: str) -> int:
    from ..models.adapter import adapter_of

    return int(adapter_of(model).to_tokens(text, truncate=False).shape[1])


def propose(model, prompt: str, top_tokens: list[str]) -> Proposal:
    """Answer, foil and corrupted prompt for ``prompt``, given the model's top next tokens."""
    templates = _templates()
    found = templates.recognise(prompt)
    answer = top_tokens[0] if top_tokens else ""
    foil, foil_note = "", ""
    if found is not None and found.family == "ioi":
        other = " " + str(found.slots.get("B", ""))
        if other.strip() and other != answer and _single_token(model, other):
            foil, foil_note = other, "The foil is the other name of the prompt (the repeated subject)."
    if not foil:
        foil = next((token for token in top_tokens[1:] if token != answer), "")
        if foil:
            foil_note = "The foil is the model's next most likely token; pick a more telling one if you like."
    corrupted, note = propose_corruption(model, prompt, answer)
    return Proposal(answer, foil, corrupted, note, foil_note)


def propose_corruption(model, prompt: str, answer: str) -> tuple[str, str]:
    """(corrupted prompt, the sentence saying how it was made); ('', why not) when none fits."""
    templates = _templates()
    found = templates.recognise(prompt)
    if found is not None:
        try:
            proposal = templates.propose_corruption(model, prompt, answer.strip() or None)
        except (ValueError, KeyError, IndexError):  # a template that fails on odd input proposes nothing
            proposal = None
        if proposal:
            return proposal, f"Proposed by the {found.label} template; edit it freely."
    swapped = swap_known_word(model, prompt)
    if swapped is not None:
        corrupted, word, other = swapped
        return corrupted, (
            f"Proposed by swapping {word!r} for {other!r} (a word the templates know, same token count); "
            "check that it changes the answer."
        )
    return "", (
        "No corrupted prompt could be proposed: the prompt matches no built-in template and holds no "
        "name, country or landmark they know; write it with the key word replaced, keeping the token count."
    )


def _known_words() -> dict[str, list[str]]:
    """{word: its replacements}: IOI names among themselves, subjects of each factual relation
    among those whose answer differs."""
    templates = _templates()
    words: dict[str, list[str]] = {}
    names = list(templates.IOI_NAMES)
    for name in names:
        words[name] = [other for other in names if other != name]
    for table, _ in templates.FACT_RELATIONS.values():
        for subject, fact in table.items():
            others = [other for other, value in table.items() if other != subject and value != fact]
            words.setdefault(subject, []).extend(o for o in others if o not in words.get(subject, []))
    return words


def swap_known_word(model, prompt: str) -> tuple[str, str, str] | None:
    """(corrupted prompt, word replaced, replacement) for the first known word of ``prompt`` that
    has a replacement of the same token count; None when none has."""
    known = _known_words()
    target = _token_count(model, prompt)
    by_length = sorted(known, key=len, reverse=True)  # "Eiffel Tower" before "Tower"
    for word in by_length:
        match = re.search(rf"\b{re.escape(word)}\b", prompt)
        if match is None:
            continue
        for other in known[word]:
            corrupted = prompt[: match.start()] + other + prompt[match.end() :]
            if _token_count(model, corrupted) == target:
                return corrupted, word, other
    return None
