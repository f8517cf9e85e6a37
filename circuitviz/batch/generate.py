"""Datasets generated on the fly from the template families (``--generate ioi --n 500 --seed 0``).

Each family draws prompts from its own templates and vocabulary, corrupts them the way the
family does (indirect object: three other names; arithmetic: operands whose result starts
differently; factual recall: another subject), and keeps a prompt only when the model's
tokenizer gives one-token answer and foil and a corruption of the prompt's token length. The
same seed and tokenizer give the same tasks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace

from ..core.tasks import PromptTask, TaskError, prepare_task
from ..models.adapter import adapter_of
from ..query.families import family
from ..query.families.arithmetic import ARITHMETIC_TEMPLATES
from ..query.families.factual import FACT_RELATIONS
from ..query.families.ioi import IOI_NAMES, IOI_OBJECTS, IOI_PLACES, IOI_TEMPLATES
from .dataset import DatasetError, DatasetTask

GENERATED_FAMILIES = ("ioi", "arithmetic", "factual")
# candidates drawn per task asked for before the family counts as exhausted
_ATTEMPTS_PER_TASK = 40
# ... or sooner, once this many draws in a row (at least _STALL_FACTOR times the distinct prompts
# found so far) gave nothing new: a family of k prompts is drawn like coupons, so the chance that
# one of its prompts is still unseen after 10k draws without a new one is about k e^-10. Asking
# the factual family (522 prompts) for 5,000 said so after 200,000 draws (2.5 CPU-minutes) before.
_STALL_DRAWS, _STALL_FACTOR = 2000, 10


def template_families() -> SimpleNamespace:
    """The template families and their vocabularies: the one place this package imports them
    (``circuitviz.query.families``).

    Holds ``family(name)`` (``match``, ``corruptions``), ``IOI_TEMPLATES``, ``IOI_NAMES``,
    ``IOI_PLACES``, ``IOI_OBJECTS``, ``ARITHMETIC_TEMPLATES`` and ``FACT_RELATIONS``.
    """

    return SimpleNamespace(
        family=family,
        IOI_TEMPLATES=IOI_TEMPLATES,
        IOI_NAMES=IOI_NAMES,
        IOI_PLACES=IOI_PLACES,
        IOI_OBJECTS=IOI_OBJECTS,
        ARITHMETIC_TEMPLATES=ARITHMETIC_TEMPLATES,
        FACT_RELATIONS=FACT_RELATIONS,
    )


def _fitting(model, clean: str, candidates, limit: int = 60) -> str | None:
    """The first candidate corruption with the clean prompt's token count."""
    count = adapter_of(model).token_count
    target = count(clean)
    for tried, corrupted in enumerate(candidates):
        if tried >= limit:
            return None
        if corrupted != clean and count(corrupted) == target:
            return corrupted
    return None


def _first_token(model, text: str) -> str:
    """The text of the first token ``text`` is split into (no <bos>)."""
    ids = adapter_of(model).to_tokens(text, prepend_bos=False, truncate=False, on_device=False)[0].tolist()
    return adapter_of(model).decode([int(ids[0])]) if ids else ""


def _ioi(model, rng: random.Random) -> PromptTask | None:
    families = template_families()
    templates, names = families.IOI_TEMPLATES, families.IOI_NAMES
    io, subject = rng.sample(names, 2)
    values = {
        "A": io,
        "B": subject,
        "place": rng.choice(families.IOI_PLACES),
        "object": rng.choice(families.IOI_OBJECTS),
    }
    clean = rng.choice(templates).format(**values)
    family = families.family("ioi")
    found = family.match(clean)
    if found is None:
        return None
    corrupted = _fitting(model, clean, family.corruptions(found, random.Random(rng.random()), None))
    if corrupted is None:
        return None
    return PromptTask(clean, corrupted, f" {io}", (f" {subject}",))


def _number_answer(model, prompt: str, value: int) -> tuple[str, str] | None:
    """(prompt, answer token) for a number written after ``prompt``: ' 37' as one token where the
    tokenizer has it, else the prompt ends with the space and the answer is the first digit."""
    token = _first_token(model, f" {value}")
    if token.strip():
        return prompt, token
    return prompt + " ", _first_token(model, str(value))


def _arithmetic(model, rng: random.Random) -> PromptTask | None:
    families = template_families()
    op = rng.choice(("+", "-"))
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    if op == "-" and a < b:
        a, b = b, a
    templates = [t for t in families.ARITHMETIC_TEMPLATES[op] if "{a}" in t]
    template = rng.choice(templates)
    clean = template.format(a=a, b=b)
    found = families.family("arithmetic").match(clean)
    if found is None:
        return None
    corruptions = families.family("arithmetic").corruptions(found, random.Random(rng.random()), None)
    corrupted = _fitting(model, clean, corruptions)
    if corrupted is None:
        return None
    other = families.family("arithmetic").match(corrupted)
    if other is None or other.answer is None or found.answer is None:
        return None
    clean_prompt, answer = _number_answer(model, clean, int(found.answer))
    corrupted_prompt, foil = _number_answer(model, corrupted, int(other.answer))
    if answer == foil:
        return None
    return PromptTask(clean_prompt, corrupted_prompt, answer, (foil,))


def _factual(model, rng: random.Random) -> PromptTask | None:
    families = template_families()
    relation = rng.choice(sorted(families.FACT_RELATIONS))
    table, templates = families.FACT_RELATIONS[relation]
    subject = rng.choice(sorted(table))
    clean = rng.choice(templates).format(X=subject)
    family = families.family("factual")
    found = family.match(clean)
    if found is None or found.answer is None:
        return None
    corrupted = _fitting(model, clean, family.corruptions(found, random.Random(rng.random()), None))
    other = family.match(corrupted) if corrupted else None
    if other is None or other.answer is None:
        return None
    return PromptTask(clean, corrupted, f" {found.answer}", (f" {other.answer}",))


DRAWS: dict[str, Callable[[object, random.Random], PromptTask | None]] = {
    "ioi": _ioi,
    "arithmetic": _arithmetic,
    "factual": _factual,
}


def check_family(family: str) -> None:
    """DatasetError in one sentence when ``family`` is not one ``generate_tasks`` can draw (said
    before a model loads)."""
    if family not in DRAWS:
        raise DatasetError(
            f"Cannot generate {family!r} tasks; --generate knows {', '.join(GENERATED_FAMILIES)}."
        )


def generate_tasks(model, family: str, n: int, seed: int = 0, max_tokens: int = 256) -> list[DatasetTask]:
    """``n`` distinct tasks of a template family that fit ``model``'s tokenizer, from ``seed``.

    DatasetError in one sentence for an unknown family, or when the family runs out of distinct
    prompts that fit before ``n`` (it names how many it found).
    """
    check_family(family)
    if n < 1:
        raise DatasetError(f"--n must be 1 or more, not {n}.")
    rng = random.Random(f"{family}:{seed}")
    tasks: list[DatasetTask] = []
    seen: set[str] = set()  # every distinct prompt drawn, kept or not (a repeat is no news)
    since_new = 0
    for _ in range(_ATTEMPTS_PER_TASK * n):
        if len(tasks) == n or since_new > max(_STALL_DRAWS, _STALL_FACTOR * len(seen)):
            break
        since_new += 1
        task = DRAWS[family](model, rng)
        if task is None or task.clean in seen:
            continue
        since_new = 0
        seen.add(task.clean)
        try:
            prepare_task(model, task, max_tokens)
        except TaskError:
            continue
        tasks.append(DatasetTask(id=f"{family}-{len(tasks):05d}", task=task, family=family))
    if len(tasks) < n:
        raise DatasetError(
            f"The {family} family gave only {len(tasks)} distinct prompts that fit this model's "
            f"tokenizer; ask for at most {len(tasks)}, or give a dataset file."
        )
    return tasks
