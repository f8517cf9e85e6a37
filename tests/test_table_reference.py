"""The command line's faithfulness table names what its figures divide by.

A run without a corrupted prompt (flow routes, CD-T) measures NDF and necessity against the neutral
prompt; its table's second metric reads "neutral prompt metric", and the legend under it must not
say "the clean-corrupted difference" of a run that had no corrupted prompt (it did, on
"Snow is white and grass is" with flow routes, both embedded models, 2026-12-07)."""

from __future__ import annotations

import math

from circuitviz.core.curves import Baseline, CurvePoint
from circuitviz.entry.tables import format_table


def _curve(completeness: float = math.nan) -> list[CurvePoint]:
    return [CurvePoint(100, 100, -17.6, 0.077, 0.077, necessity=0.962, completeness=completeness)]


def test_the_neutral_prompt_table_says_what_necessity_divides_by():
    table = format_table(Baseline(-0.805, -19.035), _curve(), 10_342, "logprob", "neutral prompt")
    assert "neutral prompt metric" in table
    assert (
        "necessity: 1 - removing only the circuit's edges removes the difference between the clean and "
        "the neutral prompt metrics" in table
    )
    assert "clean-corrupted" not in table


def test_completeness_and_the_weak_note_name_the_neutral_prompt_too():
    table = format_table(Baseline(-0.8, -0.9), _curve(0.5), 10_342, "logprob", "neutral prompt")
    assert "larger than the difference between the clean and the neutral prompt metrics (clipped)" in table
    assert "note: the difference between the clean and the neutral prompt metrics is +0.1 (too small" in table
    assert "clean-corrupted" not in table


def test_a_corrupted_prompt_keeps_the_clean_corrupted_words():
    table = format_table(Baseline(6.1, 0.08), _curve(0.5), 10_342, "logit_diff")
    assert "removes the clean-corrupted difference" in table
    assert "larger than the clean-corrupted difference (clipped)" in table
