"""A batch's own load of its model went unrecorded: the manifest split its time into discovery and
the driver's share, and the Dataset page's run form could quote only this server's load (its imports
long done), no price for a batch that loads the model again in a process of its own. The manifest
holds ``load_seconds`` now (part of ``seconds``), the command line's last line names it, and the
form quotes the newest batch's own."""

from __future__ import annotations

import json
import re
import time

import pytest

from circuitviz.batch import ModelSource, run
from circuitviz.batch.command import counts_line
from circuitviz.batch.dataset import DatasetTask
from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.services.store import ResultStore

LOAD = 0.4  # seconds the slow source takes to load


def _slow_tiny():
    time.sleep(LOAD)
    return tiny_model("gpt2", n_layers=1, n_heads=2)


def _batch(tmp_path, **where):
    task = DatasetTask("t0", IOI_TASK)
    return run(
        tmp_path / "out", tasks=[task], methods=["eap"], budgets=[3, 8], store=ResultStore(tmp_path / "store"),
        keep_edges=8, **where,
    )  # fmt: skip


def test_the_batchs_own_load_is_in_its_manifest_and_its_last_line(tmp_path):
    report = _batch(tmp_path, source=ModelSource("tiny-slow", factory=_slow_tiny))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert LOAD <= manifest["load_seconds"] <= manifest["seconds"] == report.seconds
    assert manifest["load_seconds"] + manifest["discovery_seconds"] <= manifest["seconds"]
    assert re.search(
        r"in \dm\d\ds, the model's load \dm\d\ds of it on local \(1 worker\)$", counts_line(report)
    )


def test_a_model_handed_over_loaded_records_no_load(tmp_path):
    report = _batch(tmp_path, model=tiny_model("gpt2", n_layers=1, n_heads=2))
    assert report.manifest["load_seconds"] is None
    assert "model's load" not in counts_line(report)


def test_the_run_form_quotes_the_newest_batchs_own_load(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from dataset_jobs import finished_batch

    from circuitviz.entry import calibration
    from circuitviz.ui import batch_form

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    calibration.record_load("smollm2-135m", 0.563)  # this server's, its imports long done
    manifest = {"model": {"model_id": "smollm2-135m"}, "load_seconds": 14.2}
    rows = {"method": ["eap"], "status": ["done"], "seconds": [1.2], "n_tokens": [16], "family": ["ioi"]}
    finished_batch("2026-12-06-110754-ioi-1-eap", "1 prompt × eap", manifest, rows)
    said = batch_form.measured_cost("smollm2-135m", ["eap"], 2, "ioi")
    assert said.endswith(
        "The last batch here loaded smollm2-135m in 14 s in its own process, after Python's start and "
        "imports, before its first prompt."
    ), said
    assert "This server's last load" not in said
