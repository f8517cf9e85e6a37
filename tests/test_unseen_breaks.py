"""A token holding line breaks says so under its box (``core.text.unseen_breaks_note``): a one-line
box drops them from what it shows, and the answer '\\n\\n' Gemma-3-270M proposes after "What is
the capital of Japan?" (49.9%) stood in a box that looked empty in Chromium."""

from __future__ import annotations

from circuitviz.core.text import unseen_breaks_note


def test_line_breaks_the_box_cannot_show_are_said():
    assert unseen_breaks_note("\n\n") == " · the box holds 2 line breaks it cannot show, so it looks empty"
    assert unseen_breaks_note("\n") == " · the box holds 1 line break it cannot show, so it looks empty"
    assert unseen_breaks_note(".\n") == " · the box holds 1 line break it cannot show"  # it shows '.'


def test_a_token_the_box_shows_says_nothing():
    for token in (" Paris", " ", "\t", ""):
        assert unseen_breaks_note(token) == ""
