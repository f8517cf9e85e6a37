"""The converted-weights cache (``circuitviz/models/cache.py``) of both backends: keyed by the
source's content and the converters' versions; a partial, truncated or altered entry is detected
and rebuilt, never read.

The first tests drive the cache's own functions on a small hand-made entry (no model, no torch
model code); the last two load a tiny random Llama through each backend's GGUF path with the
GGUF reader replaced (it returns the random model), convert it, read it back from the cache,
damage the cache and check that the next load converts again and gives the same weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

import circuitviz.models.cache as cache


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _source(folder: Path, content: bytes = b"a GGUF file's bytes") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.gguf"
    path.write_bytes(content)
    return path


def _fill(staging: Path) -> None:
    """What an entry holds: a config, a tokenizer file and a safetensors weights file."""
    from safetensors.torch import save_file

    (staging / "config.json").write_text(json.dumps({"hidden_size": 4}))
    (staging / "tokenizer.json").write_text(json.dumps({"vocab": ["a", "b"]}))
    generator = torch.Generator(device="cpu").manual_seed(0)  # weights on the CPU, where files are read
    weights = {
        "w": torch.randn(64, 64, generator=generator, device="cpu"),
        "b": torch.randn(64, generator=generator, device="cpu"),
    }
    save_file(weights, str(staging / "weights.safetensors"))


def _written(cache_home: Path, source: Path) -> cache.CacheEntry:
    entry = cache.cache_entry("toy", cache.source_fingerprint(source))
    assert cache.write_sealed(entry, _fill)
    return entry


def test_a_written_entry_is_sound_and_read_without_hashing_again(cache_home, tmp_path, monkeypatch):
    entry = _written(cache_home, _source(tmp_path / "src"))
    hashed = []
    original = cache.file_digest
    monkeypatch.setattr(cache, "file_digest", lambda path: hashed.append(path.name) or original(path))
    assert cache.entry_is_sound(entry)
    assert cache.entry_is_sound(entry)
    assert hashed == []  # verified when written, under the same identity
    manifest = json.loads((entry.folder / "manifest.json").read_text())
    assert set(manifest["files"]) == {"config.json", "tokenizer.json", "weights.safetensors"}


def _flip_a_byte(path: Path, offset: int = -5) -> None:
    """The same size, one byte changed (the file's identity changes with the write)."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        "truncated weights",
        "a byte changed in the weights",
        "a byte changed in the tokenizer",
        "bytes appended to the weights",
        "no manifest (a write that died)",
        "a file missing",
        "a manifest of another key",
        "an unreadable manifest",
        "a manifest whose file record is a list",  # AttributeError before
    ],
)
def test_a_damaged_or_partial_entry_is_not_sound(damage, cache_home, tmp_path):
    entry = _written(cache_home, _source(tmp_path / "src"))
    weights = entry.folder / "weights.safetensors"
    manifest = entry.folder / "manifest.json"
    if damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "a byte changed in the weights":
        _flip_a_byte(weights)
    elif damage == "a byte changed in the tokenizer":
        _flip_a_byte(entry.folder / "tokenizer.json", offset=3)
    elif damage == "bytes appended to the weights":
        weights.write_bytes(weights.read_bytes() + b"\0" * 16)
    elif damage == "no manifest (a write that died)":
        manifest.unlink()
    elif damage == "a file missing":
        (entry.folder / "config.json").unlink()
    elif damage == "a manifest of another key":
        data = json.loads(manifest.read_text())
        data["fingerprint"]["transformers"] = "0.0.1"
        manifest.write_text(json.dumps(data))
    elif damage == "a manifest whose file record is a list":
        data = json.loads(manifest.read_text())
        data["files"]["config.json"] = [1, 2]
        manifest.write_text(json.dumps(data))
    else:
        manifest.write_text("{not json")
    assert not cache.entry_is_sound(entry)


def test_a_byte_changed_with_its_times_restored_is_still_caught(cache_home, tmp_path):
    """Restoring the modification time does not hide a change: the change time and the inode
    are part of the identity a file was verified under."""
    entry = _written(cache_home, _source(tmp_path / "src"))
    weights = entry.folder / "weights.safetensors"
    before = weights.stat()
    _flip_a_byte(weights)
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert not cache.entry_is_sound(entry)


def test_a_safetensors_header_must_describe_its_file_exactly(cache_home, tmp_path):
    entry = _written(cache_home, _source(tmp_path / "src"))
    weights = entry.folder / "weights.safetensors"
    assert cache.safetensors_header_fits(weights)
    (tmp_path / "short.safetensors").write_bytes(weights.read_bytes()[:-1])
    (tmp_path / "garbage.safetensors").write_bytes(b"\xff" * 64)
    assert not cache.safetensors_header_fits(tmp_path / "short.safetensors")
    assert not cache.safetensors_header_fits(tmp_path / "garbage.safetensors")


def test_the_key_is_the_sources_content_and_the_versions(cache_home, tmp_path, monkeypatch):
    first = _source(tmp_path / "a")
    copy = _source(tmp_path / "b")  # the same bytes elsewhere
    other = _source(tmp_path / "c", b"another model's bytes")
    key = cache.cache_entry("toy", cache.source_fingerprint(first)).folder
    assert cache.cache_entry("toy", cache.source_fingerprint(copy)).folder == key
    assert cache.cache_entry("toy", cache.source_fingerprint(other)).folder != key
    monkeypatch.setattr(cache, "_version", lambda distribution: "99.0")  # an upgrade converts again
    assert cache.cache_entry("toy", cache.source_fingerprint(first)).folder != key


def test_a_sources_digest_is_hashed_once_per_identity(cache_home, tmp_path, monkeypatch):
    source = _source(tmp_path / "src")
    hashed = []
    original = cache.file_digest
    monkeypatch.setattr(cache, "file_digest", lambda path: hashed.append(path) or original(path))
    digest = cache.content_digest(source)
    assert cache.content_digest(source) == digest and len(hashed) == 1
    source.write_bytes(b"the file replaced by another model")
    assert cache.content_digest(source) != digest and len(hashed) == 2


def test_a_damaged_entry_in_the_way_is_replaced_by_a_new_write(cache_home, tmp_path):
    entry = _written(cache_home, _source(tmp_path / "src"))
    (entry.folder / "manifest.json").unlink()  # partial
    assert cache.write_sealed(entry, _fill)
    assert cache.entry_is_sound(entry)


def test_a_second_converter_waits_for_the_first(cache_home, tmp_path):
    """Two loads of one model on a cold cache: the second waits for the first's conversion
    (the lock is per open file, so two threads stand in for two processes)."""
    import threading

    entry = cache.cache_entry("model", cache.source_fingerprint(_source(tmp_path / "src")))
    order: list[str] = []
    second_waiting = threading.Event()

    def second() -> None:
        second_waiting.set()
        with cache.converting(entry):
            order.append("second holds it")

    with cache.converting(entry):
        thread = threading.Thread(target=second)
        thread.start()
        second_waiting.wait(10)
        thread.join(0.5)  # it cannot get in while this one converts
        order.append("first done")
    thread.join(10)
    assert order == ["first done", "second holds it"]


# ----- both backends, end to end ----------------------------------------------------------------
def _toy_gguf(tmp_path, monkeypatch, module):
    """A stand-in GGUF file whose 'reading' gives a tiny random Llama (counted)."""
    from circuitviz.bench.toy_families import random_hf_model
    from circuitviz.bench.toy_models import word_tokenizer
    from circuitviz.models.checkpoints import LocalCheckpoint

    _source(tmp_path / "src", b"stands in for a GGUF file")
    conversions = []

    def read_hf_model(checkpoint, config=None):
        conversions.append(checkpoint)
        model = random_hf_model("llama3", seed=3, dtype=torch.float32)
        model.config.architectures = [type(model).__name__]
        return model

    monkeypatch.setattr(module, "read_hf_model", read_hf_model)
    monkeypatch.setattr(module, "read_tokenizer", lambda checkpoint, **_: word_tokenizer())
    return LocalCheckpoint(tmp_path / "src", "gguf", "model.gguf"), conversions


def _weights_file(cache_home: Path, pattern: str) -> Path:
    (found,) = [path for path in cache_home.rglob(pattern) if ".staging" not in str(path)]
    return found


@pytest.mark.slow
def test_the_hooked_cache_rebuilds_an_altered_entry(cache_home, tmp_path, monkeypatch):
    import circuitviz.models.loading as loading

    checkpoint, conversions = _toy_gguf(tmp_path, monkeypatch, loading)
    device = torch.device("cpu")  # the test's device

    def load() -> dict[str, torch.Tensor]:
        parts = loading._gguf_parts(checkpoint, "toy", device, torch.float32, verify=lambda: None)
        model = loading._assemble(parts, device)
        return {name: tensor.clone() for name, tensor in model.state_dict().items()}

    first = load()
    second = load()
    assert len(conversions) == 1  # the second load read the cache
    assert all(torch.equal(first[name], second[name]) for name in first)
    _flip_a_byte(_weights_file(cache_home, "weights.safetensors"))
    third = load()
    assert len(conversions) == 2  # detected and converted again, never read
    assert all(torch.equal(first[name], third[name]) for name in first)
    entry = loading.gguf_cache_entry(checkpoint, "toy")
    (entry.folder / "manifest.json").unlink()  # a write that died before its manifest
    fourth = load()
    assert len(conversions) == 3
    assert all(torch.equal(first[name], fourth[name]) for name in first)
    # two loads at once on a cold cache (two app servers, two test workers) convert once
    cache.remove_entry(entry)
    import time
    from concurrent.futures import ThreadPoolExecutor

    reading = loading.read_hf_model
    monkeypatch.setattr(loading, "read_hf_model", lambda *a, **k: (time.sleep(0.5), reading(*a, **k))[1])

    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda _: load(), range(2)))
    assert len(conversions) == 4
    assert all(torch.equal(first[name], loaded[name]) for loaded in together for name in first)


@pytest.mark.slow
def test_the_bridge_cache_rebuilds_an_altered_entry(cache_home, tmp_path, monkeypatch):
    import circuitviz.models.bridge_loading as bridge_loading

    checkpoint, conversions = _toy_gguf(tmp_path, monkeypatch, bridge_loading)
    placement = {"device_map": {"": "cpu"}}  # the test's CPU

    def load() -> dict[str, torch.Tensor]:
        model, _ = bridge_loading.gguf_hf_model(checkpoint, "toy", torch.float32, placement, lambda: None)
        return {name: tensor.clone() for name, tensor in model.state_dict().items()}

    first = load()
    second = load()
    assert len(conversions) == 1
    assert all(torch.equal(first[name], second[name]) for name in first)
    _flip_a_byte(_weights_file(cache_home, "model.safetensors"))  # same size: only the digest sees it
    third = load()
    assert len(conversions) == 2
    assert all(torch.equal(first[name], third[name]) for name in first)
