"""What the inputs propose for a new prompt: answer, foil and corrupted prompt, each with why.

The answer is among the model's own top next tokens (a circuit explains what the model does): the
most likely whose task passes the meaningful-task check (``task_validity``), a content word before
a function word. The foil is, for a task the templates recognise as indirect object
identification, the other name, else what the model predicts after the corrupted prompt (its most
likely other token when there is none). The corrupted prompt comes from the template family that
recognises the prompt; when none does, a word the templates know (a name, common first names
such as Mary and John among them, a country, a landmark) is swapped for another of the same
token length, and the note says which; when nothing fits, the note says why, naming the words at
fault, and how to write one. The app's inputs (through
``ui.loaders``) and the command line (``discover`` without ``--corrupted``) read it; the templates
are imported on first use, so the first paint stays free of torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import SimpleNamespace

from ..core.text import chance_text, left_out_sentence, shown_token


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
    # here, not at the top: keeps torch out of the first paint
    from . import templates
    from .families import factual, ioi, recognise

    return SimpleNamespace(
        recognise=recognise,
        propose_corruption=templates.propose_corruption,
        IOI_NAMES=ioi.IOI_NAMES,
        COMMON_NAMES=ioi.COMMON_NAMES,
        FACT_RELATIONS=factual.FACT_RELATIONS,
    )


def single_token(model, text: str) -> bool:
    """Whether ``text`` reads as one token of ``model`` (a byte of a character, ' <0xE5>', does not:
    typed, its name is several tokens)."""
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of  # torch is loaded once a model is

    return adapter_of(model).token_count(text, prepend_bos=False) == 1


def offered_tokens(model, tokens: list[str]) -> tuple[list[str], list[str]]:
    """(the next tokens offered as answer and foil, those left out): a token whose text reads as
    several tokens cannot be a run's answer or foil (a byte of a character, SmolLM2's ' <0xE5>'
    after a Chinese word: clicked, the box refused its name as 6 tokens), nor can a control token
    (``models.control_tokens``: Gemma's '<start_of_image>' and '<eos>', not text). All are offered
    where none is left, so the choices are never empty."""
    from ..models.control_tokens import control_token_texts

    controls = control_token_texts(model)
    offered = [token for token in tokens if token not in controls and single_token(model, token)]
    if not offered:
        return tokens, []
    return offered, [token for token in tokens if token not in offered]


def left_out_line(model, left_out: list[str], probability: dict[str, float]) -> str:
    """The line under the choices naming the next tokens ``offered_tokens`` left out, with their
    chances, and why (``core.text.left_out_sentence``)."""
    from ..models.control_tokens import control_token_texts

    controls = control_token_texts(model)
    return left_out_sentence(
        [token for token in left_out if token not in controls],
        probability,
        [token for token in left_out if token in controls],
    )


def _own_text(model, text: str) -> str:
    """``text`` as the model's tokens read it (``models.tokens.token_pieces``, joined)."""
    from ..models.adapter import adapter_of
    from ..models.tokens import own_text

    return own_text(adapter_of(model), text)


CANDIDATE_ANSWERS = 5  # the model's top next tokens tried as the answer
UNLIKELY = 0.05  # an answer the model gives less than this is one it barely predicts


def barely_predicts(answer: str, chance: float, top: str) -> bool:
    """Whether the model barely predicts ``answer`` after the prompt: its probability ``chance``
    is below ``UNLIKELY`` and it is not the model's top token ``top`` (the one check behind
    discover's and the app's sentence and ``batch``'s line)."""
    return chance < UNLIKELY and top != answer


def answer_chance(model, task) -> tuple[float, str, float] | None:
    """(the answer's probability after the clean prompt, the model's top next token, that token's
    probability); None when the task has no prompt or answer, or the answer is not one token (the
    task's own check refuses that, in its own sentence)."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import TaskError, single_token_id
    from ..labels.logit_lens import token_probability

    if not task.clean.strip() or not task.answer:
        return None
    try:
        answer_id = single_token_id(model, task.answer, "answer")
    except TaskError:
        return None
    return token_probability(model, task.clean, answer_id)


def unlikely_answer_sentence(
    answer: str, chance: float, top: str, top_chance: float, way_out: str
) -> str | None:
    """The sentence for an answer the model barely predicts after the prompt (below
    ``UNLIKELY``, and not its top token), ending with ``way_out``; None otherwise. A circuit
    explains what the model does, and it hardly does this (the app's inputs and the command line)."""
    if not barely_predicts(answer, chance, top):
        return None
    return (
        f"The model gives {shown_token(answer)} only {chance_text(chance)} after this prompt (its most likely "
        f"next token is {shown_token(top)}, {chance_text(top_chance)}): a circuit for an answer the model barely predicts "
        f"explains little of what it does; {way_out}."
    )


def own_answer_sentence(answer: str, foils, chance: float | None, top: str, top_chance: float) -> str | None:
    """The sentence beside a result when the model's own top next token after the clean prompt
    is not the answer (``chance``: the answer's probability, None when not known): the circuit then
    explains what raises the answer (over the foil), not what the model itself says; None when
    the model's top token is the answer."""
    if top == answer:
        return None
    said = f" ({chance_text(chance)})" if chance is not None else ""
    over = f" over {' and '.join(shown_token(foil) for foil in foils)}" if foils else ""
    return (
        f"The model's own top next token here is {shown_token(top)} ({chance_text(top_chance)}), not the "
        f"answer {shown_token(answer)}{said}: the circuit explains what raises {shown_token(answer)}{over}, "
        "not the model's own answer."
    )


def propose(model, prompt: str, top_tokens: list[str]) -> Proposal:
    """Answer, foil and corrupted prompt for ``prompt``, given the model's top next tokens: among
    the top ``CANDIDATE_ANSWERS`` tokens as the answer, the most likely one whose task passes the
    meaningful-task check (``task_validity.preferred_task``), a content word before a function word.
    Only tokens whose text is one token again are proposed (all of them where none is): a byte of a
    character (SmolLM2's ' <0xE5>' of a Chinese word) filled the answer box with text of 6 tokens,
    which the box refused at once."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import PromptTask
    from ..measure.task_validity import preferred_task, task_gaps

    top_tokens = offered_tokens(model, top_tokens)[0]
    candidates = [
        proposal_for(model, prompt, answer, top_tokens) for answer in top_tokens[:CANDIDATE_ANSWERS]
    ]
    if len(candidates) <= 1:
        return candidates[0] if candidates else proposal_for(model, prompt, "", top_tokens)
    tasks = [PromptTask(prompt, c.corrupted, c.answer, (c.foil,) if c.foil else ()) for c in candidates]
    usable = [index for index, c in enumerate(candidates) if c.corrupted and c.foil]
    if not usable:
        return candidates[0]
    gaps = task_gaps(model, [tasks[index] for index in usable])
    return candidates[usable[preferred_task([tasks[index] for index in usable], gaps)]]


def proposal_for(
    model, prompt: str, answer: str, top_tokens: list[str], corrupted: str | None = None
) -> Proposal:
    """The foil and corrupted prompt proposed for ``answer`` (the foil for ``corrupted`` when one
    is given: then it is kept, with no note)."""
    note = ""
    if corrupted is None:
        corrupted, note = propose_corruption(model, prompt, answer)
    foil, foil_note = propose_foil(model, prompt, corrupted, answer)
    if not foil:
        foil = next((token for token in top_tokens if token != answer and single_token(model, token)), "")
        if foil:
            foil_note = (
                "The foil is the model's most likely other token; pick a more telling one if you like."
            )
    return Proposal(answer, foil, corrupted, note, foil_note)


def propose_foil(model, prompt: str, corrupted: str, answer: str) -> tuple[str, str]:
    """(foil, the sentence saying where it came from) for ``answer``: the other name of an
    indirect-object prompt, else what the model predicts after ``corrupted``; ('', '') when
    neither gives one."""
    found = _templates().recognise(prompt)
    if found is not None and found.family == "ioi":
        other = " " + str(found.slots.get("B", ""))
        if other.strip() and single_token(model, other):
            # the model's token as its tokenizer has it: a word-level tokenizer's has no space
            # (' John' was proposed, and shown as '·John', for its token 'John')
            other = _own_text(model, other)
            if other != answer:
                return other, "The foil is the other name of the prompt (the repeated subject)."
    foil = _corrupted_prediction(model, corrupted, answer) if corrupted.strip() else ""
    if foil:
        return (
            foil,
            "The foil is what the model predicts after the corrupted prompt; pick another if you like.",
        )
    return "", ""


def _corrupted_prediction(model, corrupted: str, answer: str) -> str:
    """The model's most likely next token after the corrupted prompt other than ``answer`` (the
    answer the corruption leads to: the foil its metric then falls towards), '' when none. A token
    whose text is not one token again is passed over: a prompt pasted with no-break spaces
    proposed Gemma's byte token '<0xC2>', which the foil box refused at once."""
    # here, not at the top: keeps torch out of the first paint
    from ..labels.logit_lens import next_token_probabilities

    tokens = [token for token, _ in next_token_probabilities(model, corrupted, 4)]
    return next(
        (token for token in tokens if token != answer and token.strip() and single_token(model, token)), ""
    )


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
            read = (
                ", which reads the prompt's line breaks, tabs and leading, repeated or no-break spaces as "
                "single spaces (the model reads the prompt as typed, and the corrupted prompt keeps them)"
                if found.typed is not None
                else ""
            )
            return proposal, f"Proposed by the {found.label} template{read}; edit it freely."
    swapped = swap_known_word(model, prompt)
    if swapped is not None:
        corrupted, word, other = swapped
        return corrupted, (
            f"Proposed by swapping {word!r} for {other!r} (a word the templates know, same token count); "
            "check that it changes the answer."
        )
    return "", no_corruption_sentence(prompt, found)


WRITE_IT = "write it with the key word replaced, keeping the token count"


def no_corruption_sentence(prompt: str, found) -> str:
    """Why no corrupted prompt could be proposed for ``prompt`` (``found``: the template family
    that recognised it, or None), naming the words at fault, with the way out. It said the prompt
    "matches no built-in template and holds no name ... they know" of an indirect-object prompt
    whose names ('Zoltan', two tokens) no replacement fits, and of one naming Mary and John."""
    if found is not None:
        names = [found.slots.get(key) for key in ("A", "B")] if found.family == "ioi" else []
        key = (
            f"{_quoted(names)} replaced by other names of the same token count"
            if all(names) and names
            else "the key word replaced by one of the same token count"
        )
        return (
            f"No corrupted prompt could be proposed: the {found.label} template recognises the prompt, but none "
            f"of its corruptions has the prompt's token count; write it with {key}."
        )
    known = known_words_in(prompt)
    if known:
        return (
            f"No corrupted prompt could be proposed: the prompt matches no built-in template, and no word the "
            f"templates know to put in place of {_quoted(known)} keeps its token count; {WRITE_IT}."
        )
    unknown = [
        word
        for word in dict.fromkeys(_NAMED.findall(prompt))  # each once: "'The' are not among them"
        if word[0].isupper() and word[1:].islower() and word not in _known_words()
    ]
    named = f" ({_quoted(unknown)} {'is' if len(unknown) == 1 else 'are'} not among them)" if unknown else ""
    return (
        "No corrupted prompt could be proposed: the prompt matches no built-in template and holds no "
        f"name, country or landmark they know{named}; {WRITE_IT}."
    )


# a word inside a sentence (not its first), of letters; capitalised, it is written as a name is
# ("told Zoltan", "y María")
_NAMED = re.compile(r"(?<=[^\s.!?:;\"“]\s)[^\W\d_]{2,}\b")


def _quoted(words, limit: int = 3) -> str:
    """'a', 'b' and 'c' (at most ``limit``, then how many more), each once."""
    words = list(dict.fromkeys(words))
    shown_words = [repr(word) for word in words[:limit]]
    rest = len(words) - limit
    if rest > 0:
        return f"{', '.join(shown_words)} and {rest} more"
    return shown_words[0] if len(shown_words) == 1 else f"{', '.join(shown_words[:-1])} and {shown_words[-1]}"


def _known_words() -> dict[str, list[str]]:
    """{word: its replacements}: IOI names among themselves, subjects of each factual relation
    among those whose answer differs."""
    templates = _templates()
    words: dict[str, list[str]] = {}
    names = list(dict.fromkeys(templates.IOI_NAMES + templates.COMMON_NAMES))
    for name in names:
        words[name] = [other for other in names if other != name]
    for table, _ in templates.FACT_RELATIONS.values():
        for subject, fact in table.items():
            others = [other for other, value in table.items() if other != subject and value != fact]
            words.setdefault(subject, []).extend(o for o in others if o not in words.get(subject, []))
    return words


def known_words_in(prompt: str) -> list[str]:
    """The words of ``prompt`` the templates know (a name, a country, a landmark), longest first."""
    return [
        word
        for word in sorted(_known_words(), key=len, reverse=True)
        if re.search(rf"\b{re.escape(word)}\b", prompt)
    ]


def swap_known_word(model, prompt: str) -> tuple[str, str, str] | None:
    """(corrupted prompt, word replaced, replacement) for the first known word of ``prompt`` that
    has a replacement of the same token count; None when none has. Every mention of the word is
    replaced, by a word the prompt does not hold: "France is in Europe. The capital of France is"
    became "Italy is in Europe. The capital of France is" (whose answer stays ' Paris'), and
    "France and Italy ... France" became "Italy and Italy ... France"."""
    known = _known_words()
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of  # torch is loaded once a model is

    count = adapter_of(model).token_count
    target = count(prompt)
    by_length = sorted(known, key=len, reverse=True)  # "Eiffel Tower" before "Tower"
    held = set(known_words_in(prompt))
    for word in by_length:
        mention = re.compile(rf"\b{re.escape(word)}\b")
        if word not in held:
            continue
        for other in known[word]:
            if other in held or re.search(rf"\b{re.escape(other)}\b", prompt):
                continue
            corrupted = mention.sub(lambda _, other=other: other, prompt)
            if count(corrupted) == target:
                return corrupted, word, other
    return None
