"""Tables of untrusted text (a dataset file's prompts and ids, typed paraphrases) without the
grid's own "Download as CSV". That button, in the toolbar streamlit draws over every
``st.dataframe`` and ``st.data_editor``, writes each cell as it is: a prompt
'=HYPERLINK("http://x","click")' opened in a spreadsheet was a live link (2026-12-06). Streamlit
has no option to leave it out of one table (``client.disableDataExport`` drops it from every table
and also stops copying cells from a read-only grid), so such a table sits in a keyed container whose
CSS hides that one button (copying, search and full screen stay), and a download button of the app's
beside it writes the same columns with a formula-like cell guarded (``core.spreadsheet``)."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from ..core.spreadsheet import csv_text

KEY = "cv-guarded"  # every such container's key begins with this
GRID_CSV = "Download as CSV"  # the grid's toolbar button, by its aria-label (streamlit 1.67)
# the toolbar's button wrapper holds the button; :has() hides the wrapper, so no gap is left
_HIDE_CSS = (
    f"<style>[class*='st-key-{KEY}-'] [data-testid='stElementToolbarButton']:has(button[aria-label='{GRID_CSV}'])"
    f", [class*='st-key-{KEY}-'] button[aria-label='{GRID_CSV}'] {{ display: none !important; }}</style>"
)


def guarded(name: str):
    """A container for a table of untrusted text, ``with guarded('dataset-prompts'): st.dataframe(...)``:
    the grid inside it draws no "Download as CSV" of its own."""
    st.html(_HIDE_CSS)
    return st.container(key=f"{KEY}-{name}")


def table_csv(frame, columns: Sequence[str] | None = None) -> str:
    """The columns ``columns`` of ``frame`` (a pandas DataFrame or its Styler; all of them by
    default) as the grid's CSV writes them, its cell values (not the text a styler draws) under the
    column names, with a text a spreadsheet would run as a formula written with a leading "'"."""
    frame = getattr(frame, "data", frame)  # a Styler: the values behind what it draws
    names = [name for name in (columns or frame.columns) if name in frame.columns]
    return csv_text(names, frame[names].itertuples(index=False, name=None))


def csv_button(
    frame, label: str, file_name: str, key: str, columns: Sequence[str] | None = None, what: str = "table"
):
    """A download of ``table_csv(frame, columns)``: the table above as the grid's button wrote it, guarded."""
    st.download_button(
        label,
        data=lambda: table_csv(frame, columns),
        file_name=file_name,
        mime="text/csv",
        key=key,
        on_click="ignore",  # no rerun: the page stays as it is
        help=(
            f"The {what} above, each column as the table names it and each text whole. A text beginning "
            "with =, +, -, @ is written with a leading ' so a spreadsheet does not run it as a formula"
        ),
    )
