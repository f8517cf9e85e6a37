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

# the main column's side margins shrink with a narrow window: Streamlit keeps 5rem (80 px) on each
# side at every width above 640 px, so a 1,000 px window with the sidebar left 540 px of its 700 for
# the page, and SmolLM2-135M's 30-layer circuits were drawn at 10.5 px labels there (Explore, the
# IOI circuit of 167 edges) and 9.3 px (Compare). The margins are 1.5rem at 1,000 px and below
# (652 px of page), growing back to 5rem at 1,280 px; Streamlit's own 1rem below 641 px is kept
NARROW_MARGIN_PX, WIDE_MARGIN_PX, NARROW_UNTIL_PX, WIDE_FROM_PX = 24, 80, 1000, 1280
PAGE_MARGINS_CSS = (
    "<style>@media (min-width: 641px) { [data-testid='stMainBlockContainer'] {"
    f" padding-left: var(--cv-margin) !important; padding-right: var(--cv-margin) !important;"
    f" --cv-margin: clamp({NARROW_MARGIN_PX}px, calc({NARROW_MARGIN_PX}px + (100vw - {NARROW_UNTIL_PX}px)"
    f" * {(WIDE_MARGIN_PX - NARROW_MARGIN_PX) / (WIDE_FROM_PX - NARROW_UNTIL_PX):.1f}),"
    f" {WIDE_MARGIN_PX}px); }} }}</style>"
)


def page_margin_px(window_px: float) -> float:
    """Each side margin of the main column in a window ``window_px`` wide (``PAGE_MARGINS_CSS``)."""
    if window_px < 641:
        return 16.0
    slope = (WIDE_MARGIN_PX - NARROW_MARGIN_PX) / (WIDE_FROM_PX - NARROW_UNTIL_PX)
    return min(
        max(NARROW_MARGIN_PX + (window_px - NARROW_UNTIL_PX) * slope, NARROW_MARGIN_PX), WIDE_MARGIN_PX
    )


def run_app() -> None:
    """The page configuration, the navigation (its page list), the shared sidebar (model and
    device; first, before any page's widget: the URL's values and a task opened on another page
    are set there), then the page the URL names."""
    startup.mark_once("first page run")
    st.set_page_config(page_title="circuitviz", page_icon=str(favicon_path()), layout="wide")
    st.html(PAGE_MARGINS_CSS)  # style alone: Streamlit puts it where it takes no room
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
