"""Characters a text box does not show (zero-width spaces, direction overrides) are named where the
prompt is typed: a prompt of nothing else is empty, one that holds some says so, and the model's
reading of them is left to the user (found by an audit in Chromium: a prompt that visibly named
Mary and John was told it 'holds no name', and a prompt of zero-width spaces ran)."""

from __future__ import annotations

import pytest

from circuitviz.bench.toy_models import IOI_TASK
from circuitviz.core.refusals import EMPTY_PROMPT
from circuitviz.core.text import invisible_characters, invisible_sentence, markdown_text, only_invisible
from circuitviz.entry import cli

ZWSP, ZWJ, RLO = "\u200b", "\u200d", "\u202e"


def test_invisible_characters_are_found_and_named_with_where_the_first_is():
    text = f"When Mary{ZWSP} and John{ZWJ} went"
    assert invisible_characters(text) == [(9, ZWSP), (19, ZWJ)]
    assert invisible_sentence(text) == (
        "The prompt holds 2 invisible characters (U+200B ZERO WIDTH SPACE, U+200D ZERO WIDTH JOINER; the "
        "first after 'Mary', character 10): the text box does not show them, or shows the text around "
        "them reordered, but the model reads them; delete them unless you mean them."
    )
    assert invisible_sentence(f"{RLO}When", "The corrupted prompt").startswith(
        "The corrupted prompt holds 1 invisible character (U+202E RIGHT-TO-LEFT OVERRIDE; at its start, character 1)"
    )
    assert only_invisible(f"{ZWSP} {ZWSP}") and not only_invisible(f"a{ZWSP}") and not only_invisible("  ")
    assert invisible_sentence(f"{ZWSP}{ZWSP}").startswith(
        "The prompt is empty but for 2 invisible characters"
    )


@pytest.mark.parametrize("text", ["plain text", "family 👨\u200d👩\u200d👧", "می\u200cخواهم", ""])
def test_joiners_inside_a_script_or_an_emoji_are_how_it_is_written(text):
    assert invisible_sentence(text) is None


def test_the_command_line_refuses_an_invisible_prompt_and_names_hidden_characters(capsys, monkeypatch):
    from circuitviz.bench.toy_models import tiny_model

    assert cli.main(["discover", "--prompt", ZWSP * 3, "--answer", " a"]) == 2  # before any model loads
    assert "is empty but for 3 invisible characters" in capsys.readouterr().err
    model = tiny_model("gpt2")
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    clean = IOI_TASK.clean.replace("Mary", f"Mary{ZWSP}", 1)
    args = ["discover", "--prompt", clean, "--corrupted", IOI_TASK.corrupted, "--answer", " Mary"]
    cli.main([*args, "--foil", " John", "--method", "eap", "--budgets", "5", "--no-task-check", "--no-cache"])
    assert (
        "The prompt holds 1 invisible character (U+200B ZERO WIDTH SPACE; after 'Mary'"
        in capsys.readouterr().err
    )


@pytest.mark.usefixtures("tiny_app")
@pytest.mark.parametrize("invisible_only", [False, True])
def test_explore_names_the_invisible_characters_of_a_prompt(invisible_only):
    from streamlit.testing.v1 import AppTest

    prompt = ZWSP * 2 if invisible_only else IOI_TASK.clean.replace("Mary", f"Mary{ZWSP}", 1)
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["prompt"] = prompt
    at.run()
    assert not at.exception, at.exception
    if invisible_only:  # looks empty: refused as empty, saying why it is not
        assert [e.value for e in at.error] == [markdown_text(invisible_sentence(prompt))]
        assert EMPTY_PROMPT not in [e.value for e in at.error]
    else:
        assert markdown_text(invisible_sentence(prompt)) in [w.value for w in at.warning]


def test_control_characters_but_line_breaks_and_tabs_are_named_too():
    # a link's NUL, ESC, BEL and DEL ran unsaid, drawn in Chromium as empty boxes (an audit's, 2026-12-06)
    text = "When Mary\x00 and\x1b John\x7f went\x07 to\nthe\tstore"
    assert [index for index, _ in invisible_characters(text)] == [9, 14, 20, 26]
    said = invisible_sentence(text)
    assert said.startswith(
        "The prompt holds 4 invisible characters (U+0000 CONTROL CHARACTER, U+001B CONTROL"
    )
    assert "the text box shows nothing or an empty box for them" in said and "and 1 more kind;" in said
    assert invisible_sentence("line\nnext\ttab\r\n") is None
    assert only_invisible("\x00 \x00") and invisible_sentence("\x00").startswith(
        "The prompt is empty but for"
    )
