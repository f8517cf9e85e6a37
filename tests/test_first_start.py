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
