"""Page batches deleted (``ui/batch_runner.py``, ``batch/jobs.py``): a batch run from the Dataset
page was never deleted, so the cache's ``batches/`` grew by a folder a run; now a run that has
ended is deleted from "your batches" after a confirmation, and a running one never is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.batch import jobs  # noqa: E402
from circuitviz.ui import batch_runner  # noqa: E402

TINY = [sys.executable, str(Path(__file__).with_name("tiny_batch.py"))]
FORM = batch_runner.FORM


def _refuse(model_id, device):
    raise AssertionError("the Dataset page must not load a model")


def _page(tmp_path, monkeypatch, source: str) -> AppTest:
    import circuitviz.ui.loaders as loaders

    monkeypatch.setattr(loaders, "MODEL_LOADER", _refuse)
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.session_state["dataset.source"] = source
    at.switch_page("pages/dataset.py")
    return at.run()


def _start(tmp_path, n: int, slow: float = 0.0, name: str = "2026-12-06-080000-ioi-eap"):
    argv = jobs.batch_arguments(methods=["eap"], budgets="3,8,20", generate="ioi", n=n)
    env = {"TINY_BATCH_SLOW": str(slow)} if slow else None
    folder = jobs.runs_dir() / name
    return jobs.start(
        folder, [*argv, "--batch-tasks", "1"], title=f"{n} ioi prompts × eap", launcher=TINY, env=env
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_finished_batch_is_deleted_after_a_confirmation_and_a_running_one_never(
    tmp_path, monkeypatch, cache
):
    done = _start(tmp_path, 2)
    assert jobs.wait(done.folder, 300).state == "finished"
    at = _page(tmp_path, monkeypatch, batch_runner.YOURS)
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
    running = _start(tmp_path, 4, slow=5.0, name="2026-12-06-080100-ioi-eap")
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
