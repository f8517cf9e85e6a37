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


def test_a_graph_files_labels_and_tokens_with_a_direction_override_are_written_with_codes():
    """An opened graph file's clerps and title are drawn on the canvas and in hovers as written: a
    right-to-left override there drew them reversed, as in a group's name."""
    from circuitviz.export.neuronpedia import read_neuronpedia, to_neuronpedia
    from circuitviz.positions.view import AttributionGraph, GraphLink, GraphNode

    nodes = [
        GraphNode("e0", "input", "embedding", -1, 0),
        GraphNode("m0", "m0", "mlp", 0, 0, caption="harmless"),
        GraphNode("out", "logits", "logit", 1, 0),
    ]
    graph = AttributionGraph(
        tokens=["a"], nodes=nodes, links=[GraphLink("e0", "m0", 1.0), GraphLink("m0", "out", 1.0)], n_layers=1
    )
    data = to_neuronpedia(graph)
    data["metadata"]["prompt_tokens"] = [f"x{RLO}yz"]
    data["metadata"]["info"] = {"description": f"my {RLO}graph"}
    for node in data["nodes"]:
        if node["clerp"].startswith("m0"):  # the file's own ids are Neuronpedia's
            node["clerp"] = f"m0: evil{RLO} live"
    back = read_neuronpedia(json.dumps(data))
    assert back.tokens == [f"x{RLO}yz"]  # drawn by its repr, which writes the code itself
    assert [n.caption for n in back.nodes if n.component == "m0"] == ["evil\\u202e live"]
    assert back.title == "my \\u202egraph"
    shown = json.dumps([[n.caption for n in back.nodes], back.title], ensure_ascii=False)
    assert RLO not in shown
    (said,) = [note for note in back.notes if "invisible" in note]
    assert "2 invisible characters (U+202E RIGHT-TO-LEFT OVERRIDE)" in said and "written as codes" in said
    clean = read_neuronpedia(json.dumps(to_neuronpedia(graph)))
    assert not any("invisible" in note for note in clean.notes)


def test_a_graph_files_saved_view_is_said_in_clauses_that_read():
    """ "The file's saved view: 1 pinned nodes it does not have; group 'g' names only 1 node this
    circuit does not have, so it holds no node of this circuit were left out." stood under an
    opened file's graph (Chromium, 2026-12-07): one template for parts that are not all things
    left out."""
    from circuitviz.export.neuronpedia import read_qparams

    view, sentence = read_qparams(
        {"supernodes": [["g", "zz"], ["h" * 50, "n1"]], "pinnedIds": ["n1", "nope"], "clickedId": "gone"},
        {"n1", "n2"},
    )
    assert view == {"pins": ["n1"], "groups": {"h" * 40: ["n1"]}, "clicked": ""}
    assert sentence == (
        "The file's saved view: 1 pinned node it does not have is left out; group 'g' names only 1 node "
        "this circuit does not have, so it holds no node of this circuit; a group name cut to its first "
        "40 characters; its clicked node is one it does not have, so none is clicked; the rest is shown."
    )
    assert "were left out" not in read_qparams({"pinnedIds": ["a", "b"]}, {"n1"})[1]
    assert read_qparams({"pinnedIds": ["a", "b"]}, {"n1"})[1] == (
        "The file's saved view: 2 pinned nodes it does not have are left out; the rest is shown."
    )
