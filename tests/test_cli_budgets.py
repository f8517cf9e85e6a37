"""--budgets of discover and batch, read as typed (the command-line audit of 2026-12-05, session
31): an empty item, 0 and a budget beyond what results.parquet holds are refused in one sentence
before the model loads; repeats and budgets over the graph's edges run, and are said in one line.

Before: '10,,20' ran as 10,20, '20,3,3' as 3,20 and '0,3' with an empty circuit, all unsaid; a
budget over the graph's edges kept the whole graph unsaid; batch --budgets 3,99999999999 ran every
method and then ended in 'Value 99999999999 too large to fit in C integer type'."""

from __future__ import annotations

import json

import pytest
from sentences import assert_one_sentence

from circuitviz.batch import ModelSource, run
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.entry import cli
from circuitviz.entry.budgets import MAX_BUDGET, over_graph_note, read_budgets
from circuitviz.services.store import ResultStore

IOI = ["--prompt", "When Mary and John went to the store , John gave a drink to", "--answer", " Mary"]
IOI += ["--corrupted", "When Alice and Bob went to the store , Carl gave a drink to", "--foil", " John"]
PARIS = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",))
TINY_EDGES = 46  # tiny_model("gpt2")'s graph


@pytest.fixture
def batch_loads(monkeypatch):
    """batch's model source: the tiny model; the list counts its loads."""
    loads = []

    def factory():
        loads.append(1)
        return tiny_model("gpt2")

    monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=factory))
    return loads


def _dataset(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(PARIS.to_dict()) + "\n", encoding="utf-8")
    return path


def _batch(tmp_path, budgets):
    return [
        "batch", "--dataset", str(_dataset(tmp_path)), "--out", str(tmp_path / "out"), "--methods", "eap",
        "--budgets", budgets, "--keep-edges", "20", "--store", str(tmp_path / "store"), "--consensus", "0",
        "--no-task-check",
    ]  # fmt: skip


REFUSED = [
    ("10,,20", "has an empty item"),
    ("10,20,", "has an empty item"),
    (" , ", "gives no budget"),
    ("10 20", "item '10 20' is not a whole number"),
    ("1e3", "item '1e3' is not a whole number"),
    ("0,5", "a budget of 0 keeps no edge"),
    ("-5", "a negative budget"),
    ("-" + "9" * 5000, "a negative budget"),
    ("3,99999999999", "more edges than any model's graph holds"),
    ("9" * 5000, "more edges than any model's graph holds"),
]


@pytest.mark.parametrize("budgets, said", REFUSED)
def test_a_bad_budget_list_is_one_sentence_before_discover_loads(budgets, said, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("the model was loaded first"))
    assert cli.main(["discover", *IOI, "--method", "eap", "--budgets", budgets]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --budgets ") and said in err, err
    assert_one_sentence(err.removeprefix("error: "))


@pytest.mark.parametrize("budgets, said", REFUSED)
def test_a_bad_budget_list_is_one_sentence_before_batch_loads(budgets, said, capsys, tmp_path, batch_loads):
    assert cli.main(_batch(tmp_path, budgets)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --budgets ") and said in err, err
    assert_one_sentence(err.removeprefix("error: "))
    assert not batch_loads and not (tmp_path / "out").exists()


def test_budgets_are_sorted_and_repeats_said_once():
    assert read_budgets("20, 3,3,20") == ([3, 20], read_budgets("3,3,20,20")[1])
    note = read_budgets("20,3,3,20")[1]
    assert (
        note
        == "--budgets names 3 and 20 more than once; each budget is evaluated once, so the budgets are 3, 20."
    )
    assert read_budgets("50,100") == ([50, 100], None)  # nothing done: nothing said
    assert read_budgets(" MIB ", mib=True) == ("mib", None)
    assert read_budgets(str(MAX_BUDGET)) == ([MAX_BUDGET], None)


def test_discover_says_repeats_and_a_budget_over_the_graph(capsys, monkeypatch):
    model = tiny_model("gpt2")
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny", 0.0))
    argv = ["discover", *IOI, "--method", "eap", "--no-cache", "--no-task-check", "--budgets", "500,5,5,900"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert (
        "--budgets names 5 more than once; each budget is evaluated once, so the budgets are 5, 500, 900."
        in lines
    )
    assert (
        f"Budgets 500 and 900 are over the {TINY_EDGES} edges of this model's graph: each keeps the whole graph."
        in lines
    )
    assert "\n     500 " in captured.out and "\n     900 " in captured.out  # both run, as asked
    assert cli.main(["discover", *IOI, "--method", "eap", "--no-task-check", "--budgets", "5,10"]) == 0
    assert "over the" not in capsys.readouterr().err


def test_a_budget_over_the_graph_under_acc_keeps_its_traced_circuit_and_says_so(capsys, monkeypatch):
    """ACC++ keeps no edge it did not trace, so its line before the run said 'keeps the whole
    graph' of a budget that keeps its traced circuit (its line after the run said otherwise)."""
    model = tiny_model("gpt2")
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny", 0.0))
    argv = ["discover", *IOI, "--method", "acc++", "--no-cache", "--no-task-check", "--budgets", "5,900"]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    said = [line for line in lines if line.startswith("Budget 900 is over the")]
    assert said == [
        f"Budget 900 is over the {TINY_EDGES} edges of this model's graph, so it keeps ACC++'s whole "
        "circuit (its traced edges and their completion), not the whole graph (ACC++ keeps no edge it did "
        "not find)."
    ], lines
    assert over_graph_note([900], TINY_EDGES) == (
        f"Budget 900 is over the {TINY_EDGES} edges of this model's graph, so it keeps the whole graph."
    )


def test_batch_with_acc_says_what_its_budget_over_the_graph_keeps(capsys, tmp_path, batch_loads):
    argv = _batch(tmp_path, "3,900")
    argv[argv.index("eap")] = "eap,acc++"
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert (
        f"Budget 900 is over the {TINY_EDGES} edges of this model's graph, so it keeps the whole graph."
        in err
    )
    assert (
        "Under ACC++ such a budget keeps ACC++'s whole circuit (its traced edges and their completion), not "
        "the whole graph (ACC++ keeps no edge it did not find)." in err
    )


def test_batch_says_repeats_a_budget_over_the_graph_and_mibs_budgets_that_fall_together(
    capsys, tmp_path, batch_loads
):
    assert cli.main(_batch(tmp_path, "900,3,3")) == 0
    err = capsys.readouterr().err
    assert (
        "--budgets names 3 more than once; each budget is evaluated once, so the budgets are 3, 900." in err
    )
    assert (
        f"Budget 900 is over the {TINY_EDGES} edges of this model's graph, so it keeps the whole graph."
        in err
    )
    assert err.index("--budgets names 3") < err.index("loading tiny-gpt2-0")  # before the load
    assert cli.main([*_batch(tmp_path, "mib"), "--out", str(tmp_path / "mib")]) == 0
    err = capsys.readouterr().err
    assert (
        "mib's 10 fractions of the edges (0.1 % to 100 %) are 6 distinct budgets on this graph of "
        f"{TINY_EDGES} edges: 1, 2, 4, 9, 23, 46." in err
    )


@pytest.mark.parametrize(
    "budgets, said",
    [
        ([3, MAX_BUDGET + 1], "more edges than any model's graph holds"),
        ([3, -1], "whole number of edges from 0"),
    ],
)
def test_the_python_batch_refuses_a_budget_before_the_model_loads(budgets, said, tmp_path):
    def refuse():
        raise AssertionError("the model was loaded first")

    from circuitviz.batch import DatasetTask

    with pytest.raises(ValueError, match=said):
        run(
            tmp_path / "out",
            tasks=[DatasetTask("a", PARIS)],
            methods=["eap"],
            budgets=budgets,
            source=ModelSource("tiny", factory=refuse),
            store=ResultStore(tmp_path / "store"),
        )


def test_many_problems_are_said_in_five_sentences_the_last_counting_the_rest():
    from circuitviz.entry.budgets import MAX_PROBLEMS, budget_findings

    text = ",".join(f"x{i}" for i in range(100)) + ",0,0,5"
    values, problems, _ = budget_findings(text)
    assert values == [5] and len(problems) == MAX_PROBLEMS == 5
    assert problems[0].startswith("--budgets item 'x0' is not a whole number")
    assert problems[-1] == "--budgets has 97 more items that are not budgets."  # 96 words and the 0s
    assert budget_findings("0,0,5")[1] == [budget_findings("0,5")[1][0]]  # one 0 sentence, not two
