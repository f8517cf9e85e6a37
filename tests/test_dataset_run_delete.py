"""Page batches deleted (``ui/batch_runner.py``, ``batch/jobs.py``): a batch run from the Dataset
page was never deleted, so the cache's ``batches/`` grew by a folder a run; now a run that has
ended is deleted from "your batches" after a confirmation, and a running one never is."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from dataset_jobs import dataset_page, start_tiny  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.batch import jobs  # noqa: E402
from circuitviz.ui import batch_runner  # noqa: E402

FORM = batch_runner.FORM


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_finished_batch_is_deleted_after_a_confirmation_and_a_running_one_never(
    tmp_path, monkeypatch, cache
):
    done = start_tiny(2)
    assert jobs.wait(done.folder, 300).state == "finished"
    at = dataset_page(monkeypatch, batch_runner.YOURS)
    assert not at.exception, at.exception
    assert at.selectbox(key=batch_runner.CHOSEN).value == done.folder.name
    # the Delete button sits in a popover that says what goes and what stays
    assert any(
        f"Its folder {done.folder.name} under the app's cache" in m.value.replace("`", "").replace("\\", "")
        for m in at.markdown
    )
    at.button(key=f"{FORM}delete.{done.folder.name}").click().run()
    assert not at.exception, at.exception
    assert not done.folder.exists()
    assert [s.value.replace("\\", "") for s in at.success] == [
        f"Deleted the batch 2 ioi prompts × eap ({done.folder.name})."
    ]
    assert batch_runner.YOURS not in at.segmented_control(key="dataset.source").options
    # a running batch is never deleted, nor a folder that is no page batch's
    running = start_tiny(4, slow=5.0, name="2026-12-06-080100-ioi-eap")
    try:
        with pytest.raises(jobs.JobError, match="is running; cancel it first"):
            jobs.delete(running.folder)
        assert running.folder.exists()
    finally:
        jobs.cancel(running.folder, grace=5)
        jobs.wait(running.folder, 60)
    other = tmp_path / "elsewhere"
    (other / "x").mkdir(parents=True)
    (other / "x" / jobs.JOB).write_text("{}")
    with pytest.raises(jobs.JobError, match="is not a batch run from the page"):
        jobs.delete(other / "x")
    assert (other / "x").exists()


def _failed_run(name: str) -> jobs.JobStatus:
    """A page batch that failed before its first row, as its folder records one."""
    folder = jobs.runs_dir() / name
    folder.mkdir(parents=True)
    (folder / jobs.JOB).write_text('{"pid": null, "title": "2 ioi prompts × eap", "argv": ["batch"]}')
    (folder / jobs.EXIT).write_text('{"returncode": 2, "ended": 1.0}')
    (folder / jobs.LOG).write_text("error: the model could not be loaded.\n")
    status = jobs.status(folder)
    assert status.state == "failed" and not status.has_rows
    return status


def test_every_run_that_ended_with_no_row_is_deleted_one_by_one_or_all_and_a_running_one_is_not_offered(
    monkeypatch, cache
):
    """Only the newest empty run could be deleted (the note above the form): three failed runs left
    two in the cache with no way to them from the page."""
    runs = [_failed_run(f"2026-12-06-0{n}0000-ioi-eap") for n in range(7, 3, -1)]  # newest first
    at = dataset_page(monkeypatch, batch_runner.RUN)
    assert not at.exception, at.exception
    (listed,) = [e for e in at.expander if e.label.endswith("ended with no row to open")]
    assert listed.label == "3 earlier runs ended with no row to open"  # the newest: in its own note
    assert any("failed" in m.value and "the model could not be loaded" in m.value for m in listed.markdown)
    at.button(key=f"{FORM}delete.{runs[2].folder.name}").click().run()  # one, after its confirmation
    assert not at.exception, at.exception
    assert not runs[2].folder.exists() and runs[1].folder.exists()
    (listed,) = [e for e in at.expander if e.label.endswith("ended with no row to open")]
    assert listed.label == "2 earlier runs ended with no row to open"
    running = start_tiny(4, slow=5.0, name="2026-12-06-090000-ioi-eap")
    try:
        at.run()
        assert not at.exception, at.exception
        (listed,) = [e for e in at.expander if e.label.endswith("ended with no row to open")]
        assert listed.label == "3 earlier runs ended with no row to open"  # the running one is not among them
        assert not [b for b in at.button if b.key == f"{FORM}delete.{running.folder.name}"]
        at.button(key=f"{FORM}delete.all").click().run()
        assert not at.exception, at.exception
        assert [s.value.replace("\\", "") for s in at.success] == [
            "Deleted 3 batches that ended with no row."
        ]
        assert not any(run.folder.exists() for run in runs) and running.folder.exists()
        assert not [e for e in at.expander if e.label.endswith("ended with no row to open")]
    finally:
        jobs.cancel(running.folder, grace=5)
        jobs.wait(running.folder, 60)


def test_the_batch_of_your_batches_open_is_in_the_link(monkeypatch, cache):
    """A link to "your batches" (``atlas=your batches``) opened the newest run, whichever was
    open: the run's folder name is in the link (``batch``), and one the server lacks is said."""
    older = start_tiny(2, name="2026-12-06-080000-ioi-eap")
    assert jobs.wait(older.folder, 300).state == "finished"
    newer = start_tiny(2, name="2026-12-06-090000-ioi-eap")
    assert jobs.wait(newer.folder, 300).state == "finished"
    at = dataset_page(monkeypatch, batch_runner.YOURS)
    assert at.selectbox(key=batch_runner.CHOSEN).value == newer.folder.name  # the newest first
    at.selectbox(key=batch_runner.CHOSEN).set_value(older.folder.name).run()
    assert not at.exception, at.exception
    assert at.query_params["batch"] == older.folder.name
    at.segmented_control(key="dataset.source").set_value("ioi").run()  # another atlas: out of its link
    assert "batch" not in at.query_params
    again = AppTest.from_file("../app.py", default_timeout=300)  # the link in a new browser
    for name, value in {"atlas": batch_runner.YOURS, "batch": older.folder.name}.items():
        again.query_params[name] = value
    again.switch_page("pages/dataset.py").run()
    assert not again.exception, again.exception
    assert again.selectbox(key=batch_runner.CHOSEN).value == older.folder.name
    wrong = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {"atlas": batch_runner.YOURS, "batch": "../elsewhere **x**"}.items():
        wrong.query_params[name] = value
    wrong.switch_page("pages/dataset.py").run()
    said = [
        w.value.replace("\\", "") for w in wrong.warning if "The link's batch" in w.value.replace("\\", "")
    ]
    assert len(said) == 1 and said[0].startswith("The link's batch '../elsewhere **x**' is not one of")
    assert wrong.selectbox(key=batch_runner.CHOSEN).value == newer.folder.name
