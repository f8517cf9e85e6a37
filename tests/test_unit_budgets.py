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


@pytest.mark.parametrize("more", [["--positions"], ["--set", "positions=true", "--budgets", "MIB"]])
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
