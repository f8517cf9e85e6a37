"""Labels written in words are drawn large enough to read in a 1,000 px window. The layered
drawing is as wide as its widest label line in every column, and on one line "layer 15, head 3"
(names in words) and "L15/1825 ' purchases'" (an SAE caption) made every column 16 and 18
characters wide: Explore's IOI circuit on Gemma-3-270M at budget 100 was fitted at 7.6 px with
names in words and 6.7 px with SAE captions in a 1,000 px window (Chromium). Each is two lines now,
a column 8 and 12 characters wide."""

from __future__ import annotations

import pytest
import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec
from circuitviz.render.graph_html import FONT_SIZE, canvas_caption_of, canvas_words
from circuitviz.render.vis import node_box, overlapping

GEMMA = GraphSpec(n_layers=18, n_heads=4)
FRAME_PX = 538  # the graph's frame in a 1,000 px window (Explore, Chromium)
FIT = 0.92  # of the frame vis-network's fit fills (0.556 zoom for 538 px over 896 layout units)
SAE = "L15/1825\n' purchases'"  # an SAE caption as the page writes it: the feature, its token


def _label_px(graph) -> float:
    """The labels' size, px, where a drawing is fitted to the frame's width (its height is the
    window's, or the page scrolls with "full size")."""
    left, _, right, _ = graph.bounds()
    return FONT_SIZE * min(FIT * FRAME_PX / (right - left), 16 / FONT_SIZE)


def test_a_name_in_words_is_its_layer_over_its_head():
    assert canvas_words(GEMMA, "a15.h3") == "layer 15\nhead 3"
    assert canvas_words(GEMMA, "m12") == "layer 12\nMLP"
    assert canvas_words(GEMMA, "input") == "embeddings"
    assert canvas_words(GEMMA, "logits") == "the answer's logit"
    assert canvas_caption_of("a15.h3", SAE) == "a15.h3\nL15/1825\n' purch…"
    assert canvas_caption_of("a15.h3", "↓' Mary'") == "a15.h3\n↓' Mary'"  # one line, as before
    long = canvas_caption_of("a1.h0", "L3/1794\n' Constantinople'").split("\n")
    assert long[2] == "' Const…" and len(long) == 3


def test_an_sae_token_cut_short_on_the_canvas_is_whole_on_the_hover():
    """The token under an SAE feature is drawn in at most ``CAPTION_TOKEN`` characters (the
    feature's "L15/1825" is 8), so a long token no longer sets every column's width; the node's
    hover has it whole. A short one is drawn whole, and the hover says nothing more."""
    from circuitviz.render.graph_html import CAPTION_TOKEN, caption_in_full

    assert CAPTION_TOKEN <= len("L15/1825")
    assert canvas_caption_of("a15.h3", SAE) == "a15.h3\nL15/1825\n' purch…"
    assert caption_in_full(SAE) == "under its name, cut short there: L15/1825 ' purchases'"
    assert canvas_caption_of("m3", "L3/211\n' Mary'") == "m3\nL3/211\n' Mary'"
    assert caption_in_full("L3/211\n' Mary'") == caption_in_full("+5.3") == ""
    spec = GraphSpec(n_layers=2, n_heads=2)
    scores = torch.ones(spec.n_forward, spec.n_backward, device="cpu")
    mask = spec.mask_from_edge_names(["input->a0.h1<v>", "a0.h1->logits"])
    captions = {"a0.h1": "L1/12\n' <b>purchases</b>'", "input": "L0/3\n' Mary'"}
    nodes = {n["id"]: n for n in render.circuit_graph_html(spec, scores, mask, captions=captions).vis.nodes}
    assert "cut short there: L1/12 &#x27; &lt;b&gt;purchases&lt;/b&gt;&#x27;" in nodes["a0.h1"]["title"]
    assert "cut short" not in nodes["input"]["title"]
    from circuitviz.ui.result_view import SAE_KEY

    assert "cut short with …, whole on the node's hover" in SAE_KEY  # the key says where the rest is


@pytest.mark.parametrize("budget", [20, 50, 100])
def test_names_in_words_are_drawn_readable_at_1000_px(budget):
    """The Gallery's five circuits with names in words, alone and with an SAE caption under every
    name, with or without words: fitted to the frame's width at 11 px and more (words) and 12 px
    and more (SAE captions: the factual circuit at budget 100, four heads a row, 8.8 px with its
    token line 12 characters wide, 12.2 px now at 8; 6.6 px on one line)."""
    from browser_page import gallery_result

    for slug in ("ioi", "factual", "arithmetic", "multiple-choice", "gender-bias"):
        result = gallery_result(slug)
        words = render.result_graph_html(result, budget, words=True)
        assert _label_px(words.vis) >= 11, (slug, _label_px(words.vis))
        nodes = set(words.nodes) - {"logits"}
        for in_words in (False, True):
            both = render.circuit_graph_html(
                result.graph,
                result.scores,
                result.circuit(budget),
                words=in_words,
                captions=dict.fromkeys(nodes, SAE),
                caption_key="under each name: its strongest SAE feature",
            )
            assert _label_px(both.vis) >= 12, (slug, in_words, _label_px(both.vis))
            assert overlapping(both.vis.nodes) == []
            alone = ("input", "logits")  # each alone in its row ("embeddings" is 10 characters)
            widest = max(
                node_box(node)[2] - node_box(node)[0] for node in both.vis.nodes if node["id"] not in alone
            )
            assert widest < both.grid[0]  # every box of a layer row inside its column


def _feature_circuit(per_layer: dict[int, int]) -> dict:
    nodes = [
        {
            "id": f"L{layer}/f{feature}",
            "layer": layer,
            "feature": 100 * layer + feature,
            "prompt_activation": 1.0,
        }
        for layer, count in per_layer.items()
        for feature in range(count)
    ]
    edges = [{"source": nodes[i]["id"], "target": nodes[-1]["id"], "coefficient": 0.5} for i in range(3)]
    return {
        "nodes": nodes,
        "edges": edges + [{"source": nodes[-1]["id"], "target": "metric", "coefficient": 1.0}],
    }


def test_a_named_feature_circuit_is_drawn_readable_at_1000_px():
    """CircuitLasso's feature circuit with "name the features" on (Explore's IOI prompt, SAE units
    of layers 3, 9 and 15: 47 features): each name carried its description cut at 16 characters,
    "L3/1286: fires o…" (its id again), eight features a row, and the drawing was fitted at 4.9 px
    in the 504 px frame of a 1,000 px window (7.8 px unnamed). Now what it fires on and what it
    promotes, a line each, a row as wide as ``ROW_UNITS``: 10.4 px (Chromium)."""
    from circuitviz.render.feature_graph import (
        CAPTION_CHARACTERS,
        FONT,
        feature_caption,
        feature_circuit_html,
    )

    label = "L3/1286: fires on ' Mary', ' John', ' the'; promotes ' gave', ' to'"
    assert feature_caption(label) == "on ' Mary', '…\n→ ' gave', ' …"
    circuit = _feature_circuit({3: 27, 9: 15, 15: 5})
    names = {node["id"]: label for node in circuit["nodes"]}
    for labels in (None, names):
        graph = feature_circuit_html(circuit, labels=labels).vis
        left, _, right, _ = graph.bounds()
        px = FONT * min(FIT * 504 / (right - left), 16 / FONT)
        assert px >= 10, (bool(labels), px)
        assert overlapping(graph.nodes) == []
    lines = [line for node in graph.nodes if node["id"] != "metric" for line in node["label"].split("\n")[1:]]
    assert lines and all(len(line) <= CAPTION_CHARACTERS and not line.startswith("L3/") for line in lines)


def test_a_drawing_of_many_layer_rows_writes_names_in_words_on_one_line():
    """Two-line names make every row taller: SmolLM2-135M's IOI circuit at budget 200 (27 layer
    rows), held to the window's height, was drawn at 6.5 and 6.7 px at 1,500 and 2,000 px where
    one line drew it at 8.5 and 9.0 (Chromium). A drawing of more than ``WORDS_ROWS`` rows keeps
    one line a name; one of fewer, two."""
    from circuitviz.render.graph_html import WORDS_ROWS

    smollm = GraphSpec(n_layers=30, n_heads=9)
    chain = [
        "input->a0.h1<v>",
        *[f"a{layer}.h1->a{layer + 1}.h1<v>" for layer in range(29)],
        "a29.h1->logits",
    ]
    scores = torch.ones(smollm.n_forward, smollm.n_backward, device="cpu")
    for rows in (WORDS_ROWS, 27):
        edges = chain[:rows] + [f"a{rows - 1}.h1->logits"]
        drawing = render.circuit_graph_html(smollm, scores, smollm.mask_from_edge_names(edges), words=True)
        label = {node["id"]: node["label"] for node in drawing.vis.nodes}["a0.h1"]
        assert label == ("layer 0\nhead 1" if rows <= WORDS_ROWS else "layer 0, head 1"), rows
