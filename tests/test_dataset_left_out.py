"""What a batch left out, as the Dataset page says it: a sentence, never a Python repr.

The runner writes a drawn batch's source as the request's ``generate`` tuple ("generated ('mmlu',
10, 0)"), and the page read it as a file's name: an MMLU batch with a subject short of valid
questions said "1 line of generated ('mmlu', 10, 0) was left out before the batch ran, as not
tasks", of no line and no file. A problem recorded as a record rather than text showed its repr.
"""

from __future__ import annotations

from circuitviz.batch.reuse import _data_text, generated_parts, generated_text
from circuitviz.ui.dataset import left_out

SHORT = "astronomy: only 3 of the 10 questions tried are valid tasks for this model."


def _manifest(source, problems):
    return {"dataset": {"source": source, "problems": problems}}


def test_a_drawn_batchs_notes_are_said_without_the_repr():
    sentence, lines = left_out(_manifest("generated ('mmlu', 10, 0)", [SHORT]))
    assert sentence == (
        "Drawing the batch's MMLU tasks left 1 note: every figure on this page is of the tasks it drew."
    )
    assert lines == [SHORT] and "(" not in sentence and "line" not in sentence
    assert left_out(_manifest("generated ioi", [SHORT, SHORT]))[0].startswith(
        "Drawing the batch's ioi tasks left 2 notes"
    )


def test_a_files_lines_are_said_as_before_and_a_record_reads_as_its_values():
    sentence, lines = left_out(
        _manifest("/data/tasks.jsonl", ["line 5 has no 'answer'.", {"line": 7, "reason": "not JSON"}])
    )
    assert sentence.startswith("2 lines of tasks.jsonl were left out before the batch ran")
    assert lines == ["line 5 has no 'answer'.", "line: 7; reason: not JSON"]  # not "{'line': 7, ...}"
    assert left_out(_manifest(None, ["x"]))[0].startswith("1 line of the dataset file was left out")
    assert left_out(_manifest("", [])) is None


def test_the_resume_check_names_drawn_tasks_in_words():
    assert generated_parts("generated ('mmlu', 10, 0)") == ("mmlu", 10, 0)
    assert generated_parts("generated ['ioi', 4, 1]") == ("ioi", 4, 1)
    assert generated_parts("/data/tasks.jsonl") is None and generated_parts(None) is None
    assert generated_parts("generated __import__('os')") is None  # read, never run
    assert generated_text("generated ('mmlu', 10, 0)") == "10 generated mmlu tasks (seed 0)"
    assert _data_text({"generated": "generated ('ioi', 1, 2)"}) == "1 generated ioi task (seed 2)"
