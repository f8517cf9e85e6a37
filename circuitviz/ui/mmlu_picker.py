"""Explore's MMLU question picker: a subject, then one of its questions, made the prompt.

The question becomes the task ``circuitviz.batch.mmlu_tasks`` builds (its documented prompt,
the letter the model prefers as the answer, the four markers renamed as the corrupted prompt);
Explore has one foil box, so the foil is the strongest other letter. A question the validity
check refuses (its corruption lowers the metric by less than 1 logit) is still loaded, with the
reason shown, so the user can see why, and the refusal on Explore says to pick another question.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import streamlit as st

from . import state
from .mmlu_offer import copy_line
from .state import session

REFUSED_HINT = (
    " This MMLU question's letter preference hardly moves when its option markers are renamed:"
    ' pick another question under "Or pick an MMLU question".'
)


@st.cache_data(show_spinner=False)
def _subjects() -> list[str]:
    return list(picker_index())


@st.cache_data(show_spinner=False, max_entries=64)
def _questions(subject: str) -> list[tuple[int, str]]:
    """(row, the question on one line, cut at 100 characters with an ellipsis) of a subject, in
    the file's order; the whole question becomes the prompt once chosen."""
    return [(row, line) for row, line, _ in picker_index().get(subject, [])]


@st.cache_data(show_spinner=False, max_entries=64)
def _copies(subject: str) -> dict[int, int]:
    """{row: the row of the earlier question it repeats} of a subject's repeated questions."""
    return {row: first for row, _, first in picker_index().get(subject, []) if first is not None}


INDEX_FILE = "picker.json"  # in the cache's mmlu/ folder
INDEX_VERSION = 2  # changed with what the index holds or how its lines are cut (2: the copies)


@lru_cache(maxsize=1)
def picker_index() -> dict[str, list[tuple[int, str, int | None]]]:
    """What the picker lists: each subject (sorted) with its questions as (row, the question on
    one line, the row of the earlier question it repeats or None: ``batch.mmlu.first_copies``, the
    drawer's rule), in the file's order.

    Read from ``$CIRCUITVIZ_CACHE/mmlu/picker.json`` when that index was made from the installed
    file as it is now (its path, size and modification time), else made from the parsed file and
    written there (1.4 MB). The picker is drawn, closed, on every Explore page, after the model
    has loaded and before Run is: parsing the 14,042 questions there took 0.1-0.3 CPU s of each
    server's first page (docs/benchmarks.md); reading the index takes about 0.01 s. An index
    that cannot be read, or holds anything but subjects and (row, line) pairs, is made again."""
    # here, not at the top: keeps torch out of the first paint
    from ..batch.mmlu import first_copies, load_mmlu, mmlu_path
    from ..services.assets import cache_dir

    source = mmlu_path()  # MMLUError (a ValueError) saying how to install it when it is not
    stat = source.stat()
    stamp = {
        "version": INDEX_VERSION,
        "path": str(source),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
    }
    path = cache_dir("mmlu") / INDEX_FILE
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored["source"] == stamp:
            return _index_pairs(stored["subjects"])
    except (OSError, ValueError, KeyError, TypeError):  # none yet, unreadable, or another shape
        pass
    questions = load_mmlu().questions
    copies = first_copies(questions)
    index: dict[str, list[tuple[int, str, int | None]]] = {}
    for question in questions:
        line = (question.row, _one_line(question.question), copies.get(question.row))
        index.setdefault(question.subject, []).append(line)
    index = dict(sorted(index.items()))
    written = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
            written = out.name
            json.dump({"source": stamp, "subjects": index}, out)
        os.replace(written, path)  # whole or not at all, for a server starting beside this one
    except OSError:  # a read-only or full cache: made again at the next start
        if written is not None:
            Path(written).unlink(missing_ok=True)
    return index


def _index_pairs(subjects) -> dict[str, list[tuple[int, str, int | None]]]:
    """A stored index's subjects as (row, line, row repeated or None); TypeError when it holds
    anything else."""
    if not isinstance(subjects, dict):
        raise TypeError("not an index")
    index = {}
    for subject, questions in subjects.items():
        lines = [(row, line, first) for row, line, first in questions]
        if not all(
            type(row) is int and isinstance(line, str) and (first is None or type(first) is int)
            for row, line, first in lines
        ):
            raise TypeError("not an index")
        index[subject] = lines
    return index


def _one_line(text: str, width: int = 100) -> str:
    """The text on one line, cut visibly (…) where it is longer than ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _use_question(row: int) -> None:
    """The button's callback: remember the choice, nothing more (``_open_chosen`` opens it).

    A callback must be quick. With Streamlit's fast reruns, another input while a callback runs
    (a click, a drawing asking for its script) starts a new run at once, beside the old one: a
    callback that ran the model (a second or more on a busy CPU) left its task behind that new
    run, and the page showed the old prompt until the next input."""
    session.mmlu_choice = (row, object())  # the object: this click, not an equal later one


def _open_chosen(model) -> None:
    """Open the chosen question as Explore's task (the script's body, after the model loaded),
    then rerun so that it is set before the boxes are drawn. A run stopped for a newer one may
    still finish this: only the run that finds the choice still current opens it, and a run
    that finds a task opened after its start (by such a stopped run) reruns to show it."""
    chosen = session.mmlu_choice
    if chosen is not None:
        task = _question_task(model, chosen[0])
        if session.mmlu_choice is chosen:
            if task is not None:
                state.open_task(**task)
            del session.mmlu_choice
    if state.open_is_waiting():
        st.rerun()


def _question_task(model, row: int) -> dict | None:
    """``state.open_task``'s arguments for question ``row`` (None, with the note set, when the
    tokenizer cannot make it a task)."""
    # here, not at the top: keeps torch out of the first paint
    from ..batch.mmlu import load_mmlu
    from ..batch.mmlu_tasks import question_verdict

    question = next(q for q in load_mmlu().questions if q.row == row)
    try:
        verdict = question_verdict(model, question, max_tokens=10**6)
    except ValueError as error:  # a tokenizer whose letters are not one token each
        session.mmlu_note = str(error)
        del session.mmlu_prompt  # no question opened: the note is about this model, not a prompt
        return None
    task = verdict.task
    if verdict.clean_metric != verdict.clean_metric:  # NaN: too long for this model to read at all
        session.mmlu_note = f"{question.subject}, question {question.id}: not opened, {verdict.reason}."
        del session.mmlu_prompt  # no question opened
        return None
    if task is None:  # refused by the check: show it anyway, with the model's own letters
        from ..batch.mmlu_tasks import CORRUPTIONS, DEFAULT_CORRUPTION

        letters = _preferred_letters(model, question)
        corrupted = CORRUPTIONS[DEFAULT_CORRUPTION](model, question, letters[0])
        answer, foil = f" {'ABCD'[letters[0]]}", f" {'ABCD'[letters[1]]}"
    else:
        answer, foil, corrupted = task.answer, task.foils[0], task.corrupted
    correct = "the key's letter" if answer.strip() == question.correct else f"the key says {question.correct}"
    return dict(
        task={"clean": question.prompt(), "corrupted": corrupted, "answer": answer, "foils": [foil]},
        corrupted_note="MMLU: the four option markers renamed E-H, so the letters are gone.",
        foil_note="MMLU: the foil is the letter the model prefers after the answer.",
        run=False,
        switch=False,  # Explore itself: the rerun opens it
        mmlu_prompt=question.prompt(),
        corrupted_came_with=None,  # proposed, not a run's: hidden for a method that needs none
        mmlu_note=f"{question.subject}, question {question.id}: the model prefers{answer} ({correct}); "
        + (
            "a valid task."
            if task is not None
            else f"refused as a task: {refusal_words(verdict, answer, foil)}."
        ),
    )


def refusal_words(verdict, answer: str, foil: str) -> str:
    """Why the question is refused, with the figures the refusal measured where it measured any:
    its metric (the preferred letter's logit over the mean of the other three) differs from the
    check under the boxes (the logit difference over one foil), and a user read "lowers the metric
    by less than 1 logit" over "the corruption raises the logit difference of ' A'" (SmolLM2-135M,
    where both were true of their own measure)."""
    clean, corrupted = verdict.clean_metric, verdict.corrupted_metric
    if not (math.isfinite(clean) and math.isfinite(corrupted)):
        return verdict.reason
    return (
        f"{verdict.reason} (its metric, the logit of '{answer}' over the mean of the other three letters: "
        f"{clean:+.2f} with the options lettered A-D, {corrupted:+.2f} lettered E-H; the check under "
        f"the boxes measures '{answer}' over '{foil}' alone)"
    )


def _preferred_letters(model, question) -> list[int]:
    """The four letters' indices, the model's preferred first."""
    # here, not at the top: keeps torch out of the first paint
    import torch

    from ..batch.mmlu_tasks import letter_token_ids, next_token_logits
    from ..models.adapter import adapter_of

    tokens = adapter_of(model).to_tokens(question.prompt(), truncate=False)
    logits = next_token_logits(model, tokens)[0]  # [d_vocab]
    logits = logits[torch.tensor(letter_token_ids(model), device=logits.device)]  # [4]
    return logits.argsort(descending=True).tolist()


def mmlu_picker(model, prompt: str | None = None, model_id: str | None = None) -> None:
    """An expander: pick an MMLU subject and question, then load it as the prompt. The note on
    the question opened (the model's letter, valid or refused) stands above the expander, which
    the page's rerun draws closed, while ``prompt`` is still that question. With ``model_id``
    (the sidebar's model) the subject's questions can be checked for this model, and those its
    check keeps are offered first (``mmlu_offer``)."""
    _open_chosen(model)
    note = _current_note(prompt)
    if note:
        st.caption(note)
    with st.expander("Or pick an MMLU question (MIT-licensed, Hendrycks et al.)"):
        try:
            subjects = _subjects()
        except ValueError as error:  # MMLU not installed: the sentence says how to install it
            st.info(str(error))
            return
        subject = st.selectbox("Subject", subjects, key="mmlu.subject")
        questions, copies = _questions(subject), _copies(subject)
        rows, lines = [r for r, _ in questions], dict(questions)
        for row, first in copies.items():  # a repeat of an earlier question says so (the drawer refuses it)
            lines[row] = copy_line(lines[row], first)
        order, label, key = rows, lines.get, "mmlu.question"
        if model_id is not None:
            order, label, checked = _offered(model, model_id, subject, rows, lines, copies)
            # a box of its own per count of marks: Streamlit keeps a choice by its text, and a
            # choice whose mark changed kept its old text on screen after a check (Chromium)
            key = f"{key}.{checked}" if checked else key
        row = st.selectbox(
            f"Question ({len(questions)})"
            if len(order) == len(rows)
            else f"Question ({len(order)} of {len(rows)})",
            order,
            format_func=label,
            key=key,
        )
        st.button("Use this question", key="mmlu.use", on_click=_use_question, args=(row,))


def _offered(
    model, model_id: str, subject: str, rows: list[int], lines: dict[int, str], copies: dict[int, int]
):
    """(the rows in the order offered, each row's line with its mark, how many are checked), after
    the sentence of how many the model keeps (a repeated question counted once) and the check's
    button; the file's order, unmarked, where this model's tokenizer cannot make the questions
    tasks (its sentence said instead)."""
    from .mmlu_offer import ONLY_KEPT_KEY, check_control, marked, offer_order, offer_sentence, subject_marks

    _, marks = subject_marks(model, model_id, subject, rows, copies)
    total = len(marks.distinct)
    st.caption(offer_sentence(subject, model_id, total, marks.checked, marks.kept, len(rows) - total))
    check_control(model, model_id, subject, rows, copies, marks.checked)
    only = marks.kept > 0 and st.toggle("Only the questions this model keeps", key=ONLY_KEPT_KEY)
    shown = marks.shown()  # a copy with its first copy's mark
    return (
        offer_order(marks.distinct if only else rows, shown, only),  # only: each question once
        lambda row: marked(lines[row], shown.get(row)),
        marks.checked,
    )


def _current_note(prompt: str | None) -> str | None:
    """The picker's note while it is true of the page: a question's while the prompt is still the
    question (an edited or new prompt is no longer it); a tokenizer's refusal to make any question
    a task, whatever the prompt."""
    if not session.mmlu_note:
        return None
    if session.mmlu_prompt is None or prompt is None or session.mmlu_prompt == prompt:
        return session.mmlu_note
    return None
