"""The Dataset page of a batch over token positions says units wherever its budgets and sizes count
(edge, position) units: the headline's CPR and CMD (the batch summary's, not MIB's areas over the
model's edges), the budget slider, the curves' axis and hover, the prompts' columns (the CSV's
names), captions and sentences; the form's keep-circuits refusal too. A batch over edges is as
before (tests/test_dataset_page.py)."""

from __future__ import annotations

import json

import numpy
import pytest

pytest.importorskip("streamlit")
from ioi_batch_folder import ioi_batch  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.batch import atlas  # noqa: E402
from circuitviz.batch.command import dataset_scores  # noqa: E402
from circuitviz.batch.units import budget_fractions, counts, over_positions, unit_totals  # noqa: E402
from circuitviz.positions.graph import n_units  # noqa: E402
from circuitviz.render.atlas import band_figure  # noqa: E402
from circuitviz.ui import prompt_table  # noqa: E402

TIMEOUT = 300
BUDGETS = [4, 10, 25, 60, 400]
NAMES = [("Mary", "John"), ("Tom", "Anna"), ("John", "Mary"), ("Anna", "Tom")]


@pytest.fixture
def positions_batch(tmp_path, monkeypatch):
    return ioi_batch(tmp_path, monkeypatch, NAMES, ["eap"], {"positions": True}, BUDGETS, max(BUDGETS))


def _dataset(folder) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.session_state["dataset.source"] = "a batch folder…"
    at.session_state["dataset.folder"] = str(folder)
    at.session_state["dataset.tab"] = "Prompts"  # its table is drawn only while open; the others always
    at.switch_page("pages/dataset.py")
    return at.run()


def test_the_atlas_of_a_batch_over_positions_counts_units(positions_batch):
    batch = atlas.BatchTable.load(positions_batch)
    label = batch.labels[0]
    assert over_positions(batch, label) and counts(batch, label) == "units"
    rows = batch.rows(label, passing=True)
    totals = unit_totals(batch, rows)
    assert list(totals) == [n_units(batch.spec, n) for n in rows.column("n_tokens").to_pylist()]
    assert totals.min() > batch.n_edges  # 400 units is more than the graph's edges, not of the units
    # MIB's areas were over each budget as a share of the model's edges: 400 units read as > 100 %
    fractions = atlas.mib_scores(batch, label)["fractions"]
    assert fractions == pytest.approx([float(numpy.mean(b / totals)) for b in BUDGETS])
    assert fractions == budget_fractions(batch, label, rows, BUDGETS) and max(fractions) < 1

    at = _dataset(positions_batch)
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    summary = dataset_scores(batch, label)  # the batch command's own summary
    assert "CPR (MIB)" not in metrics and "CMD (MIB)" not in metrics
    assert metrics["CPR (units)"] == f"{summary['cpr']:.3f}"
    assert metrics["CMD (units)"] == f"{summary['cmd']:.3f}"
    captions = [c.value for c in at.caption]
    assert any(
        f"(edge, position) units, of which each prompt's graph holds {int(totals.min()):,}" in c
        for c in captions
    ), captions
    assert not any("MIB's ten fractions of the edges" in c for c in captions)
    assert at.select_slider(key="dataset.budget").label == "budget (units)"
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert figure["layout"]["xaxis"]["title"]["text"] == "(edge, position) unit budget (log scale)"
    hovers = [t["hovertemplate"] for t in figure["data"] if t.get("hovertemplate")]
    assert "budget %{x:,} units<br>" in hovers[0]  # the mean line; the consensus, its size in edges:
    assert "budget %{x:,} units: %{customdata[0]:,} edges<br>" in hovers[1]
    scores = at.dataframe[0].value  # the scores table: the series' CPR is the headline's
    assert scores["CPR (units)"].iloc[0] == pytest.approx(summary["cpr"])  # the CSV's name too
    assert "CPR (MIB)" not in scores and scores["CMD (units)"].iloc[0] == pytest.approx(summary["cmd"])
    budget = at.session_state["dataset.budget"]
    assert any(
        f"at budget {budget:,} (edge, position) units, each read as the edges its units use" in m.value
        for m in at.markdown
    )
    prompts = at.dataframe[-1].value  # the CSV download writes these names
    position = BUDGETS.index(budget)
    kept = [row["edges_kept"][position] for row in batch.rows(label).to_pylist()]
    assert list(prompts[f"units kept at a budget of {budget} units"]) == kept
    assert f"NDF at a budget of {budget} units" in prompts
    assert not [name for name in prompts if "edges" in name], list(prompts)
    assert any("the next column the (edge, position) units it keeps" in c for c in captions)
    assert not any("share of edges" in c for c in captions)


def test_the_prompts_columns_and_sentences_name_what_the_budget_counts():
    assert prompt_table.at_budget("edges kept", 50) == "edges kept at a budget of 50 edges"
    assert prompt_table.at_budget("edges kept", 50, "units") == "units kept at a budget of 50 units"
    assert prompt_table.at_budget("prompt", 50, "units") == "prompt"
    order, config = prompt_table.prompt_columns(500, False, counts="units")
    column = config["units kept at a budget of 500 units"]
    assert column["label"] == "units" and column["help"].startswith("(edge, position) units the prompt's")
    assert "edges kept at a budget of 500 edges" in prompt_table.prompt_columns(500, False)[0]
    said = prompt_table.empty_circuits(["p1"], [0.0], 50, counts="units")
    assert said.startswith("p1 keeps no unit at budget 50 (sort by units") and "the 50 units its" in said
    assert "edge" not in said
    assert "keeps no edge at budget 50" in prompt_table.empty_circuits(["p1"], [0.0], 50)


def test_the_curves_axis_says_what_each_series_counts():
    bands = [{"budget": b, "mean": 0.5, "low": 0.4, "high": 0.6, "n": 2} for b in (10, 100)]
    title = lambda figure: figure.layout.xaxis.title.text  # noqa: E731
    assert title(band_figure({"eap": bands})) == "edge budget (log scale)"
    assert (
        title(band_figure({"eap": bands}, over_positions={"eap"}))
        == "(edge, position) unit budget (log scale)"
    )
    both = band_figure({"eap": bands, "eap (positions=True)": bands}, over_positions={"eap (positions=True)"})
    assert title(both) == "budget: edges, or (edge, position) units for a series over positions (log scale)"


def test_the_forms_keep_refusal_counts_units_for_a_method_over_positions():
    from circuitviz.ui import batch_settings

    over = batch_settings.BatchSettings(methods={"eap-ig": {"positions": True}}, keep_edges=40)
    with pytest.raises(ValueError) as error:
        batch_settings.arguments(over, ["eap-ig"], "100,1000", "gemma-3-270m")
    said = str(error.value)
    assert said.startswith("Keeping circuits up to 40 (edge, position) units keeps none of the budgets")
    assert said.endswith("or leave the box empty for 1,034, 10 % of the model's edges counted as units.")
    edges = batch_settings.BatchSettings(methods={"eap-ig": {}}, keep_edges=40)
    with pytest.raises(ValueError) as error:
        batch_settings.arguments(edges, ["eap-ig"], "100,1000", "gemma-3-270m")
    assert str(error.value).startswith("Keeping circuits up to 40 edges keeps none")
    assert str(error.value).endswith("leave the box empty for 10 % of the edges.")


def test_the_forms_budgets_box_says_edges_only_where_they_count_edges(tmp_path, monkeypatch):
    """The boxes are drawn before any method's positions tick: their labels said 'budgets (edges,
    ...)' and 'keep circuits up to (edges)' over the unit counts a method over positions takes;
    what each counts is in its help."""
    from dataset_jobs import dataset_page

    from circuitviz.ui import batch_runner, batch_settings

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    at = dataset_page(monkeypatch, batch_runner.RUN, launcher=True)
    box = at.text_input(key=batch_runner.FORM + "budgets")
    assert box.label == "budgets (comma separated, or mib)"
    assert box.help.startswith("each counts the graph's edges, or (edge, position) units for a method")
    # so does the box of the budgets the table keeps, a count of units over positions as well
    assert at.number_input(key=batch_settings.KEY + "keep").label == "keep circuits up to budget"
