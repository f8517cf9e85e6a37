"""The MMLU picker's offer: which questions the sidebar's model keeps, checked once and stored.

The stored marks' key (model, device kind, question file, the check's code), the batched check
against the one-question check (one rule), the store's chunks, the order the picker offers and
its sentence, and the page: a press checks the subject, and the list is offered anew.
"""

from __future__ import annotations

import functools

import pytest
import torch

from circuitviz.batch import mmlu_kept
from circuitviz.batch import mmlu_tasks as building
from circuitviz.batch.mmlu import LETTERS, MMLUQuestion
from circuitviz.batch.mmlu_kept import KeptStore, Mark, SubjectMarks, check_chunk, kept_key
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core import keys
from circuitviz.ui.mmlu_offer import (
    KEPT_MARK,
    REFUSED_MARK,
    UNCHECKED_MARK,
    marked,
    offer_order,
    offer_sentence,
)

QUESTIONS = [
    MMLUQuestion(
        0, "geography", "What is the capital of France?", ("Rome", "Paris", "Berlin", "Madrid"), "B"
    ),
    MMLUQuestion(1, "geography", "What is the capital of Italy?", ("Paris", "Madrid", "Rome", "Berlin"), "C"),
    MMLUQuestion(2, "geography", "Capital of Spain?", ("Berlin", "Rome", "Paris", "Madrid"), "D"),
    MMLUQuestion(
        3,
        "geography",
        "What is the capital city of the country Germany?",
        ("Paris", "Rome", "Madrid", "Berlin"),
        "D",
    ),
    MMLUQuestion(
        4, "history", "Who was the first emperor of Rome?", ("Augustus", "Nero", "Caesar", "Paris"), "A"
    ),
]
WORDS = sorted(
    {word for q in QUESTIONS for word in q.prompt().split()} | set(LETTERS) | {"E.", "F.", "G.", "H."}
)
LETTERS_MODEL = functools.partial(tiny_model, "gpt2", words=tuple(WORDS), n_ctx=512)
STAMP = {"path": "/x/mmlu.jsonl", "size": 10, "mtime_ns": 1}


@pytest.fixture(scope="module")
def letters_model():
    return LETTERS_MODEL()


# ----- the key ------------------------------------------------------------------------------------
def test_the_stored_marks_key_changes_with_the_model_the_file_the_check_and_the_code(monkeypatch):
    base = dict(
        model_id="smollm2-135m",
        device="cpu",
        stamp=STAMP,
        corruption="letters",
        max_tokens=10**6,
        min_gap=1.0,
    )
    key = kept_key(**base)
    assert kept_key(**base) == key
    assert kept_key(**{**base, "device": "cpu:0"}) == key  # the device's kind, not its index
    changed = [
        {"model_id": "gemma-3-270m"},
        {"device": "cuda"},
        {"stamp": {**STAMP, "size": 11}},
        {"stamp": {**STAMP, "mtime_ns": 2}},
        {"stamp": {**STAMP, "path": "/y/mmlu.jsonl"}},
        {"corruption": "label"},
        {"max_tokens": 128},
        {"min_gap": float("-inf")},  # CIRCUITVIZ_TASK_CHECK=off
    ]
    for change in changed:
        assert kept_key(**{**base, **change}) != key, change
    monkeypatch.setattr(keys, "engine_digest", lambda: "0.1.0+another-code")  # another version of the check
    assert kept_key(**base) != key


def test_the_file_stamp_is_the_installed_files_identity():
    stamp = mmlu_kept.file_stamp()
    assert stamp["path"].endswith("mmlu.jsonl") and stamp["size"] > 10**6 and stamp["mtime_ns"] > 0


# ----- the check: one rule for one question or many -----------------------------------------------
def test_the_batched_check_gives_each_questions_own_verdict(letters_model, monkeypatch):
    """Prompts of several lengths in one padded pass, and a chunk smaller than the questions: the
    same letter, metrics and verdict as the check of each question alone (the refusal's)."""
    monkeypatch.setattr(building, "CHECK_ROWS", 3)
    monkeypatch.setattr(building, "CPU_CHECK_ROWS", 3)
    alone = [building.question_verdict(letters_model, q, min_gap=-float("inf")) for q in QUESTIONS]
    gaps = sorted(v.clean_metric - v.corrupted_metric for v in alone)
    threshold = (gaps[1] + gaps[2]) / 2  # some kept, some refused
    alone = [building.question_verdict(letters_model, q, min_gap=threshold) for q in QUESTIONS]
    together = building.question_verdicts(letters_model, QUESTIONS, min_gap=threshold)
    assert len({len(q.prompt().split()) for q in QUESTIONS}) > 2  # padded: lengths differ
    assert [v.kept for v in together] == [v.kept for v in alone] and 0 < sum(v.kept for v in alone) < 5
    for one, many in zip(alone, together):
        assert one.question == many.question and one.reason == many.reason
        assert (one.task and one.task.answer) == (many.task and many.task.answer)
        for name in ("clean_metric", "corrupted_metric", "letter_mass"):
            assert getattr(many, name) == pytest.approx(getattr(one, name), abs=1e-4)


def test_a_question_over_the_length_limit_is_refused_in_a_batch_without_a_forward_pass(letters_model):
    verdicts = building.question_verdicts(letters_model, QUESTIONS[:2], max_tokens=3)
    assert [v.reason for v in verdicts] == ["longer than 3 tokens"] * 2


# ----- the store ----------------------------------------------------------------------------------
def test_a_chunks_marks_are_stored_beside_the_others_and_read_back(tmp_path, letters_model):
    store = KeptStore("k", root=tmp_path)
    assert store.read("geography") == {}

    def fake(model, questions):
        return [building.question_verdict(model, q, min_gap=-float("inf")) for q in questions]

    first = check_chunk(letters_model, store, "geography", QUESTIONS[:2], check=fake)
    both = check_chunk(letters_model, store, "geography", QUESTIONS[2:4], check=fake)
    assert set(first) == {0, 1} and set(both) == {0, 1, 2, 3}
    assert KeptStore("k", root=tmp_path).read("geography") == both  # from the file
    assert all(mark.kept and mark.letter in LETTERS for mark in both.values())
    assert KeptStore("other", root=tmp_path).read("geography") == {}  # another key: none
    assert store.read("history") == {}
    marks = SubjectMarks("geography", (0, 1, 2, 3, 9), both)
    assert (marks.checked, marks.kept, marks.waiting, marks.done) == (4, 4, [9], False)
    store._path("geography").write_text("not json")
    assert store.read("geography") == {}  # unreadable: checked again


# ----- the offer ----------------------------------------------------------------------------------
def test_the_picker_offers_the_kept_first_then_the_unchecked_then_the_refused():
    marks = {
        3: Mark(False, "corruption lowers the metric by less than 1 logit", "A"),
        5: Mark(True, None, "B"),
        1: Mark(True, None, "D"),
        7: Mark(False, "longer than 10 tokens"),
    }
    rows = [1, 2, 3, 4, 5, 6, 7]
    assert offer_order(rows, marks) == [1, 5, 2, 4, 6, 3, 7]
    assert offer_order(rows, marks, only_kept=True) == [1, 5]
    assert offer_order(rows, {}) == rows
    assert marked("What?", marks[1]) == f"{KEPT_MARK} What?"
    assert marked("What?", marks[3]) == f"{REFUSED_MARK} What?"
    assert marked("What?", None) == f"{UNCHECKED_MARK} What?"


def test_the_offers_sentence_is_true_of_the_counts():
    from sentences import assert_one_sentence

    def offer(*args):  # as rendered: markdown's escapes gone
        return offer_sentence(*args).replace("\\", "")

    done = offer("astronomy", "smollm2-135m", 152, 152, 9)
    assert "keeps 9 of astronomy's 152 questions on smollm2-135m (6%)" in done
    partial = offer("astronomy", "smollm2-135m", 152, 48, 3)
    assert partial.startswith("So far 48 of astronomy's 152 questions are checked on smollm2-135m")
    assert "the validity check keeps 3 of them (6%)" in partial and "the 104 not checked yet" in partial
    none = offer("astronomy", "smollm2-135m", 152, 0, 0)
    assert none.startswith("None of astronomy's 152 questions is checked on smollm2-135m yet")
    for sentence in (done, partial, none):
        assert_one_sentence(sentence)
    assert "\\*" in offer_sentence("a*b*", "m", 2, 2, 1)  # a subject's markup is escaped


# ----- the page -----------------------------------------------------------------------------------
def test_explore_checks_a_subject_once_and_offers_the_kept_first(tiny_app, monkeypatch):
    """A press checks the first subject on the tiny model (here every question kept: the check
    off), the list is then offered marked with the sentence; a second server's page reads the
    stored marks without a forward pass."""
    from streamlit.testing.v1 import AppTest
    from test_app_state import BASE

    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "off")
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in BASE.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("None of abstract algebra's 100 questions is checked") for c in at.caption)
    at.selectbox(key="mmlu.question").select_index(2).run()  # the third question chosen before the check
    next(b for b in at.button if b.label == "Check which questions this model keeps").click()
    at.run()
    assert not at.exception, at.exception
    sentence = [c.value for c in at.caption if c.value.startswith("The validity check keeps")]
    box = next(b for b in at.selectbox if b.label.startswith("Question"))
    options = box.options
    kept = [option for option in options if option.startswith(KEPT_MARK)]
    # the check off keeps every question the tiny model can read: those within its 64-token context
    assert 0 < len(kept) < 100 and options == kept + [o for o in options if o.startswith(REFUSED_MARK)]
    assert sentence and f"keeps {len(kept)} of abstract algebra's 100 questions" in sentence[0], sentence
    assert not any(b.label.startswith("Check") for b in at.button)  # done: no button
    assert isinstance(box.value, int) and box.index == 0  # a row, the first kept: chosen anew
    at.toggle(key="mmlu.only_kept").set_value(True).run()
    box = next(b for b in at.selectbox if b.label.startswith("Question"))
    assert box.options == kept and box.label == f"Question ({len(kept)} of 100)"

    calls = []
    monkeypatch.setattr(building, "question_verdicts", lambda *a, **k: calls.append(a) or [])
    again = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in BASE.items():
        again.query_params[name] = value
    again.run()
    assert any(f"keeps {len(kept)} of abstract algebra's 100" in c.value for c in again.caption) and not calls


# ----- repeated questions -----------------------------------------------------------------------
def test_a_repeated_question_is_one_question_to_the_drawer_and_the_picker(letters_model):
    """MMLU's test split repeats 27 questions: the batch drawer refuses the second copy, and the
    picker listed both, could mark both kept and counted both in "keeps N of M". One rule
    (``mmlu.same_question``) says what a repeat is, white space runs aside, for both."""
    from circuitviz.batch.mmlu import MMLUData, first_copies, load_mmlu
    from circuitviz.ui.mmlu_offer import copy_line

    spaced = QUESTIONS[0].question.replace(" ", "  ")  # the same question to the drawer
    again = MMLUQuestion(9, "geography", spaced, QUESTIONS[0].options, "B")
    other = MMLUQuestion(8, "history", QUESTIONS[0].question, QUESTIONS[0].options, "B")  # another subject
    questions = (*QUESTIONS[:4], other, again)
    assert first_copies(questions) == {9: 0}
    dataset = building.mmlu_tasks(
        letters_model, "geography", 5, data=MMLUData(questions, (), 6), min_gap=-float("inf")
    )
    assert dataset.summary["per_subject"]["geography"]["refusals"] == {
        "the same question as one drawn before": 1
    }
    copies = first_copies(load_mmlu().questions)  # the file: us foreign policy's 938 repeats 927
    assert len(copies) == 27 and copies[938] == 927
    assert copy_line("What?", 927) == "(the same question as mmlu-00927) What?"

    kept = Mark(True, None, "B")
    marks = SubjectMarks("geography", (0, 1, 2, 9), {0: kept, 1: Mark(False, "too weak")}, {9: 0})
    assert marks.distinct == [0, 1, 2] and (marks.checked, marks.kept, marks.waiting) == (2, 1, [2])
    assert marks.shown() == {0: kept, 9: kept, 1: marks.marks[1]}  # the copy shows its first's mark
    assert offer_order(list(marks.rows), marks.shown()) == [0, 9, 2, 1]
    assert offer_order(marks.distinct, marks.shown(), only_kept=True) == [0]
    sentence = offer_sentence("geography", "m", 3, 3, 1, 1)
    assert (
        "keeps 1 of geography's 3 questions (not counting 1 row that repeats an earlier one) on m" in sentence
    )
    assert "11 rows that repeat" in offer_sentence("college physics", "m", 91, 0, 0, 11)


def test_explore_marks_a_repeated_question_and_counts_it_once(tiny_app, monkeypatch):
    """us foreign policy lists its 100 rows, 938 marked the same question as 927; the check keeps
    and counts 99 questions, and the copy shows the first's mark."""
    from streamlit.testing.v1 import AppTest
    from test_app_state import BASE

    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "off")
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in BASE.items():
        at.query_params[name] = value
    at.run()
    at.selectbox(key="mmlu.subject").set_value("us foreign policy").run()
    assert not at.exception, at.exception
    said = "us foreign policy's 99 questions (not counting 1 row that repeats an earlier one)"
    assert any(c.value.replace("\\", "").startswith(f"None of {said}") for c in at.caption)
    box = next(b for b in at.selectbox if b.label.startswith("Question"))
    copies = [o for o in box.options if o[2:].startswith("(the same question as mmlu-00927) ")]
    assert len(copies) == 1 and box.label == "Question (100)"
    next(b for b in at.button if b.label == "Check which questions this model keeps").click()
    at.run()
    assert not at.exception, at.exception
    box = next(b for b in at.selectbox if b.label.startswith("Question"))
    line = copies[0][2:].split(") ", 1)[1]  # the copy's line, its mark and words off
    first = next(o for o in box.options if o[2:] == line)
    copy = next(o for o in box.options if "mmlu-00927" in o)
    assert copy[0] == first[0] != UNCHECKED_MARK  # the copy's mark is its first's
    kept = sum(o.startswith(KEPT_MARK) and "mmlu-00927" not in o for o in box.options)
    assert any(f"keeps {kept} of {said}" in c.value.replace("\\", "") for c in at.caption), [
        c.value for c in at.caption
    ]


def test_a_forward_pass_runs_on_the_models_device(letters_model):
    """The padded pass's last-position indices are made on the model's device."""
    letters = torch.tensor(building.letter_token_ids(letters_model), device="cpu")
    rows = [torch.tensor([1, 2, 3], device="cpu"), torch.tensor([1, 2], device="cpu")]
    scores, mass = building._letter_scores(letters_model, rows, letters)
    assert scores.shape == (2, 4) and mass.shape == (2,)
