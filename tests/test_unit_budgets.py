"""Budgets over token positions count (edge, position) units (session 39).

With ``positions`` on, a budget counts units, and a prompt has many more units than the model has
edges: the 15-token IOI prompt has 153,856 on Gemma-3-270M's 10,342 edges. Before, the budgets
stayed the edge ones there: ``batch --positions`` ran ``mib`` (MIB's fractions of the edges) as
unit budgets, at most about 7 % of a prompt's units, and its --help said "edge budgets"."""

from __future__ import annotations

import json

import pytest
from sentences import assert_one_sentence

from circuitviz.core.tasks import PromptTask
from circuitviz.entry import cli
from circuitviz.entry.parser import build_parser

PARIS = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",))


def _batch_argv(tmp_path, *more: str) -> list[str]:
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps(PARIS.to_dict()) + "\n", encoding="utf-8")
    argv = ["batch", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--methods", "eap-ig,eap"]
    return argv + ["--store", str(tmp_path / "store"), "--no-task-check", *more]


@pytest.mark.parametrize(
    "more", [["--positions", "--budgets", "mib"], ["--set", "positions=true", "--budgets", "MIB"]]
)
def test_batch_refuses_mib_over_positions_before_the_model_loads(more, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_batch_source", lambda args: pytest.fail("the model was loaded first"))
    assert cli.main(_batch_argv(tmp_path, *more)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --budgets mib means MIB's fractions of the model's edges"), err
    assert "the budgets of eap-ig and eap over token positions count (edge, position) units" in err
    assert "give unit counts such as 1000,10000,100000" in err
    assert_one_sentence(err.removeprefix("error: "))
    assert not (tmp_path / "out").exists()


def test_batch_and_discover_help_say_what_budgets_count():
    commands = build_parser()._subparsers._group_actions[0].choices
    batch = " ".join(commands["batch"].format_help().split())
    assert "edge budgets, comma separated ((edge, position) units with --positions), or mib" in batch
    assert "refused with --positions: a prompt's units depend on its length" in batch
    discover = " ".join(commands["discover"].format_help().split())
    assert "edge budgets, comma separated ((edge, position) units with --positions)" in discover


def test_the_dataset_form_refuses_mib_for_a_method_over_positions():
    pytest.importorskip("streamlit")
    from circuitviz.ui import batch_settings

    over = batch_settings.BatchSettings(methods={"eap-ig": {"positions": True}, "circuit-lasso": {}})
    with pytest.raises(ValueError) as error:
        batch_settings.arguments(over, ["eap-ig", "circuit-lasso"], "mib", "gemma-3-270m")
    said = str(error.value)
    assert said.startswith("The budgets box's mib means MIB's fractions") and "of eap-ig over" in said
    assert said.endswith("or untick positions in their settings.")
    assert_one_sentence(said)
    # unit counts run; so does mib over edges
    assert batch_settings.arguments(over, ["eap-ig", "circuit-lasso"], "100,1000", "gemma-3-270m") == [
        "--set",
        "positions=true",
    ]
    edges = batch_settings.BatchSettings(methods={"eap-ig": {}})
    assert batch_settings.arguments(edges, ["eap-ig"], "mib", "gemma-3-270m") == []


# ----- the app: Explore's budgets box with positions ticked ----------------------------------------
TIMEOUT = 300
LONGER = "When Mary and John went to the store at the end of the long road, John gave a drink to"


def _explore(**link: str):
    """Explore opened from a link with IOI's task and EAP on the tiny model (``link``: more values)."""
    from streamlit.testing.v1 import AppTest

    from circuitviz.bench.toy_models import IOI_TASK

    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    query = {"prompt": IOI_TASK.clean, "corrupted": IOI_TASK.corrupted, "answer": " Mary", "foil": " John"}
    for name, value in {**query, "method": "eap", **link}.items():
        at.query_params[name] = value
    return at.run()


def _totals(prompt: str) -> tuple[int, int]:
    """(the tiny app model's edges, the units of ``prompt``'s graph, its BOS token counted)."""
    from circuitviz.bench.toy_models import tiny_app_model
    from circuitviz.models.adapter import adapter_of
    from circuitviz.positions.graph import n_units

    model = tiny_app_model()
    spec = adapter_of(model).spec
    return spec.n_edges, n_units(spec, adapter_of(model).to_tokens(prompt).shape[1])


def _tick(at, on: bool = True):
    box = next(box for box in at.checkbox if "positions" in box.label)
    (box.check() if on else box.uncheck()).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.usefixtures("tiny_app")
def test_explores_default_budgets_follow_the_units_of_the_prompt_while_positions_is_ticked():
    """With positions ticked the box kept the edge defaults ('...,10000,10342' on Gemma-3-270M), so
    as unit budgets the curve stopped at about 7 % of the IOI prompt's 153,856 units and never
    reached the whole graph. The defaults now end at the prompt's unit total and follow its length;
    unticked, they are the edge ones again."""
    pytest.importorskip("streamlit")
    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.ui.budget_box import budgets_text, default_budgets

    edges, units = _totals(IOI_TASK.clean)
    at = _explore()
    assert at.text_input(key="w.budgets").value == budgets_text(default_budgets(edges))
    _tick(at)
    assert at.text_input(key="w.budgets").value == budgets_text(default_budgets(units)), units
    assert at.text_input(key="w.budgets").value.endswith(f",{units}")
    _, longer = _totals(LONGER)
    at.text_area(key="w.prompt").set_value(LONGER).run()  # more tokens, more units: the box follows
    assert longer > units and at.text_input(key="w.budgets").value.endswith(f",{longer}")
    _tick(at, on=False)
    assert at.text_input(key="w.budgets").value == budgets_text(default_budgets(edges))


@pytest.mark.usefixtures("tiny_app")
def test_compare_runs_over_edges_at_the_edge_defaults_after_explores_unit_defaults():
    """Compare runs a method over edges (positions ticked or not), so the defaults Explore left for
    units become the edge ones there, and the unit ones again back on Explore."""
    pytest.importorskip("streamlit")
    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.ui.budget_box import budgets_text, default_budgets

    edges, units = _totals(IOI_TASK.clean)
    at = _tick(_explore())
    assert at.session_state["budgets"] == budgets_text(default_budgets(units))
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    assert at.session_state["budgets"] == budgets_text(default_budgets(edges))
    at.switch_page("pages/explore.py").run()
    assert at.text_input(key="w.budgets").value == budgets_text(default_budgets(units))


@pytest.mark.usefixtures("tiny_app")
def test_budgets_the_user_typed_stay_and_one_over_the_units_is_said_in_units():
    pytest.importorskip("streamlit")
    from circuitviz.bench.toy_models import IOI_TASK

    _, units = _totals(IOI_TASK.clean)
    at = _tick(_explore())
    typed = f"10,40,{units + 5}"
    at.text_input(key="w.budgets").set_value(typed).run()
    said = f"Budget {units + 5:,} is over the {units:,} (edge, position) units of this prompt's graph, so it "
    warnings = [w.value.replace("\\", "") for w in at.warning]  # markdown's escapes taken off
    assert said + "keeps the whole graph." in warnings, warnings
    at.text_area(key="w.prompt").set_value(LONGER).run()
    assert at.text_input(key="w.budgets").value == typed  # typed budgets stay as written
    _tick(at, on=False)
    assert at.text_input(key="w.budgets").value == typed


@pytest.mark.usefixtures("tiny_app")
def test_a_run_over_positions_at_the_default_budgets_reaches_the_whole_graph():
    """The curve's last point is the whole graph of units: the budget of every unit, NDF 1 (pruning
    leaves out the units on no path from a token to the logits, which change nothing)."""
    pytest.importorskip("streamlit")
    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.ui import state

    _, units = _totals(IOI_TASK.clean)
    at = _tick(_explore())
    next(button for button in at.button if button.label == "Run").click()
    at.run()
    assert not at.exception, at.exception
    (result,) = [r for r in at.session_state[state.Session.results.key].values() if r.positions]
    assert max(result.budgets) == units
    whole = result.point(units)
    assert whole.budget == units and whole.ndf == pytest.approx(1.0, abs=1e-6)
