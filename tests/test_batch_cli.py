"""`circuitviz batch` as a user meets it (the command-line audit of 2026-12-05, findings 4-7 and
14): the CPR and CMD it prints mean what discover's and results.parquet's mean; a folder of
another batch is refused before anything loads, never replaced; every failed row's reason is
shown and counted once; a byte-order mark is no text; repeated rows are named by line before the
model loads; --strict, --n and Ctrl-C say what they do."""

import json
import re

import pyarrow.parquet as pq
import pytest

from circuitviz.batch import ModelSource, read_dataset, run
from circuitviz.batch.dataset import parse_dataset
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.core.text import score_text
from circuitviz.entry import cli
from circuitviz.entry.api import discover
from circuitviz.methods import get_method
from circuitviz.services.store import ResultStore

PARIS = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",))
ROME = PromptTask("The capital of Italy is", "The capital of France is", " Rome", (" Paris",))
MARY = PromptTask(
    "When Mary and John went to the store , John gave a drink to",
    "When Alice and Bob went to the store , Carl gave a drink to",
    " Mary",
    (" John",),
)
TWO_TOKENS = PromptTask("The capital of Italy is", "The capital of France is", " Mary John", (" Paris",))


def _tiny():
    return tiny_model("gpt2")


def _loads(monkeypatch):
    """The CLI's model source: the tiny model; the list counts the loads."""
    loads = []

    def factory():
        loads.append(1)
        return _tiny()

    monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=factory))
    return loads


def _write(path, tasks, bom=False):
    text = "\n".join(json.dumps(task.to_dict()) for task in tasks) + "\n"
    path.write_text(("\ufeff" if bom else "") + text, encoding="utf-8")
    return path


def _argv(tmp_path, dataset, *more, budgets="3,8,20", methods="eap"):
    return [
        "batch", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--methods", methods,
        "--budgets", budgets, "--keep-edges", "20", "--store", str(tmp_path / "store"), "--consensus", "0",
        *more,
    ]  # fmt: skip


# ----- finding 4: one meaning per label ----------------------------------------------------------
def test_printed_cpr_and_cmd_are_discovers_and_the_tables_for_one_prompt(tmp_path, monkeypatch, capsys):
    """The batch printed 'CPR 0.001, CMD 0.003' where results.parquet and discover said 0.182 and
    0.818: MIB's raw area over the budgets' fractions, not divided by the span they cover."""
    _loads(monkeypatch)
    dataset = _write(tmp_path / "one.jsonl", [MARY])
    assert cli.main(_argv(tmp_path, dataset)) == 0
    out = capsys.readouterr().out
    (row,) = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    result, _ = discover(
        _tiny(), MARY, "eap", get_method("eap").make_config({}), [3, 8, 20], model_id="tiny-gpt2-0"
    )
    summary = result.summary()
    assert row["cpr_nfs"] == pytest.approx(summary["cpr_nfs"]) and row["cmd_nfs"] == pytest.approx(
        summary["cmd_nfs"]
    )
    printed = re.search(r"eap: 1 prompt; CPR (-?[\d.]+), CMD (-?[\d.]+) \(", out)
    assert printed, out
    assert printed.group(1) == score_text(summary["cpr_nfs"]) and printed.group(2) == score_text(
        summary["cmd_nfs"]
    )
    assert "divided by that span" in out  # the label says what the figure is


# ----- finding 5: an earlier batch is never replaced silently -----------------------------------
def test_a_folder_of_another_batch_is_refused_before_the_model_loads(tmp_path, monkeypatch, capsys):
    loads = _loads(monkeypatch)
    dataset = _write(tmp_path / "two.jsonl", [PARIS, ROME])
    assert cli.main(_argv(tmp_path, dataset)) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    kept = {name: (out / name).read_bytes() for name in ("results.parquet", "manifest.json", "tasks.jsonl")}
    first_loads = len(loads)
    other = _write(tmp_path / "other.jsonl", [MARY])
    cases = [
        (_argv(tmp_path, dataset, budgets="20"), "its budgets were 3,8,20, not 20"),
        (_argv(tmp_path, other), "its task 1 had the prompt 'The capital of France is', not line 1's"),
        (_argv(tmp_path, dataset, methods="eap-ig"), "it also ran eap, which this run leaves out"),
        (_argv(tmp_path, dataset, "--max-tokens", "100"), "its --max-tokens was 256, not 100"),
    ]
    for argv, fragment in cases:
        assert cli.main(argv) == 2
        captured = capsys.readouterr()
        (error,) = captured.err.strip().splitlines()
        assert fragment in error, error
        assert error.startswith(f"error: --out {out} holds the results of another batch (")
        assert error.endswith("give another --out, or delete that folder yourself to start again.")
        assert not captured.out
    assert len(loads) == first_loads  # refused before any model loaded
    assert {name: (out / name).read_bytes() for name in kept} == kept
    # the same batch resumes; more methods or more tasks after the same ones lose nothing
    assert cli.main(_argv(tmp_path, dataset)) == 0
    assert "2 finished (2 found in the store)" in capsys.readouterr().out
    assert cli.main(_argv(tmp_path, dataset, methods="eap,eap-ig", budgets="3,8,20")) == 0
    more = _write(tmp_path / "more.jsonl", [PARIS, ROME, MARY])
    assert cli.main(_argv(tmp_path, more, methods="eap,eap-ig")) == 0
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert len(rows) == 6 and all(row["status"] == "done" for row in rows)


def test_a_folder_written_before_request_json_is_compared_with_its_manifest(tmp_path, monkeypatch, capsys):
    _loads(monkeypatch)
    dataset = _write(tmp_path / "two.jsonl", [PARIS, ROME])
    assert cli.main(_argv(tmp_path, dataset)) == 0
    (tmp_path / "out" / "request.json").unlink()
    capsys.readouterr()
    assert cli.main(_argv(tmp_path, dataset, budgets="3,8")) == 2
    assert "its budgets were 3,8,20, not 3,8" in capsys.readouterr().err
    assert cli.main(_argv(tmp_path, dataset)) == 0


# ----- finding 6: each failure's reason shown, each row counted once -----------------------------
def test_a_failed_row_says_why_and_is_counted_once(tmp_path, monkeypatch, capsys):
    _loads(monkeypatch)
    dataset = _write(tmp_path / "bad.jsonl", [PARIS, TWO_TOKENS])
    assert cli.main(_argv(tmp_path, dataset, methods="eap,eap-ig")) == 0
    captured = capsys.readouterr()
    assert "2 finished (0 found in the store), 2 failed (2 refused before running)" in captured.out
    (failed,) = [line for line in captured.err.splitlines() if line.startswith("failed")]
    assert failed.startswith("failed (eap, eap-ig): line 2: The answer ' Mary John' is 2 tokens (")
    counts = json.loads((tmp_path / "out" / "manifest.json").read_text())["counts"]
    assert (counts["done"], counts["failed"], counts["refused"]) == (2, 0, 2)
    assert counts["done"] + counts["failed"] + counts["refused"] == counts["items"] == 4


def test_many_failures_show_the_first_then_a_count(tmp_path):
    from circuitviz.batch.atlas import BatchTable
    from circuitviz.batch.command import failure_lines

    tasks = [PromptTask(f"The capital of Italy is {i}", "x", f" Mary John{i}", (" Paris",)) for i in range(4)]
    run(tmp_path / "out", tasks=[t for t in read_dataset(_write(tmp_path / "t.jsonl", tasks)).tasks],
        methods=["eap"], budgets=[3], model=_tiny(), store=ResultStore(tmp_path / "s"), consensus=None)  # fmt: skip
    lines = failure_lines(BatchTable.load(tmp_path / "out"), limit=2)
    assert [line.split(":")[1].strip() for line in lines[:2]] == ["line 1", "line 2"]
    assert lines[2].startswith("... and 2 more failed tasks; every reason is in the error column of ")


# ----- finding 7: byte-order marks ----------------------------------------------------------------
def test_a_byte_order_mark_is_skipped_in_csv_and_jsonl(tmp_path):
    csv = tmp_path / "bom.csv"
    csv.write_text("\ufeffclean,corrupted,answer,foil\na b,c d, x, y\ne f,g h, x, y\n", encoding="utf-8")
    jsonl = _write(tmp_path / "bom.jsonl", [PARIS, ROME], bom=True)
    for path in (csv, jsonl):
        loaded = read_dataset(path)
        assert len(loaded.tasks) == 2 and loaded.problems == [], path
    assert len(parse_dataset("\ufeff" + jsonl.read_text(encoding="utf-8-sig"), "jsonl").tasks) == 2


# ----- finding 14: repeats, --strict, --n, Ctrl-C -----------------------------------------------
def test_repeated_rows_are_named_by_line_before_the_model_loads(tmp_path, monkeypatch, capsys):
    loads = _loads(monkeypatch)
    rows = [dict(PARIS.to_dict(), id="a"), dict(ROME.to_dict(), id="b"), dict(PARIS.to_dict(), id="c")]
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    loaded = read_dataset(path)
    assert [t.id for t in loaded.tasks] == ["a", "b"]
    assert loaded.problems == [
        "line 3 is the task of line 1 again (the same prompt, corruption, answer, foils and metric)."
    ]
    assert cli.main(_argv(tmp_path, path, "--strict")) == 2
    err = capsys.readouterr().err
    assert err.startswith("line 3 is the task of line 1 again") and "skipped" not in err
    assert not loads and not (tmp_path / "out").exists()
    # given from Python (no lines), the repeat is named by its number and id
    with pytest.raises(ValueError, match=r"task 3 \('c'\) repeats task 1 \('a'\)"):
        from circuitviz.batch import DatasetTask

        run(tmp_path / "py", tasks=[DatasetTask(r["id"], PromptTask.from_dict(r)) for r in rows],
            methods=["eap"], budgets=[3], model=_tiny(), store=ResultStore(tmp_path / "s"))  # fmt: skip


def test_n_limits_a_dataset_file_and_says_so(tmp_path, monkeypatch, capsys):
    _loads(monkeypatch)
    dataset = _write(tmp_path / "three.jsonl", [PARIS, ROME, MARY])
    assert cli.main(_argv(tmp_path, dataset, "--n", "2")) == 0
    captured = capsys.readouterr()
    assert "running the first 2 of the 3 tasks of three.jsonl (--n 2)" in captured.err
    assert "batch: 2 items" in captured.out
    assert len(pq.read_table(tmp_path / "out" / "results.parquet")) == 2


@pytest.mark.parametrize("where", ["load", "tokenize"])
def test_ctrl_c_before_the_loop_ends_in_one_sentence(where, tmp_path, monkeypatch, capsys):
    """Ctrl-C while the model loaded or the tasks were tokenized was a KeyboardInterrupt
    traceback, and left a folder with no manifest."""
    from circuitviz.batch import executors

    if where == "load":
        monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=_interrupt))
    else:
        _loads(monkeypatch)
        monkeypatch.setattr(executors.LocalExecutor, "shapes", lambda self, tasks, max_tokens: _interrupt())
    dataset = _write(tmp_path / "two.jsonl", [PARIS, ROME])
    assert cli.main(_argv(tmp_path, dataset)) == 130
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    (last,) = [line for line in captured.out.splitlines() if line.startswith("interrupted")]
    if where == "load":
        assert last.startswith("interrupted before any task ran;") and not (tmp_path / "out").exists()
    else:
        assert last.startswith("interrupted: rerun the same command to resume")
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["interrupted"] is True and manifest["counts"]["done"] == 0
        monkeypatch.undo()
        _loads(monkeypatch)
        # a folder stopped before its first row holds nothing to lose: another batch may take it
        assert cli.main(_argv(tmp_path, dataset, budgets="3,8")) == 0


def _interrupt():
    raise KeyboardInterrupt


def test_more_generated_tasks_than_the_templates_make_is_refused_before_the_model_loads(
    tmp_path, monkeypatch, capsys
):
    """`--generate ioi --n 10**30` loaded the model and drew until the family ran dry (hours on one
    CPU thread); the templates' count of distinct prompts bounds --n, said before anything loads,
    on the command line and in Python's run."""
    from circuitviz.batch.dataset import DatasetError
    from circuitviz.batch.generate import family_capacity

    loads = _loads(monkeypatch)
    assert family_capacity("factual") >= 657  # what Gemma's tokenizer and the check keep of it
    for family, n in (("ioi", 10**30), ("factual", family_capacity("factual") + 1)):
        argv = ["batch", "--generate", family, "--n", str(n), "--out", str(tmp_path / "out")]
        assert cli.main(argv) == 2
        (error,) = capsys.readouterr().err.strip().splitlines()
        assert error.startswith(f"error: --n {n} is more than the {family} family's templates make: ")
    assert not loads and not (tmp_path / "out").exists()
    with pytest.raises(DatasetError, match="more than the arithmetic family's templates make: 154,440"):
        run(tmp_path / "py", generate=("arithmetic", 10**6, 0), methods=["eap"], model=_tiny())
