"""A circuit the user edited (removed nodes, kept only the pinned ones) is said to be edited, with
its own figures, in every view and download of it: the drawing's title, the edge table, the
explanation, the Graph HTML, the Edges CSV and the JSON, and the edit's caption names each part
of the edit present. Before: after "keep only the pinned nodes" the page drew 5 edges under the
method's title "82 edges (budget 100), NDF 0.80", the table and the CSV held the 82 unedited
edges, and the caption read "edited: ; kept only m3, a12.h2, a11.h1"."""

from __future__ import annotations

import csv
import io
import json
import re
from types import SimpleNamespace

import pytest

from circuitviz import render
from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.text import markdown_text
from circuitviz.measure.edit import CircuitEdit, edited_mask
from circuitviz.ui import downloads as dl
from circuitviz.ui.result_view import edges_table_caption


@pytest.fixture(scope="module")
def result():
    from circuitviz.entry.api import discover

    found, _ = discover(tiny_model("gpt2"), IOI_TASK, "eap", budgets=[5, 20])
    return found


def _kept_only(result, budget: int):
    """An edit keeping two of the circuit's nodes, and the mask it gives."""
    nodes = [n for n in render.circuit_edges_nodes(result, budget) if n not in ("input", "logits")][:2]
    edit = CircuitEdit(keep_only=tuple(nodes))
    return edit, edited_mask(result.graph, result.circuit(budget), edit)


def test_the_edits_caption_names_each_part_present_and_no_empty_one():
    from circuitviz.ui.instrument import edit_words

    assert edit_words(CircuitEdit(keep_only=("m3", "a12.h2", "a11.h1"))) == (
        "edited: kept only m3, a12.h2, a11.h1 (with the embeddings and the logits)"
    )
    assert edit_words(CircuitEdit(removed_nodes=("m3",), removed_edges=("input->m0",))) == (
        "edited: removed m3, input->m0"
    )
    both = edit_words(CircuitEdit(removed_nodes=("m3",), restored_edges=("m0->m1",), keep_only=("m1",)))
    assert both == "edited: removed m3; added back m0->m1; kept only m1 (with the embeddings and the logits)"
    for edit in (CircuitEdit(keep_only=("m1",)), CircuitEdit(restored_edges=("m0->m1",))):
        assert not re.search(r"edited: ;|; ;|;\s*$", edit_words(edit)), edit_words(edit)


def test_an_edited_drawing_is_titled_with_its_own_edges_and_ndf(result):
    edit, mask = _kept_only(result, 20)
    n_edges = int(mask.sum())
    drawing = render.result_graph_html(result, 20, mask=mask, edited={"ndf": 0.4071})
    method = f"{render.edges_at(result.point(20))}, NDF {result.point(20).ndf:.2f}"
    expected = (
        f"edited circuit: {n_edges} {'edge' if n_edges == 1 else 'edges'}, NDF 0.41 (the method's: {method})"
    )
    assert expected in drawing.vis.title and len(drawing.edges) == n_edges
    assert expected.replace("'", "&#x27;") in drawing.html  # the Graph HTML download's title
    unmeasured = render.result_graph_html(result, 20, mask=mask, edited={"ndf": None})
    assert "NDF not measured" in unmeasured.vis.title
    # the method's own circuit keeps the title it had
    assert render.result_graph_html(result, 20).vis.title.split(" · ")[2] == method


def test_the_edge_tables_caption_says_the_circuit_is_edited():
    assert (
        edges_table_caption(5, 50, edited=True)
        == "The edited circuit's 5 edges, strongest first (also in the CSV)."
    )
    assert edges_table_caption(120, 50, edited=True) == (
        "The 50 strongest of the edited circuit's 120 edges (all of them in the CSV)."
    )
    assert edges_table_caption(5, 50) == "The circuit's 5 edges, strongest first (also in the CSV)."
    assert edges_table_caption(5, 50, meaning="how firmly the masks keep it") == (
        "The circuit's 5 edges, strongest first (also in the CSV). Score: how firmly the masks keep it."
    )


class _Row:
    def __init__(self):
        self.buttons = {}

    def download_button(self, label, data, file_name, mime, key, **_):
        self.buttons[label] = SimpleNamespace(data=data() if callable(data) else data, file_name=file_name)


def _downloads(monkeypatch, result, budget, drawing, mask=None, edited_point=None):
    row = _Row()
    monkeypatch.setattr(dl, "st", SimpleNamespace(container=lambda **_: row, caption=lambda *_a, **_k: None))
    monkeypatch.setattr(dl, "_browser_for_images", lambda: False)
    view = {"edit": {}} if mask is not None else None
    dl.downloads(result, budget, drawing, key="k", mask=mask, view=view, edited_point=edited_point)
    return row.buttons


def test_an_edited_circuits_json_carries_its_own_figures(monkeypatch, result):
    """The edited circuit's JSON kept only the method's ``summary`` (its NDF at each budget), so a
    reader of the file took the method's figures for the edit's; an ``edited`` block now gives the
    edit's own edges, NDF and necessity (those `circuitviz evaluate --circuit` gives) and says what
    the rest of the file describes."""
    from circuitviz.measure.edit import measure

    edit, mask = _kept_only(result, 20)
    _, point = measure(tiny_model("gpt2"), result.task, mask)
    drawing = render.result_graph_html(result, 20, mask=mask, edited={"ndf": point.ndf})
    data = json.loads(_downloads(monkeypatch, result, 20, drawing, mask, point)["Circuit (JSON)"].data)
    block = data["edited"]
    assert block["n_edges"] == int(mask.sum()) == sum(edge["in_graph"] for edge in data["edges"].values())
    assert block["from_budget"] == 20 and block["ndf"] == pytest.approx(point.ndf)
    assert block["ndf"] != pytest.approx(result.point(20).ndf)  # not the method's figure
    assert "the method's unedited circuits'" in block["note"]
    unmeasured = json.loads(_downloads(monkeypatch, result, 20, drawing, mask)["Circuit (JSON)"].data)
    assert unmeasured["edited"]["ndf"] is None and "not measured" in unmeasured["edited"]["note"]
    plain = json.loads(_downloads(monkeypatch, result, 20, drawing)["Circuit (JSON)"].data)
    assert "edited" not in plain


def test_an_edited_circuits_downloads_hold_it_and_say_edited(monkeypatch, result):
    edit, mask = _kept_only(result, 20)
    drawing = render.result_graph_html(result, 20, mask=mask, edited={"ndf": 0.5})
    buttons = _downloads(monkeypatch, result, 20, drawing, mask)
    edges = list(csv.DictReader(io.StringIO(buttons["Edges (CSV)"].data)))
    assert {row["edge"] for row in edges} == set(result.graph.edge_names_of(mask))  # not the method's
    data = json.loads(buttons["Circuit (JSON)"].data)
    assert sum(edge["in_graph"] for edge in data["edges"].values()) == len(edges)
    assert "edited circuit" in buttons["Graph (HTML)"].data
    for label in ("Circuit (JSON)", "Graph (HTML)", "Edges (CSV)"):  # every file of the edited circuit
        assert "-edited_" in buttons[label].file_name, buttons[label].file_name
    for label in ("Curve (CSV)", "Curve (interactive HTML)"):  # the method's curve, not the edit's
        assert "edited" not in buttons[label].file_name
    plain = _downloads(monkeypatch, result, 20, render.result_graph_html(result, 20))
    assert not any("edited" in button.file_name for button in plain.values())
    assert len(plain["Edges (CSV)"].data.splitlines()) - 1 == int(result.circuit(20).sum())


def test_the_page_says_the_drawn_circuit_is_edited(tiny_app):
    """Explore with a link's edit: the drawing's title, the caption, the table and the explanation
    give the edited circuit's figures, which are the measured ones beside them."""
    from graph_data import graph_data
    from streamlit.testing.v1 import AppTest

    query = {
        "prompt": IOI_TASK.clean,
        "corrupted": IOI_TASK.corrupted,
        "answer": " Mary",
        "foil": " John",
        "budgets": "5,10,20,40",
        "method": "eap",
    }

    def run(**more) -> AppTest:
        at = AppTest.from_file("../app.py", default_timeout=300)
        for name, value in {**query, **more}.items():
            at.query_params[name] = value
        at.run()
        next(b for b in at.button if b.label == "Run").click()
        return at.run()

    first = run()
    assert not first.exception, first.exception
    offers = "These measure the method's circuit at this budget, not your edit"
    assert not any(c.value.startswith(offers) for c in first.caption)  # no edit: nothing to tell apart
    nodes = [n["id"] for n in graph_data(first)[0]["nodes"] if n["id"] not in ("input", "logits")][:2]
    view = {"pins": nodes, "edit": {"keep_only": nodes}}
    at = run(view=json.dumps(view))
    assert not at.exception, at.exception
    shown = {m.label: m.value for m in at.metric}
    title = graph_data(at)[0]["title"]
    n_edges = int(shown["edited edges"].replace(",", ""))
    assert len(graph_data(at)[0]["edges"]) == n_edges
    said = f"edited circuit: {n_edges} {'edge' if n_edges == 1 else 'edges'}, NDF {float(shown['edited NDF']):.2f}"
    assert said in title and "(the method's: " in title, title
    captions = [c.value for c in at.caption]
    said = f"edited: kept only {', '.join(nodes)} (with the embeddings and the logits)"
    assert markdown_text(said) in captions, captions  # markdown-escaped: node names are plain text
    assert not any(re.search(r"edited\\?: ;", c) for c in captions)
    table = [c for c in captions if "strongest" in c and "CSV" in c]
    from circuitviz.methods import method_traits

    assert table == [  # with what the method's score is (markdown-escaped, as every caption here)
        markdown_text(
            f"The edited circuit's {n_edges} {'edge' if n_edges == 1 else 'edges'}, strongest first (also in "
            f"the CSV). Score: {method_traits('eap').score_meaning}."
        )
    ]
    assert any(f"Of the edited circuit's {n_edges}" in c for c in captions), captions
    from circuitviz.ui.instrument import EDITED_CURVE  # the curve's marker is not the edit's

    assert EDITED_CURVE in captions
    # the measure buttons above the graph measure the method's circuit: said while an edit is drawn
    assert any(c.startswith(offers) for c in captions), captions


def test_an_empty_circuits_table_is_one_sentence():
    """SmolLM2's factual prompt under EAP at budget 20 keeps no edge: the caption read "The
    circuit's 0 edges, strongest first (also in the CSV). Score: ..." over an empty table."""
    assert edges_table_caption(0, 50, meaning="attribution patching's estimate") == (
        "The circuit has no edges at this budget."
    )
    assert edges_table_caption(0, 50, edited=True) == "The edited circuit has no edges."
