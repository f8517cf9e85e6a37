"""The app itself: its navigation over the pages (``pagelist``) and the sidebar they share, and
the guard that keeps every page inside it."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from ..services.assets import favicon_path
from . import startup, state
from .link_values import demo_not_here_sentence
from .pagelist import DEFAULT, default_alias, name_of, pages, switch_to
from .sidebar import sidebar


def run_app() -> None:
    """The page configuration, the navigation (its page list), the shared sidebar (model and
    device; first, before any page's widget: the URL's values and a task opened on another page
    are set there), then the page the URL names."""
    startup.mark_once("first page run")
    st.set_page_config(page_title="circuitviz", page_icon=str(favicon_path()), layout="wide")
    app_navigation = st.navigation([*pages(), default_alias(_to_default)])
    if app_navigation.url_path == DEFAULT:  # /explore: on to "/" before the sidebar reads the link
        _to_default()
    state.session.page = name_of(app_navigation.title)  # whose URL fields the URL holds (state.write_to_url)
    sidebar()
    not_here = demo_not_here_sentence(app_navigation.title, state.session.demo)
    if not_here:  # a demo link to a page without demo mode: said, not ignored
        st.info(not_here)
    app_navigation.run()


def _to_default() -> None:
    """``/explore`` goes to the default page at ``/`` with the link's own parameters, each of its
    values (a parameter given twice, twice), so the page reads and names them as it does at ``/``.
    It forwarded the values the sidebar had read, after the sidebar's sentences about the rest: a
    link's unknown model, a parameter given twice and ``demo=yes`` opened there unsaid (2026-12-06)."""
    switch_to(DEFAULT, state.url_params(as_given=True))


def inside_app() -> None:
    """Make sure this page runs inside the app's navigation; the first call of every page.

    Streamlit treats a ``pages/`` folder beside the entry point as its older multipage layout
    until a session calls ``st.navigation``: a fresh server whose first visitor opens a page's
    own URL (``/dataset``, a shared ``/compare?...``) runs that page alone, without ``app.py``
    (no model or device in the sidebar, a page list of raw file names), and so does every
    session after it. Here the page turns that layout off, as ``st.navigation`` does, runs the
    app (which runs this page inside it) and stops: one script run, so a button pressed for
    this run keeps its click."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        run_app()
        st.stop()
