"""A line of code no template recognises, whose answer a code word decides ("def add(a, b): return
a", answer ' +'), gets a corrupted prompt with that word swapped ('add' for 'mul'), measured like
the other swaps before it is proposed; until 2026-12-07 it got "No corrupted prompt could be
proposed ... holds no name, country or landmark they know"."""

from __future__ import annotations

import pytest

from circuitviz.query.code_swaps import code_candidates, code_words_in, looks_like_code
from circuitviz.query.proposals import no_corruption_sentence


def _words(text: str) -> int:  # a token count in which every word is one token
    return len(text.replace("(", " ( ").split())


def test_an_operation_name_is_swapped_for_the_others_of_its_group():
    found = code_candidates("def add(a, b): return a", _words)
    assert [(word, other) for _, word, other in found] == [("add", "mul"), ("add", "sub"), ("add", "div")]
    assert found[0][0] == "def mul(a, b): return a"
    # at every mention
    found = code_candidates("def add(a, b): return a  # add, not sub", _words)
    assert [(word, other) for _, word, other in found] == [
        ("sub", "mul"),  # the last code word first, never for one the prompt holds ('add')
        ("sub", "div"),
        ("add", "mul"),
        ("add", "div"),
        ("add", "multiply"),
    ]
    assert found[2][0] == "def mul(a, b): return a  # mul, not sub"


def test_prose_and_parts_of_names_are_not_swapped():
    assert not looks_like_code("The upper floor of the house is")
    assert not looks_like_code("The answer (in French) is")  # a bracket alone is prose
    assert looks_like_code("import numpy as") and looks_like_code("f(x)") and looks_like_code("x = 3")
    assert code_words_in("The upper floor of the house is") == []
    assert code_words_in("def is_even(n): return") == []  # 'even' inside a name
    assert code_words_in("x = max(a, b) + True") == ["max", "+", "True"]


def test_a_replacement_changing_the_token_count_is_not_offered():
    found = code_candidates("import numpy as", lambda text: len(text))  # 'pandas' is a letter shorter
    assert found == []


@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        ("import os; os.", "holds no code word the app swaps"),
        ("import numpy as", "no code word to put in place of 'numpy' keeps its token count"),
    ],
)
def test_code_with_no_swap_says_what_to_write(prompt, said):
    sentence = no_corruption_sentence(prompt, None)
    assert said in sentence and "'def add' as 'def mul'" in sentence
    assert "country or landmark" not in sentence


def test_an_operator_between_spaces_is_swapped():
    found = code_candidates('if a > b:\n    print("a is', _words)
    assert [(word, other) for _, word, other in found] == [(">", "<")]
    assert found[0][0] == 'if a < b:\n    print("a is'
    assert code_words_in("x = -1 if a <= b else a**2") == ["<="]  # not '-' of '-1', '<' of '<=' or '*'


@pytest.mark.parametrize(
    ("prompt", "answer", "foil", "corrupted", "said"),
    [
        ("def add(a, b): return a", " +", " *", "def mul(a, b): return a", "the code word 'add' for 'mul'"),
        (
            'if a > b:\n    print("a is',
            " greater",
            " less",
            'if a < b:\n    print("a is',
            "the operator '>' for '<'",
        ),
    ],
)
def test_a_code_line_gets_a_measured_corruption(
    embedded_model, monkeypatch, prompt, answer, foil, corrupted, said
):
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "on")  # the suite turns it off for its random models
    from circuitviz.core.tasks import PromptTask
    from circuitviz.labels.logit_lens import next_token_probabilities
    from circuitviz.measure.task_validity import task_verdict
    from circuitviz.query.proposals import propose

    top = [t for t, _ in next_token_probabilities(embedded_model, prompt, 8)]
    proposal = propose(embedded_model, prompt, top)
    assert (proposal.answer, proposal.foil, proposal.corrupted) == (answer, foil, corrupted)
    assert proposal.corrupted_note.startswith(f"Proposed by swapping {said}")
    assert "which lowers the logit difference" in proposal.corrupted_note
    task = PromptTask(prompt, proposal.corrupted, proposal.answer, (proposal.foil,))
    assert task_verdict(embedded_model, task) is None  # it passes the page's own check
