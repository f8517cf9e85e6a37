"""Run pressed on the Dataset page's form with no file of prompts read. The upload box refuses a
file of another type or over its size in its own words ("text/plain files are not allowed"), and
the page never sees that file: the page's "Upload a JSONL or CSV file of prompts first" stood under
the refusal, beside the file the user had uploaded (seen in Chromium). The sentence says what is
true either way: no file it accepts was read, which ones it accepts, and the way out."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from dataset_jobs import dataset_page, page_errors  # noqa: E402

from circuitviz.ui import batch_runner  # noqa: E402


def test_run_without_a_file_read_says_which_files_the_box_accepts(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    at = dataset_page(monkeypatch, batch_runner.RUN)
    at.segmented_control(key=batch_runner.FORM + "source").set_value(batch_runner.UPLOAD).run()
    at.button(key=batch_runner.FORM + "go").click().run()
    assert not at.exception, at.exception
    assert page_errors(at) == [
        "No file of prompts was read: the box above holds none it accepts (.jsonl, .csv, .json, "
        ".ndjson); upload one, or generate a family's."
    ]
