"""A tokenizer whose tokens carry no space (a word-level one that splits on spaces, as the tests'
tiny models and some local folders have) reads ' Mary' as its token 'Mary'. The line under the
answer box showed '·Mary' (a leading space marked where the token has none) and no chance, and
the IOI prompt's other name was proposed as ' John' and shown '·John'. The model's token is shown
as its tokenizer has it, as the prompt's chips show it; a tokenizer whose tokens do carry the
space keeps it."""

from __future__ import annotations

from circuitviz.bench.toy_models import IOI_TASK
from circuitviz.models.adapter import adapter_of
from circuitviz.models.tokens import token_pieces
from circuitviz.query.proposals import propose_foil
from circuitviz.ui.inputs import own_token_line


def test_a_word_level_tokens_own_text_has_no_space(words, spaced):
    assert token_pieces(adapter_of(words), " Mary") == ["Mary"]
    assert token_pieces(adapter_of(words), "Mary") == ["Mary"]
    assert token_pieces(adapter_of(spaced), " Mary") == [" Mary"]  # its token carries the space
    assert token_pieces(adapter_of(spaced), "Mary") == ["Mary"]


def test_the_answer_line_shows_the_models_token(words, spaced):
    line = own_token_line(words, " Mary", {"Mary": 0.03})
    shown = line.split("(")[0]
    assert ">Mary</span>" in shown and "·Mary" not in shown  # the token, no space marked
    assert "the model gives it 3.0%" in line  # its chance: the likely tokens are 'Mary'
    assert "the space in the box is not part of it" in line and "·Mary" in line  # what was in the box
    # a tokenizer whose token has the space: shown with it, nothing more said
    line = own_token_line(spaced, " Mary", {" Mary": 0.03})
    assert ">·Mary</span>" in line and "3.0%" in line and "not part of it" not in line
    assert "not part of it" not in own_token_line(words, "Mary", {"Mary": 0.03})


def test_the_ioi_foil_proposed_is_the_models_token(words, spaced):
    assert propose_foil(words, IOI_TASK.clean, IOI_TASK.corrupted, "Mary")[0] == "John"
    assert propose_foil(spaced, IOI_TASK.clean, IOI_TASK.corrupted, " Mary")[0] == " John"


def test_an_answer_that_is_the_models_top_token_is_not_called_unlikely(words, monkeypatch):
    """' Mary' in the box, the model's top token 'Mary' (3%): the sentence read "The model gives
    ' Mary' only 3.0% ... (its most likely next token is 'Mary', 3.0%)", one token named as two;
    and the result's note said the model's own answer is not the answer."""
    from types import SimpleNamespace

    from circuitviz.ui import loaders, result_view
    from circuitviz.ui.inputs import unlikely_answer

    likely = {"Mary": 0.03, "John": 0.02}
    assert unlikely_answer(words, "tiny", IOI_TASK.clean, " Mary", likely) is None
    assert unlikely_answer(words, "tiny", IOI_TASK.clean, " John", likely) is not None  # not the top one
    monkeypatch.setattr(loaders, "next_tokens", lambda *args, **kwargs: list(likely.items()))
    result = SimpleNamespace(task=IOI_TASK, model_id="tiny")  # its answer: ' Mary'
    assert result_view.own_answer_note(result, words) is None


def test_discover_does_not_call_the_models_top_token_unlikely(words, monkeypatch):
    """discover's sentence under the same task: --answer ' Mary' on a word-level tokenizer whose
    top token is 'Mary' read "The model gives ' Mary' only 3.0% ... (its most likely next token is
    'Mary', 3.0%)"."""
    from circuitviz.entry import api

    monkeypatch.setattr(api, "answer_chance", lambda model, task: (0.03, "Mary", 0.03))
    assert api.answer_note(words, IOI_TASK) is None  # its answer: ' Mary'
    monkeypatch.setattr(api, "answer_chance", lambda model, task: (0.03, "Anna", 0.04))
    assert "only 3.0%" in api.answer_note(words, IOI_TASK)


def test_batch_names_the_answers_own_top_token_as_the_answer(words):
    """batch's chance of each task names the top token; when it is the answer's own token it is
    named as the answer is written (' When', the word-level token 'When'), so that the unlikely-
    answer check does not take one token for two."""
    from circuitviz.batch.work import answer_chances
    from circuitviz.core.tasks import PromptTask
    from circuitviz.labels.logit_lens import next_token_probabilities
    from circuitviz.query.proposals import barely_predicts

    prompt = "The cat sat on the"
    top = next_token_probabilities(words, prompt, 1)[0][0]
    assert top.strip() and not top.startswith(" ")  # a word, as the tokenizer has it
    task = PromptTask(prompt, "The cat sat on a", " " + top, ("a",))
    chance, name, top_chance = answer_chances(words, [task])[0]
    assert name == " " + top and chance == top_chance
    assert not barely_predicts(task.answer, 0.01, name)  # however small its chance
