"""Group (supernode) names hold the user's text, from a link's view, a graph file's qParams or the
groups box: a name holding U+202E RIGHT-TO-LEFT OVERRIDE drew the rest of it reversed on the canvas,
in the group's card and its hover ('evil' read 'live'), and a zero-width space hid part of it. Such
characters are written as their codes, as the prompt's sentences name them, and one sentence says
so; the sentences a link's view writes are escaped (a name's markdown was drawn as a live link)."""

from __future__ import annotations

import json

import pytest

from circuitviz.render.groups import check_groups, grouped

RLO, ZWSP = "\u202e", "\u200b"


def test_a_group_name_with_a_direction_override_is_written_with_its_code():
    groups, sentence = check_groups(
        {f"good {RLO}live": ["a"], f"x{ZWSP}y{RLO}": ["b"], "plain": ["c"]}, {"a", "b", "c"}
    )
    assert groups == {"good \\u202elive": ["a"], "x\\u200by\\u202e": ["b"], "plain": ["c"]}
    assert not any(RLO in name or ZWSP in name for name in groups)
    assert (
        "group 'good \\u202elive' held 1 invisible character (U+202E RIGHT-TO-LEFT OVERRIDE), which draws "
        "a name reordered or not at all: it is written as its code" in sentence
    )
    assert "2 invisible characters (U+200B ZERO WIDTH SPACE, U+202E RIGHT-TO-LEFT OVERRIDE)" in sentence
    assert "they are written as their codes" in sentence
    clean, said = check_groups({"plain": ["c"], "नमस्ते\u200dजी": ["a"]}, {"a", "c"})  # a joiner in writing
    assert said == "" and "नमस्ते\u200dजी" in clean


def test_the_drawn_group_shows_no_direction_override():
    from circuitviz.render.vis import VisGraph

    nodes = [{"id": node, "label": node, "x": i, "y": 0} for i, node in enumerate(("a", "b"))]
    groups, _ = check_groups({f"evil{RLO}": ["a", "b"]}, {"a", "b"})
    drawn = grouped(VisGraph(nodes, []), groups)
    (group,) = [node for node in drawn.nodes if node["id"].startswith("group:")]
    shown = json.dumps(group, ensure_ascii=False)
    assert RLO not in shown and "evil\\\\u202e" in shown


def test_a_graph_files_supernode_with_a_direction_override_is_written_with_its_code():
    from circuitviz.export.neuronpedia import read_qparams

    view, sentence = read_qparams(
        {"supernodes": [[f"{RLO}dnuor", "n1", "n2"]], "pinnedIds": ["n1"]}, {"n1", "n2"}
    )
    assert view["groups"] == {"\\u202ednuor": ["n1", "n2"]}
    assert "RIGHT-TO-LEFT OVERRIDE" in sentence and sentence.startswith("The file's saved view:")


@pytest.mark.usefixtures("tiny_app")
def test_a_links_view_sentences_are_escaped_and_its_group_names_harmless():
    pytest.importorskip("streamlit")
    from explore_session import QUERY, explore_session, run_it
    from graph_data import graph_data

    first = run_it(explore_session())
    assert not first.exception, first.exception
    node = next(n["id"] for n in graph_data(first)[0]["nodes"] if n["id"] not in ("input", "logits"))
    view = {"groups": {f"evil{RLO}": [node], "[click](https://example.com) **now**": ["a99.h9"]}}
    at = explore_session({**QUERY, "view": json.dumps(view)})  # the stored circuit, the link's view
    assert not at.exception, at.exception
    drawn = json.dumps(graph_data(at)[0], ensure_ascii=False)
    assert RLO not in drawn and "evil\\\\u202e" in drawn
    (said,) = [info.value for info in at.info if info.value.startswith("Groups")]
    assert "RIGHT\\-TO\\-LEFT OVERRIDE" in said
    assert "[click](" not in said and "\\[click\\]" in said and "`https://example.com" in said  # no live link
    assert "\\*\\*now\\*\\*" in said
