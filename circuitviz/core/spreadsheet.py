"""CSV that a spreadsheet opens as text: a cell beginning with =, +, -, @, a tab or a carriage
return is read by Excel, LibreOffice and Google Sheets as a formula ('=HYPERLINK("http://x","click")'
in a prompt would be a live link, '+1+2 @SUM(A1)' a sum). The app's CSV files write such a text
cell with a leading "'", which spreadsheets show as text and drop; numbers stay numbers."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value):
    """A text cell that a spreadsheet would read as a formula, with a leading "'" (numbers and
    booleans as they are)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _plain(value):
    """A cell as a CSV writes it: a missing figure (None, NaN) empty, numpy's scalars as Python's."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    item = getattr(value, "item", None)  # numpy's int64, float64, bool_
    return _plain(item()) if callable(item) and not isinstance(value, str) else value


def csv_text(columns: Sequence[str], rows: Iterable[Sequence]) -> str:
    """``rows`` under the header ``columns`` as CSV: every text quoted where it needs to be (commas,
    quotes, line breaks stay inside their cell), a formula-like text written with a leading "'"
    (a header too: a column can be named after a file's field)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([safe_cell(str(name)) for name in columns])
    for row in rows:
        writer.writerow([safe_cell(_plain(value)) for value in row])
    return buffer.getvalue()
