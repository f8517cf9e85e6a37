"""What the tests of the Dataset page's batch runs share: the tiny batch command that stands in
for ``python -m circuitviz`` (``tiny_batch.py``), the page opened at a source without loading a
model, a batch started in the background, and the page's errors as read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from circuitviz.batch import jobs

TINY = [sys.executable, str(Path(__file__).with_name("tiny_batch.py"))]


def refuse_model(model_id, device):
    raise AssertionError("the Dataset page must not load a model to run a batch")


def dataset_page(monkeypatch, source: str, launcher: bool = False) -> AppTest:
    """The Dataset page opened at ``source`` (``batch_runner.RUN``, ``YOURS``) and run once;
    ``launcher``: the page's own batches start ``TINY``."""
    import circuitviz.ui.loaders as loaders

    monkeypatch.setattr(loaders, "MODEL_LOADER", refuse_model)
    if launcher:
        monkeypatch.setattr(jobs, "LAUNCHER", TINY)
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.session_state["dataset.source"] = source
    at.switch_page("pages/dataset.py")
    return at.run()


def start_tiny(n: int, slow: float = 0.0, name: str = "2026-12-06-080000-ioi-eap") -> jobs.JobStatus:
    """A batch of ``n`` IOI prompts with EAP started in the background, as the page starts one
    (``slow``: seconds each group of the tiny command waits)."""
    argv = jobs.batch_arguments(methods=["eap"], budgets="3,8,20", generate="ioi", n=n)
    env = {"TINY_BATCH_SLOW": str(slow)} if slow else None
    folder = jobs.runs_dir() / name
    return jobs.start(
        folder, [*argv, "--batch-tasks", "1"], title=f"{n} ioi prompts × eap", launcher=TINY, env=env
    )


def page_errors(at) -> list[str]:
    """The page's errors as read: markdown_sentence's escapes undone."""
    return [e.value.replace("\\", "") for e in at.error]


def finished_batch(name: str, title: str, manifest: dict, rows: dict) -> Path:
    """A batch folder ``name`` under the runs folder that ended well (exit status 0), with
    ``manifest`` and a results table of ``rows`` (column: values), as the Dataset page reads one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = jobs.runs_dir() / name
    folder.mkdir(parents=True)
    (folder / jobs.JOB).write_text(json.dumps({"pid": None, "title": title}))
    (folder / jobs.EXIT).write_text('{"returncode": 0, "ended": 1.0}')
    (folder / "manifest.json").write_text(json.dumps(manifest))
    pq.write_table(pa.table(rows), folder / "results.parquet")
    return folder
