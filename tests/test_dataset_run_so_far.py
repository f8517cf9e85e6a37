"""A running batch's rows so far kept in step (``ui/batch_runner.py``): its atlas ("Open the
prompts finished so far") did not redraw while the progress line counted on, and each rerun (a
slider's move) read the rows anew under the reader; now it says when its rows are from, keeps them
until Refresh, and the progress counts the rows finished since, with a Refresh beside it."""

from __future__ import annotations

import os
import time

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


def test_a_running_batchs_atlas_says_when_it_was_drawn_and_the_progress_counts_the_newer_rows(
    tmp_path, monkeypatch, cache
):
    job = start_tiny(6, slow=2.5)
    try:
        deadline = time.monotonic() + 120
        while not batch_runner._finished_any(jobs.status(job.folder)):
            assert time.monotonic() < deadline and jobs.status(job.folder).running, jobs.log_lines(job.folder)
            time.sleep(0.5)
        at = dataset_page(monkeypatch, batch_runner.YOURS)
        assert not at.exception, at.exception
        (said,) = [c.value for c in at.caption if c.value.startswith("Still running")]
        shown = int(said.split("holds the ")[1].split(" row")[0])
        assert "when it was drawn, and does not redraw by itself" in said
        while jobs.rows_written(job.folder) <= shown:  # a newer row on disk
            assert time.monotonic() < deadline and jobs.status(job.folder).running
            time.sleep(0.5)
        at.run()  # a rerun (a slider's move) keeps the rows shown; the progress counts the newer ones
        assert not at.exception, at.exception
        (again,) = [c.value for c in at.caption if c.value.startswith("Still running")]
        assert again == said
        newer = [c.value for c in at.caption if "finished since the atlas below was drawn" in c.value]
        assert newer and newer[0].endswith("finished since the atlas below was drawn.")
        at.button(key=f"{FORM}newer.{job.folder.name}").click().run()  # Refresh: the rows written by now
        assert not at.exception, at.exception
        (now,) = [c.value for c in at.caption if c.value.startswith("Still running")]
        assert int(now.split("holds the ")[1].split(" row")[0]) > shown
    finally:
        jobs.cancel(job.folder, grace=5)
        jobs.wait(job.folder, 60)
    assert os.path.isdir(job.folder)
