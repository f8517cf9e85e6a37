"""A streamlit script for tests/test_browser_guarded_table.py: a table of hostile texts drawn
through ``ui.guarded_table`` (read-only and editable, as the Dataset and Paraphrases pages draw
theirs) beside the same table drawn plainly, with no model."""

import pandas as pd
import streamlit as st

from circuitviz.ui.guarded_table import csv_button, guarded

st.set_page_config(layout="wide")  # as the app: the toolbar sits over each table's top right
TEXTS = ['=HYPERLINK("http://e.vil","click") When Tom', "+1+2 @SUM(A1) When Mary", "plain, with a comma"]
frame = pd.DataFrame({"id": ["p0", "p1", "p2"], "prompt": TEXTS, "NDF": [0.5, None, 1.0]})
st.markdown("**plain**")
st.dataframe(frame, hide_index=True, key="plain")
st.markdown("**guarded**")
with guarded("test-read"):
    st.dataframe(frame, hide_index=True, key="read")
csv_button(frame, "Table (CSV)", "table.csv", "read.csv")
st.markdown("**guarded editor**")
with guarded("test-edit"):
    st.data_editor(frame, hide_index=True, key="edit")
