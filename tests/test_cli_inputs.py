"""The command line's checks before a run: what an audit found said only after the run, or never.

Each refusal is one sentence on stderr with exit status 2, before the model loads (``_load`` fails
the test if it is reached), except the prompt's length, which needs the model's tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sentences import assert_one_sentence

from circuitviz.entry import cli, listing

IOI = ["--prompt", "When Mary and John went to the store , John gave a drink to", "--answer", " Mary"]
IOI += ["--corrupted", "When Alice and Bob went to the store , Carl gave a drink to", "--foil", " John"]


@pytest.fixture
def no_load(monkeypatch):
    def refuse(args):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(cli, "_load", refuse)


def _refused(capsys, argv, *said):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: "), err
    assert_one_sentence(err.removeprefix("error: "))
    for part in said:
        assert part in err, err
    return err


def test_planted_bench_bounds_its_cases_and_checks_its_files_first(capsys, tmp_path, monkeypatch):
    """--cases 99999999999 built its case list first and reached 20 GB; a missing or unwritable
    --json folder was said after the benchmark's minutes."""
    monkeypatch.setattr(listing, "run_bench", lambda *a, **k: pytest.fail("the benchmark ran"))
    _refused(capsys, ["planted-bench", "--methods", "eap", "--cases", "99999999999"], "from 1 to 1,000")
    missing = tmp_path / "nowhere" / "x.json"
    _refused(capsys, ["planted-bench", "--methods", "eap", "--json", str(missing)], "does not exist")
    same = ["--json", str(tmp_path / "r"), "--markdown", str(tmp_path / "r")]
    _refused(capsys, ["planted-bench", "--methods", "eap", *same], "name the same file")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a folder no file can be made in")
def test_a_folder_no_file_can_be_made_in_is_said_before_the_run(capsys, no_load):
    """/proc exists and, even for root, holds no new file: 'No such file or directory' came after
    the run's table."""
    _refused(capsys, ["discover", *IOI, "--out", "/proc/x.json"], "No file can be written in /proc")


def test_discovers_written_files_are_checked_together_first(capsys, tmp_path, no_load):
    same = str(tmp_path / "same.json")
    _refused(capsys, ["discover", *IOI, "--out", same, "--html", same], "--out and --html name the same file")
    _refused(capsys, ["discover", *IOI, "--html-budget", "50"], "--html-budget sets the budget")
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked.json"
        locked.write_text("{}")
        locked.chmod(0o444)
        _refused(capsys, ["discover", *IOI, "--out", str(locked)], "cannot be written to")


def test_a_transfer_file_of_the_wrong_format_is_refused_before_the_run(capsys, tmp_path, no_load):
    bad = tmp_path / "pairs.txt"
    bad.write_text("vm\n")
    _refused(capsys, ["discover", *IOI, "--transfer-file", str(bad)], f"--transfer-file {bad}: line 1")


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_token_limit_under_one_is_refused(capsys, limit, no_load):
    _refused(capsys, ["discover", *IOI, "--max-tokens", limit], "--max-tokens must be 1 or more")


def test_ctrl_c_is_one_line_not_a_traceback(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_load", interrupted)
    assert cli.main(["discover", *IOI]) == 130
    assert capsys.readouterr().err.strip() == "interrupted (Ctrl-C): discover stopped."


def test_a_long_prompt_is_refused_for_its_length_first(capsys, monkeypatch, tmp_path):
    """A 1,460-token prompt ran the model twice (a foil proposed, the answer warned about) before
    its length was said; without --corrupted it was refused for the corruption instead."""
    from circuitviz.bench.toy_models import tiny_model

    model = tiny_model("gpt2")
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny", 0.0))
    long = ["--prompt", "Mary " * 40, "--answer", " Mary", "--max-tokens", "8"]
    circuit = tmp_path / "edges.txt"  # a circuit (an empty file is refused first, before the load)
    circuit.write_text("input->logits\n")
    for argv in (["discover", *long], ["evaluate", "--circuit", str(circuit), *long]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "over the limit of 8" in err and "No --foil" not in err and "corrupt" not in err, err


def test_options_that_would_be_ignored_or_overridden_are_refused(capsys, no_load):
    """--ig-steps 3 beat --set ig_steps=5 without a word, --foil was unused with prob and logprob,
    and --answer '' was read as no answer given (while --foil '' was refused)."""
    both = ["discover", *IOI, "--method", "eap-ig", "--ig-steps", "3", "--set", "ig_steps=5"]
    _refused(capsys, both, "--ig-steps 3 and --set ig_steps=5 disagree")
    agreeing = ["discover", *IOI, "--method", "eap-ig", "--ig-steps", "5", "--set", "ig_steps=5"]
    with pytest.raises(AssertionError, match="the model was loaded"):  # the same value: no conflict
        cli.main(agreeing)
    for metric in ("prob", "logprob"):
        _refused(
            capsys, ["discover", *IOI, "--metric", metric], f"The {metric} metric scores the answer alone"
        )
    empty = ["discover", *IOI[:3], "", *IOI[4:]]
    _refused(capsys, empty, "--answer is empty")


def test_a_table_over_a_weak_or_reversed_difference_says_so():
    """With --no-task-check a run printed NDF 0.406 and necessity 0.858 over a clean-corrupted
    difference of -0.009 with nothing under the table."""
    from circuitviz.core.curves import Baseline, CurvePoint
    from circuitviz.entry.tables import format_table

    curve = [CurvePoint(10, 10, 7.0, 0.4, 0.406, necessity=0.858)]
    reversed_ = format_table(Baseline(7.0622, 7.0708), curve, 100, metric="logit_diff")
    assert (
        "note: the clean-corrupted difference is -0.0086 (reversed: the corruption raises the metric"
        in reversed_
    )
    small = format_table(Baseline(0.5, 0.45), curve, 100, metric="logprob")
    assert "is +0.05 (too small; the task check asks for at least 0.3)" in small
    assert "NFS, NDF and necessity divide by it" in small and "completeness" not in small  # not measured
    assert "note:" not in format_table(Baseline(5.0, 1.0), curve, 100, metric="logit_diff")
    assert "note:" not in format_table(Baseline(7.0, 7.1), curve, 100)  # metric not known: nothing said


def test_a_drawn_budget_the_run_did_not_evaluate_is_said(capsys, tmp_path, monkeypatch):
    """--html-budget 77 drew 'budget 77: 54 edges' though the table has no row for 77."""
    from circuitviz.bench.toy_models import tiny_model

    model = tiny_model("gpt2")
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny", 0.0))
    page = tmp_path / "g.html"
    base = ["discover", *IOI, "--method", "eap", "--budgets", "5,10", "--no-cache", "--no-task-check"]
    assert cli.main([*base, "--html", str(page), "--html-budget", "7"]) == 0
    assert "(budget 7: " in capsys.readouterr().out.split("wrote")[-1]
    assert cli.main([*base, "--html", str(page), "--html-budget", "7"]) == 0
    assert "not among the evaluated budgets, so no NDF" in capsys.readouterr().out
    assert cli.main([*base, "--html", str(page), "--html-budget", "10"]) == 0
    assert "not among the evaluated" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--method", "edge-pruning", "--steps", "-3"], "--steps must be"),
        (["--method", "eap-ig", "--ig-steps", "0"], "--ig-steps "),
        (["--method", "eap-ig", "--set", "ig_steps=0"], "--ig-steps "),
    ],
)
def test_a_settings_range_is_checked_before_the_load_and_named_by_its_flag(capsys, no_load, flags, said):
    """'--steps -3' was refused after the model's load, naming 'steps' rather than the flag."""
    _refused(capsys, ["discover", *IOI, *flags], said)


def test_an_empty_corrupted_prompt_given_is_refused_not_taken_as_left_out(capsys, no_load):
    """--corrupted '' printed "No --corrupted given" and ran on a proposed one (as --answer '' did)."""
    for empty in ("", "   "):
        argv = ["discover", *IOI[:5], empty, *IOI[6:]]
        _refused(capsys, argv, "--corrupted is empty", "leave --corrupted out")


def test_a_corrupted_prompt_equal_to_the_prompt_is_refused_before_the_load(capsys, no_load):
    """It was refused after the model's load and the estimate's line."""
    same = ["discover", "--prompt", IOI[1], "--corrupted", IOI[1], "--answer", " Mary", "--foil", " John"]
    err = _refused(capsys, same)
    assert "Estimate" not in err


def test_a_paraphrase_files_refusal_names_its_flag_and_file(capsys, tmp_path, no_load):
    """With --paraphrases and --transfer-file both given, "Line 1 is not 'paraphrase<TAB>corrupted'"
    named neither; an empty --paraphrases file was told to give its pairs '(--paraphrases FILE on
    the command line)', after the model's load."""
    good, bad, empty = tmp_path / "good.tsv", tmp_path / "bad.tsv", tmp_path / "empty.tsv"
    good.write_text(
        "When Mary and John went to the park , John gave a ball to\tWhen Alice and Bob went to the park , Carl gave a ball to\n"
    )
    bad.write_text("only one column\n")
    empty.write_text("")
    (commented := tmp_path / "commented.tsv").write_text("# nothing but a comment\n")
    run = ["discover", *IOI, "--method", "bon", "--paraphrase-source", "file", "--budgets", "10"]
    err = _refused(
        capsys,
        [*run, "--paraphrases", str(good), "--transfer-file", str(bad)],
        f"--transfer-file {bad}: line 1 is not",
    )
    assert "Line 1" not in err
    _refused(
        capsys,
        [*run, "--paraphrases", str(bad), "--transfer-file", str(good)],
        f"--paraphrases {bad}: line 1 is not",
    )
    _refused(capsys, [*run, "--paraphrases", str(empty)], f"--paraphrases {empty} holds no paraphrase pair")
    _refused(
        capsys,
        [*run, "--paraphrases", str(commented)],
        f"--paraphrases {commented}: the paraphrase list is empty",
    )
    _refused(
        capsys,
        ["discover", *IOI, "--method", "eap", "--transfer-file", str(empty)],
        f"--transfer-file {empty} holds no",
    )
