"""The pure renderers: graph pages, curves, UpSet plots, tables; plus the logit-lens labels.

No streamlit and no browser: the graph page's data is read back out of its HTML, so these tests
check what would be drawn (which nodes, which edges, how they look, what their hovers say).
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec, top_n
from circuitviz.render.graph_html import KIND_COLOURS, node_position
from circuitviz.ui import bon

SPEC = GraphSpec(n_layers=3, n_heads=2)


def _data(page: str) -> tuple[list[dict], list[dict]]:
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", page, re.S).group(1))
    edges = json.loads(re.search(r"edges = new vis\.DataSet\((.*?)\);", page, re.S).group(1))
    return nodes, edges


def _scores(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(SPEC.n_forward, SPEC.n_backward, generator=generator) * SPEC.edge_mask


def _mask(*names: str) -> torch.Tensor:
    return SPEC.mask_from_edge_names(names)


def test_graph_draws_exactly_the_circuit_with_kind_colours_and_signs():
    scores = torch.zeros(SPEC.n_forward, SPEC.n_backward, device="cpu")
    names = ["input->a0.h1<q>", "a0.h1->m1", "m1->a2.h0<v>", "a2.h0->logits", "input->m0"]
    values = [0.5, -2.0, 1.0, 4.0, 0.1]
    for name, value in zip(names, values):
        scores[SPEC.edge_position(name)] = value
    drawing = render.circuit_graph_html(SPEC, scores, _mask(*names[:4]))
    nodes, edges = _data(drawing.html)
    assert {n["id"] for n in nodes} == {"input", "a0.h1", "m1", "a2.h0", "logits"}
    by_pair = {(e["from"], e["to"]): e for e in edges}
    assert set(by_pair) == {("input", "a0.h1"), ("a0.h1", "m1"), ("m1", "a2.h0"), ("a2.h0", "logits")}
    assert by_pair[("input", "a0.h1")]["color"]["color"] == KIND_COLOURS["q"]
    assert by_pair[("m1", "a2.h0")]["color"]["color"] == KIND_COLOURS["v"]
    assert by_pair[("a0.h1", "m1")]["color"]["color"] == KIND_COLOURS["mlp"]
    # dashed: works against the answer (a positive score), as the graph over positions dashes
    assert by_pair[("a2.h0", "logits")]["dashes"]  # a [dash, gap] pattern
    assert by_pair[("a0.h1", "m1")]["dashes"] is False  # negative: the answer relies on it
    # width grows with |score|: the strongest edge is the widest
    assert (
        by_pair[("a2.h0", "logits")]["width"]
        > by_pair[("m1", "a2.h0")]["width"]
        > by_pair[("input", "a0.h1")]["width"]
    )
    # hover text names source, destination, kind and score
    title = by_pair[("a0.h1", "m1")]["title"]
    assert "a0.h1-&gt;m1" in title and "MLP input" in title and "-2" in title
    assert drawing.n_left_out == 0 and drawing.n_circuit_edges == 4
    # physics off, everything inline (no network needed)
    assert '"enabled": false' in drawing.html.replace("'", '"')
    assert "cdn.jsdelivr" not in drawing.html and "cdnjs" not in drawing.html.split("<body>")[1]
    assert "vis.Network" in drawing.html


def test_layout_is_the_fields_orientation_and_shared():
    layers = [0, 1, 2]
    x_input, y_input = node_position(SPEC, "input", layers)
    _, y_logits = node_position(SPEC, "logits", layers)
    heads = [node_position(SPEC, f"a1.h{h}", layers) for h in range(SPEC.n_heads)]
    mlp = node_position(SPEC, "m1", layers)
    # vis-network's y grows downwards: the embeddings at the bottom, the logit at the top
    assert y_input > heads[0][1] > y_logits
    assert heads[0][1] == heads[1][1] and heads[0][0] < heads[1][0] < mlp[0]  # heads in order, MLP after
    assert mlp[1] < heads[0][1]  # the MLP a little above the heads it reads
    assert node_position(SPEC, "a0.h0", layers)[1] > heads[0][1] > node_position(SPEC, "a2.h0", layers)[1]
    # two circuits drawn with the same layers put a node in the same place
    first = render.circuit_graph_html(SPEC, _scores(1), top_n(SPEC, _scores(1), 10), layers=layers)
    second = render.circuit_graph_html(SPEC, _scores(2), top_n(SPEC, _scores(2), 10), layers=layers)
    place = {n["id"]: (n["x"], n["y"]) for n in _data(first.html)[0]}
    for node in _data(second.html)[0]:
        if node["id"] in place:
            assert place[node["id"]] == (node["x"], node["y"])


def test_drawings_side_by_side_are_fitted_to_one_box():
    """Compare's columns: each drawing framed by the union of every drawing's box, so a node
    that two circuits share is shown at one place and one zoom in both; the originals untouched."""
    from circuitviz.render.vis import framed_alike

    layers = [0, 1, 2]
    small = render.circuit_graph_html(SPEC, _scores(1), top_n(SPEC, _scores(1), 1), layers=layers).vis
    large = render.circuit_graph_html(SPEC, _scores(2), SPEC.edge_mask, layers=layers).vis
    assert small.bounds() != large.bounds()  # else the test shows nothing
    framed = framed_alike([small, large])
    union = framed[0].frame
    assert framed[1].frame == union and framed[0].bounds() == framed[1].bounds() == union
    for graph in (small, large):  # every node's box inside the shared box
        left, top, right, bottom = graph.bounds()
        assert union[0] <= left and union[1] <= top and right <= union[2] and bottom <= union[3]
    data = [graph.to_data() for graph in framed]
    assert data[0]["box"] == data[1]["box"] == list(union) and data[0]["aspect"] == data[1]["aspect"]
    assert small.frame is None and small.to_data()["box"] is None  # fitted to its own nodes
    assert framed_alike([]) == []


def test_drawings_side_by_side_share_one_grid_with_and_without_captions():
    """Compare's columns: a circuit whose names carry a caption (EAP-IG's) has taller rows and
    wider columns than one without (flow routes'), so the second was drawn at half the size in a
    corner of the shared box; laid out on the largest grid of the two, a shared node sits at one
    place in both."""
    from circuitviz.ui.compare import common_grid

    layers = [0, 1, 2]
    mask = top_n(SPEC, _scores(1), 10)
    captions = {name: "+12.5 ' Mary'" for name in SPEC.node_names}
    drawings = {
        "captioned": render.circuit_graph_html(SPEC, _scores(1), mask, layers=layers, captions=captions),
        "plain": render.circuit_graph_html(SPEC, _scores(1), mask, layers=layers),
    }
    assert drawings["captioned"].grid[0] > drawings["plain"].grid[0]  # else the test shows nothing
    assert drawings["captioned"].grid[1] > drawings["plain"].grid[1]
    grid = common_grid(drawings)
    assert grid == list(drawings["captioned"].grid)
    again = [
        render.circuit_graph_html(SPEC, _scores(1), mask, layers=layers, captions=captions, grid=grid),
        render.circuit_graph_html(SPEC, _scores(1), mask, layers=layers, grid=grid),
    ]
    places = [{node["id"]: (node["x"], node["y"]) for node in drawing.vis.nodes} for drawing in again]
    assert set(places[0]) == set(places[1]) and len(places[0]) > 3
    assert places[0] == places[1]
    assert again[0].vis.nodes == drawings["captioned"].vis.nodes  # the largest grid is its own


@pytest.mark.parametrize("words", [False, True])
@pytest.mark.parametrize("shape", [(3, 2), (18, 4), (30, 9)])
def test_no_two_node_boxes_overlap_with_captions_and_words(shape, words):
    from circuitviz.render.vis import overlapping

    spec = GraphSpec(n_layers=shape[0], n_heads=shape[1])
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(spec.n_forward, spec.n_backward, generator=generator) * spec.edge_mask
    captions = {name: "promotes ' Paris' strongly" for name in spec.node_names}
    drawing = render.circuit_graph_html(
        spec, scores, spec.edge_mask, show_faded=True, captions=captions, words=words
    )
    assert len(drawing.vis.nodes) == len(spec.node_names)
    assert overlapping(drawing.vis.nodes) == []
    if words:  # the layer over the head; on one line in a drawing of many rows (``WORDS_ROWS``)
        name = "layer 1\nhead 0" if shape[0] <= 20 else "layer 1, head 0"
        assert any(node["label"].startswith(name) for node in drawing.vis.nodes)


def test_edge_cap_keeps_the_strongest_and_says_so():
    scores = _scores(3)
    drawing = render.circuit_graph_html(SPEC, scores, SPEC.edge_mask, max_edges=7)
    _, edges = _data(drawing.html)
    assert len(edges) == 7 and drawing.n_left_out == SPEC.n_edges - 7
    strongest = sorted(scores[SPEC.edge_index].abs().tolist(), reverse=True)[:7]
    assert sorted((abs(e.score) for e in drawing.edges), reverse=True) == pytest.approx(strongest)
    assert f"{SPEC.n_edges - 7:,} weaker ones are left out" in drawing.html


def test_faded_nodes_and_highlight():
    mask = _mask("input->a0.h0<k>", "a0.h0->logits", "input->logits")
    plain = _data(render.circuit_graph_html(SPEC, _scores(), mask).html)[0]
    faded = _data(render.circuit_graph_html(SPEC, _scores(), mask, show_faded=True).html)[0]
    assert len(plain) == 3 and len(faded) == len(SPEC.node_names)
    grey = [n for n in faded if n["color"]["background"] == "#d9d9d9"]
    assert {n["id"] for n in grey} == set(SPEC.node_names) - {"input", "a0.h0", "logits"}
    _, edges = _data(render.circuit_graph_html(SPEC, _scores(), mask, highlight={"input->logits"}).html)
    lit = [e for e in edges if e["color"]["opacity"] == 1.0]
    assert [(e["from"], e["to"]) for e in lit] == [("input", "logits")]


def test_user_text_is_escaped_everywhere():
    hostile = '<img src=x onerror=alert(1)> href="javascript:x"'
    labels = {"a0.h0": {"promotes": [hostile], "suppresses": ["</script><script>alert(2)</script>"]}}
    mask = _mask("input->a0.h0<q>", "a0.h0->logits")
    page = render.circuit_graph_html(SPEC, _scores(), mask, labels=labels, title=hostile).html
    assert "<img src=x" not in page
    assert "</script><script>alert(2)" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # shown as text in the legend
    nodes, _ = _data(page)
    title = next(n["title"] for n in nodes if n["id"] == "a0.h0")
    assert "<img" not in title and "href" not in title and "&lt;/script&gt;" in title
    chips = render.token_strip_html(["<b>", " Mary"])
    assert "<b>" not in chips and "&lt;b&gt;" in chips and "·Mary" in chips


def test_curve_figure_marks_the_budget():
    curve = [
        {"budget": 10, "n_edges": 8, "metric": 1.0, "nfs": 0.2, "ndf": 0.2},
        {"budget": 100, "n_edges": 90, "metric": 2.0, "nfs": 0.9, "ndf": 0.9},
    ]
    figure = render.curve_figure(
        {"eap-ig": curve, "eap": curve[:1]}, 200, current_budget=100, marker_value=0.9
    )
    names = [trace.name for trace in figure.data]
    assert names == ["eap-ig", "eap", "shown now"]
    assert list(figure.data[0].x) == [10, 100] and list(figure.data[0].y) == [0.2, 0.9]
    assert figure.layout.shapes[0].x0 == 100  # the vertical marker
    csv_text = render.curves_csv({"eap-ig": curve}, 200)
    assert csv_text.splitlines()[0].startswith("curve,budget,edges_kept")
    assert "eap-ig,100,90,45.0000" in csv_text


def test_a_curves_name_is_a_value_of_its_hover_never_part_of_the_template():
    """plotly fills in '%{...}' written in a hover template: the name went into it with '%' doubled
    and braces made parentheses, so '100% {q}' read '100%% (q)' (checked in Chromium: the hover now
    reads '100% {q} <b>x' as typed). Its little HTML stays escaped."""
    from circuitviz.render.curves import candidate_figure

    curve = [{"budget": 10, "n_edges": 8, "metric": 1.0, "nfs": 0.2, "ndf": 0.2}]
    trace = render.curve_figure({"100% {q} <b>x": curve}, 200).data[0]
    assert trace.meta == "100% {q} &lt;b&gt;x" and trace.hovertemplate.startswith("%{meta}<br>budget")
    assert "100%" not in trace.hovertemplate and "(q)" not in trace.hovertemplate
    bars = candidate_figure([{"name": "p1 {x} 5%", "ndf": 0.5, "winner": True}], 20).data[0]
    assert list(bars.x) == ["p1 {x} 5%"]  # a category value: not doubled nor bracketed


def test_the_curve_legend_sits_under_the_plot_clear_of_the_mode_bar():
    """The legend sat above the plot, on the row of plotly's mode bar (top right, 25 px high, 224
    wide): at 1,000 px Compare's five methods ran under it. Now it is at the figure's foot (its rows
    grow the bottom margin), and a top margin of 30 px keeps the mode bar off the plot."""
    curve = [{"budget": b, "n_edges": b, "metric": 1.0, "nfs": 0.5, "ndf": 0.5} for b in (10, 100)]
    names = ("acc++", "circuit-lasso", "edge-pruning", "eap", "eap-ig")
    figure = render.curve_figure({name: curve for name in names}, 200, current_budget=10, marker_value=0.5)
    legend = figure.layout.legend
    assert (legend.orientation, legend.yref, legend.y, legend.yanchor) == ("h", "container", 0, "bottom")
    assert figure.layout.margin.t >= 30
    titled = render.curve_figure({"eap-ig": curve}, 200, title="NDF<br>prompt")
    assert titled.layout.legend.yref == "container" and titled.layout.margin.t >= 30 + 2 * 20
    assert "<html>" in render.figure_html(figure).lower()


def test_upset_counts_exclusive_intersections():
    sets = {"q": {"a", "b", "c", "d"}, "p1": {"a", "b", "e"}, "p2": {"a", "c", "e", "f"}}
    found = {item.members: set(item.edges) for item in render.exclusive_intersections(sets)}
    assert found == {
        ("q", "p1", "p2"): {"a"},
        ("q", "p1"): {"b"},
        ("q", "p2"): {"c"},
        ("q",): {"d"},
        ("p1", "p2"): {"e"},
        ("p2",): {"f"},
    }
    assert sum(len(edges) for edges in found.values()) == len(set().union(*sets.values()))
    assert render.shared_by_all(sets) == {"a"}
    figure, shown = render.upset_figure(sets, selected=("q", "p1", "p2"))
    bars = figure.data[0]
    assert list(bars.y) == [item.size for item in shown]
    assert bars.marker.color[[item.members for item in shown].index(("q", "p1", "p2"))] == "#D55E00"
    # labels keep their size (plotly shrank '113' over a narrow bar, and ten sets' counts to a dash)
    assert bars.constraintext == "none"
    assert list(figure.layout.yaxis2.ticktext) == [f"{name} ({len(sets[name])})" for name in sets]
    # the bars it leaves out are said, with the edges in them (six intersections, three drawn)
    assert render.cut_sentence(sets, 6) == ""
    assert render.cut_sentence(sets, 3, "candidate") == (
        "The plot draws the 3 largest of the 6 intersections, holding 3 of the 6 edges in any "
        "candidate; the other 3 hold 1 edge each."
    )
    wider = {"q": {"a", "b", "c", "d", "x", "y"}, "p1": {"a", "b", "e"}, "p2": {"a", "c", "e", "f", "g"}}
    assert render.cut_sentence(wider, 1).endswith("; the other 5 hold 1 to 2 edges each.")
    candidates = render.candidate_figure(
        [{"name": "q", "ndf": 0.38, "winner": False}, {"name": "p3", "ndf": 0.602, "winner": True}], 200
    )
    assert list(candidates.data[0].text) == ["0.38", "0.60"] and candidates.data[0].constraintext == "none"
    assert list(candidates.layout.xaxis.ticktext) == ["q", "p3<br><b>winner</b>"]


def test_tables_overlap_unique_and_csv():
    circuits = {"eap": {"x", "y", "z"}, "eap-ig": {"y", "z", "w"}}
    (row,) = render.overlap_rows(circuits)
    assert row["shared"] == 2 and row["Jaccard"] == pytest.approx(2 / 4)
    assert render.unique_edges(circuits) == {"eap": {"x"}, "eap-ig": {"w"}}
    scores = _scores(4)
    mask = top_n(SPEC, scores, 5)
    rows = render.edge_rows(SPEC, scores, mask)
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5]
    assert abs(rows[0]["score"]) >= abs(rows[-1]["score"])
    lines = render.edges_csv(SPEC, scores, mask).splitlines()
    assert lines[0] == "rank,edge,source,destination,kind,score" and len(lines) == 6
    assert render.differing_positions(["a", "b", "c"], ["a", "x"]) == [False, True, True]


def test_result_graph_html_matches_the_result(tmp_path):
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.entry.api import discover

    model = tiny_model("gpt2")
    result, _ = discover(model, IOI_TASK, "eap", budgets=[5, 20])
    drawing = render.result_graph_html(result, 20)
    _, edges = _data(drawing.html)
    assert len(edges) == int(result.circuit(20).sum())
    point = result.point(20)  # the title counts the edges kept, and names the budget where they differ
    assert f"· {render.edges_at(point)}, NDF" in drawing.html
    assert (f"{point.n_edges} edges (budget 20)" if point.n_edges != 20 else "· 20 edges,") in drawing.html


def test_logit_lens_labels_match_the_unembedding():
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.core.tasks import prepare_task
    from circuitviz.labels.logit_lens import logit_lens_labels, next_token_probabilities

    model = tiny_model("gpt2")
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    labels = logit_lens_labels(model, spec, prepared, top_k=3)
    assert set(labels) == set(spec.node_names)
    assert all(
        len(labels[n]["promotes"]) == 3 and len(labels[n]["suppresses"]) == 3 for n in spec.forward_names
    )
    # the logits node's top tokens are the model's own top next tokens
    top = next_token_probabilities(model, IOI_TASK.clean, 3)
    assert labels["logits"]["top next tokens"] == [token for token, _ in top]
    logits = model(prepared.clean_tokens)[0, -1]
    assert top[0][0] == model.tokenizer.decode([int(logits.argmax())])
    assert sum(p for _, p in next_token_probabilities(model, IOI_TASK.clean, 10_000)) == pytest.approx(1.0)
    # a node's "promotes" is the top of its own output read through the unembedding: check one
    # by brute force with the normalisation's scale left out (it does not change the order)
    from circuitviz.engine.capture import writers_and_residual

    writers, _ = writers_and_residual(model, spec, prepared.clean_tokens)
    output = writers[0, -1, spec.forward_names.index("a1.h0")]
    output = (output - output.mean()) * model.ln_final.w
    expected = (output @ model.W_U).topk(3).indices.tolist()
    assert labels["a1.h0"]["promotes"] == [model.tokenizer.decode([i]) for i in expected]


def test_bon_adapter_matches_the_runs_own_shared_subcircuit(tmp_path, monkeypatch):
    """Candidate circuits rebuilt from the stored scores reproduce the run's UpSet sizes, NDFs
    and edge counts; iBoN gives a circuit at a budget the run never evaluated."""
    pytest.importorskip("circuitviz.methods.bon")
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.entry.api import discover
    from circuitviz.services.store import ResultStore

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path))
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    result, _ = discover(
        model,
        IOI_TASK,
        "ibon",
        {"n_paraphrases": 3, "ig_steps": 1},
        budgets=[5, 10, 20, 40],
        model_id="tiny",
        store=ResultStore(),  # the run keeps its score matrices in the store it is given
    )
    rows = bon.paraphrase_rows(result)
    assert rows[0]["pair"] == "q" and rows[0]["paraphrase"] == IOI_TASK.clean and len(rows) >= 2
    scores = bon.candidate_ndf(result, 10)
    assert sum(row["winner"] for row in scores) == 1
    sets = bon.candidate_edge_sets(model, "tiny", result, 10, ResultStore())
    assert sets is not None and list(sets) == [row["name"] for row in scores]
    assert [len(edges) for edges in sets.values()] == [row["n_edges"] for row in scores]
    names = list(sets)
    ours = sorted(
        (tuple(names.index(m) for m in item.members), item.size)
        for item in render.exclusive_intersections(sets)
    )
    shared = bon.shared_entry(result, 10)
    theirs = sorted((tuple(entry["members"]), entry["size"]) for entry in shared["upset"])
    assert ours == theirs
    assert render.shared_by_all(sets) == set(shared["common_edges"])
    assert result.any_budget and result.point(13) is None
    mask = result.circuit(13)
    assert int(mask.sum()) <= 13 and mask.any()


def test_cli_html_writes_the_apps_graph_page(tmp_path):
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.entry.api import discover
    from circuitviz.entry.cli import build_parser
    from circuitviz.entry.outputs import write_graph_html

    args = build_parser().parse_args(
        [
            "discover",
            "--prompt",
            "p",
            "--answer",
            " a",
            "--html",
            str(tmp_path / "g.html"),
            "--html-budget",
            "20",
        ]
    )
    assert args.html == tmp_path / "g.html" and args.html_budget == 20
    model = tiny_model("gpt2")
    result, _ = discover(model, IOI_TASK, "eap", budgets=[5, 20])
    write_graph_html(model, result, args.html, args.html_budget)
    page = args.html.read_text()
    nodes, edges = _data(page)
    assert len(edges) == int(result.circuit(20).sum())
    assert any("promotes" in (node.get("title") or "") for node in nodes)  # the labels, as in the app
    assert page == render.result_graph_html(result, 20, labels=_labels_of(model, result)).html


def _labels_of(model, result):
    from circuitviz.core.tasks import prepare_task
    from circuitviz.labels.logit_lens import logit_lens_labels

    return logit_lens_labels(model, result.graph, prepare_task(model, result.task))


def test_next_tokens_stay_right_while_another_session_runs_hooked_passes():
    """One model shared by two sessions: the Explore page's next-token pass must never run
    through the hooks of a patched evaluation running at the same time in another thread."""
    import threading

    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.core.tasks import prepare_task
    from circuitviz.labels.logit_lens import next_token_probabilities
    from circuitviz.measure.evaluate import Evaluator, forget_prompt_runs

    model = tiny_model("gpt2")
    spec = GraphSpec.from_model(model)
    expected = next_token_probabilities(model, IOI_TASK.clean, 5)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    circuits = torch.stack([torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool)] * 4)
    stop = threading.Event()

    def other_session():
        while not stop.is_set():
            evaluator.metrics(circuits)  # every edge patched to its corrupted value

    thread = threading.Thread(target=other_session)
    thread.start()
    try:
        seen = []
        for _ in range(30):
            forget_prompt_runs(model)  # each call runs its own forward pass, beside the other session's
            seen.append(next_token_probabilities(model, IOI_TASK.clean, 5))
    finally:
        stop.set()
        thread.join()
    for result in seen:
        assert [token for token, _ in result] == [token for token, _ in expected]
        assert [p for _, p in result] == pytest.approx([p for _, p in expected], abs=1e-9)


@pytest.mark.browser
def test_curve_exports_as_svg_when_kaleido_finds_a_browser():
    import shutil

    pytest.importorskip("kaleido")
    if not shutil.which("chromium"):
        pytest.skip("kaleido needs a Chrome/Chromium to render images")
    figure = render.curve_figure(
        {"eap": [{"budget": 10, "n_edges": 9, "metric": 1, "nfs": 0.5, "ndf": 0.5}]}, 100
    )
    image = render.figure_image(figure, "svg")
    assert image is not None and b"<svg" in image[:400]


def test_the_sae_feature_circuit_is_drawn_in_layer_rows_with_its_labels():
    from circuitviz.render.feature_graph import feature_circuit_html
    from circuitviz.render.vis import overlapping

    nodes = [{"id": f"L{layer}/f{feature}", "layer": layer, "feature": feature, "prompt_activation": 1.0}
             for layer in (2, 5, 9) for feature in (3, 40, 7)]  # fmt: skip
    edges = [
        {"source": "L2/f3", "target": "L5/f40", "coefficient": 0.5},
        {"source": "L5/f40", "target": "L9/f7", "coefficient": -0.2},
        {"source": "L9/f7", "target": "metric", "coefficient": 0.9},
    ]
    labels = {"L5/f40": "fires on '<b>Paris</b>'"}
    drawing = feature_circuit_html({"nodes": nodes, "edges": edges, "target": "metric"}, labels=labels)
    placed = {node["id"]: node for node in drawing.vis.nodes}
    # one row per layer, the earliest at the bottom (vis-network's y grows downwards), the metric on top
    assert placed["L2/f3"]["y"] > placed["L5/f40"]["y"] > placed["L9/f7"]["y"] > placed["metric"]["y"]
    assert placed["L2/f3"]["y"] == placed["L2/f40"]["y"]
    assert overlapping(drawing.vis.nodes) == []
    # a feature that stands for its identical twins says so in its tooltip; the others do not
    nodes[0] = dict(nodes[0], twins=[498, 988])
    titles = {n["id"]: n["title"] for n in feature_circuit_html({"nodes": nodes, "edges": edges}).vis.nodes}
    assert "stands for 2 identical features of its layer: #498, #988" in titles["L2/f3"]
    assert "identical" not in titles["L2/f40"]
    assert "on '‹b›Paris" in placed["L5/f40"]["label"] and "<b>" not in placed["L5/f40"]["label"]
    assert "&lt;b&gt;" in placed["L5/f40"]["title"]
    by_pair = {(e["from"], e["to"]): e for e in drawing.vis.edges}
    assert by_pair[("L5/f40", "L9/f7")]["dashes"] and by_pair[("L9/f7", "metric")]["width"] == 7.0
    assert "<b>Paris" not in drawing.html


def test_a_wide_sae_layer_wraps_onto_rows_below_the_next_layer():
    """A layer of 20 features is drawn on rows of at most eight, none overlapping, every row of an
    earlier layer below every row of a later one, the metric above all."""
    from circuitviz.render.feature_graph import PER_ROW, feature_circuit_html
    from circuitviz.render.vis import overlapping

    nodes = [{"id": f"L3/f{f}", "layer": 3, "feature": f, "prompt_activation": 1.0} for f in range(20)]
    nodes += [{"id": f"L9/f{f}", "layer": 9, "feature": f, "prompt_activation": 1.0} for f in range(5)]
    edges = [{"source": "L3/f0", "target": "L9/f0", "coefficient": 0.5}]
    placed = {n["id"]: n for n in feature_circuit_html({"nodes": nodes, "edges": edges}).vis.nodes}
    rows: dict[float, int] = {}
    for f in range(20):
        rows[placed[f"L3/f{f}"]["y"]] = rows.get(placed[f"L3/f{f}"]["y"], 0) + 1
    assert sorted(rows.values()) == [4, PER_ROW, PER_ROW]
    assert min(placed[f"L3/f{f}"]["y"] for f in range(20)) > max(placed[f"L9/f{f}"]["y"] for f in range(5))
    assert max(placed[f"L9/f{f}"]["y"] for f in range(5)) > placed["metric"]["y"]
    assert overlapping(list(placed.values())) == []


def test_a_group_is_one_node_with_its_members_and_a_bad_group_is_one_sentence():
    from circuitviz.render.groups import check_groups, group_edges, grouped, propose_groups

    mask = top_n(SPEC, _scores(4), 25)
    drawing = render.circuit_graph_html(SPEC, _scores(4), mask)
    members = [n for n in drawing.nodes if n not in ("input", "logits")][:2]
    graph = grouped(drawing.vis, {"movers": members})
    ids = {node["id"] for node in graph.nodes}
    assert "group:movers" in ids and not set(members) & ids
    group = next(node for node in graph.nodes if node["id"] == "group:movers")
    assert group["members"] == members and all(m in group["title"] for m in members)
    assert all(e["from"] in ids and e["to"] in ids for e in graph.edges)
    # the group's figures are its members' edges, those inside it dropped
    summed = group_edges(drawing.edges, {"movers": members})
    outside = [e for e in drawing.edges if not (e.source in members and e.target in members)]
    assert len(summed) == len(outside)
    assert sum(e.score for e in summed if e.source == "group:movers") == pytest.approx(
        sum(e.score for e in drawing.edges if e.source in members and e.target not in members)
    )
    groups, sentence = check_groups(
        {"ghosts": ["a99.h9"], "ok": members, "": ["a0.h0"]}, set(SPEC.node_names)
    )
    assert groups == {"ok": members} and "holds no node" in sentence and "without a name" in sentence
    # a group of unknown nodes only is said once, in one sentence (it read 'names 1 node this
    # circuit does not have; group 'ghosts' holds no node of this circuit')
    assert sentence.count("'ghosts'") == 1 and "names only 1 node this circuit does not have" in sentence
    half = check_groups({"a": members[:1], "b": [members[0], "a99.h9"]}, set(SPEC.node_names))[1]
    assert (
        "group 'b' names 1 node this circuit does not have and holds no node" in half
        and half.count("'b'") == 1
    )
    assert check_groups([["x"]] * 100, set(SPEC.node_names))[1].startswith("100 groups")
    proposal = propose_groups(drawing.edges, SPEC.n_layers)
    assert all(len(m) > 1 for m in proposal.values())
    assert all(name.split()[0] in ("early", "middle", "late") for name in proposal)


def test_demo_paths_walk_back_from_the_strongest_edges_into_the_logit():
    from circuitviz.core.tasks import PromptTask
    from circuitviz.render.demo import path_sentence, prompt_sentence, strongest_paths
    from circuitviz.render.graph_html import GraphEdge

    edges = [
        GraphEdge("input->a0.h0<q>", "input", "a0.h0", "q", -1.0),
        GraphEdge("input->m0", "input", "m0", "mlp", -0.1),
        GraphEdge("a0.h0->m1", "a0.h0", "m1", "mlp", -2.0),
        GraphEdge("m0->m1", "m0", "m1", "mlp", 0.5),
        GraphEdge("m1->logits", "m1", "logits", "logits", -3.0),
        GraphEdge("m0->logits", "m0", "logits", "logits", 0.2),
    ]
    paths = strongest_paths(edges, 3)
    # from each edge into the logit, strongest first, back along the strongest incoming edge
    assert [path_sentence(p) for p in paths] == ["input → a0.h0 → m1 → logits", "input → m0 → logits"]
    task = PromptTask(clean="The Eiffel Tower is in", corrupted="", answer=" Paris", foils=(" Rome",))
    assert prompt_sentence(task) == 'The model reads "The Eiffel Tower is in" and prefers "Paris" to "Rome".'


def test_a_graph_says_when_its_labels_are_too_small_to_read():
    """Fifteen tokens in the 538 px a 1,000 px window leaves drew 5.6 px labels: the graph still
    opens whole, and its frame says how to read it (shown by the fit below 9 px labels, hidden
    again when zoomed in or wider). The layered drawings too: SmolLM2-135M's 30 layers fitted at
    4.0 px at 1,000 px and 7.2 px at 2,000 with no word (the line was for positions only)."""
    from circuitviz.render.vis import DRAW_SCRIPT, SMALL_HINT, SMALL_LABEL_PX, VisGraph, standalone_page

    nodes = [{"id": f"n{i}", "label": "h1", "x": 60 * i, "y": 0, "font": {"size": 20}} for i in range(15)]
    positions = VisGraph(nodes, [], kind="positions")
    data = positions.to_data()
    assert data["small_scale"] == pytest.approx(SMALL_LABEL_PX / 20) and data["small_hint"] == SMALL_HINT
    layered = VisGraph(nodes, []).to_data()  # the same threshold, whatever the drawing's kind
    assert (
        layered["small_scale"] == pytest.approx(SMALL_LABEL_PX / 20) and layered["small_hint"] == SMALL_HINT
    )
    assert "cvHintUpdate(network, data)" in DRAW_SCRIPT and 'network.on("zoom"' in DRAW_SCRIPT
    page = standalone_page(positions)
    assert "id='cv-hint' style='display:none'" in page and "network.cvHint = " in page


def test_the_fit_never_draws_a_small_circuit_larger_than_the_pages_type():
    """A circuit of 40 edges on three columns was fitted at scale 0.95: 21 px labels in boxes
    twice the page's type. The fit's zoom is capped, and the frame is no taller than the drawing
    at that zoom needs."""
    from circuitviz.render.vis import MAX_LABEL_PX, VisGraph, frame_height

    def node(name, x, y):
        return {"id": name, "label": name, "x": x, "y": y, "shape": "box", "font": {"size": 22}}

    small = VisGraph([node("input", 0, 400), node("a1.h1", -100, 200), node("logits", 0, 0)], [])
    assert small.max_scale() == pytest.approx(MAX_LABEL_PX / 22)
    left, top, right, bottom = small.bounds()
    assert small.widest() == pytest.approx((right - left) * MAX_LABEL_PX / 22)
    drawn_tall = (bottom - top) * MAX_LABEL_PX / 22 + 30
    assert frame_height(small, 1000) == int(max(drawn_tall, 260))  # not aspect x 1000 px
    data = small.to_data()
    assert data["max_scale"] == small.max_scale() and data["widest"] == small.widest()
    from circuitviz.ui.demo import DEMO_LABEL_PX  # demo mode: an audience reads from further away

    assert small.to_data(DEMO_LABEL_PX)["max_scale"] == pytest.approx(DEMO_LABEL_PX / 22)
    wide = VisGraph([node(f"a{i}.h0", 300 * i, 0) for i in range(12)], [])
    assert frame_height(wide, 1000) == int(max(wide.aspect() * 1000 + 30, 260))  # wider than the frame


IOI_PAIRS = [  # the Paraphrases page's default run on IOI (an audit's, in Chromium)
    ("When Mary and John went to the store, John gave a drink to", "Mary → Alice, John → Bob, John → Carl"),
    (
        "Yesterday Mary and John went to the library, and John gave a key to",
        "Mary → Mark, John → Henry, John → Jack",
    ),
    (
        "After lunch, Mary and John went to the market. John gave a ticket to",
        "Mary → James, John → Emma, John → Nick",
    ),
    (
        "While Mary and John were working at the beach, John gave a snack to",
        "Mary → Jack, John → Maria, John → Anna",
    ),
]
MEASURED_CHAR_PX, CELL_PADDING_PX = 6.06, 16  # Source Sans 14 px in Chromium; 8 px a side


def _lines_at(text: str, px: float) -> int:
    """The lines ``text`` takes wrapped at words in a cell ``px`` wide, at the measured type."""
    chars, lines, used = int((px - CELL_PADDING_PX) / MEASURED_CHAR_PX), 1, 0
    for word in text.split():
        if used and used + 1 + len(word) > chars:
            lines, used = lines + 1, len(word)
        else:
            used += len(word) + (1 if used else 0)
    return lines


def test_the_paraphrase_table_fits_its_frame_with_every_text_whole():
    """The table was cut on the right at every width, its corrupted column mid-word even in a 1,540 px
    frame (about 1,700 px of columns: 7 px a character against the 6.06 measured, and Streamlit's own
    short columns). Now every column of the default IOI run fits the 1,040 px frame of a 1,500 px
    page, the pair's name and both texts the 540 px frame of a 1,000 px page (what the corruption
    replaces last, right of them), and no column is narrower than its content: each text wraps onto
    no more lines than a row holds, each header on one line."""
    rows = [
        {
            "pair": f"p{index}" if index else "q",
            "paraphrase": clean,
            "corrupted": clean.replace("Mary", "Alice").replace("John", "Bob"),
            "candidate": True,
            "answer matches": True,
            "model's answer": " Mary",
            "source": "template:ioi" if index else "original",
            "replaced": replaced,
        }
        for index, (clean, replaced) in enumerate(IOI_PAIRS * 3)
    ]
    assert (
        bon.TABLE_COLUMNS[:3] == ("pair", "paraphrase", "corrupted") and bon.TABLE_COLUMNS[-1] == "replaced"
    )
    widths = {name: config["width"] for name, config in bon.table_widths(rows).items()}
    assert list(widths) == list(bon.TABLE_COLUMNS)
    assert sum(widths.values()) <= 1040 - 12, widths  # Streamlit's frame adds about 12 px
    assert widths["pair"] + widths["paraphrase"] + widths["corrupted"] <= bon.NARROW_FRAME_PX, widths
    row_px = bon.table_row_height(rows)
    assert row_px is not None and row_px > 64  # Streamlit wraps a cell's text only in rows over 64 px
    for name in ("paraphrase", "corrupted", "replaced"):
        texts = [row[name].replace("→", "->") for row in rows]
        assert max(_lines_at(text, widths[name]) for text in texts) * 18 <= row_px - 4, name
    for name in bon.TABLE_COLUMNS:
        header_px = MEASURED_CHAR_PX * len(name) + CELL_PADDING_PX + (20 if name in bon.TEXT_COLUMNS else 0)
        assert widths[name] >= header_px, name
        if name not in bon.TEXT_COLUMNS + ("replaced", "candidate", "answer matches"):
            assert (
                widths[name] >= MEASURED_CHAR_PX * max(len(str(row[name])) for row in rows) + CELL_PADDING_PX
            )
    assert bon.table_height(rows) >= 36 + row_px * len(rows)  # every row shown, not five and a half
    # short texts fit one line at Streamlit's own row height; a very long one is capped, wrapped
    short = [{**rows[0], "paraphrase": "12 + 7 =", "corrupted": "13 + 7 =", "replaced": "12 → 13"}]
    assert bon.table_lines(short) == 1 and bon.table_row_height(short) is None
    assert bon.table_height(short) == "auto"
    # a very long text is capped so that the columns right of it stay on a 1,500 px page (at 720 px
    # a column they were off its right edge at 2,000 px too), and its row is said to be cut
    long = [{**rows[0], "paraphrase": "word " * 400}]
    assert sum(config["width"] for config in bon.table_widths(long).values()) <= 1040 - 12
    assert bon.cut_rows(long) == ["q"]


MC_PAIRS = [  # the Paraphrases page's run on the Gallery's multiple-choice prompt (an audit's, in Chromium)
    "Q: Is the sky blue? A) yes B) no. Answer: A. Q: Is fire hot? A) yes B) no. Answer:",
    "Q: Is the sky blue? A. yes B. no. The answer is A. Q: Is fire hot? A. yes B. no. The answer is",
    "Question: Is the sky blue? A) yes B) no. The answer is A. Question: Is fire hot? A) yes B) no. The answer is",
    "Question: Is the sky blue? (A) yes (B) no. Answer: A. Question: Is fire hot? (A) yes (B) no. Answer:",
]
ARITHMETIC_PAIRS = [  # SmolLM2-135M's arithmetic template paraphrases, 'template:arithmetic'
    "one plus one is two. one plus two is",
    "what is one plus one? The answer is two. what is one plus two? The answer is",
    "add one and one. The result is two. add one and two. The result is",
    "one plus one is two. if you add one and two, you get",
]


@pytest.mark.parametrize(
    "texts, source, replaced",
    [
        (MC_PAIRS, "template:inline-choice", "yes → no, no → yes, A → B, yes → no, no → yes"),
        (ARITHMETIC_PAIRS, "template:arithmetic", "one → two"),
    ],
    ids=["multiple-choice", "arithmetic"],
)
def test_the_paraphrase_table_fits_a_wide_page_for_longer_template_names_too(texts, source, replaced):
    """On the multiple-choice prompt the table was 1,114 px in a 1,500 px page's 1,038 px frame, its
    last column cut mid-word ("replace", "yes → n"), and on the arithmetic one 1,053 px: the texts
    wrapped onto at most three lines, and 'template:inline-choice' with what its corruption replaces
    took the rest. The texts wrap onto more lines where that makes the table fit, each still whole."""
    rows = [
        {
            "pair": f"p{index}" if index else "q",
            "paraphrase": clean,
            "corrupted": clean.replace("yes", "no").replace("one plus two", "two plus two"),
            "candidate": True,
            "answer matches": True,
            "model's answer": " A",
            "source": source if index else "original",
            "replaced": replaced,
        }
        for index, clean in enumerate(texts * 3)
    ]
    widths = {name: config["width"] for name, config in bon.table_widths(rows).items()}
    assert sum(widths.values()) <= 1040 - 12, widths  # Streamlit's frame adds about 12 px
    assert widths["pair"] + widths["paraphrase"] + widths["corrupted"] <= bon.NARROW_FRAME_PX, widths
    row_px = bon.table_row_height(rows)
    for name in ("paraphrase", "corrupted", "replaced"):
        cells = [row[name].replace("→", "->") for row in rows]
        assert max(_lines_at(text, widths[name]) for text in cells) * 18 <= row_px - 4, name
    for name in bon.TABLE_COLUMNS:
        header_px = MEASURED_CHAR_PX * len(name) + CELL_PADDING_PX + (20 if name in bon.TEXT_COLUMNS else 0)
        assert widths[name] >= header_px, name


def test_group_lines_that_cannot_be_read_are_said_not_dropped():
    from circuitviz.render.groups import MAX_NAME, check_groups, parse_groups_text

    members = list(SPEC.node_names)[1:3]
    text = f"no colon here\n\nmovers: {members[0]}\nmovers: {members[1]}\n{'x' * 60}: {members[0]}\n"
    parsed, unread = parse_groups_text(text)
    assert parsed == {"movers": [members[1]], "x" * 60: [members[0]]}  # the last 'movers' line kept
    assert unread == [
        "1 line without a colon ('name: node, node')",
        "group 'movers' on more than one line (the last one kept)",
    ]
    groups, sentence = check_groups(parsed, set(SPEC.node_names), unread)
    assert groups == {"movers": [members[1]], "x" * MAX_NAME: [members[0]]}
    assert sentence == (
        "Groups: 1 line without a colon ('name: node, node'); group 'movers' on more than one line (the "
        f"last one kept); a group name cut to its first {MAX_NAME} characters; the rest is shown."
    )
    assert parse_groups_text("a: b\n\n  \n") == ({"a": ["b"]}, [])


def test_a_nodes_plus_x_caption_is_its_effect_at_every_budget():
    """The caption's +x is what the key says, how much the node raises the metric (minus the
    summed scores of all its edges out): an audit found one node reading +1.3 at one budget and
    +2.3 at another, when it was summed over the circuit's edges only."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.render import meaningful_captions

    scores = _scores(3)
    task = PromptTask("a b c", "a b d", " x", (" y",), "logit_diff")
    small = _mask("a0.h1->m1", "m1->logits")
    large = SPEC.edge_mask.clone()
    whole = -(scores * SPEC.edge_mask)[SPEC.forward_names.index("m1")].sum().item()
    at_small = meaningful_captions(SPEC, scores, small, {}, task)
    at_large = meaningful_captions(SPEC, scores, large, {}, task)
    assert at_small["m1"] == at_large["m1"] == f"{whole:+.2g}"
    assert set(at_small) == {"a0.h1", "m1"}  # the circuit's nodes only
    assert meaningful_captions(SPEC, scores, small, {}, task, estimates_metric=False) == {}


def test_a_wide_dashed_edge_keeps_visible_gaps():
    """The strongest edge working against the answer is the widest and dashed: vis's fixed 5-pixel
    dashes closed up at that width and it read as solid (the legend's other meaning). Its gaps grow
    with the width, wider than the line itself."""
    from circuitviz.render.graph_html import dash_pattern

    scores = torch.zeros(SPEC.n_forward, SPEC.n_backward, device="cpu")
    strong, weak = SPEC.edge_names.index("a2.h0->logits"), SPEC.edge_names.index("a0.h1->m1")
    forward, backward = SPEC.edge_index
    scores[forward[strong], backward[strong]] = 4.0
    scores[forward[weak], backward[weak]] = 0.1
    _, edges = _data(render.circuit_graph_html(SPEC, scores, _mask("a2.h0->logits", "a0.h1->m1")).html)
    for edge in edges:
        dash, gap = edge["dashes"]
        assert gap > edge["width"] and dash > gap, edge
    assert dash_pattern(False, 8.0) is False


@pytest.mark.browser
def test_the_small_labels_line_says_widen_only_where_widening_helps(tmp_path):
    """ACC++'s circuit on SmolLM2-135M (30 layer rows) fills the frame's greatest height at 1,500 and
    2,000 px, fitted to its height with labels under 9 px, and the line under the key said 'or
    widen the window', which changed nothing; a wide, short drawing still says it. (The frame now
    grows to ``TALLEST_FRAME`` for its labels: the tall drawing here has rows twice as far apart,
    under 9 px even then.)"""
    from pathlib import Path

    from circuitviz.render.vis import SMALL_HINT, SMALL_HINT_TALL, VisGraph, hint_text, standalone_page

    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Debian's chromium is not installed")
    playwright_api = pytest.importorskip("playwright.sync_api")

    def node(i: int, x: float, y: float) -> dict:
        return {"id": f"n{i}", "label": "h1", "x": x, "y": y, "font": {"size": 20}, "shape": "box"}

    tall = VisGraph(
        [node(30 * c + r, 60 * c, 200 * r) for c in range(15) for r in range(30)], [], kind="positions"
    )
    wide = VisGraph([node(c, 60 * c, 0) for c in range(60)], [], kind="positions")
    seen = {}
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        try:
            # a window that holds the tall frame whole (a lower one holds the frame to its height
            # and the line says "full size": tests/test_frame_window.py)
            for name, graph, width, height in (("tall", tall, 1500, 1800), ("wide", wide, 1000, 1000)):
                path = tmp_path / f"{name}.html"
                path.write_text(standalone_page(graph), encoding="utf-8")
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(path.as_uri())
                page.wait_for_timeout(800)
                hint = page.locator("#cv-hint")
                px = page.evaluate("() => network.getScale() * 20")  # every label's size
                seen[name] = (hint.is_visible(), hint.inner_text(), [px] * len(graph.nodes))
        finally:
            browser.close()
    assert seen["tall"][:2] == (True, hint_text(SMALL_HINT_TALL, seen["tall"][2]))
    assert seen["wide"][:2] == (True, hint_text(SMALL_HINT, seen["wide"][2]))


def test_the_shared_budget_line_is_named_and_in_no_curves_colour():
    """Compare draws its curves with the budget's dotted line and no labelled point: the line was
    the logits' orange, the second curve's own colour (CD-T's beside EAP, an audit), unnamed."""
    import math

    from circuitviz.render.curves import SERIES_COLOURS

    curve = [
        {"budget": 10, "n_edges": 8, "metric": 1.0, "nfs": 0.2, "ndf": 0.2},
        {"budget": 200, "n_edges": 181, "metric": 2.0, "nfs": 0.9, "ndf": 0.9},
    ]
    figure = render.curve_figure(
        {"eap": curve, "cd-t": curve, "edge-pruning": curve}, 10342, current_budget=200
    )
    (line,) = figure.layout.shapes
    assert line.x0 == 200 and line.line.color not in SERIES_COLOURS
    (named,) = [a for a in figure.layout.annotations if a.text == "budget 200"]
    assert named.x == pytest.approx(math.log10(200))  # a log axis places an annotation at log10(x)
    labelled = render.curve_figure({"eap": curve}, 10342, current_budget=200, marker_value=0.9)
    assert not [
        a for a in labelled.layout.annotations if a.text == "budget 200"
    ]  # Explore: its point says it


def test_a_token_of_a_tab_or_an_invisible_character_draws_a_chip_that_says_so():
    """A family emoji's zero-width joiners (Gemma's tokens of '👨\u200d👩\u200d👧') and a tab drew empty chips."""
    chips = render.token_strip_html(["<bos>", "👨", "\u200d", "👩", "\t", "\u200b", "a\tb", " x\r\n"])
    shown = re.findall(r">([^<]*)</span>", chips)
    assert shown == ["&lt;bos&gt;", "👨", "\\u200d", "👩", "⇥", "\\u200b", "a⇥b", "·x␍↵"]
    assert render.token_strip_html(["👨\u200d👩"]).count("\u200d") == 1  # a joiner inside a token joins
