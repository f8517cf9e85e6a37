"""What ``discover`` says when it writes its drawings (``--html``, ``--neuronpedia``): the budget it
drew and, when it chose that budget itself, why, once."""

import pytest

from circuitviz.bench.toy_models import tiny_model
from circuitviz.entry import cli
from circuitviz.measure.task_validity import CHECK_ENV

TASK = [
    "--prompt",
    "When Mary and John went to the store , John gave a drink to",
    "--corrupted",
    "When Alice and Bob went to the store , Carl gave a drink to",
    "--answer",
    " Mary",
    "--foil",
    " John",
]


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    monkeypatch.setenv(CHECK_ENV, "off")  # a random model's corruption changes little
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return model


def _discover(tmp_path, capsys, *extra) -> str:
    argv = ["discover", *TASK, "--method", "eap", "--budgets", "5,20", "--transfer-paraphrases", "0"]
    assert cli.main([*argv, *extra]) == 0
    return capsys.readouterr().out


def test_the_readable_budget_of_both_position_drawings_is_said_once(tmp_path, capsys, tiny):
    """--html and --neuronpedia draw one budget; its sentence was printed once for each file."""
    html, graph = tmp_path / "g.html", tmp_path / "g.json"
    printed = _discover(tmp_path, capsys, "--positions", "--html", str(html), "--neuronpedia", str(graph))
    reasons = [line for line in printed.splitlines() if line.startswith(("Opened at", "No circuit"))]
    assert len(reasons) == 1, printed
    assert html.exists() and graph.exists()
    assert f"wrote {html} (" in printed and f"wrote {graph} (" in printed
