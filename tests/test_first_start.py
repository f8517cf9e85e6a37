"""What a new user meets at the first start: what the app's launcher (``python -m circuitviz.ui.serve``,
``make app``) prints in the terminal and asks of the network, and what the page says while it loads."""

from __future__ import annotations

import os
import subprocess
import sys

from circuitviz.ui import serve

# what the preload does before Streamlit's runtime exists: define cached functions (the page
# modules' imports)
_DEFINE_CACHED = """
import sys
if sys.argv[1] == "quiet":
    from circuitviz.ui import serve
    serve.quiet_before_the_runtime()
import logging
import streamlit as st

@st.cache_data(max_entries=4)
def one(x):
    return x

@st.cache_data
def two(x):
    return x

logging.getLogger(sys.argv[2]).warning("another warning")
"""


def _stderr(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _DEFINE_CACHED, mode, serve.CACHE_DATA_LOGGER],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_launcher_prints_no_warning_for_the_cached_functions_it_defines_before_the_runtime():
    """Every ``make app`` printed "WARNING ... No runtime found, using MemoryCacheStorageManager"
    nine times (once per cached function the preload's imports define before Streamlit's runtime
    exists); meaningless there, alarming to a new user. The launcher drops that one message, and
    only that one."""
    plain = _stderr("plain")
    assert plain.count(serve.NO_RUNTIME_WARNING) == 2  # Streamlit's message is still this text
    quiet = _stderr("quiet")
    assert serve.NO_RUNTIME_WARNING not in quiet
    assert "another warning" in quiet


def test_the_launcher_names_the_browsers_address_so_streamlit_asks_no_web_service():
    """Headless and told no address, Streamlit looked up the machine's public address at every
    start (checkip.amazonaws.com, up to two 1 s requests on the event loop before the first page)
    and, offline, printed "Did not auto detect external IP. Please go to ... for debugging
    hints." The launcher names the browser's address unless the user named one."""
    quiet_environ: dict[str, str] = {}
    flags = serve.streamlit_flags(["--server.port", "8501"], quiet_environ)
    assert flags == ["--server.port", "8501", "--browser.serverAddress", "localhost"]
    for given in (
        ["--server.address", "0.0.0.0"],
        ["--server.address=0.0.0.0"],
        ["--browser.serverAddress", "example.org"],
    ):
        assert serve.streamlit_flags(given, quiet_environ) == given
    named = {"STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}
    assert serve.streamlit_flags(["--server.port", "8501"], named) == ["--server.port", "8501"]


def test_an_address_in_a_streamlit_config_file_is_left_to_it(tmp_path):
    (tmp_path / ".streamlit").mkdir()
    config = tmp_path / ".streamlit" / "config.toml"
    config.write_text("[server]\nheadless = true\n", encoding="utf-8")
    assert not serve._address_configured((tmp_path,))
    config.write_text('[server]\naddress = "0.0.0.0"\n', encoding="utf-8")
    assert serve._address_configured((tmp_path,))


def test_the_checkouts_own_streamlit_config_names_no_address():
    """``make app`` runs in the checkout, whose config file sets no address: the launcher adds
    the browser's."""
    assert not serve._address_configured((serve.APP.parent,))


def test_the_tab_icon_is_served_by_the_app_not_fetched_from_the_web():
    """``page_icon=":material/hub:"`` made every page's browser fetch the icon from
    fonts.gstatic.com (Chromium: "Failed to load resource: net::ERR_NAME_NOT_RESOLVED" on every
    offline start); the icon is now a file of the checkout, served by the app."""
    import ast
    from pathlib import Path

    from circuitviz.services.assets import favicon_path

    assert favicon_path().is_file() and favicon_path().read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    root = Path(__file__).resolve().parents[1]
    icons = []
    for path in [*(root / "circuitviz").rglob("*.py"), *(root / "pages").glob("*.py"), root / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "set_page_config":
                icon = next((k.value for k in node.keywords if k.arg == "page_icon"), None)
                icons.append((path.name, ast.unparse(icon) if icon is not None else None))
    assert icons == [("navigation.py", "str(favicon_path())")]


def test_a_load_that_converted_the_weights_is_not_what_the_next_start_expects(tmp_path, monkeypatch):
    """A first start converts the embedded GGUF (334 s at load 15 on 2026-12-07); that load was
    recorded as the model's load time, and the next start, reading its weights from the cache in
    30 s, said "Loading the model gemma-3-270m: 19 s (about 334 s, as last time)". A load that
    wrote a cache entry is not recorded; a load from the cache is."""
    from concurrent.futures import Future

    from circuitviz.entry import calibration
    from circuitviz.ui import loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path))
    monkeypatch.setattr(loaders.probe, "probe_unmeasured", lambda model: False)
    monkeypatch.setattr(loaders, "freeze_long_lived_objects", lambda: None)
    monkeypatch.setattr("circuitviz.models.adapter.register", lambda model, name: None)

    class Model:  # the loaded models are kept by weak reference
        pass

    def converting(model_id, device):
        entry = tmp_path / "models" / "a-model" / "0123456789abcdef"
        entry.mkdir(parents=True)
        (entry / "manifest.json").write_text("{}")
        return Model()

    first = Future()
    loaders._load_into(first, converting, "a-model", "cpu")
    assert first.result() is not None and calibration.last_load("a-model") is None
    again = Future()
    loaders._load_into(again, lambda model_id, device: Model(), "a-model", "cpu")
    assert again.result() is not None and calibration.last_load("a-model") is not None


def test_the_terminal_says_what_the_models_load_does(capsys):
    """A first start's conversion took minutes with nothing in the terminal but transformers' bar
    "Loading weights" at its end; the launcher prints the loader's own lines."""
    import logging

    handler = serve.say_what_the_load_does()
    try:
        assert handler is not None and serve.say_what_the_load_does() is None  # once
        logging.getLogger("circuitviz.models.loading").info(
            "Converting %s once (half a minute to minutes); later loads read %s.", "gemma-3-270m", "/cache/x"
        )
        logging.getLogger("circuitviz.models.cache").debug("not this one")
        said = capsys.readouterr().err
        assert said == (
            "circuitviz: Converting gemma-3-270m once (half a minute to minutes); later loads read /cache/x.\n"
        )
    finally:
        logger = logging.getLogger(serve.MODEL_LOGGER)
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


# Streamlit's stop on SIGTERM or Ctrl-C, once the reader of the server's output has gone
_STOP_AFTER_THE_READER_WENT = """
import sys
from circuitviz.ui import serve
if sys.argv[1] == "wrapped":
    serve.survive_a_closed_terminal()
sys.stdin.readline()  # the parent has closed its end of this process's output
from streamlit import cli_util
cli_util.print_to_cli("  Stopping...", fg="blue")  # what Streamlit's Server.stop prints first
print("and Python's own print", flush=True)
sys.stdout.flush()
"""


def _stop_with_the_reader_gone(mode: str) -> tuple[int, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _STOP_AFTER_THE_READER_WENT, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    process.stdout.close()
    _, errors = process.communicate("go\n", timeout=120)
    return process.returncode, errors


def test_the_server_stops_after_the_terminal_that_started_it_has_gone():
    """A server whose output pipe was closed (its terminal or test harness gone) kept serving
    after SIGTERM and Ctrl-C until SIGKILL: Streamlit's stop prints "Stopping..." first, the write
    raised BrokenPipeError, and the stop never went on. The launcher's streams drop what they
    cannot write."""
    status, errors = _stop_with_the_reader_gone("plain")
    assert status != 0 and "BrokenPipeError" in errors  # Streamlit's own stop still fails so
    status, errors = _stop_with_the_reader_gone("wrapped")
    assert status == 0, errors
    assert "BrokenPipeError" not in errors


def test_a_stream_whose_reader_went_writes_to_the_null_device():
    read_end, write_end = os.pipe()
    stream = serve._TerminalGone(os.fdopen(write_end, "w", encoding="utf-8"))
    stream.write("read\n")
    stream.flush()
    assert os.read(read_end, 100) == b"read\n"
    os.close(read_end)
    assert stream.write("nobody reads this\n") == len("nobody reads this\n")
    stream.flush()
    assert os.readlink(f"/proc/self/fd/{stream.fileno()}") == os.devnull
    stream.write("nor this\n")
    stream.flush()
    stream.close()


def test_a_page_opened_during_the_load_counts_the_loads_seconds_not_its_own(tmp_path, monkeypatch):
    """A page opened half a minute into a first start's conversion said "Loading the model
    gemma-3-270m: 3 s (... a first start converts them, once: half a minute to minutes ...)": it
    counted from its own open (session 47), while the expectation beside it, and a last load's
    time, count from the load's start. The line now counts from when the load began."""
    import threading

    from circuitviz.ui import loaders, run

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path))
    monkeypatch.setattr(loaders.probe, "probe_unmeasured", lambda model: False)
    monkeypatch.setattr(loaders, "freeze_long_lived_objects", lambda: None)
    monkeypatch.setattr("circuitviz.models.adapter.register", lambda model, name: None)
    release = threading.Event()

    class Model:  # the loaded models are kept by weak reference
        pass

    def slow_loader(model_id, device):
        release.wait(30)
        return Model()

    monkeypatch.setattr(loaders, "MODEL_LOADER", slow_loader)
    future = loaders.model_future("slowmodel", "cpu")
    try:
        future.started -= 25.0  # the page opens 25 s into the load
        said: list[str] = []

        class Line:
            def info(self, text: str) -> None:
                said.append(text)
                release.set()  # the load ends once the page has drawn its line

            def empty(self) -> None:
                pass

        monkeypatch.setattr(run.calibration, "last_load", lambda model_id: None)
        monkeypatch.setattr(run.startup, "mark_once", lambda what: None)
        monkeypatch.setattr(run.st, "empty", Line)
        assert isinstance(run.load_model_or_stop("slowmodel", "cpu"), Model)
        assert said and said[0].startswith("Loading the model slowmodel: 25 s (")
    finally:
        release.set()
        loaders._model_future.clear()
