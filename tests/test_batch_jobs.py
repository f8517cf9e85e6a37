"""A batch started in the background (``batch.jobs``, the Dataset page's Run): the very
``circuitviz batch`` command as a subprocess (here on the tiny GPT-2, ``tiny_batch.py``), tracked
by its folder: it runs, reports where it stands in ``progress.json``, ends with an atlas that
opens; Cancel stops the whole process group and keeps the finished rows; one batch at a time."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from circuitviz.batch import atlas, jobs
from circuitviz.batch.progress import PROGRESS, read_progress
from circuitviz.services.store import ResultStore

TINY = [sys.executable, str(Path(__file__).with_name("tiny_batch.py"))]
ROWS = [
    ("When Mary and John went to the store , John gave a drink to", "When Alice and Bob went to the store , Carl gave a drink to", " Mary", " John"),
    ("When Tom and Anna went to the park , Anna gave a ball to", "When Alice and Bob went to the park , Carl gave a ball to", " Tom", " Anna"),
    ("The capital of France is", "The capital of Italy is", " Paris", " Rome"),
    ("The capital of Italy is", "The capital of France is", " Rome", " Paris"),
]  # fmt: skip


def _dataset(path: Path, rows=ROWS) -> Path:
    lines = [json.dumps({"clean": c, "corrupted": k, "answer": a, "foil": f}) for c, k, a, f in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _argv(tmp_path, dataset, methods=("eap",)) -> list[str]:
    return jobs.batch_arguments(methods=list(methods), budgets="3,8,20", dataset=dataset) + [
        "--store", str(tmp_path / "store"), "--keep-edges", "20", "--batch-tasks", "1",
    ]  # fmt: skip


def test_a_batch_runs_in_the_background_and_opens_as_an_atlas(tmp_path):
    root = tmp_path / "batches"
    folder = root / jobs.folder_name("mine 4 eap")
    started = jobs.start(folder, _argv(tmp_path, _dataset(tmp_path / "p.jsonl")), launcher=TINY, threads=1)
    assert started.running and started.pid
    record = json.loads((folder / jobs.JOB).read_text())
    assert record["argv"][-2:] == ["--out", str(folder)] and record["command"].startswith(
        "python -m circuitviz batch --dataset"
    )
    ended = jobs.wait(folder, 300)
    assert ended.state == "finished" and ended.returncode == 0, ended.log_tail
    assert ended.has_rows and not ended.reason
    # the command's own progress: its last state, every item finished
    progress = read_progress(folder)
    assert (
        progress["total"] == 4
        and progress["finished"] == 4
        and progress["phase"] in ("discover", "consensus")
    )
    batch = atlas.BatchTable.load(folder)
    assert batch.rows(batch.labels[0]).num_rows == 4
    assert any("wrote" in line for line in ended.log_tail)  # the command's own last line
    assert [job.folder for job in jobs.jobs(root)] == [folder]
    assert jobs.running_job(root) is None
    # the status is the folder's: a new reader (another session, a restarted server) sees the same
    jobs._WAITERS.clear()
    assert jobs.status(folder).state == "finished"


def test_cancel_stops_the_whole_group_and_keeps_the_finished_rows(tmp_path, monkeypatch):
    root = tmp_path / "batches"
    folder = root / "run"
    monkeypatch.setenv("TINY_BATCH_SLOW", "2.5")  # each one-task group waits: time to cancel
    rows = ROWS * 1 + [(c + " ,", k + " ,", a, f) for c, k, a, f in ROWS]  # 8 distinct tasks
    jobs.start(folder, _argv(tmp_path, _dataset(tmp_path / "p.jsonl", rows)), launcher=TINY)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # cancel once a row is finished
        found = read_progress(folder)
        if found and found.get("phase") == "discover" and found.get("done", 0) >= 1:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the batch never finished a row: {jobs.log_lines(folder)}")
    # the rows so far open as an atlas of their own while it runs; the batch's parts are untouched
    deadline = time.monotonic() + 60  # the page's batch writes its rows every 5 s (the command: 30 s)
    while (partial := jobs.partial_atlas(folder, ResultStore(tmp_path / "store"))) is None:
        assert time.monotonic() < deadline and jobs.status(folder).running, jobs.log_lines(folder)
        time.sleep(0.5)
    parts = sorted(path.name for path in (folder / "parts").glob("*"))
    assert jobs.partial_atlas(folder, ResultStore(tmp_path / "store")) == folder / jobs.PARTIAL
    assert set(parts) <= {path.name for path in (folder / "parts").glob("*")}  # none moved or renamed
    so_far = atlas.BatchTable.load(partial)
    assert 1 <= so_far.rows(done=False).num_rows < 8 and so_far.manifest["partial"]
    assert so_far.kept_budgets(so_far.labels[0]) == [3, 8, 20]
    # a second batch is refused while this one runs, in one sentence
    with pytest.raises(jobs.JobError, match="one batch at a time"):
        jobs.start(root / "other", _argv(tmp_path, tmp_path / "p.jsonl"), launcher=TINY)
    assert not (root / "other" / jobs.JOB).exists()
    pid = jobs.status(folder).pid
    jobs.cancel(folder, grace=30)
    ended = jobs.wait(folder, 60)
    assert ended.state == "cancelled", (ended.state, ended.log_tail)
    assert "interrupted" in ended.reason  # the command's own sentence
    assert not (folder / jobs.PARTIAL).exists()  # the rows so far are the folder's own now
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
    batch = atlas.BatchTable.load(folder)  # the rows it finished open as an atlas
    assert 1 <= batch.rows(done=False).num_rows < 8 and batch.manifest["interrupted"]
    assert (folder / PROGRESS).exists()


def test_a_failed_batch_says_why_from_its_log(tmp_path):
    folder = tmp_path / "batches" / "bad"
    argv = jobs.batch_arguments(methods=["eap"], budgets="3,8", generate="factual", n=5000)
    jobs.start(folder, argv, launcher=TINY)
    ended = jobs.wait(folder, 120)
    assert ended.state == "failed" and ended.returncode == 2
    assert ended.reason.startswith("error: --n 5000 is more than the factual family's templates make")
    assert not ended.has_rows


def test_the_arguments_refuse_no_method_and_two_sources():
    with pytest.raises(jobs.JobError, match="at least one method"):
        jobs.batch_arguments(methods=[], budgets="mib", generate="ioi", n=4)
    with pytest.raises(jobs.JobError, match="Give one of a family to generate, MMLU subjects or a dataset"):
        jobs.batch_arguments(methods=["eap"], budgets="mib", generate="ioi", dataset="x.jsonl")
    with pytest.raises(jobs.JobError, match="Give one of"):
        jobs.batch_arguments(methods=["eap"], budgets="mib", subjects=["astronomy"], dataset="x.jsonl")
    assert jobs.batch_arguments(methods=["eap"], budgets="mib", subjects=["astronomy", "marketing"], n=2) == [
        "batch", "--dataset", "mmlu", "--subjects", "astronomy,marketing", "--seed", "0", "--n", "2",
        "--methods", "eap", "--budgets", "mib",
    ]  # fmt: skip
    assert jobs.batch_arguments(methods=["eap", "eap-ig"], budgets="mib", generate="ioi", n=4, model="m") == [
        "batch", "--generate", "ioi", "--seed", "0", "--n", "4", "--methods", "eap,eap-ig", "--budgets", "mib",
        "--model", "m",
    ]  # fmt: skip


def test_a_log_reads_as_a_terminal_shows_it(tmp_path):
    (tmp_path / jobs.LOG).write_text("loading x ...\rdiscover [#.] 1/2\rdiscover [##] 2/2\n\nerror: bad.\n")
    assert jobs.log_lines(tmp_path) == [
        "loading x ...\rdiscover [#.] 1/2\rdiscover [##] 2/2".rsplit("\r")[-1],
        "error: bad.",
    ]
    assert jobs._reason(jobs.log_lines(tmp_path)) == "error: bad."
    assert jobs.folder_name("IOI 4 eap/../x", now=0).endswith("-ioi-4-eap-x")


def test_cancel_interrupts_a_batch_started_by_a_process_that_ignores_ctrl_c(tmp_path, monkeypatch):
    """A shell's background job (``make test &``) ignores SIGINT unless it sets a handler of its own
    (Streamlit's server does), and every program it starts inherits that: Cancel (SIGINT) went
    unheard, the batch ran on through the grace period and was killed (-9) without its own
    'interrupted' line or manifest. The batch command takes Ctrl-C back (``take_ctrl_c``)."""
    import signal

    monkeypatch.setenv("TINY_BATCH_SLOW", "2.5")
    rows = ROWS * 1 + [(c + " ,", k + " ,", a, f) for c, k, a, f in ROWS]  # 8 distinct tasks
    folder = tmp_path / "batches" / "run"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a backgrounded shell leaves it
    try:
        jobs.start(folder, _argv(tmp_path, _dataset(tmp_path / "p.jsonl", rows)), launcher=TINY)
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 240
    while not ((found := read_progress(folder)) and found.get("phase") == "discover"):
        assert time.monotonic() < deadline and jobs.status(folder).running, jobs.log_lines(folder)
        time.sleep(0.2)
    jobs.cancel(folder, grace=60)
    ended = jobs.wait(folder, 90)
    assert ended.state == "cancelled" and ended.returncode != -signal.SIGKILL, (
        ended.returncode,
        ended.log_tail,
    )
    assert "interrupted" in ended.reason  # the command's own sentence: it heard the Ctrl-C
