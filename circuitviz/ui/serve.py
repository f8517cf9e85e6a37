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
import sys
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


def main(argv: list[str] | None = None) -> None:
    """Preload, then run streamlit on app.py with ``argv`` (default: this command's flags)."""
    from . import startup

    startup.mark("launcher")
    from streamlit.web import cli

    startup.mark("streamlit imported")
    preload()
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = (
        False  # app.py's navigation, whatever the first URL (ui.navigation.inside_app)
    )
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    from . import background

    background.END_AT_EXIT = True  # a thread that will not stop at exit ends the server, said
    cli.main()


if __name__ == "__main__":
    main()
