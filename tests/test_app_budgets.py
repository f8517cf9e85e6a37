"""The app's budgets box says what the command line's --budgets says (the rules of
circuitviz.entry.budgets, session 31): a refusal is one sentence under the box and Run stays
disabled; repeats and a budget over the graph's edges are a note, and Run goes on.

Before: '10,,20' ran as 10,20 and '20,5,5' as 5,20, unsaid; '10 20' stopped the page with
"invalid literal for int() with base 10: '10 20'" (it read as 1020 elsewhere); 3,99999999999 was
only a note, where the command line refuses it."""

from __future__ import annotations

import pytest
from sentences import assert_one_sentence

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.bench.toy_models import IOI_TASK  # noqa: E402
from circuitviz.core.text import markdown_text  # noqa: E402
from circuitviz.entry.budgets import budget_findings  # noqa: E402
from circuitviz.ui.budget_box import budget_check  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
BASE = {
    "prompt": IOI_TASK.clean,
    "corrupted": IOI_TASK.corrupted,
    "answer": " Mary",
    "foil": " John",
    "method": "eap",
}


def _page(budgets: str, **more) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**BASE, "budgets": budgets, **more}.items():
        at.query_params[name] = value
    return at.run()


def _run_disabled(at: AppTest) -> bool:
    return next(b for b in at.button if b.label == "Run").disabled


REFUSED = [
    ("10,,20", "The budgets box '10,,20' has an empty item"),
    ("10,20,", "has an empty item"),
    ("10 20", "The budgets box item '10 20' is not a whole number of edges; separate budgets with commas"),
    ("3,99999999999", "more edges than any model's graph holds"),
    ("-5", "a negative budget"),
]


@pytest.mark.parametrize("budgets, said", REFUSED)
def test_the_box_refuses_what_the_command_line_refuses(budgets, said):
    problems, _ = budget_check(budgets, 46)
    assert len(problems) == 1 and said in problems[0], problems
    assert_one_sentence(problems[0])
    cli = budget_findings(budgets, "--budgets")[1][0].replace("--budgets", "The budgets box")
    way_out = ", so give that count"  # the app names its graph's count; the command line, discover's
    assert problems[0].split(way_out)[0] == cli.split(way_out)[0]


@pytest.mark.parametrize("budgets, said", REFUSED[:3])
def test_a_refused_box_is_one_sentence_under_it_and_run_waits(budgets, said):
    at = _page(budgets)
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert any(said in text for text in errors), errors
    assert _run_disabled(at)


def test_repeats_and_a_budget_over_the_graph_are_notes_and_run_goes_on():
    at = _page("900,5,5")
    assert not at.exception, at.exception
    notes = [w.value for w in at.warning]
    repeats = (
        "The budgets box names 5 more than once; each budget is evaluated once, so the budgets are 5, 900."
    )
    assert markdown_text(repeats) in notes, notes
    assert any("Budget 900 is over the" in note and "keeps the whole graph" in note for note in notes), notes
    assert not at.error and not _run_disabled(at)


def test_a_budget_over_the_graph_under_acc_says_it_keeps_the_traced_circuit():
    """ACC++ keeps no edge it did not trace: the note under its box said 'keeps the whole graph'."""
    at = _page("900,5", method="acc++")
    assert not at.exception, at.exception
    notes = [w.value for w in at.warning]
    said = markdown_text(
        "so it keeps ACC++'s whole circuit (its traced edges and their completion), not the whole"
    )
    assert any("Budget 900 is over the" in n and said in n for n in notes), notes
    assert not any(markdown_text("keeps the whole graph.") in n for n in notes), notes
