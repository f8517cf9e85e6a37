"""What the inputs propose for a new prompt: answer, foil and corrupted prompt, each with why.

The answer is among the model's own top next tokens (a circuit explains what the model does): the
most likely whose task passes the meaningful-task check (``task_validity``), a content word before
a function word. The foil is, for a task the templates recognise as indirect object
identification, the other name, else what the model predicts after the corrupted prompt, of the
answer's kind where the corruption raises one (``query.foils``; its likeliest other answer when
there is none, never the answer spelt otherwise). The corrupted prompt comes from the template family that
recognises the prompt; when none does, a word the templates know (a name, common first names
such as Mary and John among them, a country, a landmark) is swapped for another of the same
token length, or in code a code word (``query.code_swaps``), or a number is changed
(``query.number_swaps``), and the note says which. Each candidate is measured as the check before Run
measures it, and the first that passes is proposed (``query.trials``); when nothing fits or
nothing passes, the note says why, naming the words at fault or those tried, and how to write
one. The app's inputs (through
``ui.loaders``) and the command line (``discover`` without ``--corrupted``) read it; the templates
are imported on first use, so the first paint stays free of torch.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import NamedTuple

from ..core.text import chance_text, left_out_sentence, shown_token
from .foils import propose_foil, same_word, single_token, text_token


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
    meaningful-task check (``task_validity.preferred_task``), a content word before a function word
    but not one the model barely predicts ("Mary gave John a book because": ' John', 2.1% on
    Gemma-3-270M, was put before ' he', 47.7%, once both had a corruption that passes). Only
    tokens whose text is one token again are proposed (all of them where none is): a byte of a
    character (SmolLM2's ' <0xE5>' of a Chinese word) filled the answer box with text of 6 tokens,
    which the box refused at once. Each answer's corrupted prompt is the first candidate whose task
    passes the check (``measured``), the candidates of every answer measured together."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import PromptTask
    from ..measure.task_validity import barely_ranked, is_function_word, preferred_task
    from .trials import Trials

    top_tokens = offered_tokens(model, top_tokens)[0]
    answers = top_tokens[:CANDIDATE_ANSWERS] or [""]
    trials = Trials(model, prompt)
    chances, top = trials.chances(answers)
    barely = [
        chance is not None and barely_predicts(answer, chance, top)
        for answer, chance in zip(answers, chances)
    ]
    # the order ``preferred_task`` ranks passing answers in: one ranked after an answer that passes
    # already is not measured further (answers the model barely predicts rank alike: their gaps decide)
    order = [
        (int(barely[index]), int(is_function_word(answer)), barely_ranked(index, barely[index]))
        for index, answer in enumerate(answers)
    ]
    found = measured(model, prompt, answers, top_tokens, trials, order)
    if len(found) <= 1:
        return found[0][0]
    tasks = [
        PromptTask(prompt, made.corrupted, made.answer, (made.foil,) if made.foil else ())
        for made, _ in found
    ]
    return found[preferred_task(tasks, [gap for _, gap in found], barely)][0]


def proposal_for(
    model,
    prompt: str,
    answer: str,
    top_tokens: list[str],
    corrupted: str | None = None,
    foil: str | None = None,
) -> Proposal:
    """The foil and corrupted prompt proposed for ``answer`` (the first candidate whose task passes
    the check before Run, ``measured``; with ``foil``, the foil is that one and each candidate is
    measured against it: Steer's and the command line's given foil); the foil for ``corrupted``
    when one is given: then it is kept, with no note."""
    if corrupted is None:
        from .trials import Trials  # here, not at the top: keeps torch out of the first paint

        return measured(model, prompt, [answer], top_tokens, Trials(model, prompt), foil=foil)[0][0]
    return _with_foil(model, prompt, answer, top_tokens, corrupted, "")


def _with_foil(
    model,
    prompt: str,
    answer: str,
    top_tokens: list[str],
    corrupted: str,
    note: str,
    after=None,
    given: str | None = None,
) -> Proposal:
    """``corrupted`` proposed for ``answer`` with ``note``, and its foil (``given``, else
    ``propose_foil``, else the model's likeliest other answer, not the answer spelt otherwise)."""
    if given:
        return Proposal(answer, given, corrupted, note)
    foil, foil_note = propose_foil(model, prompt, corrupted, answer, after)
    if not foil:
        foil = next(
            (
                token
                for token in top_tokens
                if token != answer and not same_word(token, answer) and text_token(model, token)
            ),
            "",
        )
        if foil:
            foil_note = "The foil is the model's likeliest other answer after the prompt."
    return Proposal(answer, foil, corrupted, note, foil_note)


def measured(
    model, prompt: str, answers: list[str], top_tokens: list[str], trials, order=None, foil=None
) -> list:
    """(proposal, its gap L(M(q)) - L(M(q')) or None) for each of ``answers``: the corrupted prompt
    is the first of ``corruption_candidates`` whose task (with the foil proposed for it) passes
    the check before Run, measured on ``trials`` (``query.trials``: every answer's first candidate
    in one pass, the others, where the first fails, in a second). Where none passes, no corrupted
    prompt, and the note says so (``none_passes_sentence``); a candidate with no foil to measure
    it by is proposed unmeasured, as before. ``order``: how ``propose`` ranks the answers once
    they pass; an answer ranked after one whose first candidate passes is not measured further
    (an empty proposal stands for it, never chosen). ``foil``: the foil every candidate is
    measured against, where one is given."""
    options = [corruption_candidates(model, prompt, answer) for answer in answers]
    trials.run([candidates[0].corrupted for candidates in options if candidates])
    found: list = []
    for answer, candidates in zip(answers, options):
        if not candidates:
            made = _with_foil(
                model,
                prompt,
                answer,
                top_tokens,
                "",
                no_corruption_sentence(prompt, _templates().recognise(prompt)),
                given=foil,
            )
            found.append((made, None))
        else:
            found.append(_tried(model, prompt, answer, top_tokens, candidates[0], trials, foil))
    failed = [index for index, (made, _) in enumerate(found) if made is None]
    settled = [order[index] for index, (_, gap) in enumerate(found) if order and _settles(gap)]
    for index in [index for index in failed if settled and order[index] > min(settled)]:
        failed.remove(index)
        found[index] = (Proposal(answers[index], "", "", ""), None)
    trials.run([candidate.corrupted for index in failed for candidate in options[index][1:]])
    for index in failed:
        answer, candidates = answers[index], options[index]
        for candidate in candidates[1:]:
            found[index] = _tried(model, prompt, answer, top_tokens, candidate, trials, foil)
            if found[index][0] is not None:
                break
        else:
            made = _with_foil(model, prompt, answer, top_tokens, "", "", given=foil)
            found[index] = (
                dataclasses.replace(made, corrupted_note=none_passes_sentence(made, candidates)),
                None,
            )
    return found


def _settles(gap: float | None) -> bool:
    """Whether a measured gap passes as ``task_validity.preferred_task`` counts it."""
    from ..measure.task_validity import MIN_GAP

    return gap is not None and gap >= MIN_GAP["logit_diff"]


def _tried(model, prompt: str, answer: str, top_tokens: list[str], candidate, trials, foil=None) -> tuple:
    """(the proposal of ``candidate`` for ``answer``, its gap) when its task passes the check before
    Run, (None, None) when it does not, (the proposal, None) when no foil measures it or the task
    cannot be prepared."""
    from ..core.tasks import PromptTask
    from ..measure.task_validity import gap_check_enabled
    from .trials import passes

    after = functools.partial(trials.likely, candidate.corrupted, answer)  # read where no name is the foil
    note = candidate.note + (SWAP_END if candidate.swapped else "")
    made = _with_foil(model, prompt, answer, top_tokens, candidate.corrupted, note, after, foil)
    if not made.foil or not answer:
        return made, None
    task = PromptTask(prompt, candidate.corrupted, answer, (made.foil,))
    metrics = trials.metrics(task)
    if metrics is None:  # a task that cannot be prepared (a prompt over the limit): its check says why
        return made, None
    if not passes(task, metrics):
        return None, None
    gap = metrics[0] - metrics[1]
    if candidate.swapped and gap_check_enabled():
        said = f"which lowers the logit difference of {shown_token(answer)} over {shown_token(made.foil)} by {gap:.3g}"
        made = dataclasses.replace(made, corrupted_note=f"{candidate.note}, {said}; edit it freely.")
    return made, gap


def none_passes_sentence(made: Proposal, candidates) -> str:
    """Why no corrupted prompt is proposed for ``made.answer`` when every candidate was tried and
    none passes the check before Run, naming what was tried, with the way out."""
    from ..measure.task_validity import MIN_GAP

    tried = (
        f"the one tried ({candidates[0].what}) does not lower"
        if len(candidates) == 1
        else f"none of the {len(candidates)} tried ({_listed([c.what for c in candidates])}) lowers"
    )
    answer = shown_token(made.answer)
    return (
        f"No corrupted prompt is proposed: {tried} the logit difference of {answer} (over the foil "
        f"proposed with it) by {MIN_GAP['logit_diff']:g} or more, as the check before Run asks; pick an "
        "answer a word of the prompt decides, or write the corrupted prompt with that word replaced, "
        "keeping the token count."
    )


def _listed(parts: list[str], limit: int = 3) -> str:
    """'a, b and c' (at most ``limit``, then how many more)."""
    rest = len(parts) - limit
    shown_parts = parts[:limit] + ([f"{rest} more"] if rest > 0 else [])
    return shown_parts[0] if len(shown_parts) == 1 else f"{', '.join(shown_parts[:-1])} and {shown_parts[-1]}"


class Candidate(NamedTuple):
    """A corrupted prompt tried for a new prompt, and how it was made."""

    corrupted: str
    note: str  # the sentence saying how (a swap's, without its end: ``measured`` adds what it measured)
    what: str  # the same in a few words, for the sentence when none passes
    swapped: bool = False


SWAP_END = "; check that it changes the answer."
TRIED = 6  # the most corruptions tried for one answer


def propose_corruption(model, prompt: str, answer: str) -> tuple[str, str]:
    """(corrupted prompt, the sentence saying how it was made): the first of
    ``corruption_candidates``, unmeasured; ('', why not) when none fits."""
    candidates = corruption_candidates(model, prompt, answer)
    if not candidates:
        return "", no_corruption_sentence(prompt, _templates().recognise(prompt))
    first = candidates[0]
    return first.corrupted, first.note + (SWAP_END if first.swapped else "")


def corruption_candidates(model, prompt: str, answer: str) -> list[Candidate]:
    """The corrupted prompts to try for ``prompt``, in the order proposed: the template family's
    that recognises it, then a word the templates know swapped (``swap_candidates``), at most
    ``TRIED``; [] when none fits."""
    templates = _templates()
    found = templates.recognise(prompt)
    candidates = []
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
            note = f"Proposed by the {found.label} template{read}; edit it freely."
            candidates.append(Candidate(proposal, note, f"the {found.label} template's"))
    for corrupted, word, other, mention in swap_candidates(model, prompt):
        which = f"the {mention} " if mention else ""
        note = f"Proposed by swapping {which}{word!r} for {other!r} (a word the templates know, same token count)"
        at = f" at the {mention} mention" if mention else ""
        candidates.append(Candidate(corrupted, note, f"{word!r} swapped for {other!r}{at}", True))
    if found is None:  # "1, 2, 3, 4,": a number changed (a template's own numbers are its to change)
        from ..models.adapter import adapter_of
        from .code_swaps import code_candidates
        from .number_swaps import number_candidates

        count = adapter_of(model).token_count
        for corrupted, word, other in code_candidates(prompt, count):  # "def add(a, b): return a"
            kind = "code word" if word[:1].isalnum() else "operator"
            note = f"Proposed by swapping the {kind} {word!r} for {other!r} (same token count)"
            candidates.append(Candidate(corrupted, note, f"{word!r} swapped for {other!r}", True))
        for corrupted, number, other, mention in number_candidates(prompt, count):
            which = f"the {mention} number" if mention else "the number"
            note = f"Proposed by changing {which} {number!r} to {other!r} (same token count)"
            candidates.append(Candidate(corrupted, note, f"{number!r} changed to {other!r}", True))
    return candidates[:TRIED]


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
    from .code_swaps import code_words_in, looks_like_code

    known = known_words_in(prompt)
    if looks_like_code(prompt) and not known:  # "import os; os.": code, with no word swapped
        code = code_words_in(prompt)
        held = (
            f", and no code word to put in place of {_quoted(code)} keeps its token count"
            if code
            else (
                " and holds no code word the app swaps (a name such as 'add', 'max', True or 'numpy', or an "
                "operator between spaces such as '<')"
            )
        )
        return (
            f"No corrupted prompt could be proposed: the prompt matches no built-in template{held}; write it "
            "with the name or operator the answer depends on replaced ('def add' as 'def mul'), keeping the "
            "token count."
        )
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


# places whose name, written in lower case, is also an English word ("fine china", "a turkey")
COMMON_NOUN_PLACES = frozenset({"China", "Turkey"})


def _known_words() -> dict[str, list[str]]:
    """{word: its replacements}: IOI names among themselves, subjects of each factual relation
    among those whose answer differs. A place is also known written in lower case, as typed in
    a hurry ("the capital of france is", its replacements in lower case too; got no swap until
    2026-12-07), but for a place whose lower-case name is a common noun (``COMMON_NOUN_PLACES``);
    a person's name is not ("mark", "rose", "frank" are words)."""
    templates = _templates()
    words: dict[str, list[str]] = {}
    names = list(dict.fromkeys(templates.IOI_NAMES + templates.COMMON_NAMES))
    for name in names:
        words[name] = [other for other in names if other != name]
    for table, _ in templates.FACT_RELATIONS.values():
        for subject, fact in table.items():
            others = [other for other, value in table.items() if other != subject and value != fact]
            words.setdefault(subject, []).extend(o for o in others if o not in words.get(subject, []))
            if subject in COMMON_NOUN_PLACES:
                continue
            lower = [other.lower() for other in others if other not in COMMON_NOUN_PLACES]
            words.setdefault(subject.lower(), []).extend(o for o in lower if o not in words[subject.lower()])
    return words


def known_words_in(prompt: str) -> list[str]:
    """The words of ``prompt`` the templates know (a name, a country, a landmark), longest first."""
    return [
        word
        for word in sorted(_known_words(), key=len, reverse=True)
        if re.search(rf"\b{re.escape(word)}\b", prompt)
    ]


def swap_known_word(model, prompt: str) -> tuple[str, str, str] | None:
    """(corrupted prompt, word replaced, replacement): the first of ``swap_candidates`` (the first
    known word swapped at every mention); None when none fits."""
    found = swap_candidates(model, prompt)
    return found[0][:3] if found else None


def swap_candidates(model, prompt: str) -> list[tuple[str, str, str, str]]:
    """(corrupted prompt, word replaced, replacement, which mention: '' for every one, else 'first'
    or 'last') for each known word of ``prompt`` with a replacement of the same token count. The
    word is replaced at every mention, then (said more than once) at its last and first alone, by
    a word the prompt does not hold: "France is in Europe. The capital of France is" became "Italy
    is in Europe. The capital of France is" (whose answer stays ' Paris'), and "France and Italy
    ... France" became "Italy and Italy ... France". One mention alone is the indirect-object
    corruption where no other name fits: "When Zoltan and Mary went to the store, Mary gave a
    drink to" swapped at both mentions still points at ' Zol' ('Zoltan' is two of Gemma's tokens,
    so no template's names keep the count); swapped at the last, it does not (``query.trials``)."""
    known = _known_words()
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of  # torch is loaded once a model is

    count = adapter_of(model).token_count
    target = count(prompt)
    by_length = sorted(known, key=len, reverse=True)  # "Eiffel Tower" before "Tower"
    held = set(known_words_in(prompt))
    found = []
    for word in by_length:
        mention = re.compile(rf"\b{re.escape(word)}\b")
        if word not in held:
            continue
        spans = [match.span() for match in mention.finditer(prompt)]
        for other in known[word]:
            if other in held or re.search(rf"\b{re.escape(other)}\b", prompt):
                continue
            corrupted = mention.sub(lambda _, other=other: other, prompt)
            if count(corrupted) != target:
                continue
            found.append((corrupted, word, other, ""))
            if len(spans) > 1:
                for which, (start, end) in (("last", spans[-1]), ("first", spans[0])):
                    once = prompt[:start] + other + prompt[end:]
                    if count(once) == target:
                        found.append((once, word, other, which))
            break
    return found
