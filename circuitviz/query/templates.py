"""The template source: paraphrase pairs of a recognised prompt, generated offline from a seed.

``template_rewrites`` is the one walk over a family's rewrites: each rewrite of the prompt with
its corruptions, most preferred first (the family's own, then the prompt's own corruption
carried over by ``transfer_corruption``). ``template_paraphrases`` keeps, per rewrite, the first
corruption of the rewrite's token length and checks the pairs against the model;
``unchecked_template_pairs`` takes the first corruption as it comes, for callers that only
observe the texts (CircuitLasso). The same recognition proposes a corrupted prompt for a typed
one (``propose_corruption``) and the answer a family expects (``propose_answer``).
"""

from __future__ import annotations

import difflib
import itertools
import random
import re
from collections.abc import Iterable, Iterator

from ..core.tasks import PromptTask, TaskError, prepare_task
from ..models.adapter import adapter_of
from .checks import model_answer, validate_pairs
from .families import family, recognise
from .families.base import respaced
from .pairs import ParaphraseError, ParaphrasePair

NO_FAMILY_WAY_OUT = "give paraphrases in a file or use the openai source."
NO_FAMILY = (
    "The prompt matches none of the built-in template families (indirect object, arithmetic, "
    "factual recall such as 'The capital of France is' or 'The currency of Japan is the', "
    f"occupation and pronoun, multiple choice); {NO_FAMILY_WAY_OUT}"
)
# the command line's ways out, naming its flags (the app's form names its own fields): for a
# method's own paraphrases, and for the held-out transfer (which draws only template paraphrases)
NO_FAMILY_FLAGS = (
    "give paraphrase pairs in a file (--paraphrase-source file --paraphrases FILE) or use the openai "
    "source (--paraphrase-source openai)."
)
NO_FAMILY_TRANSFER_FLAGS = (
    "give paraphrase pairs of your own with --transfer-file FILE to measure the held-out transfer."
)


# the app's way out where the held-out transfer found no family: its paraphrases come from the
# templates alone, so "give paraphrases in a file or use the openai source" (a setting of the
# methods that draw paraphrases of their own) was no way out beside it (Compare's held-out caption)
NO_FAMILY_TRANSFER_APP = (
    "the held-out transfer draws template paraphrases only (on the command line, evaluate "
    "--transfer-file measures a circuit on paraphrase pairs of your own)."
)


def for_transfer(text: str) -> str:
    """``text`` with ``NO_FAMILY``'s way out replaced by the held-out transfer's in the app."""
    return text.replace(NO_FAMILY, NO_FAMILY[: -len(NO_FAMILY_WAY_OUT)] + NO_FAMILY_TRANSFER_APP)


def with_flags(text: str, transfer: bool = False) -> str:
    """``text`` with ``NO_FAMILY``'s way out replaced by the command line's flags (``transfer``:
    those of the held-out transfer). "give paraphrases in a file" named no flag."""
    flags = NO_FAMILY_TRANSFER_FLAGS if transfer else NO_FAMILY_FLAGS
    return text.replace(NO_FAMILY, NO_FAMILY[: -len(NO_FAMILY_WAY_OUT)] + flags)


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


def template_rewrites(task: PromptTask, seed: int = 0) -> tuple[str, Iterator[tuple[str, Iterator[str]]]]:
    """(the family's name, each rewrite of the prompt with its corruptions, most preferred first).

    Rewrites come in the order ``seed`` gives; a family that needs the answer (multiple choice)
    gets the task's. Corruptions are the family's own (seeded by the seed and the rewrite), then
    the prompt's own corruption carried over; a family that keeps the prompt's corruption
    (arithmetic: the same other operands; factual recall: the same other subject) puts that one
    first, so the rewrite's corrupted run leads to the prompt's foil as the prompt's does.
    ParaphraseError when no family recognises the prompt, or no rewrite can keep its answer.
    """
    found = recognise(task.clean)
    if found is None:
        raise ParaphraseError(NO_FAMILY)
    chosen = family(found.family)
    answer = task.answer if chosen.needs_answer else None
    variants = chosen.variants(found, random.Random(seed), answer=answer)
    if not variants and chosen.needs_answer:
        raise ParaphraseError(chosen.unusable_answer(task.answer))

    corrupted = (
        recognise(task.corrupted) if chosen.keeps_prompt_corruption and task.corrupted.strip() else None
    )

    def corruptions(text: str, variant) -> Iterator[str]:
        # the task's answer, known or not to the family (another subject with the same answer is
        # no corruption of a subject its table lacks)
        own = chosen.corruptions(variant, random.Random(f"{seed}:{text}"), task.answer)
        carried = transfer_corruption(task.clean, task.corrupted, text) if task.corrupted.strip() else None
        kept = (
            chosen.prompt_corruption(variant, corrupted, carried) if chosen.keeps_prompt_corruption else None
        )
        last = [carried] if carried and carried != kept else []  # never the same corruption checked twice
        return itertools.chain([kept] if kept else [], own, last)

    return found.family, ((text, corruptions(text, variant)) for text, variant in variants)


def unchecked_template_pairs(task: PromptTask, count: int, seed: int = 0) -> list[tuple[str, str]]:
    """Up to ``count`` (rewrite, corruption) pairs, each rewrite's first corruption as it comes.

    No model is run: neither the token lengths nor the model's answers are checked, for callers
    that only observe the texts. ParaphraseError as ``template_rewrites``.
    """
    pairs: list[tuple[str, str]] = []
    if count <= 0:
        return pairs
    _, rewrites = template_rewrites(task, seed)
    for text, corruptions in rewrites:
        corrupted = next((c for c in corruptions if c != text), "")
        if text != task.clean:
            pairs.append((text, corrupted))
        if len(pairs) == count:
            break
    return pairs


def _first_fitting(model, clean: str, corruptions: Iterable[str], limit: int = 200) -> str | None:
    """The first corruption whose token count equals the clean prompt's."""
    count = adapter_of(model).token_count
    target = count(clean)
    for tried, corrupted in enumerate(corruptions):
        if tried >= limit:
            return None
        if corrupted != clean and count(corrupted) == target:
            return corrupted
    return None


def template_paraphrases(
    model,
    task: PromptTask,
    n: int = 9,
    seed: int = 0,
    max_tokens: int = 256,
    fill: bool = True,
    progress=None,
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
    name, rewrites = template_rewrites(task, seed)
    source = f"template:{name}"
    result: list[ParaphrasePair] = []

    def draw(count: int) -> list[ParaphrasePair]:
        drawn = []
        for text, corruptions in rewrites:
            corrupted = _first_fitting(model, text, corruptions)
            if corrupted is None:
                continue
            drawn.append(ParaphrasePair(text, corrupted, task.answer, task.foils, source, task.metric))
            if len(drawn) == count:
                break
        return drawn

    batch = draw(n)
    while batch:
        result += validate_pairs(model, task, batch, max_tokens=max_tokens, progress=progress)
        usable = sum(pair.usable() for pair in result)
        if not fill or usable >= n or len(result) >= 4 * max(n, 1):
            break
        batch = draw(n - usable)
    return result


def propose_corruption(model, prompt: str, answer: str | None = None) -> str | None:
    """A corrupted prompt of the same token length for a prompt a template family recognises.

    Indirect object: the three names become others (ABC); arithmetic: operands whose result
    starts differently; factual recall: another subject; multiple choice: the correct option's
    text swapped with another's (the correct letter is ``answer``, else the model's top-1).
    A prompt recognised single-spaced (a line break or two spaces between its words) is corrupted
    with its own white space: only the replaced words differ.
    Returns None when no family recognises the prompt or no same-length corruption exists.
    """
    found = recognise(prompt)
    if found is None:
        return None
    chosen = family(found.family)
    if chosen.needs_answer and not answer:
        answer = model_answer(model, prompt)
    corruptions = chosen.corruptions(found, None, answer)
    if found.typed is not None:  # recognised single-spaced: written back with the prompt's white space
        corruptions = (respaced(found.typed, corrupted) for corrupted in corruptions)
    return _first_fitting(model, prompt, corruptions)


def propose_answer(prompt: str) -> str | None:
    """The answer a family expects for a recognised prompt (as text, e.g. 'Mary'), or None."""
    found = recognise(prompt)
    return found.answer if found else None


def check_task(model, task: PromptTask, max_tokens: int = 256) -> None:
    """TaskError for an unusable prompt, with a proposed corruption when the prompt lacks one."""
    if not task.corrupted.strip() and task.clean.strip():
        proposal = propose_corruption(model, task.clean, task.answer)
        if proposal is not None:
            raise TaskError(
                f"The corrupted prompt is empty; give the prompt with its key fact replaced, for example {proposal!r}."
            )
    prepare_task(model, task, max_tokens=max_tokens)
