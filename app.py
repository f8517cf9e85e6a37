"""circuitviz: the app. ``streamlit run app.py`` (or ``make app``).

Navigation over the pages in pages/ (their list: ``circuitviz.ui.navigation``), and the sidebar
they share (model and device). Nothing heavy is imported here: torch and the model load when a
page first needs them.
"""

import streamlit as st

from circuitviz.ui import navigation
from circuitviz.ui.sidebar import sidebar

st.set_page_config(page_title="circuitviz", page_icon=":material/hub:", layout="wide")

app_navigation = st.navigation(navigation.pages())
sidebar()  # first, before any page's widget: the URL's values and a task opened on another page
app_navigation.run()
