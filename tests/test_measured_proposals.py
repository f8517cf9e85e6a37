"""The corrupted prompt proposed for a typed prompt passes the page's own check before Run
(``query.trials``): each candidate (the template's, then known words swapped) is measured on the
embedded Gemma-3-270M, and where none passes nothing is proposed, in one sentence with the way out."""

from __future__ import annotations

import pytest

from circuitviz.core.tasks import PromptTask

ZOLTAN = "When Zoltan and Mary went to the store, Mary gave a drink to"


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "on")  # the suite turns it off for its random models


def _proposed(model, prompt):
    from circuitviz.labels.logit_lens import next_token_probabilities
    from circuitviz.query.proposals import propose

    return propose(model, prompt, [token for token, _ in next_token_probabilities(model, prompt, 8)])


def test_a_swap_the_check_refuses_is_not_proposed(embedded_model, checked, monkeypatch):
    # 'Mary' swapped at both mentions kept ' Zol' the answer: the logit difference over ' Mary'
    # rose from +4.90 to +10.44, and the page refused the corruption it had proposed
    from circuitviz.measure import evaluate
    from circuitviz.measure.task_validity import task_verdict

    passes = []  # the rows of each forward pass the proposal makes (the prompt's own was made before)
    real = evaluate.final_residual
    monkeypatch.setattr(
        evaluate, "final_residual", lambda *args: passes.append(args[1].shape[0]) or real(*args)
    )
    made = _proposed(embedded_model, ZOLTAN)
    assert (made.answer, made.foil) == (" Zol", " Mary")
    assert made.corrupted == "When Zoltan and Mary went to the store, Alice gave a drink to"
    assert task_verdict(embedded_model, PromptTask(ZOLTAN, made.corrupted, made.answer, (made.foil,))) is None
    assert made.corrupted_note.startswith(
        "Proposed by swapping the last 'Mary' for 'Alice' (a word the templates know, same token count), "
        "which lowers the logit difference of ' Zol' over ' Mary' by 4.4"
    )
    assert passes == [1, 2]  # the first candidate in one pass, the two others in a second


def test_no_candidate_that_passes_is_said_in_one_sentence_with_the_way_out(embedded_model, checked):
    made = _proposed(embedded_model, "What is the capital of Japan?")  # answer '\n\n': no word decides it
    assert made.corrupted == ""
    assert made.corrupted_note == (
        "No corrupted prompt is proposed: the one tried ('Japan' swapped for 'France') does not lower the "
        "logit difference of '\\n\\n' (over the foil proposed with it) by 1 or more, as the check before Run "
        "asks; pick an answer a word of the prompt decides, or write the corrupted prompt with that word "
        "replaced, keeping the token count."
    )


def test_an_answer_the_model_barely_predicts_is_not_put_first(embedded_model, checked):
    # ' John' (2.1%) was put before ' he' (47.7%) as a content word once both had a passing swap
    made = _proposed(embedded_model, "Mary gave John a book because")
    assert (made.answer, made.foil, made.corrupted) == (" he", " she", "Mary gave Alice a book because")


@pytest.fixture(scope="module")
def smollm2():
    from circuitviz.models import load_model

    return load_model("smollm2-135m", device="cpu")


@pytest.mark.embedded
@pytest.mark.slow
def test_the_answer_the_swapped_word_decides_goes_before_a_likelier_unlikely_one(smollm2, checked):
    # SmolLM2-135M gives ' located' 4.96 % and ' Paris' 3.4 % after it (' the' 15.0 % and ' a' 11.9 %
    # do not pass): ' located' over ' a' was proposed, a task 'france' swapped for 'italy' barely moves
    made = _proposed(smollm2, "the capital of france is")
    assert (made.answer, made.corrupted) == (" Paris", "the capital of italy is")
    assert "lowers the logit difference of ' Paris'" in made.corrupted_note


def test_a_name_said_twice_is_also_tried_swapped_at_one_mention(words):
    from circuitviz.query.proposals import corruption_candidates

    found = [c.corrupted for c in corruption_candidates(words, "Mary met Mary and John", "")]
    assert found[:3] == ["Alice met Alice and John", "Mary met Alice and John", "Alice met Mary and John"]


def test_the_command_line_proposes_the_corruption_the_app_does(embedded_model, checked):
    from circuitviz.entry.api import with_proposed_inputs

    task, said = with_proposed_inputs(embedded_model, PromptTask(ZOLTAN, "", " Zol", ()))
    assert task.corrupted == "When Zoltan and Mary went to the store, Alice gave a drink to"
    assert task.foils == (" Mary",) and "Proposed by swapping the last 'Mary' for 'Alice'" in said


def test_a_place_typed_in_lower_case_is_swapped_in_lower_case(words, embedded_model, checked):
    from circuitviz.measure.task_validity import task_verdict
    from circuitviz.query.proposals import swap_known_word

    # "the capital of france is" got no swap: Gemma gives ' paris' 26.7% after it
    swapped = swap_known_word(words, "the capital of france is")
    assert swapped == ("the capital of italy is", "france", "italy")
    assert swap_known_word(words, "mark bought fine china for rose") is None  # words, not names or places
    made = _proposed(embedded_model, "the capital of france is")
    assert (made.answer, made.corrupted) == (" paris", "the capital of italy is")
    task = PromptTask("the capital of france is", made.corrupted, made.answer, (made.foil,))
    assert task_verdict(embedded_model, task) is None


def test_a_task_too_long_to_measure_keeps_its_first_candidate(embedded_model, checked):
    # a prompt past the check's 256 tokens cannot be measured: it was told no candidate passes,
    # where the check itself says the prompt is too long
    from circuitviz.query.proposals import proposal_for

    prompt = "The cat sat on the mat. " * 45 + "Mary gave it to"
    made = proposal_for(embedded_model, prompt, " John", [" John", " the"])
    assert made.corrupted == prompt.replace("Mary", "Alice")
    assert made.corrupted_note.endswith("check that it changes the answer.")


def test_a_given_foil_is_the_one_the_candidates_are_measured_against(embedded_model, checked):
    # discover with --foil (and Steer's "Compute it on Explore", its foil given) took the first
    # candidate unmeasured: 'Mary' swapped at both mentions, which the check then refused
    from circuitviz.entry.api import with_proposed_inputs
    from circuitviz.query.proposals import proposal_for

    task, said = with_proposed_inputs(embedded_model, PromptTask(ZOLTAN, "", " Zol", (" Mary",)))
    assert task.corrupted == "When Zoltan and Mary went to the store, Alice gave a drink to"
    made = proposal_for(embedded_model, ZOLTAN, " Zol", [], foil=" Mary")
    assert (made.foil, made.corrupted, made.foil_note) == (" Mary", task.corrupted, "")
