"""``evaluate --json`` of a circuit found without a corrupted prompt says what its baseline's
'corrupted' is: the neutral prompt's metric. Its JSON held ``"corrupted": ""`` in the task and
``"baseline": {"corrupted": -19.04}`` with nothing naming that figure (flow routes on "Snow is
white and grass is", Gemma-3-270M, 2026-12-07), while the printed table read "neutral prompt
metric"."""

import json

from test_cli_file_task import CORRUPTED, PROMPT, TINY, _discover, tiny  # noqa: F401 (the fixture)

from circuitviz.entry import cli


def _evaluated(tmp_path, capsys, method, task) -> dict:
    out, _ = _discover(tmp_path, capsys, method, task)
    figures = tmp_path / f"{method}.evaluation.json"
    assert cli.main(["evaluate", *TINY, "--circuit", str(out), "--json", str(figures)]) == 0
    capsys.readouterr()
    return json.loads(figures.read_text())


def test_the_neutral_prompts_baseline_is_named_in_the_json(tmp_path, capsys, tiny):  # noqa: F811
    data = _evaluated(tmp_path, capsys, "flow-routes", PROMPT)
    assert data["task"]["corrupted"] == ""
    note = data["baseline_note"]
    assert "'corrupted' is the metric of the neutral prompt" in note
    assert "every token after the first replaced by the padding token" in note


def test_a_corrupted_prompt_needs_no_baseline_note(tmp_path, capsys, tiny):  # noqa: F811
    data = _evaluated(tmp_path, capsys, "eap", [*PROMPT, *CORRUPTED])
    assert data["task"]["corrupted"] and "baseline_note" not in data
