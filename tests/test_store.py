"""The result store under pressure: LRU size limit, two processes writing one key, readers
during writes, entries evicted under a reader."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from circuitviz.services.store import ResultStore, default_max_bytes

PAYLOAD = 50_000  # floats per entry: about 200 kB


def entry(tag: float) -> dict:
    return {"tag": float(tag), "payload": torch.full((PAYLOAD,), float(tag))}


def test_least_recently_used_entries_go_first(tmp_path):
    store = ResultStore(tmp_path, max_bytes=None)
    size = store.save_state("a", entry(1)).stat().st_size
    store.save_state("b", entry(2))
    old = time.time() - 100
    os.utime(store.path("a", "result"), (old, old))
    os.utime(store.path("b", "result"), (old + 1, old + 1))
    assert store.load_state("a")["tag"] == 1.0  # a read is a use: a is now the most recent
    store.max_bytes = int(2.5 * size)
    store.save_state("c", entry(3))
    assert store.load_state("b") is None  # least recently used, evicted
    assert store.load_state("a")["tag"] == 1.0 and store.load_state("c")["tag"] == 3.0
    assert sum(s for _, s, _ in store.entries()) <= store.max_bytes
    # a limit below one entry keeps the entry just written
    store.max_bytes = 1
    store.save_state("d", entry(4), kind="scores")
    assert [p.name for _, _, p in store.entries()] == ["d.pt"]
    assert store.notices == []


def test_store_limit_from_the_environment(monkeypatch):
    monkeypatch.delenv("CIRCUITVIZ_STORE_MAX_GB", raising=False)
    assert default_max_bytes() == int(10e9)
    monkeypatch.setenv("CIRCUITVIZ_STORE_MAX_GB", "0.5")
    assert default_max_bytes() == int(0.5e9)
    assert ResultStore("/nonexistent").max_bytes == int(0.5e9)
    monkeypatch.setenv("CIRCUITVIZ_STORE_MAX_GB", "none")
    assert default_max_bytes() is None
    monkeypatch.setenv("CIRCUITVIZ_STORE_MAX_GB", "lots")
    with pytest.raises(ValueError, match="CIRCUITVIZ_STORE_MAX_GB"):
        default_max_bytes()


# writers wait until the reader is reading; the reader reads until the test says the writers are
# done (then once more), so its reads span the whole writing and it always sees entries
WRITER = """
import os, sys, time, torch
from circuitviz.services.store import ResultStore
root, tag, rounds, limit, ready = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
deadline = time.time() + 120
while not os.path.exists(ready) and time.time() < deadline:
    time.sleep(0.01)
store = ResultStore(root, max_bytes=limit or None)
for index in range(rounds):
    key = "shared" if limit == 0 else f"k{index % 6}"
    store.save_state(key, {"tag": tag + index * (limit > 0), "payload": torch.full((PAYLOAD,), tag + index * (limit > 0))})
""".replace("PAYLOAD", str(PAYLOAD))
READER = """
import os, sys, time, torch
from circuitviz.services.store import ResultStore
root, ready, done = sys.argv[1], sys.argv[2], sys.argv[3]
store = ResultStore(root, max_bytes=None)
bad = seen = 0
open(ready, "w").close()
deadline = time.time() + 120
while time.time() < deadline:
    finished = os.path.exists(done)
    for key in ("shared", "k0", "k1", "k2", "k3", "k4", "k5"):
        state = store.load_state(key)
        if state is None:
            continue
        seen += 1
        bad += not torch.equal(state["payload"], torch.full((PAYLOAD,), state["tag"]))
    if finished:
        break
print(bad, seen, len(store.notices))
""".replace("PAYLOAD", str(PAYLOAD))


def _start(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    return out


def _read_while_writing(root, writers: list[tuple]) -> tuple[int, int, int]:
    """Run the writers and one reader side by side; (broken entries, entries read, notices)."""
    ready, done = root.parent / f"{root.name}.ready", root.parent / f"{root.name}.done"
    reader = _start(READER, root, ready, done)
    running = [_start(WRITER, root, *arguments, ready) for arguments in writers]
    for writer in running:
        _finish(writer)
    done.touch()
    return tuple(map(int, _finish(reader).split()))


@pytest.mark.slow
def test_two_processes_writing_one_key_never_leave_a_broken_entry(tmp_path):
    root = tmp_path / "s"
    bad, seen, notices = _read_while_writing(root, [(1, 40, 0), (2, 40, 0)])
    assert seen > 0, "the reader never saw an entry: the test proved nothing"
    assert bad == 0 and notices == 0
    store = ResultStore(root, max_bytes=None)
    final = store.load_state("shared")
    assert final["tag"] in (1.0, 2.0) and torch.equal(final["payload"], torch.full((PAYLOAD,), final["tag"]))
    assert store.notices == []
    assert not list(root.rglob("*.tmp")), "a temporary file was left behind"
    assert not (root / "corrupt").exists()


@pytest.mark.slow
def test_entries_evicted_under_a_reader_read_as_absent_not_corrupt(tmp_path):
    probe = ResultStore(tmp_path / "probe", max_bytes=None)
    size = probe.save_state("x", entry(0)).stat().st_size
    root = tmp_path / "s"
    bad, seen, notices = _read_while_writing(root, [(1, 60, 3 * size)])
    assert seen > 0, "the reader never saw an entry: the test proved nothing"
    assert bad == 0 and notices == 0
    assert not (root / "corrupt").exists()
    assert len(ResultStore(root, max_bytes=None).entries()) <= 3
