"""The batch summary says what NDF is measured against where a task has no corrupted prompt, in
discover's words: the neutral prompt, or ACC++'s signals knocked out. Before 2026-12-06 its
'mean NDF' named no reference for such tasks (docs/datasets.md said it; the printed summary did not)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from circuitviz.batch import atlas
from circuitviz.batch.command import summary_lines
from circuitviz.batch.planted import planted_batch
from circuitviz.details.base import NEUTRAL_PROMPT_WORDS
from circuitviz.details.kinds import reference_words
from circuitviz.measure.task_validity import CHECK_ENV


def _without_corrupted(method: str, blank: int | None = None) -> atlas.BatchTable:
    """A planted batch under ``method`` whose first ``blank`` tasks (all: None) have no corrupted prompt."""
    planted = planted_batch(sizes=(6, 4), seed=1, method=method)
    table = planted.batch.table
    corrupted = table.column("corrupted").to_pylist()
    blank = len(corrupted) if blank is None else blank
    values = pa.array(["" if i < blank else text for i, text in enumerate(corrupted)], type=pa.string())
    table = table.set_column(table.schema.get_field_index("corrupted"), "corrupted", values)
    return atlas.BatchTable(table=table, manifest=planted.batch.manifest)


@pytest.mark.parametrize(
    "method, words",
    [
        ("eap-ig", "the neutral prompt (every token after the first replaced by the padding token)"),
        ("acc++", "its signals knocked out (the prompt with every signal ACC++ found knocked out"),
    ],
)
def test_the_summary_names_ndfs_reference_without_a_corrupted_prompt(method, words):
    lines = summary_lines(_without_corrupted(method))
    said = [line for line in lines if line.startswith("  NDF's 0:")]
    assert len(said) == 1
    assert said[0].startswith(
        f"  NDF's 0: no task has a corrupted prompt, so NDF is measured against {words}"
    )
    assert (
        lines.index(said[0]) == next(i for i, line in enumerate(lines) if line.startswith("  mean NDF")) + 1
    )


def test_a_mixed_batch_says_both_and_a_full_one_says_nothing():
    lines = summary_lines(_without_corrupted("eap-ig", blank=3))
    assert (
        f"  NDF's 0: the corrupted prompt, and for the 3 tasks with none, {NEUTRAL_PROMPT_WORDS} "
        "(the mean mixes the two)" in lines
    )
    assert not [
        line for line in summary_lines(planted_batch(sizes=(6, 4), seed=1).batch) if "NDF's 0" in line
    ]
    assert (
        "signals knocked out" in reference_words("acc++") and reference_words("eap") == NEUTRAL_PROMPT_WORDS
    )


def test_a_task_with_no_corrupted_prompt_is_not_refused_for_its_reference(monkeypatch):
    """The batch runs such a task unchecked (no gap to check); the atlas's stored check refused
    ACC++'s rows whose knockout did not lower the metric by 1, and its series left the summary."""
    monkeypatch.setenv(CHECK_ENV, "on")  # the suite turns the check off for its random models
    batch = _without_corrupted("acc++")
    table = batch.table
    low = pa.array([value + 0.5 for value in table.column("clean_metric").to_pylist()], type=pa.float64())
    table = table.set_column(table.schema.get_field_index("corrupted_metric"), "corrupted_metric", low)
    batch = atlas.BatchTable(table=table, manifest=batch.manifest)
    label = batch.labels[0]
    assert batch.rows(label, passing=True).num_rows == batch.rows(label).num_rows == 10
    assert any(line.startswith("acc++") for line in summary_lines(batch))


def test_a_series_no_task_of_which_passes_the_check_is_said(monkeypatch):
    """Such a series left the summary without a word (ACC++'s, before the check above was fixed)."""
    monkeypatch.setenv(CHECK_ENV, "on")
    planted = planted_batch(sizes=(6, 4), seed=1, method="eap")
    table = planted.batch.table
    high = pa.array([value + 0.5 for value in table.column("clean_metric").to_pylist()], type=pa.float64())
    table = table.set_column(table.schema.get_field_index("corrupted_metric"), "corrupted_metric", high)
    batch = atlas.BatchTable(table=table, manifest=planted.batch.manifest)
    assert summary_lines(batch) == [
        f"{batch.labels[0]}: no figures: none of its 10 finished tasks passes the validity check"
    ]
