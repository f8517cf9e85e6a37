"""The Explore page with positions on: the circuit drawn over token positions, why it opened at its
budget, the Neuronpedia download; the tiny model, as tests/test_app.py runs the app."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from graph_data import graph_data  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.bench.toy_models import IOI_TASK, tiny_app_model  # noqa: E402

TIMEOUT = 300


pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
_tiny_loader = tiny_app_model
POSITIONS = '{"positions": true}'  # the method's settings in a link: a circuit over positions


def _opened(budgets: str, **link: str) -> AppTest:
    """Explore opened from a link with IOI's task, EAP and ``budgets`` (and ``link``'s values)."""
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    query = {"prompt": IOI_TASK.clean, "corrupted": IOI_TASK.corrupted, "answer": " Mary", "foil": " John"}
    query.update({"method": "eap", "budgets": budgets, **link})
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def _ran(at: AppTest) -> AppTest:
    """``at`` after its Run button is pressed."""
    next(button for button in at.button if button.label == "Run").click()
    return at.run()


def test_explore_draws_a_circuit_over_positions_with_its_tokens_as_the_axis():
    at = _opened("10,40,100,400")
    assert not at.exception
    toggle = next(box for box in at.checkbox if "positions" in box.label)
    toggle.check()
    at.run()
    at = _ran(at)
    assert not at.exception, at.exception
    data = next(d for d in graph_data(at) if any(n["id"].startswith("token@") for n in d["nodes"]))
    nodes = data["nodes"]
    tokens = [node for node in nodes if node["id"].startswith("token@")]
    assert len(tokens) == len(_tiny_loader("", "").to_str_tokens(IOI_TASK.clean))  # every position a column
    circuit = [
        node for node in nodes if "@" in node["id"] and not node["id"].startswith(("token@", "layer@"))
    ]
    assert any(node["id"].startswith("logits@") for node in circuit)
    assert any("Opened at" in note for note in data["notes"])  # the view says why it chose its budget
    assert any(button.label == "Neuronpedia graph JSON" for button in at.get("download_button"))
    assert any(metric.label == "units kept" for metric in at.metric)
    # the curve's x is the unit budget (units kept are fewer after pruning): named so, hover in units
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert figure["layout"]["xaxis"]["title"]["text"] == "unit budget (log scale)"
    hovers = [t.get("hovertemplate") or "" for t in figure["data"]]
    assert any(" units<br>" in h for h in hovers) and not any(" edges" in h for h in hovers), hovers
    assert "before pruning" in at.select_slider(key="budget.units").label


def test_the_positions_card_and_header_say_the_same_units():
    """The header and the 'units kept' card count the same units: those kept after pruning, the
    budget asked named beside them when pruning dropped some."""
    from circuitviz.positions.present import result_attribution_graph

    at = _opened("10,40,100,400")
    next(box for box in at.checkbox if "positions" in box.label).check()
    at.run()
    at = _ran(at)
    assert not at.exception, at.exception
    result = at.session_state["results"]["eap"]
    for budget in result.budgets:
        at.select_slider(key="budget.units").set_value(budget).run()
        kept = next(metric.value for metric in at.metric if metric.label == "units kept")
        assert int(kept.replace(",", "")) == result.point(budget).n_edges
        header = f"{kept} units" + (
            "" if int(kept.replace(",", "")) == budget else f" kept (budget {budget:,})"
        )
        assert f"over positions · {header}" in result_attribution_graph(result, budget).title, (kept, budget)


def test_a_dip_in_the_positions_curve_is_said_with_its_units():
    """The positions view drew its curve falling from NDF 0.55 at budget 20 to 0.37 at 50 (the Louvre,
    EAP-IG) and said nothing, where Explore's edge view says where and why."""
    from circuitviz.core.curves import CurvePoint
    from circuitviz.render.curve_notes import dip_note_of_units as dip_note

    curve = [
        CurvePoint(20, 20, 0, 0.55, 0.55),
        CurvePoint(50, 44, 0, 0.37, 0.37),
        CurvePoint(100, 89, 0, 0.6, 0.6),
    ]
    note = dip_note(curve)
    assert note.startswith(
        "The curve is not monotone: at 44 units (budget 50) NDF is 0.37, below 0.55 at 20 units."
    )
    assert "edges" not in note
    assert dip_note(curve[::2]) is None  # rising: nothing to say


def test_a_link_keeps_the_unit_budget_it_was_shared_at():
    """The unit slider was not in the URL: a view shared at 400 units opened at the readable budget
    (the link's 'budget' is the edge view's), so a colleague saw another circuit."""
    from circuitviz.positions.present import readable_position_budget

    at = _ran(_opened("10,40,100,400", settings=POSITIONS))
    assert not at.exception, at.exception
    readable = readable_position_budget(at.session_state["results"]["eap"]).budget
    assert at.select_slider(key="budget.units").value == readable
    other = next(b for b in (400, 100, 40, 10) if b != readable)
    at.select_slider(key="budget.units").set_value(other).run()
    assert at.query_params["units"] == str(other)  # the URL names the unit budget shown
    shared = _ran(_opened("10,40,100,400", settings=POSITIONS, units=str(other)))
    assert not shared.exception, shared.exception
    assert shared.select_slider(key="budget.units").value == other


def test_the_neuronpedia_download_names_token_ids_as_discover_does(monkeypatch, tmp_path):
    """Explore's 'Neuronpedia graph JSON' named an embedding E_{position}_{position} and the logit
    {L+1}_0_{p} (the page never passed the token ids), where discover --neuronpedia and the format's
    table write E_{token id}_{p} and {L+1}_{answer id}_{p}."""
    import circuitviz.ui.position_view as position_view
    from circuitviz.entry.outputs import write_position_outputs
    from circuitviz.export.neuronpedia import task_ids
    from circuitviz.positions.present import result_attribution_graph

    asked = []
    monkeypatch.setattr(
        position_view, "task_ids", lambda model, task: asked.append(model) or task_ids(model, task)
    )
    at = _opened("10,40,100", settings=POSITIONS)
    at = _ran(at)
    assert not at.exception, at.exception
    assert asked and asked[-1] is not None  # the page had the model's ids for its download
    result = at.session_state["results"]["eap"]
    budget = at.select_slider(key="budget.units").value
    model = _tiny_loader("", "")
    shown = json.loads(
        position_view.neuronpedia_text(result_attribution_graph(result, budget), task_ids(model, result.task))
    )
    written = tmp_path / "graph.json"
    write_position_outputs(model, result, None, written, budget)
    ids = sorted(node["node_id"] for node in shown["nodes"])
    assert ids == sorted(node["node_id"] for node in json.loads(written.read_text())["nodes"])
    token = model.to_tokens(IOI_TASK.clean)[0].tolist()
    embeddings = [i.split("_") for i in ids if i.startswith("E_")]
    assert embeddings and all(int(vocab) == token[int(p)] for _, vocab, p in embeddings), embeddings


def test_a_graph_neuronpedia_cannot_read_disables_its_download_and_says_why(monkeypatch):
    """A graph holding NaN downloaded as a file Neuronpedia cannot open; the button is now disabled
    and the sentence why is on the page (export_problem decides: tests/test_positions.py)."""
    import circuitviz.ui.position_view as position_view

    why = "Node a0.h0 at position 1 has a contribution of nan, not a finite number, so no export"
    monkeypatch.setattr(position_view, "export_problem", lambda graph: why + ".")
    at = _ran(_opened("10,40,100", settings=POSITIONS))
    assert not at.exception, at.exception
    button = at.get("download_button")
    download = next(b for b in button if b.proto.label == "Neuronpedia graph JSON")
    assert download.proto.disabled
    said = f"{why}; the graph's HTML and its curve still download."
    assert said in [caption.value for caption in at.caption]


def test_the_positions_view_shows_the_figures_the_edge_view_and_discover_show():
    """The view over positions showed clean, corrupted, NDF and units kept; discover's table of the
    same run, and Explore's edge view, give necessity and NFS too (IOI over positions at 50 units:
    necessity 0.257, NFS -0.873 under NDF 0.000, unseen on the page)."""
    at = _opened("10,40,100", settings=POSITIONS)
    at = _ran(at)
    assert not at.exception, at.exception
    result = at.session_state["results"]["eap"]
    point = result.point(at.select_slider(key="budget.units").value)
    shown = {metric.label: metric.value for metric in at.metric}
    assert shown["necessity"] == f"{point.necessity:.3f}" and shown["NFS"] == f"{point.nfs:.3f}"
    assert shown["NDF"] == f"{point.ndf:.3f}" and shown["units kept"] == f"{point.n_edges:,}"


def test_the_budgets_box_counts_units_when_positions_is_ticked():
    """With positions ticked the box read 'edge budgets' and said a budget over the model's edges
    'keeps the whole graph', false of (edge, position) units (IOI on Gemma-3-270M: 10,342 edges,
    153,856 units)."""
    from circuitviz.ui.budget_words import EDGE_LABEL, UNIT_LABEL

    at = _opened("10,40,400")  # 400: over the tiny graph's edges
    assert at.text_input(key="w.budgets").label == EDGE_LABEL
    assert any("keeps the whole graph" in w.value for w in at.warning)
    next(box for box in at.checkbox if "positions" in box.label).check()
    at.run()
    assert at.text_input(key="w.budgets").label == UNIT_LABEL
    assert not any("keeps the whole graph" in w.value for w in at.warning), [w.value for w in at.warning]


def test_steer_reads_the_unit_budget_explore_showed_for_a_circuit_over_positions(monkeypatch):
    """After Explore showed IOI's circuit over positions at 50 units, Steer labelled 'the circuit at
    budget 200' (the edge view's budget, never shown for that result) as 'the budget chosen on
    Explore'."""
    from types import SimpleNamespace

    import circuitviz.ui.steer as steer
    from circuitviz.entry.api import discover

    model = _tiny_loader("", "")
    result, _ = discover(model, IOI_TASK, "eap", {"positions": True}, [10, 40, 100, 400], model_id="tiny")
    monkeypatch.setattr(steer.state, "session", SimpleNamespace(budget=400, units=40))
    nodes, budget, total = steer.circuit_at_budget(result)
    assert budget == 40 and steer.budget_words(result, budget) == "a budget of 40 (edge, position) units"
    monkeypatch.setattr(steer.state, "session", SimpleNamespace(budget=400, units=None))
    from circuitviz.positions.present import readable_position_budget

    assert steer.circuit_at_budget(result)[1] == readable_position_budget(result).budget


def test_the_positions_view_offers_its_curve_as_csv_counting_units():
    """The view over positions offered the Neuronpedia JSON and the HTML page only: its NDF and
    necessity at each unit budget could be read off the chart, not taken away."""
    from circuitviz import render
    from circuitviz.entry.api import discover
    from circuitviz.positions.graph import n_units

    at = _opened("10,40,100", settings=POSITIONS)
    at = _ran(at)
    assert any(button.label == "Curve (CSV)" for button in at.get("download_button"))
    model = _tiny_loader("", "")
    result, _ = discover(model, IOI_TASK, "eap", {"positions": True}, [10, 40, 100], model_id="tiny")
    total = n_units(result.graph, len(result.tokens["clean"]))
    lines = render.curves_csv({"eap": result.curve}, total, kept="units").splitlines()
    assert lines[0].startswith("curve,budget,units_kept,percent_of_units,metric,nfs,ndf,necessity")
    first = result.curve[0]
    assert lines[1].startswith(f"eap,{first.budget},{first.n_edges},{100 * first.n_edges / total:.4f},")


def test_the_positions_downloads_sit_in_a_wrapping_row_not_equal_columns():
    """In three equal columns at 1,000 px (180 px each) the first button read 'Neuronpedia graph
    J…' (seen in Chromium); the edge view's downloads sit in one row that wraps."""
    at = _opened("10,40,100", settings=POSITIONS)
    at = _ran(at)
    in_columns = [b.label for column in at.columns for b in column.get("download_button")]
    assert "Neuronpedia graph JSON" not in in_columns, in_columns
    assert any(b.label == "Neuronpedia graph JSON" for b in at.get("download_button"))


def test_a_links_unit_budget_the_run_lacks_is_said():
    """A link naming units=123 (not one of the run's budgets) opened at the readable budget without
    a word of the budget it was asked for."""
    at = _opened("10,40,100", settings=POSITIONS, units="123")
    at = _ran(at)
    assert not at.exception, at.exception
    from graph_data import graph_data

    notes = [note for data in graph_data(at) for note in data.get("notes", [])]
    assert any(
        note.startswith("The link's unit budget 123 is not one this run evaluated (10, 40, 100).")
        for note in notes
    ), notes


def test_a_card_over_positions_counts_links_not_edges():
    """A head's card on the view over positions read 'its 12 edges out in this circuit' and 'Out (12
    edges, strongest first)' of links to the heads and MLPs at later positions (SmolLM2's a23.h4@5);
    the drawing, its key and its hover call them links."""
    at = _opened("10,40,100", settings=POSITIONS)
    at = _ran(at)
    data = next(d for d in graph_data(at) if any(n["id"].startswith("token@") for n in d["nodes"]))
    cards = data["cards"]["nodes"]
    heads = [card for card in cards.values() if card["out"].get("head")]
    assert heads and all(
        " link" in card["out"]["head"] and " edge" not in card["out"]["head"] for card in heads
    )
    assert all(" edge" not in card["score"] for card in cards.values()), [c["score"] for c in cards.values()]


def test_the_faithful_budget_the_opening_offers_is_one_click_away(monkeypatch):
    """When the opened circuit does not reach NDF 0.8 (IOI over positions on Gemma-3-270M: every
    circuit of at most 40 nodes at NDF 0.00), the sentence names the smallest budget that does;
    a button under the slider opens it, and goes once the slider has moved."""
    from circuitviz.positions import present
    from circuitviz.ui import position_view

    def opening(result, **options):
        return present.ReadableBudget(10, 5, 0.0, "No circuit of at most 40 nodes is faithful.", 400)

    monkeypatch.setattr(position_view, "readable_position_budget", opening)
    at = _ran(_opened("10,40,100,400", settings=POSITIONS))
    assert not at.exception, at.exception
    assert at.select_slider(key="budget.units").value == 10
    ndf = at.session_state["results"]["eap"].point(400).ndf
    offer = next(b for b in at.button if b.label.startswith("Open at 400 units"))
    assert offer.label == f"Open at 400 units (NDF {ndf:.2f})"
    at = offer.click().run()
    assert not at.exception, at.exception
    assert at.select_slider(key="budget.units").value == 400 and at.query_params["units"] == "400"
    assert not any(b.label.startswith("Open at 400 units") for b in at.button)
