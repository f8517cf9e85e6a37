"""Prompts as users type them: white space the templates do not write (a story pasted over two
lines, two spaces, a tab, a space before the first word) is read single-spaced to recognise the
task, and the corrupted prompt proposed keeps the prompt's own white space, so the model reads the
prompt as typed and the two prompts differ in their key words alone."""

from __future__ import annotations

import pytest

from circuitviz.core.tasks import PromptTask
from circuitviz.query import proposals
from circuitviz.query.families import recognise
from circuitviz.query.families.base import respaced, single_spaced
from circuitviz.query.templates import propose_corruption, template_rewrites


@pytest.mark.parametrize(
    ("typed", "corrupted"),
    [
        ("The capital of\nFrance is", "The capital of\nItaly is"),
        ("  The capital of France is", "  The capital of Italy is"),
        ("Q: What is the capital of Spain?\nA:", "Q: What is the capital of France?\nA:"),
        (
            "When Mary and\tJohn went to the store,  John gave a drink to",
            "When Alice and\tBob went to the store,  Carl gave a drink to",
        ),
    ],
)
def test_white_space_the_templates_do_not_write_is_read_single_spaced_and_kept(words, typed, corrupted):
    found = recognise(typed)  # each was "No corrupted prompt could be proposed" or a swap, no family
    assert found is not None and found.typed == typed
    assert propose_corruption(words, typed) == corrupted
    made, note = proposals.propose_corruption(words, typed, "")
    assert made == corrupted
    assert "reads the prompt's line breaks, tabs and extra spaces as single spaces" in note
    assert "the model reads the prompt as typed" in note
    family, rewrites = template_rewrites(PromptTask(typed, corrupted, " x", (" y",)))
    assert family == found.family and next(rewrites)[0]  # the paraphrase methods draw rewrites too


def test_a_prompt_the_templates_read_as_typed_says_nothing_of_spaces(words):
    found = recognise("The capital of France is")
    assert found.typed is None
    assert proposals.propose_corruption(words, "The capital of France is", "")[1] == (
        "Proposed by the factual recall template; edit it freely."
    )


def test_respacing_keeps_each_kept_words_white_space_and_a_replacements_last():
    typed = "The  Eiffel\tTower is located\nin the city of "
    assert single_spaced(typed) == "The Eiffel Tower is located in the city of "
    assert respaced(typed, "The Colosseum is located in the city of ") == (
        "The  Colosseum is located\nin the city of "
    )
    assert respaced("  a  b\nc\td", "a X Y c d") == "  a  X Y\nc\td"
    assert respaced("a  b\nc", "a c") == "a\nc"
