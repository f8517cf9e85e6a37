"""The command line's default budgets are Explore's (session 39).

``discover`` without ``--budgets`` ran 50 to 5,000 edges (and units with ``--positions``), where
Explore's defaults end at the whole graph (10,342 edges on Gemma-3-270M, or the prompt's units),
so its curve never had the whole-graph point and its figures could differ from the app's for the
same prompt. A budget too large said "edges" where the budgets counted units; ``batch
--positions`` without ``--budgets`` was refused for a 'mib' the user never typed; and a batch
over positions left its larger unit budgets out of the table's circuits unsaid."""

from __future__ import annotations

import json

import pytest
from sentences import assert_one_sentence

from circuitviz.batch import ModelSource
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.entry import cli
from circuitviz.entry.budgets import default_budgets, read_budgets

IOI = ["--prompt", "When Mary and John went to the store , John gave a drink to", "--answer", " Mary"]
IOI += ["--corrupted", "When Alice and Bob went to the store , Carl gave a drink to", "--foil", " John"]
PARIS = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",))
TINY_EDGES, TINY_UNITS = 46, 592  # tiny_model("gpt2")'s graph; its units on the 15-token IOI prompt


@pytest.fixture
def tiny(monkeypatch):
    model = tiny_model("gpt2")
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny", 0.0))
    return model


def _table_budgets(out: str) -> list[int]:
    lines = out.split("  budget ", 1)[1].splitlines()[1:]
    budgets = []
    for line in lines:
        first = line.split()[:1]
        if not first or not first[0].isdigit():
            break
        budgets.append(int(first[0]))
    return budgets


def test_the_app_and_the_command_line_share_one_default_budgets_function():
    from circuitviz.ui import budget_box

    assert budget_box.default_budgets is default_budgets


@pytest.mark.parametrize("more, total", [([], TINY_EDGES), (["--positions"], TINY_UNITS)])
def test_discover_without_budgets_runs_explores_defaults_up_to_the_whole_graph(
    more, total, tiny, capsys, tmp_path
):
    out = tmp_path / "c.json"
    argv = [
        "discover",
        *IOI,
        "--no-cache",
        "--no-task-check",
        "--transfer-paraphrases",
        "0",
        "--out",
        str(out),
    ]
    assert cli.main([*argv, *more]) == 0
    printed = capsys.readouterr().out
    assert _table_budgets(printed) == default_budgets(total) and default_budgets(total)[-1] == total, printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [point["budget"] for point in data["curve"]] == default_budgets(total)
    assert data["curve"][-1]["ndf"] == pytest.approx(1.0, abs=1e-6)  # the whole graph is the model
    # in_graph is a circuit, not the whole graph: the largest budget under it, said on the line
    assert data["budget"] == default_budgets(total)[-2]
    marked = sum(bool(edge["in_graph"]) for edge in data["edges"].values())
    assert 0 < marked <= min(data["budget"], TINY_EDGES)  # at most one edge a unit
    assert f"wrote {out} (in_graph: " in printed and f"budget {data['budget']:,}" in printed


def test_discovers_json_marks_the_largest_budget_asked_for_under_the_whole_graph(tiny, capsys, tmp_path):
    out = tmp_path / "c.json"
    argv = ["discover", *IOI, "--method", "eap", "--no-cache", "--no-task-check", "--budgets", "5,20"]
    assert cli.main([*argv, "--transfer-paraphrases", "0", "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["budget"] == 20
    assert f"wrote {out} (in_graph: the circuit at budget 20)" in capsys.readouterr().out


def test_a_budget_too_large_is_said_in_units_where_the_budgets_count_units(tiny, capsys):
    with pytest.raises(ValueError) as error:
        read_budgets("3,99999999999", units=True)
    said = str(error.value)
    assert "more (edge, position) units than any prompt's graph holds" in said and " edges " not in said
    assert_one_sentence(said)
    with pytest.raises(ValueError) as error:
        read_budgets("3,99999999999")
    assert "more edges than any model's graph holds" in str(error.value)
    assert cli.main(["discover", *IOI, "--positions", "--budgets", "99999999999"]) == 2
    err = capsys.readouterr().err
    assert "more (edge, position) units than any prompt's graph holds" in err and "more edges" not in err, err


def test_explores_box_says_a_budget_too_large_in_units_with_the_prompts_total():
    pytest.importorskip("streamlit")
    from circuitviz.ui.budget_box import budget_reading

    _, problems, _ = budget_reading("99999999999", TINY_EDGES, units=True, n_units=TINY_UNITS)
    (said,) = problems
    assert said.startswith("The budgets box has 99999999999, more (edge, position) units than any")
    assert f"this prompt's graph has {TINY_UNITS:,}" in said and "edges" not in said, said
    _, problems, _ = budget_reading("99999999999", TINY_EDGES)
    assert "more edges than any model's graph holds" in problems[0]
    assert f"this model's graph has {TINY_EDGES}" in problems[0]


def _batch_argv(tmp_path, *more: str) -> list[str]:
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps(PARIS.to_dict()) + "\n", encoding="utf-8")
    argv = ["batch", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--methods", "eap"]
    return argv + ["--store", str(tmp_path / "store"), "--no-task-check", "--consensus", "0", *more]


def test_batch_over_positions_without_budgets_says_mib_is_the_default(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_batch_source", lambda args: pytest.fail("the model was loaded first"))
    assert cli.main(_batch_argv(tmp_path, "--positions")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --budgets defaults to mib, MIB's fractions of the model's edges"), err
    assert_one_sentence(err.removeprefix("error: "))
    assert cli.main(_batch_argv(tmp_path, "--positions", "--budgets", "3,99999999999")) == 2
    err = capsys.readouterr().err
    assert "more (edge, position) units than any prompt's graph holds" in err, err


@pytest.fixture
def batch_model(monkeypatch):
    monkeypatch.setattr(
        cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=lambda: tiny_model("gpt2"))
    )


@pytest.mark.usefixtures("batch_model")
def test_batch_over_positions_says_which_unit_budgets_its_table_keeps_no_circuit_of(capsys, tmp_path):
    """--keep-edges' default is 10 % of the model's edges (4 on the tiny model), the same count in
    units over positions: budgets 5 and 100 run, and the line before says they keep no circuit."""
    assert cli.main(_batch_argv(tmp_path, "--positions", "--budgets", "3,5,100")) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    said = [line for line in lines if line.startswith("Over token positions the table keeps")]
    # the summary counts units: it read '... over the 8.93 % to 966.93 % of the 10,342 edges its
    # circuits keep' and 'budget (edges)' of a Gemma batch at 1000,10000,100000 units
    assert "(edge, position) units its circuits keep" in captured.out and " % of the " not in captured.out
    assert "  budget (units)" in captured.out and "budget (edges)" not in captured.out
    assert said == [
        "Over token positions the table keeps circuits up to 4 units (--keep-edges' default, 10 % of the "
        f"model's {TINY_EDGES} edges: it bounds the table as over edges), so budgets 5 and 100 have curves "
        "but no kept circuit or consensus; --keep-edges 100 keeps them."
    ], lines
    assert_one_sentence(said[0])
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kept_budgets"] == [3]
    # given, it is not said, and the table keeps what it names
    (tmp_path / "again").mkdir()
    assert (
        cli.main(
            _batch_argv(tmp_path / "again", "--positions", "--budgets", "3,5,100", "--keep-edges", "100")
        )
        == 0
    )
    assert "Over token positions the table keeps" not in capsys.readouterr().err


def test_held_out_transfer_over_positions_skips_only_the_whole_graph_of_units(tiny, capsys, tmp_path):
    """Transfer measures each budget but the whole graph; over positions it compared unit budgets
    with the model's edges, so every unit budget from the edge count up went unmeasured, unsaid
    (20,000 and 100,000 of discover's default units on Gemma-3-270M's IOI prompt)."""
    out = tmp_path / "c.json"
    argv = ["discover", *IOI, "--positions", "--no-cache", "--no-task-check", "--out", str(out)]
    assert cli.main([*argv, "--transfer-paraphrases", "2"]) == 0
    measured = [int(budget) for budget in json.loads(out.read_text(encoding="utf-8"))["transfer"]["budgets"]]
    assert measured == default_budgets(TINY_UNITS)[:-1] and max(measured) > TINY_EDGES, measured
    assert f"budget {max(measured):,}: mean" in capsys.readouterr().out


def test_the_dataset_forms_keep_box_says_its_default_over_positions(tmp_path, monkeypatch):
    """Its help said only '10 % of the model's edges', the count the units of a method over token
    positions are kept up to as well."""
    pytest.importorskip("streamlit")
    from dataset_jobs import dataset_page

    from circuitviz.ui import batch_runner, batch_settings

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    at = dataset_page(monkeypatch, batch_runner.RUN, launcher=True)
    assert not at.exception, at.exception
    said = at.number_input(key=batch_settings.KEY + "keep").help
    assert "Empty: 10 % of the model's edges (for a method over token positions, that many units" in said


def test_the_default_method_benchmark_runs_the_apps_own_default_budgets(monkeypatch):
    """It kept a copy, 'the Explore page's default budgets', that had drifted: on SmolLM2-135M's
    123,211 edges it ran 20 ... 10,000 where the app runs 20, 50, 100, 200, 500, 2,000, 10,000,
    20,000, 100,000 and the whole graph."""
    import importlib
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    bench = importlib.import_module("bench_default_method")
    assert bench.default_budgets is default_budgets and not hasattr(bench, "app_budgets")


@pytest.mark.parametrize("config, total", [(None, TINY_EDGES), ({"positions": True}, TINY_UNITS)])
def test_the_python_apis_discover_without_budgets_runs_the_same_defaults(config, total, monkeypatch):
    """api.discover ran 50 to 5,000 (all of them the whole graph on the tiny model)."""
    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.entry.api import discover
    from circuitviz.measure.task_validity import CHECK_ENV

    monkeypatch.setenv(CHECK_ENV, "off")
    result, _ = discover(tiny_model("gpt2"), IOI_TASK, "eap", config)
    assert result.budgets == default_budgets(total) and result.budgets[-1] == total
