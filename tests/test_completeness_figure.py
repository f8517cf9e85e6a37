"""A circuit's completeness where a user reads one circuit: the command line's table and JSON
(``--completeness``) and Explore's metrics (one click), each the figure ``measure.completeness``
gives for the same circuit, kept with the stored result."""

from __future__ import annotations

import json
import math

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.curves import Baseline, CurvePoint
from circuitviz.core.tasks import prepare_task
from circuitviz.entry import cli
from circuitviz.entry.api import discover, evaluate_circuits, measure_completeness
from circuitviz.measure.completeness import completeness
from circuitviz.measure.evaluate import Evaluator
from circuitviz.ui import measure_offers, result_figures

TASK_ARGS = [
    "--prompt",
    IOI_TASK.clean,
    "--corrupted",
    IOI_TASK.corrupted,
    "--answer",
    IOI_TASK.answer,
    "--foil",
    IOI_TASK.foils[0],
]


def _direct(model, result, budgets) -> list[float]:
    """Completeness of the result's circuits, measured here without the code under test."""
    evaluator = Evaluator(model, result.graph, prepare_task(model, result.task))
    return completeness(evaluator, torch.stack([result.circuit(b) for b in budgets]))


def test_measured_completeness_joins_the_curve_and_the_json():
    model = tiny_model("gpt2")
    result, _ = discover(model, IOI_TASK, "eap", budgets=[5, 20, 40])
    assert all(math.isnan(p.completeness) for p in result.curve)  # never measured unasked
    assert all(d["completeness"] is None for d in result.to_eap_json()["curve"])  # NaN is no JSON
    found = measure_completeness(model, result, budgets=[20, 40, 7])  # 7: not a budget of the run
    assert list(found) == [20, 40]
    assert list(found.values()) == pytest.approx(_direct(model, result, [20, 40]), abs=1e-9)
    curve = {p.budget: p.completeness for p in result.curve}
    assert math.isnan(curve[5]) and curve[20] == found[20] and curve[40] == found[40]
    assert [d["completeness"] for d in result.to_eap_json()["curve"]] == [None, found[20], found[40]]
    assert 0.0 <= min(found.values()) <= max(found.values()) <= 1.0


def test_evaluate_circuits_measures_completeness_when_asked():
    model = tiny_model("gpt2")
    result, _ = discover(model, IOI_TASK, "eap", budgets=[10, 30])
    circuits = [result.circuit(10), result.circuit(30)]
    _, plain = evaluate_circuits(model, IOI_TASK, circuits, [10, 30])
    _, measured = evaluate_circuits(model, IOI_TASK, circuits, [10, 30], completeness=True)
    assert all(math.isnan(p.completeness) for p in plain)
    assert [p.ndf for p in measured] == [p.ndf for p in plain]
    assert [p.completeness for p in measured] == pytest.approx(_direct(model, result, [10, 30]), abs=1e-9)


def test_the_command_line_prints_and_writes_completeness(tmp_path, capsys, monkeypatch):
    model = tiny_model("gpt2")
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    out = tmp_path / "c.json"
    args = ["discover", *TASK_ARGS, "--method", "eap", "--budgets", "10,30", "--no-task-check"]
    assert cli.main([*args, "--out", str(out), "--transfer-paraphrases", "0"]) == 0
    printed = capsys.readouterr().out
    assert "completeness" not in printed  # not asked: not measured, no column
    assert cli.main([*args, "--out", str(out), "--transfer-paraphrases", "0", "--completeness"]) == 0
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.strip().startswith("budget"))
    assert header.split()[-1] == "completeness"
    data = json.loads(out.read_text())
    values = [point["completeness"] for point in data["curve"]]
    shown = [line.split()[-1] for line in printed.splitlines() if line.strip().startswith(("10 ", "30 "))]
    assert shown == [f"{v:.3f}" for v in values]
    assert "completeness: 1 - how differently the circuit and the whole model respond" in printed
    assert "completeness_s" in printed

    evaluate = ["evaluate", "--circuit", str(out), "--model", "tiny-gpt2"]  # the model the file names
    assert cli.main([*evaluate, *TASK_ARGS, "--no-task-check", "--completeness"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:1].isdigit()]
    by_budget = {int(row[0]): row[-1] for row in rows}  # the file's in_graph circuit: row 'in_graph'
    assert by_budget == {10: f"{values[0]:.3f}", 30: f"{values[1]:.3f}"}


def _point(n_edges: int = 20, completeness: float = math.nan) -> CurvePoint:
    return CurvePoint(budget=20, n_edges=n_edges, metric=1.0, nfs=0.5, ndf=0.5, completeness=completeness)


def _result(point: CurvePoint, corrupted: str = "c", positions: bool = False):
    from types import SimpleNamespace

    return SimpleNamespace(
        task=SimpleNamespace(corrupted=corrupted),
        positions=positions,
        point=lambda budget: point if budget == point.budget else None,
        baseline=Baseline(2.0, -1.0),
        graph=SimpleNamespace(n_edges=100),
        details=None,
        transfer=None,
    )


def test_the_button_is_offered_only_where_a_figure_can_be_measured():
    label = "Measure its completeness (runs the model)"
    assert measure_offers.completeness_label(_result(_point()), 20) == label
    assert measure_offers.completeness_label(_result(_point()), 50) is None  # not a budget of the run
    assert measure_offers.completeness_label(_result(_point(), corrupted=""), 20) is None
    assert measure_offers.completeness_label(_result(_point(), positions=True), 20) is None
    assert measure_offers.completeness_label(_result(_point(n_edges=1)), 20) is None  # no half to remove
    assert measure_offers.completeness_label(_result(_point(completeness=0.8)), 20) is None
    values = result_figures.metric_values(_result(_point()), _point())
    assert "completeness" not in values
    values = result_figures.metric_values(_result(_point()), _point(completeness=0.8125))
    assert values["completeness"] == "0.812" and "completeness" in result_figures.METRIC_HELP


@pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
def test_completeness_measured_on_explore_is_shown_and_kept_past_a_reload():
    pytest.importorskip("streamlit")

    from explore_session import explore_session, run_it

    from circuitviz.ui import loaders

    def shown(at) -> list[str]:
        return [m.value for m in at.metric if m.label == "completeness"]

    at = run_it(explore_session())
    assert not at.exception, at.exception
    assert shown(at) == []
    at.button(key="explore.completeness").click().run()
    assert not at.exception, at.exception
    (value,) = shown(at)
    result = at.session_state["results"]["eap"]
    (point,) = [p for p in result.curve if not math.isnan(p.completeness)]
    assert f"{point.completeness:.3f}" == value
    model = loaders.MODEL_LOADER()
    assert point.completeness == pytest.approx(_direct(model, result, [point.budget])[0], abs=1e-6)
    loaders._REMEMBERED.clear()  # as after a restart: the entry is read from its file
    again = explore_session()
    assert not again.exception, again.exception
    assert shown(again) == [value]
    assert not [b for b in again.button if b.key == "explore.completeness"]  # nothing left to measure
