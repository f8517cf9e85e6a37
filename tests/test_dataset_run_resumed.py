"""The Dataset page says what a batch found stored before it computed (``batch.resumed``): each of
its runs has a folder of its own and finds earlier results only in the result store, so after a
code change (every key holds the engine) the same prompts were computed again in full with nothing
said of why. The tiny command runs the real engine; the store is made to look as an earlier
engine's left it (its results gone under this engine's keys, its lineage under another engine)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from dataset_jobs import dataset_page, start_tiny  # noqa: E402

from circuitviz.batch import jobs  # noqa: E402
from circuitviz.batch.resumed import MADE  # noqa: E402
from circuitviz.core.keys import engine_digest  # noqa: E402
from circuitviz.ui import batch_runner  # noqa: E402


def test_a_rerun_after_a_code_change_says_on_the_page_why_it_computes_again(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    first = jobs.wait(start_tiny(2, name="2026-12-07-080000-ioi-eap").folder, 300)
    assert first.state == "finished", first.log_tail
    assert batch_runner.resumed_note(first) is None  # nothing was stored before it
    store = tmp_path / "cache" / "results"
    for path in (store / "result").glob("*.pt"):
        path.unlink()  # as a code change leaves them: under keys this engine never asks
    (lineage,) = (store / MADE).glob("*.keys")
    lineage.rename(lineage.with_name("0.0.9+aaaaaaaaaaaaaaaa.keys"))
    second = jobs.wait(start_tiny(2, name="2026-12-07-090000-ioi-eap").folder, 300)
    assert second.state == "finished", second.log_tail
    said = (
        "2 items of the batch's 2 were stored before: 2 were made by version 0.0.9 of the engine "
        f"(now {engine_digest().partition('+')[0]}) and are computed again."
    )
    assert batch_runner.resumed_note(second) == said
    at = dataset_page(monkeypatch, batch_runner.YOURS)
    assert not at.exception, at.exception
    assert at.selectbox(key=batch_runner.CHOSEN).value == second.folder.name
    assert said in [c.value.replace("\\", "") for c in at.caption]
