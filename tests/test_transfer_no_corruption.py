"""A task with no corrupted prompt (flow routes, CD-T) and paraphrase pairs given with
--transfer-file: each pair brings its own corrupted prompt, so its NDF is measured against it, as
for any method, and the JSON and the printed line say what the figures were measured against.
Until 2026-12-07 `discover` and `evaluate` read the pairs, then said "not measured: this task has no
corrupted prompt, and a paraphrase's NDF needs one"."""

from __future__ import annotations

import json

import pytest

from circuitviz.entry import cli

TASK = ["--prompt", "the cat sat on the", "--answer", " mat"]  # no --corrupted, no --foil
PAIRS = [("the dog sat on the", "the ball sat on the"), ("a cat sat on the", "the cow sat on the")]
SAID = (
    "The task has no corrupted prompt (the prompt's NDF was measured against the neutral prompt); "
    "each pair's NDF is measured against that pair's own corrupted prompt, as for any method."
)


def test_given_pairs_are_measured_against_their_own_corruption(cli_tiny, capsys, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{clean}\t{corrupted}\n" for clean, corrupted in PAIRS), encoding="utf-8")
    out = tmp_path / "c.json"
    argv = ["discover", *TASK, "--method", "flow-routes", "--budgets", "5", "--transfer-file", str(pairs)]
    assert cli.main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "needs one" not in printed and SAID in printed.splitlines()
    made = json.loads(out.read_text(encoding="utf-8"))
    assert made["task"]["corrupted"] == "" and made["task"]["metric"] == "logprob"
    transfer = made["transfer"]
    assert transfer["source"] == "given" and transfer["note"].startswith(SAID)
    held = transfer["budgets"]["5"]
    assert held["paraphrases"] == [clean for clean, _ in PAIRS] and len(held["ndf"]) == 2
    assert [task["corrupted"] for task in held["tasks"]] == [corrupted for _, corrupted in PAIRS]

    # each figure is the circuit patched to its pair's corrupted run, as evaluate measures that pair
    for (clean, corrupted), ndf in zip(PAIRS, held["ndf"]):
        figures = tmp_path / "one.json"
        one = ["--prompt", clean, "--corrupted", corrupted, "--answer", " mat", "--metric", "logprob"]
        assert (
            cli.main(
                ["evaluate", "--model", "tiny-gpt2", "--circuit", str(out), *one, "--json", str(figures)]
            )
            == 0
        )
        point = json.loads(figures.read_text(encoding="utf-8"))["curve"][-1]  # budget 5's row
        assert point["budget"] == 5 and point["ndf"] == pytest.approx(ndf, abs=1e-5)
    capsys.readouterr()

    # evaluate --transfer-file on the file, which keeps no corrupted prompt: the same figures and sentence
    figures = tmp_path / "figures.json"
    assert (
        cli.main(
            [
                "evaluate",
                "--model",
                "tiny-gpt2",
                "--circuit",
                str(out),
                "--transfer-file",
                str(pairs),
                "--json",
                str(figures),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "needs one" not in printed and SAID in printed.splitlines()
    measured = json.loads(figures.read_text(encoding="utf-8"))["transfer"]
    assert measured["note"].startswith(SAID)
    assert measured["budgets"]["5"]["ndf"] == pytest.approx(held["ndf"], abs=1e-5)


def test_without_pairs_the_sentence_still_says_why_none_is_measured(cli_tiny, capsys, tmp_path):
    out = tmp_path / "c.json"
    argv = ["discover", *TASK, "--method", "flow-routes", "--budgets", "5", "--out", str(out)]
    assert cli.main(argv) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("transfer: ")]
    assert line.startswith("transfer: not measured: this task has no corrupted prompt")
    assert line.endswith("give paraphrase pairs with their own corrupted prompts with --transfer-file FILE")
    transfer = json.loads(out.read_text(encoding="utf-8"))["transfer"]
    assert transfer["source"] == "template" and transfer["budgets"] == {}
    assert transfer["note"] == f"Transfer {line.removeprefix('transfer: ')}."
