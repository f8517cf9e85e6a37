"""The foil proposed with a corrupted prompt is the answer it leads to, of the answer's kind
(``query.foils``), on the embedded Gemma-3-270M, and the corruption is measured against it."""

from __future__ import annotations

import pytest

from circuitviz.core.tasks import PromptTask

JAPAN = "What is the capital of Japan?"


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "on")  # the suite turns it off for its random models


def _top(model, prompt):
    from circuitviz.labels.logit_lens import next_token_probabilities

    return [token for token, _ in next_token_probabilities(model, prompt, 8)]


def test_a_content_answer_gets_the_content_word_the_corruption_leads_to(embedded_model, checked):
    # ' The' (4.2% after "What is the capital of France?", 3.1% after the prompt) was the foil of
    # ' Tokyo': its logit difference measured ' Tokyo' over a sentence's start, not over ' Paris'
    from circuitviz.measure.task_validity import task_gaps
    from circuitviz.query.proposals import proposal_for

    made = proposal_for(embedded_model, JAPAN, " Tokyo", _top(embedded_model, JAPAN))
    assert (made.corrupted, made.foil) == ("What is the capital of France?", " Paris")
    # short: it ran to 9 lines under the foil box at 1,000 px until 2026-12-07
    assert made.foil_note == (
        "The foil is what the corrupted prompt leads to (1.6% there), a content word or number as the answer is."
    )
    # the note's figure is the gap against the foil proposed with it
    gap = task_gaps(embedded_model, [PromptTask(JAPAN, made.corrupted, " Tokyo", (" Paris",))])[0]
    assert f"over ' Paris' by {gap:.3g}" in made.corrupted_note


def test_a_content_word_the_corruption_does_not_raise_is_passed_over(embedded_model, checked):
    # ' one' (11.0% after "The capital of Italy is", 7.2% after the prompt) is a content word the
    # corruption hardly moves; ' Rome' (7.0%, 0.05%) is the answer it leads to
    from circuitviz.query.proposals import propose

    prompt = "The capital of France is"
    made = propose(embedded_model, prompt, _top(embedded_model, prompt))
    assert (made.answer, made.foil, made.corrupted) == (" Paris", " Rome", "The capital of Italy is")
    lower = propose(
        embedded_model, "the capital of france is", _top(embedded_model, "the capital of france is")
    )
    assert (lower.answer, lower.foil) == (" paris", " rome")  # not ' known' (6.8%, 6.1% after the prompt)


def test_a_function_word_answer_and_a_name_keep_their_foils(embedded_model, checked):
    from circuitviz.query.proposals import propose

    made = propose(
        embedded_model, "Mary gave John a book because", _top(embedded_model, "Mary gave John a book because")
    )
    assert (made.answer, made.foil) == (" he", " she")  # a function word, as the answer is
    ioi = "When Mary and John went to the store, John gave a drink to"
    made = propose(embedded_model, ioi, _top(embedded_model, ioi))
    assert (made.answer, made.foil) == (" Mary", " John")  # the other name, as before
    assert made.foil_note == "The foil is the other name of the prompt (the repeated subject)."


def test_no_token_of_the_answers_kind_falls_back_to_the_likeliest(spaced):
    from circuitviz.query.foils import corrupted_foil

    likely = [(" the", 0.5, 0.1), (" known", 0.2, 0.19), (" Rome", 0.1, None), (" Paris", 0.01, 0.8)]
    foil, note = corrupted_foil(spaced, " Paris", likely)
    assert foil == " the"
    assert note == "The foil is the model's likeliest other answer after the corrupted prompt."
    raised = [likely[0], (" Rome", 0.1, 0.01), *likely[1:]]
    assert corrupted_foil(spaced, " Paris", raised)[0] == " Rome"  # 10 times likelier than after the prompt
    # where the corruption does not make the answer less likely, the likeliest, as before
    assert corrupted_foil(spaced, " Paris", [*raised[:-1], (" Paris", 0.5, 0.8)])[0] == " the"


def test_the_command_line_proposes_the_foil_the_app_does(embedded_model, checked):
    from circuitviz.entry.api import with_proposed_inputs

    task, said = with_proposed_inputs(embedded_model, PromptTask(JAPAN, "", " Tokyo", ()))
    assert (task.corrupted, task.foils) == ("What is the capital of France?", (" Paris",))
    assert "No --foil given; using ' Paris'. The foil is what the corrupted prompt leads to" in said


def test_each_prompt_is_unembedded_once_for_the_foil(spaced, monkeypatch):
    # the command line unembedded both prompts again for each of the 11 tokens it read (22 passes
    # over Gemma's 262,144 tokens), and the trials the prompt again for every candidate
    from circuitviz.labels import logit_lens
    from circuitviz.query import foils, trials

    prompt = "When Mary and John went to the store, John gave a drink to"
    calls = []
    for module in (logit_lens, trials):
        real = module.logits_from_residual
        monkeypatch.setattr(module, "logits_from_residual", lambda *a, real=real: calls.append(1) or real(*a))
    assert len(foils.likely_after(spaced, prompt, prompt.replace("Mary", "Alice"), " Mary")) >= trials.LIKELY
    assert len(calls) == 3  # the corrupted prompt's top tokens, its chances, the prompt's
    calls.clear()
    tried = trials.Trials(spaced, prompt)
    tried.likely(prompt.replace("Mary", "Alice"), " Mary")
    tried.likely(prompt.replace("John", "Bob"), " Mary")
    assert len(calls) == 3  # each candidate once, the prompt once


def test_the_answer_spelt_otherwise_is_never_the_foil(embedded_model, spaced):
    # "def f(a, b): return a" (no word to swap) proposed the foil '+' (18.2%) for ' +' (56.2%): a
    # logit difference between two spellings of one operator
    from circuitviz.query.foils import corrupted_foil, same_word
    from circuitviz.query.proposals import propose

    assert same_word("+", " +") and same_word(" paris", " Paris") and same_word("np", " np")
    assert not same_word(" ", "  ") and not same_word(" *", " +")
    prompt = "def f(a, b): return a"
    made = propose(embedded_model, prompt, _top(embedded_model, prompt))
    assert (made.answer, made.corrupted) == (" +", "")
    assert made.foil == " *"  # the likeliest other answer (8.9%)
    assert made.foil_note == "The foil is the model's likeliest other answer after the prompt."
    likely = [(" the", 0.5, 0.1), ("the", 0.3, 0.01), (" a", 0.1, 0.05)]
    assert corrupted_foil(spaced, " the", likely)[0] == " a"  # after a corrupted prompt too
