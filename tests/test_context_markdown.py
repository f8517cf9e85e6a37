"""A feature's top contexts are corpus text: the Steer page writes them into markdown, and the
markdown must show them as written (the corpus's "only *inappropriate* times" was drawn with
"inappropriate" in italics and its asterisks gone)."""

from __future__ import annotations

import re

import pytest

from circuitviz.render import context_html

CORPUS = [
    " only *inappropriate* _times_ ~~x~~ `c` $a$",
    " [link](http://b.example) www.x.com a@b.c",
    "\n",
    "\"'&",
]


def test_a_context_stays_text_inside_markdown():
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    rendered = md.render("**L3/113** fired on: " + context_html({"tokens": CORPUS, "target": 1}))
    tags = set(re.findall(r"</?(\w+)", rendered))
    assert tags <= {"p", "strong", "mark"}, tags  # no em, s, code, a: the markup stays text
    text = re.sub(r"<[^>]+>", "", rendered)
    assert (
        "only *inappropriate* _times_ ~~x~~ `c` $a$ [link](http://b.example) www.x.com" in text
    )  # as written


def test_the_html_of_a_context_is_unchanged_for_plain_words():
    assert context_html({"tokens": [" the", " cat"], "target": 1}) == " the<mark> cat</mark>"


def test_a_node_card_shows_a_feature_s_context_as_written():
    # the embedded SAE's own contexts: the node card wrote them into a caption as they stood, so
    # "_Money_" showed in italics with its underscores gone (found by an audit, 2026-12-06)
    markdown_it = pytest.importorskip("markdown_it")
    from circuitviz.ui.node_card import context_caption

    tokens = [" -- Martin Amis,", " _Money_", "\n\n", "We", " apologize", " ***", " DO"]
    rendered = markdown_it.MarkdownIt("commonmark").render(context_caption({"tokens": tokens, "target": 4}))
    assert set(re.findall(r"</?(\w+)", rendered)) <= {"p", "mark"}
    assert re.sub(r"<[^>]+>", "", rendered).strip() == "-- Martin Amis, _Money_↵↵We apologize *** DO"


def test_a_node_cards_feature_says_the_nodes_part_of_its_activation_in_percent():
    # it read "share 4.2e+03": the node's raw share in the SAE's units, summed over positions
    pytest.importorskip("streamlit")
    from circuitviz.ui.node_card import feature_line

    item = {"label": "L9/2015 wish", "token": " said", "share": 314.3, "activation": 641.4}
    assert feature_line(item) == "L9/2015 wish  (at ' said'; this node's part of its activation 49.0 %)"
    assert feature_line({**item, "activation": 0.0}).endswith("; not active here)")
