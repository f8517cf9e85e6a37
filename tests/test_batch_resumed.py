"""A batch resumed after a code change says what it reuses and what it computes again, and why.

An item's store key holds the engine (the version and a digest of the package's source), so after
any code change the rows of an earlier run are computed again; until 2026-12-07 nothing said so,
and a user who expected a resume saw it take the full time. The engine is swapped here by patching
``core.keys.engine_digest``, as a code change swaps it."""

import json

import pytest

from circuitviz.batch import DatasetTask, ModelSource, run
from circuitviz.batch.progress import PROGRESS, ProgressFile, read_progress
from circuitviz.batch.resumed import MADE, Found, engine_words
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core import keys
from circuitviz.core.tasks import PromptTask
from circuitviz.entry import cli
from circuitviz.services.store import ResultStore

TASKS = [
    PromptTask(
        "When Mary and John went to the store , John gave a drink to",
        "When Alice and Bob went to the store , Carl gave a drink to",
        " Mary",
        (" John",),
    ),
    PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",)),
    PromptTask("The capital of Italy is", "The capital of France is", " Rome", (" Paris",)),
]
OLD, NEW = "0.1.0+aaaaaaaaaaaaaaaa", "0.1.0+bbbbbbbbbbbbbbbb"


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2")


def _engine(monkeypatch, digest: str) -> None:
    monkeypatch.setattr(keys, "engine_digest", lambda: digest)


def _run(tmp_path, model, tasks, out="out", **options):
    said: list[str] = []
    report = run(
        tmp_path / out,
        tasks=[DatasetTask(f"t{i}", task) for i, task in enumerate(tasks)],
        budgets=[3, 8],
        methods=["eap"],
        model=model,
        store=ResultStore(tmp_path / "store"),
        consensus=None,
        log=said.append,
        progress=ProgressFile(tmp_path / out / PROGRESS),
        **options,
    )
    return report, [line for line in said if "stored before" in line]


def test_a_resume_after_a_code_change_says_every_row_is_computed_again_and_why(tmp_path, tiny, monkeypatch):
    _engine(monkeypatch, OLD)
    first, said = _run(tmp_path, tiny, TASKS)
    assert first.computed == 3 and said == []  # nothing was stored: nothing to say
    assert json.loads((tmp_path / "out" / "request.json").read_text())["engine"] == OLD
    _engine(monkeypatch, NEW)
    again, said = _run(tmp_path, tiny, TASKS)
    assert again.computed == 3 and again.skipped == 0
    assert said == [
        "3 items of the batch's 3 were stored before: 3 were made by the engine's earlier code "
        "(version 0.1.0, source digest aaaaaaaaaaaaaaaa, now bbbbbbbbbbbbbbbb) and are computed again."
    ]
    assert again.manifest["resumed"] == said[0] and again.manifest["engine"] == NEW
    assert read_progress(tmp_path / "out")["resumed"] == said[0]  # what the Dataset page shows
    # the same engine again: everything reused, and said so
    third, said = _run(tmp_path, tiny, TASKS)
    assert third.computed == 0 and said == [
        "3 items of the batch's 3 were stored before: 3 are reused from this folder's rows."
    ]


def test_a_resume_that_reuses_some_rows_and_computes_others_says_both(tmp_path, tiny, monkeypatch):
    """The folder ran t0 and t1 under the old code; a batch in another folder (as each of the Dataset
    page's runs has its own) ran t0 under the new one: t0 is reused from the store, t1 computed
    again, of t2 nothing was stored."""
    _engine(monkeypatch, OLD)
    _run(tmp_path, tiny, TASKS[:2])
    _engine(monkeypatch, NEW)
    elsewhere, said = _run(tmp_path, tiny, TASKS[:1], out="elsewhere")
    assert elsewhere.computed == 1 and said == [
        "1 item of the batch's 1 was stored before: 1 was made by the engine's earlier code "
        "(version 0.1.0, source digest aaaaaaaaaaaaaaaa, now bbbbbbbbbbbbbbbb) and is computed again."
    ]  # found through the store's lineage: that folder held no row
    report, said = _run(tmp_path, tiny, TASKS)
    assert (report.computed, report.skipped) == (2, 1)
    assert said == [
        "2 items of the batch's 3 were stored before: 1 is reused from the result store, and 1 was "
        "made by the engine's earlier code (version 0.1.0, source digest aaaaaaaaaaaaaaaa, now "
        "bbbbbbbbbbbbbbbb) and is computed again; no earlier result of the other 1 was found."
    ]


def test_a_folder_without_a_recorded_engine_or_lineage_still_says_why(tmp_path, tiny, monkeypatch):
    """A folder and store written before the engine was recorded: the rows are there under other
    keys, and the sentence says so without naming an engine it cannot know; a result gone from the
    store and a failed row are said too."""
    _engine(monkeypatch, OLD)
    _run(tmp_path, tiny, TASKS)
    for path in (tmp_path / "store" / MADE).glob("*"):
        path.unlink()
    for name in ("request.json", "manifest.json"):
        record = json.loads((tmp_path / "out" / name).read_text())
        record.pop("engine", None)
        (tmp_path / "out" / name).write_text(json.dumps(record))
    _engine(monkeypatch, NEW)
    report, said = _run(tmp_path, tiny, TASKS)
    assert report.computed == 3
    assert said == [
        "3 items of the batch's 3 were stored before: 3 were stored under another key (made by the "
        "engine's earlier code (its source has changed since), or with another model dtype or "
        "backend) and are computed again."
    ]
    for path in (tmp_path / "store" / "result").glob("*.pt"):
        path.unlink()
        break
    report, said = _run(tmp_path, tiny, TASKS)
    assert report.computed == 1 and said == [
        "3 items of the batch's 3 were stored before: 2 are reused from this folder's rows, and 1 is "
        "no longer in the result store and is computed again."
    ]


def test_the_sentence_names_versions_and_failed_rows():
    assert engine_words("0.1.0+aaaa", "0.2.0+bbbb") == "version 0.1.0 of the engine (now 0.2.0)"
    assert engine_words("0.1.0", "0.2.0+bbbb") == "version 0.1.0 of the engine (now 0.2.0)"
    found = Found(items=5, reused_rows=1, retried=2)
    assert found.sentence(NEW) == (
        "3 items of the batch's 5 were stored before: 1 is reused from this folder's rows, and 2 "
        "failed before and are tried again; no earlier result of the other 2 was found."
    )
    assert Found(items=4).sentence(NEW) is None
    assert Found(items=2, other_settings=2).sentence(NEW) == (
        "2 items of the batch's 2 were stored before: 2 were stored under another key by this code "
        "(with another model dtype or backend) and are computed again."
    )


def test_the_command_line_says_it(tmp_path, tiny, monkeypatch, capsys):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(dict(t.to_dict(), id=f"p{i}")) for i, t in enumerate(TASKS)))
    monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=lambda: tiny))
    argv = ["batch", "--dataset", str(path), "--out", str(tmp_path / "out"), "--methods", "eap"]
    argv += ["--budgets", "3,8", "--store", str(tmp_path / "store"), "--consensus", "0"]
    _engine(monkeypatch, OLD)
    assert cli.main(argv) == 0
    capsys.readouterr()
    _engine(monkeypatch, NEW)
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert (
        "3 items of the batch's 3 were stored before: 3 were made by the engine's earlier code "
        "(version 0.1.0, source digest aaaaaaaaaaaaaaaa, now bbbbbbbbbbbbbbbb) and are computed again." in err
    )
