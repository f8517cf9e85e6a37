"""Page batches deleted (``ui/batch_runner.py``, ``batch/jobs.py``): a batch run from the Dataset
page was never deleted, so the cache's ``batches/`` grew by a folder a run; now a run that has
ended is deleted from "your batches" after a confirmation, and a running one never is."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from dataset_jobs import dataset_page, start_tiny  # noqa: E402

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
