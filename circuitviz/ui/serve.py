"""Start the app with its default model already loading: ``python -m circuitviz.ui.serve [flags]``.

``streamlit run app.py`` runs nothing until a browser opens the page, so the first visitor waits
for the whole load (TransformerLens's import, the weights, a timed pass) after the page opens.
This launcher first starts loading the embedded model on the automatic device in a background
thread of the server's own process (``loaders.model_future``, the cache every session shares),
then hands over to streamlit's command line in the same process: by the time a browser has
opened the page and the page has imported its own modules, the model is loaded or nearly.
Any flag is streamlit's (``--server.port 8501``); ``make app`` uses this launcher.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app.py"

# Streamlit checks each ``st.cache_data`` function's settings against the runtime's cache storage
# when the function is defined, and where no runtime exists yet it logs this warning. The preload
# imports the page modules before Streamlit's server (and runtime) starts, so every start printed it
# once per cached function, nine lines in the terminal that meant nothing (each cache is made at its
# first call, inside the runtime).
NO_RUNTIME_WARNING = "No runtime found, using MemoryCacheStorageManager"
CACHE_DATA_LOGGER = "streamlit.runtime.caching.cache_data_api"


class _NotBeforeTheRuntime(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != NO_RUNTIME_WARNING


def quiet_before_the_runtime() -> None:
    """Drop Streamlit's "No runtime found" warning in this process (the launcher's preload runs
    before the runtime exists, by design); any other message of that logger still prints."""
    logger = logging.getLogger(CACHE_DATA_LOGGER)
    if not any(isinstance(known, _NotBeforeTheRuntime) for known in logger.filters):
        logger.addFilter(_NotBeforeTheRuntime())


def preload() -> None:
    """Start loading the default model (the sidebar's first choice) in the background.

    Python's cyclic garbage collector is paused until that load ends: importing torch,
    transformers and TransformerLens makes about 500,000 objects, and each full collection the
    allocations trigger meanwhile walks all of them (7 full collections, about 15 % of the
    imports' CPU time on this machine). The load's end freezes what it made
    (``loaders.freeze_long_lived_objects``) before the collector runs again.
    """
    import gc

    quiet_before_the_runtime()  # before the imports: their cached functions are defined there
    from ..models.catalog import EMBEDDED_MODEL
    from . import loaders
    from .sidebar import DEVICES

    was_enabled = gc.isenabled()
    gc.disable()
    future = loaders.model_future(EMBEDDED_MODEL, DEVICES[0])
    if was_enabled:
        future.add_done_callback(lambda _future: gc.enable())


# where neither is named, Streamlit (headless) asks an outside web service for the machine's public
# address at every start, on the server's event loop before it serves the first page
ADDRESS_FLAGS = ("--browser.serverAddress", "--server.address")
ADDRESS_VARIABLES = ("STREAMLIT_BROWSER_SERVER_ADDRESS", "STREAMLIT_SERVER_ADDRESS")


def streamlit_flags(given: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """Streamlit's flags for the server: ``given``, and ``--browser.serverAddress localhost``
    where they (or Streamlit's environment variables) name no address.

    With no address named, a headless Streamlit looks up the machine's public address at every
    start (two web requests to checkip.amazonaws.com, up to 1 s each, with the server's event
    loop waiting) to print an "External URL", and where the network is off, as the app is meant
    to run, printed "Did not auto detect external IP. Please go to https://docs.streamlit.io/ for
    debugging hints." With the browser's address named it prints one URL,
    ``http://localhost:PORT``, and asks nothing. To serve other machines, name the address to
    listen on (``--server.address 0.0.0.0``): Streamlit's own lines are printed then.
    """
    environ = os.environ if environ is None else environ
    named = any(flag.split("=", 1)[0] in ADDRESS_FLAGS for flag in given)
    if named or any(environ.get(variable) for variable in ADDRESS_VARIABLES) or _address_configured():
        return list(given)
    return [*given, "--browser.serverAddress", "localhost"]


def _address_configured(folders: tuple[Path, ...] | None = None) -> bool:
    """Whether a Streamlit config file this server reads (the working folder's, the user's) sets
    an address (``serverAddress`` or ``address``)."""
    folders = (Path.cwd(), Path.home()) if folders is None else folders
    setting = re.compile(r"^\s*(serverAddress|address)\s*=", re.MULTILINE)
    for folder in folders:
        try:
            text = (folder / ".streamlit" / "config.toml").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if setting.search(text):
            return True
    return False


class _TerminalGone:
    """The server's ``sys.stdout`` or ``sys.stderr``: the stream it wraps, until a write or flush
    finds the reader gone (a closed pipe: the terminal or the program that started the server has
    quit). From then on the stream's file descriptor is the null device, so this write and every
    later one (Python's, Streamlit's, a library's in C) succeeds and is dropped.

    Streamlit's stop, on SIGTERM or Ctrl-C, first prints "Stopping..."; with the pipe closed that
    raised BrokenPipeError inside the stop, which never went on, and the server kept serving until
    SIGKILL (seen after a test harness closed its end of the pipe)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
            self._stream.flush()  # what failed goes to the null device
        except (OSError, ValueError):  # no descriptor of its own (a test's capture): drop it here
            self._stream = open(os.devnull, "w", encoding="utf-8")

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def survive_a_closed_terminal() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (once) so that a reader gone does not stop the
    server's own stop (``_TerminalGone``)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _TerminalGone):
            setattr(sys, name, _TerminalGone(stream))


MODEL_LOGGER = "circuitviz.models"


def say_what_the_load_does() -> logging.Handler | None:
    """Print the model loader's own lines in the terminal, ``circuitviz: Converting gemma-3-270m
    once (half a minute to minutes); later loads read ...`` on a first start, ``circuitviz: Loading
    gemma-3-270m from the conversion cache ...`` after: the terminal said nothing for the minutes
    of a first start's conversion, then showed transformers' bar "Loading weights". Returns the
    handler added (None when the logger has one already)."""
    logger = logging.getLogger(MODEL_LOGGER)
    if logger.handlers:
        return None
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("circuitviz: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # once, whatever the root logger does
    return handler


def main(argv: list[str] | None = None) -> None:
    """Preload, then run streamlit on app.py with ``argv`` (default: this command's flags)."""
    from . import startup

    startup.mark("launcher")
    survive_a_closed_terminal()  # before any handler or library keeps a reference to the streams
    say_what_the_load_does()
    from streamlit.web import cli

    startup.mark("streamlit imported")
    preload()
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = (
        False  # app.py's navigation, whatever the first URL (ui.navigation.inside_app)
    )
    sys.argv = ["streamlit", "run", str(APP), *streamlit_flags(sys.argv[1:] if argv is None else argv)]
    from . import background

    background.END_AT_EXIT = True  # a thread that will not stop at exit ends the server, said
    cli.main()


if __name__ == "__main__":
    main()
