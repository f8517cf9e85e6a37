"""The Dataset page's Run (``ui/batch_runner.py``) through AppTest: a family generated on the
tiny GPT-2 (``tiny_batch.py`` stands in for ``python -m circuitviz``) runs in the background,
shows its progress, ends among "your batches" and opens as the atlas; no method, a family asked
for more prompts than its templates make and a bad upload are one sentence each; a shared
server caps the prompts and says so."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from dataset_jobs import dataset_page, page_errors  # noqa: E402

from circuitviz.batch import atlas, jobs  # noqa: E402
from circuitviz.ui import batch_form, batch_runner  # noqa: E402

FORM = batch_runner.FORM


@pytest.fixture
def page(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return dataset_page(monkeypatch, batch_runner.RUN, launcher=True)


def test_a_generated_batch_runs_shows_its_progress_and_opens(page, tmp_path):
    at = page
    assert not at.exception, at.exception
    assert at.multiselect(key=FORM + "methods").value == ["eap-ig"]  # the registry's default
    at.multiselect(key=FORM + "methods").set_value(["eap"])
    at.number_input(key=FORM + "n").set_value(3)
    at.text_input(key=FORM + "budgets").set_value("3,8,20")
    at.button(key=FORM + "go").click().run()
    assert not at.exception, at.exception and not page_errors(at)
    job = jobs.running_job()
    assert job is not None and job.folder.parent == tmp_path / "cache" / "batches"
    assert job.argv[:9] == ["batch", "--generate", "ioi", "--seed", "0", "--n", "3", "--methods", "eap"]
    assert job.threads == 1
    assert any("Running" in i.value and "1 torch thread" in i.value for i in at.info)
    assert at.button(key=FORM + "go").disabled  # one batch at a time
    ended = jobs.wait(job.folder, 300)
    assert ended.state == "finished", ended.log_tail
    at.run()  # the page after it ended: its rows under "your batches"
    assert not at.exception, at.exception
    assert batch_runner.YOURS in at.segmented_control(key="dataset.source").options
    assert any("finished in" in s.value for s in at.success)
    at.button(key=f"{FORM}open.{job.folder.name}").click().run()
    assert not at.exception, at.exception
    assert at.session_state["dataset.source"] == batch_runner.YOURS
    assert at.selectbox(key=batch_runner.CHOSEN).value == job.folder.name
    batch = atlas.BatchTable.load(job.folder)
    assert {m.label: m.value for m in at.metric}["prompts"] == f"{batch.rows(batch.labels[0]).num_rows:,}"


def test_no_method_and_too_many_prompts_are_one_sentence_each(page):
    at = page
    at.multiselect(key=FORM + "methods").set_value([])
    at.button(key=FORM + "go").click().run()
    assert page_errors(at) == ["Choose at least one method to run (the box above)."]
    at.multiselect(key=FORM + "methods").set_value(["eap"])
    at.selectbox(key=FORM + "family").set_value("factual")
    at.number_input(key=FORM + "n").set_value(5000)
    at.button(key=FORM + "go").click().run()
    (error,) = page_errors(at)
    assert error.startswith("5,000 prompts is more than the factual family's templates make: 682")
    at.number_input(key=FORM + "n").set_value(4)
    at.text_input(key=FORM + "budgets").set_value("20,abc")
    at.button(key=FORM + "go").click().run()
    assert page_errors(at) == [
        "The budgets box item 'abc' is not a whole number of edges; write edge counts such as 50,100,200, or mib."
    ]
    assert jobs.running_job() is None and not jobs.jobs()


class _Upload:
    def __init__(self, name: str, data: bytes):
        self.name, self.data = name, data

    def getvalue(self) -> bytes:
        return self.data


def test_a_bad_upload_is_one_sentence():
    tasks, problem = batch_form._upload_tasks(_Upload("p.jsonl", b"\xff\xfe not text"))
    assert tasks is None and problem == "p.jsonl is not UTF-8 text; save it as UTF-8 and upload it again."
    tasks, problem = batch_form._upload_tasks(_Upload("p.jsonl", b'{"clean": "a"}\nnot json\n'))
    assert tasks is None and problem.startswith("p.jsonl holds no usable task (line 1 has no 'answer'")
    tasks, problem = batch_form._upload_tasks(_Upload("p.txt", b"clean,corrupted\n"))
    assert tasks is None and problem.startswith("p.txt holds no")
    good = b'{"clean": "The capital of France is", "corrupted": "The capital of Italy is", "answer": " Paris", "foil": " Rome"}\n'
    tasks, problem = batch_form._upload_tasks(_Upload("p.jsonl", good + b"oops\n"))
    assert problem is None and len(tasks.tasks) == 1 and len(tasks.problems) == 1


def test_a_shared_server_caps_the_prompts_and_says_so(page, monkeypatch):
    from circuitviz.ui.loaders import BROWSER_PATHS_ENV

    monkeypatch.setenv(BROWSER_PATHS_ENV, "0")
    at = page.run()
    assert not at.exception, at.exception
    assert at.number_input(key=FORM + "n").max == batch_runner.SHARED_MAX_PROMPTS
    assert not [w for w in at.number_input if w.key == FORM + "threads"]  # one thread, not offered
    at.segmented_control(key=FORM + "source").set_value(batch_runner.UPLOAD).run()
    assert not at.exception, at.exception
    assert at.get("file_uploader")[0].proto.max_upload_size_mb == batch_runner.SHARED_MAX_UPLOAD_MB
    assert any(
        f"at most {batch_runner.SHARED_MAX_PROMPTS} prompts on one thread" in c.value for c in at.caption
    )


def test_how_a_run_ended_is_one_plain_sentence_escaped_once(tmp_path):
    """The page escaped the log's last line twice ('interrupted\\: ... 2026\\-12\\-06'): the sentence
    is plain text now, escaped once where it is shown; the picker names a run by when and what."""
    folder = tmp_path / "2026-12-06-071200-ioi-4-eap"
    job = jobs.JobStatus(
        folder=folder, state="cancelled", title="4 ioi prompts × eap", started=100.0, ended=141.0,
        progress={"phase": "discover", "total": 4, "finished": 3.5, "done": 2, "skipped": 1},
        argv=["batch", "--methods", "eap"],
        reason="interrupted: rerun the same command to resume; /x/2026-12-06 keeps what finished.",
    )  # fmt: skip
    said = batch_runner.ended_sentence(job)
    assert said == (
        "The batch 4 ioi prompts × eap was cancelled after 0m41s, with 3 of 4 prompts finished. "
        "It finished no row to open."
    )
    job.state = "failed"
    assert batch_runner.ended_sentence(job).startswith(
        "The batch 4 ioi prompts × eap failed after 0m41s, with 3 of 4 prompts finished: interrupted: rerun"
    )
    assert batch_runner._run_label(job) == "2026-12-06 07:12, 4 ioi prompts × eap (failed)"


def test_a_running_batch_opens_its_prompts_so_far_and_cancel_keeps_them(page, monkeypatch):
    import time

    at = page
    monkeypatch.setenv("TINY_BATCH_SLOW", "2.5")  # each group waits: it runs while the page reads it
    arguments = jobs.batch_arguments
    monkeypatch.setattr(  # one prompt a group (the form keeps the command's 16): rows come one by one
        jobs, "batch_arguments", lambda **given: [*arguments(**given), "--batch-tasks", "1"]
    )
    at.multiselect(key=FORM + "methods").set_value(["eap"])
    at.number_input(key=FORM + "n").set_value(6)
    at.text_input(key=FORM + "budgets").set_value("3,8,20")
    at.button(key=FORM + "go").click().run()
    job = jobs.running_job()
    assert job is not None
    deadline = time.monotonic() + 120
    while jobs.partial_atlas(job.folder) is None:  # its first rows on disk (every 5 s)
        assert time.monotonic() < deadline and jobs.status(job.folder).running, jobs.log_lines(job.folder)
        time.sleep(0.5)
    at.run()
    assert not at.exception, at.exception
    so_far = f"{FORM}sofar.{job.folder.name}"
    at.button(key=so_far).click().run()
    assert not at.exception, at.exception
    assert at.session_state["dataset.source"] == batch_runner.YOURS
    assert batch_runner._run_label(jobs.status(job.folder)).endswith(" ioi prompts × eap")
    assert any("Still running" in c.value for c in at.caption)
    shown = int({m.label: m.value for m in at.metric}["prompts"])
    assert 1 <= shown < 6
    at.button(key=f"{FORM}cancel.{job.folder.name}").click().run()  # the page's Cancel
    assert not at.exception, at.exception
    ended = jobs.wait(job.folder, 60)
    assert ended.state == "cancelled" and ended.has_rows
    at.run()  # the page after the cancel: the cancelled run's rows, and why it stopped
    assert not at.exception, at.exception
    assert any("was cancelled after" in w.value for w in at.warning)


def test_the_progress_counts_whole_prompts_and_says_how_far_the_running_group_is(tmp_path):
    """'6 of 8 prompts done' read while none was: the bar's count adds the running group's share."""
    job = jobs.JobStatus(
        folder=tmp_path, state="running", started=None, argv=["batch", "--methods", "eap"],
        progress={"phase": "discover", "total": 8, "finished": 6.0, "done": 0, "eta": 5.0},
    )  # fmt: skip
    share, line = batch_runner.progress_sentence(job)
    assert share == 0.75
    assert line.startswith(
        "finding circuits: 0 of 8 prompts finished (75% of the way), about 0m05s left in this step"
    )
    job.argv = ["batch", "--methods", "eap,eap-ig"]
    job.progress = {"phase": "discover", "total": 8, "finished": 2.0, "done": 2}
    assert batch_runner.progress_sentence(job)[1].startswith(
        "finding circuits: 2 of 8 runs (4 prompts × 2 methods) finished; "
    )


def test_a_cancelled_run_says_when_cancel_was_pressed_and_when_it_stopped(tmp_path):
    """Cancel pressed 10 s into a batch still loading its model, the process stopped 6 s later:
    the page said 'cancelled after 0m16s'."""
    job = jobs.JobStatus(
        folder=tmp_path / "2026-12-06-191107-ioi-4-eap-ig", state="cancelled", title="4 ioi prompts × eap-ig",
        started=100.0, ended=116.0, cancel_asked=110.0,
    )  # fmt: skip
    assert batch_runner.ended_sentence(job) == (
        "The batch 4 ioi prompts × eap-ig was cancelled after 0m10s, and stopped 0m06s later. "
        "It finished no row to open."
    )
    job.cancel_asked = 115.5  # stopped at once: one figure
    assert batch_runner.ended_sentence(job).startswith(
        "The batch 4 ioi prompts × eap-ig was cancelled after 0m16s."
    )


def test_a_batch_cancel_was_pressed_for_says_it_is_stopping(tmp_path, monkeypatch):
    """A batch loading its model took 5 s to stop after Cancel; the line went on saying 'loading
    gemma-3-270m… (0m09s since it began)' beside a Cancel still offered (seen in Chromium)."""
    monkeypatch.setattr(batch_runner.time, "time", lambda: 112.0)
    job = jobs.JobStatus(
        folder=tmp_path, state="running", started=100.0, argv=["batch", "--methods", "eap"],
        progress={"phase": "discover", "total": 8, "finished": 2.0, "done": 2}, cancel_asked=109.0,
    )  # fmt: skip
    share, line = batch_runner.progress_sentence(job)
    assert share == 0.25
    assert line == (
        "cancelling: Cancel was pressed 0m03s ago, and the batch is stopping; it keeps the prompts it "
        f"finished (at most {jobs.GRACE_S:.0f} s after the press it is stopped outright)."
    )
    job.cancel_asked = None
    assert batch_runner.progress_sentence(job)[1].startswith("finding circuits: 2 of 8 prompts finished")
