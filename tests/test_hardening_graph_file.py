"""An opened graph file (Explore's graph-file opener) read as hostile input: what an audit in
Chromium found on 2026-12-06. Each raised in the browser (the drawing's script stopped on a
second node of one id, or on a link width of Infinity), or was read unsaid as something else."""

from __future__ import annotations

import json

import pytest

from circuitviz.export.neuronpedia import (
    GraphFileError,
    read_neuronpedia,
    read_neuronpedia_bytes,
    to_neuronpedia,
)
from circuitviz.positions.view import AttributionGraph, GraphLink, GraphNode
from circuitviz.render.attribution_graph import attribution_graph_html


def _graph() -> AttributionGraph:
    nodes = [
        GraphNode("input@0", "input", "embedding", -1, 0),
        GraphNode("a0.h0@1", "a0.h0", "head", 0, 1, head=0),
        GraphNode("logits@1", "logits", "logit", 1, 1),
    ]
    links = [GraphLink("input@0", "a0.h0@1", 2.0, "v"), GraphLink("a0.h0@1", "logits@1", 3.0, "logits")]
    return AttributionGraph(["A", "B"], nodes, links, n_layers=1, prompt="A B", model_id="toy")


def _file(change=None) -> dict:
    data = to_neuronpedia(_graph())
    if change:
        change(data)
    return data


@pytest.mark.parametrize(
    "change, says",
    [
        # vis.js stopped the drawing with "Cannot add item: item with id ... already exists"
        (lambda d: d["nodes"].append(dict(d["nodes"][1])), "node_id .* is given to two nodes"),
        # read as weight 1, activation 0 and tokens "{'a': 1}" / "None", unsaid
        (lambda d: d["links"][0].update(weight=True), "a link's weight is not a number"),
        (lambda d: d["nodes"][1].update(activation="5"), "activation of node .* is not a number or null"),
        (
            lambda d: d["metadata"].update(prompt_tokens=[{"a": 1}, None]),
            "prompt_tokens must be a list of tokens",
        ),
    ],
)
def test_a_graph_file_that_the_drawing_cannot_show_as_it_is_is_refused_in_one_sentence(change, says):
    with pytest.raises(GraphFileError, match=says):
        read_neuronpedia(json.dumps(_file(change)), "upload.json")


def test_the_largest_finite_weights_draw_with_finite_widths():
    # 6 * 1e308 is inf: the drawing's JSON held Infinity, which the browser's JSON.parse refused
    def huge(data):
        data["links"][0]["weight"], data["links"][1]["weight"] = 1e308, -1e308
        data["nodes"][1]["activation"] = 1e308

    drawing = attribution_graph_html(read_neuronpedia(json.dumps(_file(huge))))
    json.dumps(drawing.vis.nodes, allow_nan=False)
    json.dumps(drawing.vis.edges, allow_nan=False)


def test_the_file_is_read_as_utf8_with_or_without_a_byte_order_mark_and_nothing_else():
    text = json.dumps(_file(lambda d: d["metadata"].update(prompt_tokens=["été", "B"])), ensure_ascii=False)
    assert read_neuronpedia_bytes(text.encode("utf-8")).tokens == ["été", "B"]
    assert read_neuronpedia_bytes(b"\xef\xbb\xbf" + text.encode("utf-8")).tokens == ["été", "B"]  # Notepad's
    # Latin-1's 'é' was read as U+FFFD, unsaid
    with pytest.raises(GraphFileError, match=r"upload.json is not UTF-8 text \(byte \d+\); save it as UTF-8"):
        read_neuronpedia_bytes(text.encode("latin-1"), "upload.json")
    with pytest.raises(GraphFileError, match="is not UTF-8 text"):
        read_neuronpedia_bytes(text.encode("utf-16"), "upload.json")


def test_nodes_past_the_prompts_tokens_are_drawn_and_named():
    graph = read_neuronpedia(json.dumps(_file(lambda d: d["nodes"][1].update(ctx_idx=10**9))))
    assert any("past its 2 prompt_tokens" in note and "1,000,000,000" in note for note in graph.notes)
    attribution_graph_html(graph)
    assert not read_neuronpedia(json.dumps(_file())).notes


def test_the_opener_s_uploader_holds_the_limit_the_page_says():
    from streamlit.testing.v1 import AppTest

    from circuitviz.ui import position_view

    def opener():
        from circuitviz.ui.position_view import graph_file_opener

        graph_file_opener()

    at = AppTest.from_function(opener)
    at.run()
    assert not at.exception
    assert at.get("file_uploader")[0].proto.max_upload_size_mb == position_view.MAX_UPLOAD_MB
    assert position_view.MAX_UPLOAD_BYTES == position_view.MAX_UPLOAD_MB * 2**20


def test_a_file_of_more_nodes_than_a_frame_holds_draws_those_its_drawn_links_join():
    # 40,000 nodes of one layer were drawn whole beside the 800 strongest links: one row 40,000
    # slots wide, a grey line across the frame (seen in Chromium, 2026-12-06)
    from circuitviz.render.attribution_graph import DEFAULT_MAX_LINKS, MAX_DRAWN_NODES

    def many(data):
        node = dict(data["nodes"][1])
        data["nodes"] += [dict(node, node_id=f"extra{i}", feature=i) for i in range(MAX_DRAWN_NODES + 500)]
        data["links"] += [
            {"source": f"extra{i}", "target": data["nodes"][2]["node_id"], "weight": 1 + i % 5}
            for i in range(MAX_DRAWN_NODES + 500)
        ]

    drawing = attribution_graph_html(read_neuronpedia(json.dumps(_file(many))))
    drawn = [node for node in drawing.vis.nodes if not str(node["id"]).startswith(("layer@", "token@"))]
    assert len(drawn) <= 2 * DEFAULT_MAX_LINKS
    ends = {end for edge in drawing.vis.edges for end in (edge["from"], edge["to"])}
    assert ends <= {node["id"] for node in drawn}
    assert any("nodes the drawn links join" in note for note in drawing.notes), drawing.notes
    small = attribution_graph_html(read_neuronpedia(json.dumps(_file())))
    assert not any("nodes" in note for note in small.notes)
