"""The MMLU picker's offer: which of a subject's questions the sidebar's model keeps, checked on demand.

A question the validity check refuses (its corruption moves the metric by less than 1 logit) is
one Explore refuses to explain; on SmolLM2-135M that is most questions (docs/mmlu.md). So the
picker can check a whole subject (``batch.mmlu_kept``: the check's own rule, in batched forward
passes on the model's device, stored per model, question file and code version), then lists the
kept questions first, marked, with one sentence of how many the model keeps. The check runs in a
fragment, a chunk at a time, each chunk stored as it ends: any click elsewhere stops it and keeps
what it found, and the next press goes on from there.
"""

from __future__ import annotations

import time

import streamlit as st

from ..core.text import counted, markdown_text

KEPT_MARK, REFUSED_MARK, UNCHECKED_MARK = "✓", "✗", "·"
ONLY_KEPT_KEY = "mmlu.only_kept"


def offer_order(rows: list[int], marks: dict, only_kept: bool = False) -> list[int]:
    """The rows as the picker offers them: the kept first, then those not checked yet, then the
    refused, each group in the file's order; only the kept with ``only_kept``."""
    kept = [row for row in rows if row in marks and marks[row].kept]
    if only_kept:
        return kept
    waiting = [row for row in rows if row not in marks]
    refused = [row for row in rows if row in marks and not marks[row].kept]
    return kept + waiting + refused


def copy_line(line: str, first: int) -> str:
    """The line of a question that repeats the one on row ``first`` (``batch.mmlu.same_question``):
    said so first, by the id the first's note names it by: at the line's end, a long question's
    words cut it off in a 1,000 px window (Chromium)."""
    from ..batch.mmlu import question_id  # here, not at the top: keeps torch out of the first paint

    return f"(the same question as {question_id(first)}) {line}"


def marked(line: str, mark) -> str:
    """A question's line in the list, after its mark (kept, refused, or not checked: ``mark`` None)."""
    if mark is None:
        return f"{UNCHECKED_MARK} {line}"
    return f"{KEPT_MARK if mark.kept else REFUSED_MARK} {line}"


def offer_sentence(subject: str, model_id: str, total: int, checked: int, kept: int, copies: int = 0) -> str:
    """One sentence of how many of the subject's questions the model's check keeps (markdown: the
    subject and the model id escaped); ``total`` counts a repeated question once, and ``copies``
    says how many repeats were left out of it."""
    name, model = markdown_text(subject), markdown_text(model_id)
    questions = counted(total, "question") + (
        f" (not counting {counted(copies, 'row')} that {'repeat' if copies > 1 else 'repeats'} an earlier one)"
        if copies
        else ""
    )
    if checked == 0:
        return (
            f"None of {name}'s {questions} is checked on {model} yet: checking them "
            "finds those the validity check keeps, the ones Explore can explain."
        )
    share = f"{kept / checked:.0%}"
    if checked == total:
        return (
            f"The validity check keeps {kept:,} of {name}'s {questions} on {model} "
            f"({share}): they are listed first, marked {KEPT_MARK}; a refused one ({REFUSED_MARK}) still opens, "
            "with its reason."
        )
    return (
        f"So far {checked:,} of {name}'s {questions} are checked on {model}, the shortest "
        f"first, and the validity check keeps {kept:,} of them ({share}), listed first ({KEPT_MARK}); the "
        f"{total - checked:,} not checked yet ({UNCHECKED_MARK}) follow."
    )


def progress_words(
    subject: str, model_id: str, total: int, checked: int, kept: int, left_s: float | None
) -> str:
    """The progress line of a running check (plain text: a progress bar's text is markdown too)."""
    left = "" if left_s is None else f"; about {_duration(left_s)} left"
    return (
        f"Checking {markdown_text(subject)} on {markdown_text(model_id)}: {checked:,} of {total:,} "
        f"questions checked, {kept:,} kept{left} (a click elsewhere stops it; what is checked stays)."
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def subject_marks(model, model_id: str, subject: str, rows: list[int], copies: dict[int, int]):
    """(the store of this model's check, the subject's ``SubjectMarks``, ``copies`` its repeated
    questions); torch is imported here."""
    from ..batch.mmlu_kept import PICKER_MAX_TOKENS, KeptStore, SubjectMarks, file_stamp, kept_key
    from ..batch.mmlu_tasks import DEFAULT_CORRUPTION, default_min_gap
    from ..models.adapter import model_device

    key = kept_key(
        model_id,
        model_device(model).type,
        file_stamp(),
        DEFAULT_CORRUPTION,
        PICKER_MAX_TOKENS,
        default_min_gap(),
    )
    store = KeptStore(key)
    return store, SubjectMarks(subject, tuple(rows), store.read(subject), copies)


def check_control(
    model, model_id: str, subject: str, rows: list[int], copies: dict[int, int], shown: int
) -> None:
    """The check's button and progress, in a fragment: a press checks the subject's questions not
    checked yet, chunk by chunk, and reruns the page when done, so the list is offered anew.
    ``shown``: how many marks the list outside was drawn with; a fragment's rerun that finds more
    stored (a stopped check, or another session's) reruns the page too. A repeated question
    (``copies``) is not checked: it shows its first copy's mark."""
    _check_fragment(model, model_id, subject, rows, copies, shown)


@st.fragment
def _check_fragment(
    model, model_id: str, subject: str, rows: list[int], copies: dict[int, int], shown: int
) -> None:
    from ..batch.mmlu import load_mmlu
    from ..batch.mmlu_kept import CHUNK, SubjectMarks, check_chunk, check_order

    store, marks = subject_marks(model, model_id, subject, rows, copies)
    if marks.done:
        return
    label = "Check which questions this model keeps" if not marks.checked else "Check the rest"
    go = st.button(label, key="mmlu.check", help="Two forward passes a question; stored, so done once.")
    if not go:
        if marks.checked != shown:  # stopped mid-check (this fragment rerun by the click): show what it found
            st.rerun()
        return
    by_row = {question.row: question for question in load_mmlu().questions if question.subject == subject}
    waiting = check_order(model, [by_row[row] for row in marks.waiting])
    total, checked, kept = len(marks.distinct), marks.checked, marks.kept
    bar = st.progress(checked / total, text=progress_words(subject, model_id, total, checked, kept, None))
    started, done_here = time.monotonic(), 0
    for start in range(0, len(waiting), CHUNK):
        chunk = waiting[start : start + CHUNK]
        try:
            found = check_chunk(model, store, subject, chunk)
        except ValueError as error:  # MMLUError: a tokenizer that splits a letter; its one sentence
            st.info(str(error))
            return
        done_here += len(chunk)
        now = SubjectMarks(subject, tuple(rows), found, copies)
        checked, kept = now.checked, now.kept
        left = (time.monotonic() - started) / done_here * (total - checked)
        bar.progress(checked / total, text=progress_words(subject, model_id, total, checked, kept, left))
    st.rerun()  # the whole page: the list offered with every mark
