"""A user's text of several lines, made safe for markdown (``core.text.markdown_text``,
``markdown_sentence``), stays one paragraph of its lines: a blank line followed by an indented line
was drawn as a code block, a line of '=' under a line as a heading, and a pair of backticks around
a blank line ended the sentence's paragraph and let the rest be markup (2026-12-06). Rendered here
by a CommonMark parser, as Streamlit's markdown reads it."""

from __future__ import annotations

import pytest

from circuitviz.core.text import markdown_sentence, markdown_text

markdown_it = pytest.importorskip("markdown_it")
RENDER = markdown_it.MarkdownIt("commonmark").render

TYPED = [
    "Big\n===\n\n    indented code\n\nThe cat sat on the",
    "Title\n---\n1. one\n2) two\n- three\n> quoted\n```\nfenced\n```\n<b>x</b>",
    "a\r\n\r\n\tb\rc\n",
    "line one  \nline two",
]


@pytest.mark.parametrize("typed", TYPED)
def test_a_text_of_several_lines_is_one_paragraph_of_its_lines(typed):
    html = RENDER(markdown_text(typed))
    assert html.startswith("<p>") and html.count("<p>") == 1, html
    for tag in ("<h1", "<h2", "<pre", "<code", "<ol", "<ul", "<blockquote", "<b>", "<hr"):
        assert tag not in html, html
    lines = [line for line in typed.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()  # a break at the very end draws nothing
    assert html.count("<br />") == len(lines) - 1, html


def test_a_code_span_of_the_users_over_a_line_break_is_not_kept():
    sentence = "No batch in '`x\n\n# Heading **bold**`'; run `circuitviz batch --out FOLDER` first."
    html = RENDER(markdown_sentence(sentence))
    assert html.count("<p>") == 1 and "<h1" not in html and "<strong>" not in html, html
    # our own code span, with nothing of the user's across a line, stays code
    plain = RENDER(markdown_sentence("No batch in 'x'; run `circuitviz batch --out FOLDER` first."))
    assert "<code>circuitviz batch --out FOLDER</code>" in plain
