"""`evaluate`'s table: the first row, the file's in_graph circuit, has no budget of its own, and
its budget column says so rather than showing its edge count where a budget stands."""

from __future__ import annotations

import json

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.entry import cli

TASK_ARGS = ["--prompt", IOI_TASK.clean, "--corrupted", IOI_TASK.corrupted, "--answer", IOI_TASK.answer]


def test_the_in_graph_row_is_not_labelled_as_a_budget(tmp_path, capsys, monkeypatch):
    model = tiny_model("gpt2")
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    out = tmp_path / "c.json"
    task = [*TASK_ARGS, "--foil", IOI_TASK.foils[0], "--no-task-check"]
    argv = ["discover", *task, "--method", "eap", "--budgets", "10,40", "--transfer-paraphrases", "0"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    in_graph = sum(edge["in_graph"] for edge in data["edges"].values())

    assert cli.main(["evaluate", "--circuit", str(out), "--model", "tiny-gpt2", *task]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(index for index, line in enumerate(lines) if line.split()[:1] == ["budget"])
    rows = [line.split() for line in lines[header + 1 : header + 4]]
    assert [row[0] for row in rows] == ["in_graph", "10", "40"]  # read its edge count, "10", "40"
    assert rows[0][1] == str(in_graph) and rows[0][1:] == rows[2][1:]  # the budget-40 circuit
