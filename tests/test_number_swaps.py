"""A prompt no template recognises whose answer a number decides ("2, 4, 6, 8, 1") gets a
corrupted prompt with that number changed, measured like the word swaps before it is proposed;
until 2026-12-07 it got "No corrupted prompt could be proposed ... holds no name, country or
landmark they know"."""

from __future__ import annotations

import pytest

from circuitviz.query.number_swaps import _others, number_candidates


def _words(text: str) -> int:  # a token count in which a number is one token whatever its digits
    return len(text.split())


def test_the_last_number_then_the_first_is_changed_keeping_its_digit_count():
    found = number_candidates("2, 4, 6, 8, 1", _words)
    assert [(number, which) for _, number, _, which in found] == [("1", "last")] * 2 + [("2", "first")] * 2
    assert found[0][0] == "2, 4, 6, 8, 4" and found[2][0] == "5, 4, 6, 8, 1"
    assert _others("1999") == ["2002", "2004", "2000"]
    assert _others("9999") == ["1002", "1004", "1000"]  # no leading zero, four digits still
    assert _others("07") == ["10", "12", "08"]  # written with its leading zero as typed
    assert number_candidates("Chapter 7 comes after chapter", _words)[0][:4] == (
        "Chapter 0 comes after chapter",
        "7",
        "0",
        "",
    )


@pytest.mark.parametrize("prompt", ["The cat sat on the", "Pi is 3.14 and e is", "Version v2 of the app"])
def test_no_whole_number_no_candidate(prompt):
    assert number_candidates(prompt, _words) == []


def test_a_replacement_changing_the_token_count_is_not_offered():
    # a count in which every digit is a token: '9' -> '2' keeps it, '9' -> '12' would not
    found = number_candidates("Count 9", lambda text: len(text.replace(" ", "")))
    assert found and all(len(corrupted) == len("Count 9") for corrupted, *_ in found)


def test_a_number_sequence_gets_a_measured_corruption(embedded_model, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "on")  # the suite turns it off for its random models
    from circuitviz.core.tasks import PromptTask
    from circuitviz.labels.logit_lens import next_token_probabilities
    from circuitviz.measure.task_validity import task_verdict
    from circuitviz.query.proposals import propose

    prompt = "2, 4, 6, 8, 1"
    proposal = propose(
        embedded_model, prompt, [t for t, _ in next_token_probabilities(embedded_model, prompt, 8)]
    )
    assert proposal.corrupted.startswith("2, 4, 6, 8, ") and proposal.corrupted != prompt
    assert proposal.corrupted_note.startswith("Proposed by changing the last number '1' to ")
    assert "which lowers the logit difference" in proposal.corrupted_note
    task = PromptTask(prompt, proposal.corrupted, proposal.answer, (proposal.foil,))
    assert task_verdict(embedded_model, task) is None  # it passes the page's own check
