"""An answer that is the first piece of a longer word of the prompt says so under the answer box
(``core.text.first_piece_note``): 'Zoltan' is ' Zol' 'tan' on Gemma-3-270M, and the app proposed
' Zol' as the answer of an indirect-object prompt with nothing said."""

from __future__ import annotations

from circuitviz.core.text import first_piece_note

IOI = "When Zoltan and Mary went to the store, Mary gave a drink to"


def test_a_piece_of_a_name_of_the_prompt_is_said():
    assert first_piece_note(" Zol", IOI) == (
        " · the first piece of the prompt's 'Zoltan': a circuit for it explains that piece"
    )
    assert first_piece_note("Zol", IOI).startswith(" · the first piece")  # a word-level tokenizer's


def test_a_whole_word_a_lower_case_piece_or_a_letter_says_nothing():
    assert first_piece_note(" Mary", IOI) == ""  # the name itself
    assert first_piece_note(" Mary", "Mary and Maryam went out; Maryam gave it to") == ""
    assert first_piece_note(" sto", IOI) == ""  # lower case: ' is' of 'island' is no news
    assert first_piece_note(" Z", IOI) == ""
    assert first_piece_note(" Paris", "The capital of France is") == ""
    assert first_piece_note("", IOI) == ""


def test_the_note_names_letters_of_the_prompt_never_its_markup():
    """The note goes into the page's HTML: the word it names is letters alone, so a prompt's tags
    never reach it."""
    note = first_piece_note(" Al", "<b>Alice</b> and Bob met. <script>x</script> Bob gave it to")
    assert note == " · the first piece of the prompt's 'Alice': a circuit for it explains that piece"
