"""circuitviz: the app. ``streamlit run app.py`` (or ``make app``).

Navigation over the pages in pages/, and the sidebar they share (model and device). Nothing
heavy is imported here: torch and the model load when a page first needs them.
"""

import streamlit as st

from circuitviz.ui.sidebar import sidebar

st.set_page_config(page_title="circuitviz", page_icon=":material/hub:", layout="wide")

PAGES = [
    st.Page("pages/explore.py", title="Explore", icon=":material/travel_explore:", default=True),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("pages/signals.py", title="Signals", icon=":material/conversion_path:"),
    st.Page("pages/paraphrases.py", title="Paraphrases", icon=":material/format_quote:"),
    st.Page("pages/steer.py", title="Steer", icon=":material/tune:"),
    st.Page("pages/gallery.py", title="Gallery", icon=":material/photo_library:"),
    st.Page("pages/dataset.py", title="Dataset", icon=":material/dataset:"),
    st.Page("pages/about.py", title="About", icon=":material/info:"),
]

navigation = st.navigation(PAGES)
sidebar()
navigation.run()
