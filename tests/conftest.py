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
    _scan_component_packages_once()


def _scan_component_packages_once() -> None:
    """Every ``AppTest`` run makes a new component manager, which reads the metadata of every
    installed package (166 here) looking for Streamlit component manifests: 0.4 CPU s a run, about
    a fifth of an app test. The installed packages do not change during a test run, so the scan
    runs once per test process. (A running app scans once, when its server starts.) If Streamlit
    moves the scanner, nothing is patched and the app tests are only slower."""
    import functools

    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:
        return
    scan = getattr(manifest_scanner, "scan_component_manifests", None)
    if scan is not None and not hasattr(scan, "cache_info"):
        manifest_scanner.scan_component_manifests = functools.cache(scan)


@pytest.fixture
def tiny_app(tmp_path, monkeypatch):
    """An app test's model is the tiny GPT-2 (``bench.toy_models.tiny_app_model``) and its results
    go under tmp_path (``pytestmark = pytest.mark.usefixtures("tiny_app")`` in the app test files)."""
    import circuitviz.ui.loaders as loaders
    from circuitviz.bench.toy_models import tiny_app_model

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", tiny_app_model)


@pytest.fixture(scope="module")
def words():
    """A model whose tokens carry no leading space (the toy GPT-2's word-level tokenizer)."""
    from circuitviz.bench.toy_models import tiny_model

    return tiny_model("gpt2", n_layers=1, n_heads=2)


@pytest.fixture(scope="module")
def spaced():
    """A model whose tokens carry the space before a word, as Gemma's and SmolLM2's do."""
    from test_batch_inputs import spaced_model

    return spaced_model()


@pytest.fixture(scope="session")
def embedded_model():
    from circuitviz.models import EMBEDDED_MODEL, load_model

    return load_model(EMBEDDED_MODEL, device="cpu")


# The files that take longest, longest first. `make test` hands each file whole to one of two
# workers in the order collected (pytest-xdist, --dist loadfile): started last, the two Chromium
# walks of test_browser.py (about 10 minutes together) ran alone at the end of the suite.
LONG_FIRST = (
    "test_browser.py",
    "test_browser_instrument.py",
    "test_exact_norm.py",
    "test_stored_figures.py",  # about 5 minutes since every yardstick row is checked
    "test_cli.py",
    "test_split.py",
    "test_models.py",
    "test_device.py",
    "test_bridge_families.py",
)


def _collection_rank(item) -> int:
    name = item.path.name
    return LONG_FIRST.index(name) if name in LONG_FIRST else len(LONG_FIRST)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    items.sort(key=_collection_rank)  # stable: each file's tests stay together, in their order
    for item in items:
        if "embedded_model" in item.fixturenames:  # directly or through another fixture
            item.add_marker(pytest.mark.embedded)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items:
        import torch

        # CIRCUITVIZ_GPU_TEST_DEVICE=cpu runs them on the CPU to check the tests themselves
        on_cuda = os.environ.get("CIRCUITVIZ_GPU_TEST_DEVICE", "cuda").startswith("cuda")
        if on_cuda and not torch.cuda.is_available():
            for item in gpu_items:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; this machine has none"))


@pytest.fixture
def cli_tiny(monkeypatch, tmp_path):
    """The command line on a tiny GPT-2 (``cli._load`` replaced, the task check off: a random
    model's corruption changes little; results under tmp_path), for the CLI tests."""
    from circuitviz.bench.toy_models import tiny_model
    from circuitviz.entry import cli
    from circuitviz.measure.task_validity import CHECK_ENV

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    monkeypatch.setenv(CHECK_ENV, "off")
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return model
