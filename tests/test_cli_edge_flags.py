"""The command line's edge counts besides --budgets, and discover's model load (session 31).

--html-budget (discover) and --keep-edges (batch) took any integer: --keep-edges 0 or -5 kept no
circuit in results.parquet, unsaid, and --html-budget 99999999999 was taken as asked after the
run. Each is now a whole number of edges from 1 to the largest budget a result holds, refused in
one sentence naming the flag before the model loads. discover loaded its model (about 10 s for
the embedded one) without a word, where batch says "loading <model> ..."; it now says the same
line, on stderr, so what it prints on stdout (the table) stays as it was."""

from __future__ import annotations

import json

import pytest
from sentences import assert_one_sentence

from circuitviz.batch import ModelSource
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.entry import cli
from circuitviz.entry.budgets import MAX_BUDGET
from circuitviz.models import EMBEDDED_MODEL

IOI = ["--prompt", "When Mary and John went to the store , John gave a drink to", "--answer", " Mary"]
IOI += ["--corrupted", "When Alice and Bob went to the store , Carl gave a drink to", "--foil", " John"]
PARIS = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",))
OUT_OF_RANGE = [
    ("0", f"must be a whole number of edges from 1 to {MAX_BUDGET:,}, not 0"),
    ("-5", f"must be a whole number of edges from 1 to {MAX_BUDGET:,}, not -5"),
    (str(MAX_BUDGET + 1), f"must be at most {MAX_BUDGET:,} edges"),
    ("9" * 40, "not 999999999999… (40 digits)"),
]


def _refused(capsys, argv, flag, said):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag} ") and said in err, err
    assert_one_sentence(err.removeprefix("error: "))


@pytest.mark.parametrize("value, said", OUT_OF_RANGE)
def test_html_budget_out_of_range_is_refused_before_discover_loads(
    value, said, capsys, tmp_path, monkeypatch
):
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("the model was loaded first"))
    argv = ["discover", *IOI, "--method", "eap", "--html", str(tmp_path / "g.html"), "--html-budget", value]
    _refused(capsys, argv, "--html-budget", said)


@pytest.mark.parametrize("value, said", OUT_OF_RANGE)
def test_keep_edges_out_of_range_is_refused_before_batch_loads(value, said, capsys, tmp_path, monkeypatch):
    loads = []

    def factory():
        loads.append(1)
        return tiny_model("gpt2")

    monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=factory))
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps(PARIS.to_dict()) + "\n", encoding="utf-8")
    argv = ["batch", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--methods", "eap"]
    argv += ["--budgets", "3,5", "--keep-edges", value, "--store", str(tmp_path / "store"), "--no-task-check"]
    _refused(capsys, argv, "--keep-edges", said)
    assert not loads and not (tmp_path / "out").exists()


def test_discover_says_its_model_load_on_stderr(capsys, monkeypatch):
    monkeypatch.setattr(cli, "load_model", lambda model_id, **options: tiny_model("gpt2"))
    argv = ["discover", *IOI, "--method", "eap", "--no-cache", "--no-task-check", "--budgets", "5,10"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert f"loading {EMBEDDED_MODEL} ..." in captured.err.splitlines()
    assert "loading" not in captured.out  # stdout holds the table, as before
    assert f"model {EMBEDDED_MODEL} on " in captured.out


@pytest.mark.parametrize(
    "value, said",
    [("-5", f"must be a whole number of edges from 0 to {MAX_BUDGET:,}, not -5"), ("99999999999", "at most")],
)
def test_top_edges_out_of_range_is_refused_before_batch_loads(value, said, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_batch_source", lambda args: pytest.fail("the model was loaded first"))
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps(PARIS.to_dict()) + "\n", encoding="utf-8")
    argv = ["batch", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--methods", "eap"]
    argv += ["--budgets", "3,5", "--top-edges", value, "--store", str(tmp_path / "store"), "--no-task-check"]
    _refused(capsys, argv, "--top-edges", said)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "value, said",
    [
        (0, "not 0."),
        (-5, "not -5."),
        (2.5, "not 2.5."),
        ("10", "not '10'."),
        (True, "not True."),
        (MAX_BUDGET + 1, f"must be at most {MAX_BUDGET:,} edges"),
    ],
)
def test_the_python_apis_keep_edges_follows_the_command_lines_rule(value, said, tmp_path):
    """``batch.run(keep_edges=0)`` (or -5, 2.5, '10') took any value before: 0 and -5 kept no
    circuit in results.parquet, unsaid. It is refused now by --keep-edges' rule, in one sentence
    naming the value and the range, before the model loads."""
    sentence = _api_refusal(tmp_path, keep_edges=value)
    assert sentence.startswith("keep_edges must be ") and said in sentence, sentence
    assert f"{MAX_BUDGET:,}" in sentence and ("from 1 to" in sentence or value > MAX_BUDGET), sentence


def _api_refusal(tmp_path, **field) -> str:
    """``batch.run``'s one-sentence refusal of ``field``, given before the model loads or the
    folder is written."""
    from circuitviz.batch import DatasetTask, run
    from circuitviz.services.store import ResultStore

    loads = []
    source = ModelSource("tiny-gpt2-0", factory=lambda: loads.append(1) or tiny_model("gpt2"))
    with pytest.raises(ValueError) as refused:
        run(
            tmp_path / "out",
            tasks=[DatasetTask("paris", PARIS)],
            methods=["eap"],
            budgets=[3, 5],
            source=source,
            store=ResultStore(tmp_path / "store"),
            **field,
        )
    sentence = str(refused.value)
    assert_one_sentence(sentence)
    assert not loads and not (tmp_path / "out").exists()
    return sentence


@pytest.mark.parametrize("command", ["discover", "evaluate", "batch"])
def test_a_mistyped_model_is_refused_without_a_load_line(command, capsys, tmp_path):
    """``--model gemma-3-27m`` printed "loading gemma-3-27m ..." and then that the model is
    unknown; the name is now checked first, so only the sentence is said and nothing loads."""
    circuit = tmp_path / "circuit.json"
    circuit.write_text('["input->logits"]', encoding="utf-8")  # a circuit: "{}" is refused first
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps(PARIS.to_dict()) + "\n", encoding="utf-8")
    argv = {
        "discover": ["discover", *IOI, "--method", "eap", "--no-cache"],
        "evaluate": ["evaluate", "--circuit", str(circuit), *IOI],
        "batch": ["batch", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--methods", "eap",
                  "--store", str(tmp_path / "store")],
    }[command]  # fmt: skip
    assert cli.main([*argv, "--model", "gemma-3-27m"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("error: Unknown model 'gemma-3-27m'"), said
    assert_one_sentence(said[0].removeprefix("error: "))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("batch_tasks", 0, "batch_tasks must be a whole number of tasks, 1 or more, not 0."),
        ("batch_tasks", 2.5, "not 2.5."),
        ("max_tokens", 0, "max_tokens must be a whole number of tokens, 1 or more, not 0."),
        ("max_tokens", "256", "not '256'."),
        (
            "consensus",
            1.5,
            "consensus must be a share above 0 and at most 1 (0 or None for no consensus), not 1.5.",
        ),
        ("consensus", -0.2, "not -0.2."),
        ("consensus", "half", "not 'half'."),
    ],
)
def test_the_python_apis_other_fields_are_refused_before_the_model_loads(field, value, said, tmp_path):
    """``batch.run(batch_tasks=0)`` ran groups of one unsaid, ``max_tokens=0`` refused every
    prompt as too long after loading the model, and ``consensus=1.5`` failed only after the whole
    batch had run; each is one sentence now, before anything loads or is written."""
    sentence = _api_refusal(tmp_path, **{field: value})
    assert sentence.startswith(f"{field} must be ") and said in sentence, sentence


def test_a_consensus_of_none_or_zero_runs_without_one(tmp_path):
    """0 and None both mean no consensus, as --consensus 0 does on the command line."""
    from circuitviz.batch import DatasetTask, run
    from circuitviz.services.store import ResultStore

    for share in (0, None):
        report = run(
            tmp_path / f"out-{share}",
            tasks=[DatasetTask("paris", PARIS)],
            methods=["eap"],
            budgets=[3, 5],
            source=ModelSource("tiny-gpt2-0", factory=lambda: tiny_model("gpt2")),
            store=ResultStore(tmp_path / f"store-{share}"),
            consensus=share,
            batch_tasks=1,
            max_tokens=64,
        )
        assert report.computed == 1 and not report.manifest.get("consensus")


def test_batch_tasks_below_one_is_refused_before_batch_loads(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_batch_source", lambda args: pytest.fail("the model was loaded first"))
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps(PARIS.to_dict()) + "\n", encoding="utf-8")
    argv = ["batch", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--methods", "eap"]
    argv += ["--budgets", "3,5", "--batch-tasks", "0", "--store", str(tmp_path / "store"), "--no-task-check"]
    _refused(capsys, argv, "--batch-tasks", "must be 1 or more, not 0.")
    assert not (tmp_path / "out").exists()
