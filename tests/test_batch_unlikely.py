"""`circuitviz batch` says, in one line, which tasks have an answer the model barely predicts after
the clean prompt (discover's check, ``proposals.barely_predicts``: under 5 % and not the top
token), runs them all the same, and lists them in the manifest for the Dataset page. Before
2026-12-06 discover warned of such a task and batch kept it silently (4 or 5 of 20 generated
factual tasks on SmolLM2-135M)."""

from __future__ import annotations

import json

from circuitviz.batch import ModelSource
from circuitviz.batch.dataset import DatasetTask
from circuitviz.batch.unlikely import unlikely_line
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.entry import cli
from circuitviz.entry.api import answer_note
from circuitviz.query.proposals import answer_chance, barely_predicts

CLEAN = "When Mary and John went to the store , John gave a drink to"
CORRUPTED = "When Alice and Bob went to the store , Carl gave a drink to"


def test_batch_names_the_tasks_whose_answer_the_model_barely_predicts(tmp_path, monkeypatch, capsys):
    model = tiny_model("gpt2")
    chances = {
        a: answer_chance(model, PromptTask(CLEAN, CORRUPTED, a, (" Bob",)))[0] for a in (" Mary", " ball")
    }
    assert chances[" Mary"] < 0.05 <= chances[" ball"]  # the toy model's figures the test rests on
    rows = [
        {"clean": CLEAN, "corrupted": CORRUPTED, "answer": " ball", "foil": " Bob"},
        {"clean": CLEAN, "corrupted": CORRUPTED, "answer": " Mary", "foil": " Bob"},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(
        cli, "_batch_source", lambda args: ModelSource("tiny", factory=lambda: tiny_model("gpt2"))
    )
    argv = [
        "batch", "--dataset", str(path), "--out", str(tmp_path / "out"), "--methods", "eap", "--budgets", "3,20",
        "--keep-edges", "20", "--store", str(tmp_path / "store"), "--consensus", "0", "--no-task-check",
    ]  # fmt: skip
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "batch: 2 items: 2 finished" in captured.out  # said, not refused
    said = [line for line in captured.err.splitlines() if "under 5%" in line]
    assert len(said) == 1
    assert "in 1 of 2 tasks (line 2: ' Mary' 0.8% (top 'ball' 9.2%))" in said[0]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    record = manifest["dataset"]["unlikely_answers"]
    assert record["threshold"] == 0.05
    assert [(entry["index"], entry["answer"]) for entry in record["tasks"]] == [(1, " Mary")]
    assert abs(record["tasks"][0]["chance"] - chances[" Mary"]) < 1e-6
    # discover's sentence rests on the same check: it speaks of ' Mary' and not of ' ball' (the toy
    # tokenizer's tokens carry no space: 'Mary', the token it reads ' Mary' as; the batch's line
    # names the file's row by its answer as written)
    assert answer_note(model, PromptTask(CLEAN, CORRUPTED, " Mary", (" Bob",))).startswith(
        "The model gives 'Mary' only"
    )
    assert answer_note(model, PromptTask(CLEAN, CORRUPTED, " ball", (" Bob",))) is None


def test_the_line_names_the_first_tasks_then_a_count():
    tasks = [DatasetTask(f"t{i}", PromptTask(CLEAN, CORRUPTED, " Mary", (" Bob",))) for i in range(5)]
    line = unlikely_line(tasks, {i: (0.01, " John", 0.5) for i in range(5)}, 20)
    assert "in 5 of 20 tasks (task 1 ('t0'): ' Mary' 1.0% (top ' John' 50.0%); task 2" in line
    assert "task 3 ('t2')" in line and "task 4" not in line and "; and 2 more)" in line
    assert unlikely_line(tasks, {}, 20) is None
    assert barely_predicts(" Mary", 0.049, " John") and not barely_predicts(" Mary", 0.05, " John")
    assert not barely_predicts(" John", 0.01, " John")  # the model's own top token, however unsure


def test_the_batched_chances_are_discovers_one_by_one():
    """The batch reads every prompt's chance in padded passes; each is what discover's one-prompt
    run gives (prompts of several lengths: the padding changes nothing)."""
    from circuitviz.batch.work import answer_chances

    model = tiny_model("gpt2")
    tasks = [
        PromptTask(CLEAN, CORRUPTED, " Mary", (" Bob",)),
        PromptTask("When Mary and John went to the store ,", "x", " John", (" Bob",)),
        PromptTask("the ball", "x", " gave", (" Bob",)),
        PromptTask(CLEAN, CORRUPTED, " two words", (" Bob",)),  # not one token: no chance
    ]
    batched = answer_chances(model, tasks)
    assert batched[3] is None
    for task, found in zip(tasks[:3], batched):
        alone = answer_chance(model, task)
        assert found[1] == alone[1]
        assert abs(found[0] - alone[0]) < 1e-5 and abs(found[2] - alone[2]) < 1e-5


def test_a_small_probability_never_reads_0_0_percent():
    """A random-weight OLMo 2 with SmolLM2's 49,152 tokens gave its answer 0.002 % and its eight
    likeliest tokens about that: the app read "only 0.0%" and eight chips "0.0%", discover and the
    batch's line likewise. Under 0.1 % a probability keeps two significant digits."""
    from circuitviz.core.text import chance_text
    from circuitviz.query.proposals import own_answer_sentence, unlikely_answer_sentence

    assert [chance_text(p) for p in (0.353, 0.001, 0.00099, 0.0002, 4.4e-7, 0.0)] == [
        "35.3%", "0.1%", "0.099%", "0.02%", "4.4e-05%", "0.0%",
    ]  # fmt: skip
    sentence = unlikely_answer_sentence(" Mary", 2e-5, " the", 0.0004, "pick another")
    assert (
        sentence.startswith("The model gives ' Mary' only 0.002% after this prompt")
        and "' the', 0.04%" in sentence
    )
    assert "' the' (0.04%), not the answer ' Mary' (0.002%)" in own_answer_sentence(
        " Mary", [], 2e-5, " the", 4e-4
    )
    tasks = [DatasetTask("t0", PromptTask(CLEAN, CORRUPTED, " Mary", (" Bob",)))]
    assert "' Mary' 0.0031% (top ' John' 0.05%)" in unlikely_line(tasks, {0: (3.1e-5, " John", 5e-4)}, 1)
