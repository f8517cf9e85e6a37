"""Shared fixtures: tiny models are cheap; the embedded model is loaded once per session.

Markers (registered in pyproject.toml; `make test-fast` leaves out all four): ``embedded`` is
added here to every test that uses the ``embedded_model`` fixture, so a new test that loads it is
marked without anyone remembering to; ``gpu`` tests are skipped on a machine without CUDA.
"""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One intra-op thread unless the caller sets OMP_NUM_THREADS (subprocesses inherit it). On a small
# CPU shared with other work, torch's default of a thread per core waits at every operation for a
# core another process holds: `make test-fast` took 14 min with the default and under 3 min with
# one thread on this 2-core machine under load. Set before torch is imported, and told to torch in
# case a plugin imported it first.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The tiny models are random: their tasks' corruptions do not lower the metric by the margin a
# real model's must (circuitviz.measure.task_validity). Tests of that check turn it back on.
os.environ.setdefault("CIRCUITVIZ_TASK_CHECK", "off")


def pytest_configure(config):
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture
def tiny_app(tmp_path, monkeypatch):
    """An app test's model is the tiny GPT-2 (``bench.toy_models.tiny_app_model``) and its results
    go under tmp_path (``pytestmark = pytest.mark.usefixtures("tiny_app")`` in the app test files)."""
    import circuitviz.ui.loaders as loaders
    from circuitviz.bench.toy_models import tiny_app_model

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", tiny_app_model)


@pytest.fixture(scope="session")
def embedded_model():
    from circuitviz.models import EMBEDDED_MODEL, load_model

    return load_model(EMBEDDED_MODEL, device="cpu")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "embedded_model" in item.fixturenames:  # directly or through another fixture
            item.add_marker(pytest.mark.embedded)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items:
        import torch

        if not torch.cuda.is_available():
            for item in gpu_items:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; this machine has none"))
