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
from ..core.text import given
from ..measure.task_validity import gap_check_enabled, gap_problem, prepared_metrics
from ..models.adapter import adapter_of
from ..query.families import family
from ..query.families.arithmetic import ARITHMETIC_TEMPLATES
from ..query.families.factual import FACT_RELATIONS
from ..query.families.ioi import IOI_NAMES, IOI_OBJECTS, IOI_PLACES, IOI_TEMPLATES
from .dataset import Dataset, DatasetError, DatasetTask
from .task_check import refusal_kind

GENERATED_FAMILIES = ("ioi", "arithmetic", "factual")
# candidates drawn per task asked for before the family counts as exhausted
_ATTEMPTS_PER_TASK = 40
# ... or sooner, once this many draws in a row (at least _STALL_FACTOR times the distinct prompts
# found so far) gave nothing new: a family of k prompts is drawn like coupons, so the chance that
# one of its prompts is still unseen after 10k draws without a new one is about k e^-10. Asking
# the factual family (522 prompts) for 5,000 said so after 200,000 draws (2.5 CPU-minutes) before.
_STALL_DRAWS, _STALL_FACTOR = 2000, 10
_CHECK_BATCH = 64  # fitting candidates checked against the model in one round


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


def family_capacity(family: str) -> int:
    """How many distinct prompts ``family``'s templates can make at most (before any tokenizer or
    the validity check refuses some): more than that can never be drawn."""
    families = template_families()
    if family == "ioi":
        names = len(families.IOI_NAMES)
        return (
            len(families.IOI_TEMPLATES)
            * names
            * (names - 1)
            * len(families.IOI_PLACES)
            * len(families.IOI_OBJECTS)
        )
    if family == "arithmetic":
        plus, minus = ([t for t in families.ARITHMETIC_TEMPLATES[op] if "{a}" in t] for op in ("+", "-"))
        return len(plus) * 90 * 90 + len(minus) * 90 * 91 // 2  # operands 10 to 99; a >= b for '-'
    return sum(len(table) * len(templates) for table, templates in families.FACT_RELATIONS.values())


def check_family(family: str, n: int | None = None) -> None:
    """DatasetError in one sentence when ``family`` is not one ``generate_tasks`` can draw, or
    ``n`` is more tasks than its templates make (said before a model loads: ``--n`` of 10^30
    loaded the model and drew until the family ran dry, hours on this CPU)."""
    if family == "mmlu":  # real questions, read (mmlu_tasks); the Python run's generate= takes it
        raise DatasetError(
            "--generate makes template tasks (ioi, arithmetic, factual); MMLU's questions are read "
            "instead, with --dataset mmlu --subjects SUBJECT[,SUBJECT...] --n N."
        )
    if family not in DRAWS:
        raise DatasetError(
            f"Cannot generate {family!r} tasks; --generate knows {', '.join(GENERATED_FAMILIES)}."
        )
    most = family_capacity(family)
    if n is not None and n > most:
        raise DatasetError(
            f"--n {given(n)} is more than the {family} family's templates make: {most:,} distinct prompts "
            "at most, of which a tokenizer and the validity check keep fewer; ask for fewer, or give a "
            "dataset file."
        )


def generate_tasks(model, family: str, n: int, seed: int = 0, max_tokens: int = 256) -> list[DatasetTask]:
    """``n`` distinct tasks of a template family that fit ``model``'s tokenizer and pass the
    validity check, from ``seed`` (``generated_dataset``'s tasks)."""
    return generated_dataset(model, family, n, seed, max_tokens).tasks


def generated_dataset(model, family: str, n: int, seed: int = 0, max_tokens: int = 256) -> Dataset:
    """``n`` distinct tasks of a template family that fit ``model``'s tokenizer and whose
    corruption clearly lowers the answer's metric on ``model`` (the validity check every run
    applies, ``task_validity``; skipped where ``CIRCUITVIZ_TASK_CHECK=off``), from ``seed``.
    Candidates are drawn in the seed's order and checked in batches (one plain pass per prompt
    length), so asking for 200 gives 200 a batch will run, not 200 of which the batch then refuses
    most (the arithmetic family on Gemma-3-270M: 43 of 200 drawn pass). ``summary`` says how many
    were tried and why the others were refused, like MMLU's selection.

    DatasetError in one sentence for an unknown family, or when the family runs out of distinct
    prompts that fit and pass before ``n`` (it names how many it found).
    """
    check_family(family, n)
    if n < 1:
        raise DatasetError(f"--n must be 1 or more, not {n}.")
    checked = gap_check_enabled()
    rng = random.Random(f"{family}:{seed}")
    tasks: list[DatasetTask] = []
    seen: set[str] = set()  # every distinct prompt drawn, kept or not (a repeat is no news)
    pending: list[tuple[PromptTask, object]] = []  # fitting candidates awaiting the check
    refusals: dict[str, int] = {}
    tried = too_long = 0

    def settle() -> None:
        nonlocal tried
        metrics = prepared_metrics(model, [prepared for _, prepared in pending]) if checked else None
        for index, (task, _) in enumerate(pending):
            if len(tasks) == n:
                break
            tried += 1
            if metrics is not None and gap_problem(task, *metrics[index], advice=False):
                kind = refusal_kind(task, *metrics[index])
                refusals[kind] = refusals.get(kind, 0) + 1
                continue
            tasks.append(DatasetTask(id=f"{family}-{len(tasks):05d}", task=task, family=family))
        pending.clear()

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
            pending.append((task, prepare_task(model, task, max_tokens)))
        except TaskError:
            # a prompt over the token limit is counted, to be said: a limit below every prompt's length
            # ended 'gave only 0 distinct prompts ...; ask for at most 0' without naming it
            if adapter_of(model).to_tokens(task.clean, truncate=False).shape[1] > max_tokens:
                too_long += 1
            continue
        if len(pending) >= min(_CHECK_BATCH, n - len(tasks)):
            settle()
    settle()
    summary = _summary(family, n, seed, tried, len(tasks), refusals) if checked else {}
    if len(tasks) < n:
        passing = " and pass the validity check" if checked else ""
        said = [_refused_words(refusals)] if refusals else []
        said += [f"{too_long:,} longer than {max_tokens:,} tokens"] if too_long else []
        why = f" ({'; '.join(said)})" if said else ""
        advice = ["raise --max-tokens"] if too_long else []
        advice += [f"ask for at most {len(tasks)}"] if tasks else []
        raise DatasetError(
            f"The {family} family gave only {len(tasks)} distinct prompts that fit this model's "
            f"tokenizer{passing}{why}; {', '.join([*advice, 'or give a dataset file'])}."
        )
    return Dataset(tasks=tasks, source=f"generated {family}", summary=summary)


def _refused_words(refusals: dict[str, int]) -> str:
    """'9 refused, most because the corruption raises ...' (the counts per reason are the summary's)."""
    most = max(refusals.items(), key=lambda item: item[1])[0]
    return f"{sum(refusals.values()):,} refused, {'most' if len(refusals) > 1 else 'all'} because {most}"


def _summary(family: str, n: int, seed: int, tried: int, kept: int, refusals: dict[str, int]) -> dict:
    """The selection as MMLU's reads (``mmlu.selection_lines``): the family as its one subject."""
    row = {
        "tried": tried,
        "kept": kept,
        "refused": tried - kept,
        "kept_share": kept / tried if tried else 0.0,
        "refusals": dict(sorted(refusals.items(), key=lambda item: -item[1])),
    }
    return {"dataset": family, "n": n, "seed": seed, "per_subject": {family: row}}
