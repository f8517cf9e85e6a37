"""The app's pages, in one list: the navigation (``navigation.run_app``) is built from it, and a
page that sends the user to another (Gallery's and Dataset's "open in Explore") switches to the
very ``st.Page`` of that navigation, so the page opens inside the app."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitAPIException

ROOT = Path(__file__).resolve().parents[2]  # where app.py and pages/ are
# name -> (script, title, icon); the first is the default page
PAGES = {
    "explore": ("pages/explore.py", "Explore", ":material/travel_explore:"),
    "compare": ("pages/compare.py", "Compare", ":material/compare_arrows:"),
    "signals": ("pages/signals.py", "Signals", ":material/conversion_path:"),
    "paraphrases": ("pages/paraphrases.py", "Paraphrases", ":material/format_quote:"),
    "steer": ("pages/steer.py", "Steer", ":material/tune:"),
    "gallery": ("pages/gallery.py", "Gallery", ":material/photo_library:"),
    "dataset": ("pages/dataset.py", "Dataset", ":material/dataset:"),
    "about": ("pages/about.py", "About", ":material/info:"),
}
DEFAULT = "explore"


# the default page is served at "/", but its name must still be a path of its own: not its
# file's, which ``default_alias`` takes
DEFAULT_PATH = "home"


def page(name: str):
    """The ``st.Page`` of page ``name`` (the same page, hash and URL as in the navigation)."""
    script, title, icon = PAGES[name]
    if name == DEFAULT:
        return st.Page(str(ROOT / script), title=title, icon=icon, default=True, url_path=DEFAULT_PATH)
    return st.Page(str(ROOT / script), title=title, icon=icon)


def name_of(title: str) -> str | None:
    """The name of the page titled ``title`` (None for a title no page has)."""
    return next((name for name, (_, shown, _) in PAGES.items() if shown == title), None)


def pages() -> list:
    """Every page of the app, the navigation's list."""
    return [page(name) for name in PAGES]


def default_alias(to_default):
    """A hidden page at the default page's name (``/explore``: every other page is at
    ``/<name>``, so users type it and hand-made links hold it; it opened Streamlit's "Page not
    found" dialog over the default page) whose callable ``to_default`` goes there."""
    return st.Page(to_default, title=PAGES[DEFAULT][1], url_path=DEFAULT, visibility="hidden")


def switch_to(name: str, query_params: dict[str, str] | None = None) -> None:
    """Go to page ``name`` inside the app with the view's URL parameters ``query_params`` (a
    switch clears them otherwise). A page run on its own (no navigation: a test's AppTest of one
    file) just stays; the values it set are in the session for when Explore opens."""
    try:
        st.switch_page(page(name), query_params=query_params or None)
    except StreamlitAPIException:
        return
