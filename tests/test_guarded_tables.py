"""Tables of untrusted text have no grid "Download as CSV" (it wrote a prompt
'=HYPERLINK("http://e.vil","click")' as a live spreadsheet formula) and, where the page offers
one, a download of the same columns with such a cell behind a leading "'". Which tables: the
Dataset page's prompts and failed prompts (a dataset file's texts and ids) and the Paraphrases
page's pairs (typed or generated texts). The CSS itself is checked in Chromium
(tests/test_browser_guarded_table.py); here, that each table sits in a guarded container and
what its download writes."""

from __future__ import annotations

import csv
import io

import pandas
import pytest

pytest.importorskip("streamlit")
from ioi_batch_folder import ioi_batch  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_dataset_page import NAMES, _dataset  # noqa: E402
from test_paraphrases_page_notes import _pairs_table_page  # noqa: E402

from circuitviz.core.spreadsheet import csv_text, safe_cell  # noqa: E402
from circuitviz.ui import dataset as dataset_ui  # noqa: E402
from circuitviz.ui.guarded_table import KEY, table_csv  # noqa: E402

LINK = '=HYPERLINK("http://e.vil","click") When Tom'
SUM = "+1+2 @SUM(A1) When Mary"


def _tables(at) -> list[tuple[str, object]]:
    """(the key of the container each table sits in, or '', the table) for every dataframe and
    data editor of the page, in order."""
    found = []

    def walk(node, block: str) -> None:
        proto = getattr(node, "proto", None)
        if type(node).__name__ == "Block" and proto is not None and f"-{KEY}-" in str(proto.id):
            block = str(proto.id).split(f"-{KEY}-", 1)[1]
        if type(node).__name__ in ("Dataframe", "DataEditor") or getattr(proto, "editing_mode", None):
            found.append((block, node))
        for child in getattr(node, "children", {}).values():
            walk(child, block)

    walk(at.main, "")
    return found


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_a_formula_like_text_is_written_with_a_leading_quote_and_numbers_stay_numbers():
    assert [safe_cell(v) for v in ("=1", "+1", "-x", "@A", "\tx", "a=1", 3, -2.5, True)] == [
        "'=1", "'+1", "'-x", "'@A", "'\tx", "a=1", 3, -2.5, True,
    ]  # fmt: skip
    frame = pandas.DataFrame({"id": ["p0", "p1"], "prompt": [LINK, SUM], "NDF": [0.5, float("nan")]})
    styled = frame.style.format(lambda text: text[:5], subset=["prompt"])  # the grid draws it cut
    assert _rows(table_csv(styled, ["prompt", "id", "gone"])) == [  # the values, in the table's order
        ["prompt", "id"],
        ["'" + LINK, "p0"],
        ["'" + SUM, "p1"],
    ]
    assert _rows(csv_text(["=a"], [[None]])) == [["'=a"], [""]]


@pytest.fixture
def hostile_batch(tmp_path, monkeypatch):
    """A batch folder whose first prompt and second id are formulas, its third task failed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = ioi_batch(
        tmp_path, monkeypatch, NAMES, ["eap-ig"], {"ig_steps": 3}, [4, 10, 25, 60], 60, batch_tasks=4
    )
    path = folder / "results.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["clean"] = LINK
    rows[1]["task_id"] = SUM
    rows[2].update(status="failed", error="=cmd|' /C calc'!A0")
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    return folder


def _recorded_downloads(monkeypatch, module) -> dict:
    """{label: (the CSV text, file name)} of each guarded download ``module`` offers (its
    ``csv_button`` recording instead of drawing)."""
    written = {}

    def recording(frame, label, file_name, key, columns=None, what="table"):
        written[label] = (table_csv(frame, columns), file_name)

    monkeypatch.setattr(module, "csv_button", recording)
    return written


def test_the_dataset_pages_prompt_tables_are_guarded_and_their_downloads_too(hostile_batch, monkeypatch):
    written = _recorded_downloads(monkeypatch, dataset_ui)
    at = _dataset(hostile_batch)
    assert not at.exception, at.exception
    tables = dict(_tables(at))
    assert {"dataset-prompts", "dataset-failed"} <= set(tables), [name for name, _ in _tables(at)]
    assert "" in tables  # the edges' table, of the app's own names, keeps the grid's button
    prompts = _rows(written["Prompts (CSV)"][0])
    shown = tables["dataset-prompts"].value
    order = list(tables["dataset-prompts"].proto.column_order)
    assert prompts[0] == order  # the columns the table shows, in its order, under its column names
    assert len(prompts) == len(shown) + 1
    column = prompts[0].index("prompt")
    assert prompts[1][column] == "'" + LINK  # the whole text, behind a "'"
    assert prompts[2][prompts[0].index("id")] == "'" + SUM
    assert written["Prompts (CSV)"][1] == "prompts_eap-ig-ig-steps-3_budget-60.csv"
    failed = _rows(written["Failed prompts (CSV)"][0])
    assert failed[0] == ["task_id", "error", "clean"] and failed[1][1] == "'=cmd|' /C calc'!A0"


def test_the_paraphrase_pairs_table_is_guarded():
    pairs = [("When Mary and John went to the store", "When Alice ..."), (LINK, SUM)]
    at = AppTest.from_function(_pairs_table_page, args=(pairs,)).run()
    assert not at.exception, at.exception
    assert [name for name, _ in _tables(at)] == ["bon-pairs"]


def test_the_dataset_pages_scores_table_is_guarded_as_its_series_names_are_the_folders(
    hostile_batch, monkeypatch
):
    """A series is named by the batch folder's method column: a hand-edited one is a file's text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from circuitviz.ui import dataset_curves

    path = hostile_batch / "results.parquet"
    table = pq.read_table(path)
    index = table.column_names.index("method")
    table = table.set_column(
        index, "method", pa.array(["=2+5"] * table.num_rows, type=table.schema.field("method").type)
    )
    pq.write_table(table, path)
    written = _recorded_downloads(monkeypatch, dataset_curves)
    at = _dataset(hostile_batch)
    assert not at.exception, at.exception
    assert "dataset-scores" in dict(_tables(at))
    scores = _rows(written["Scores (CSV)"][0])
    assert scores[1][0].startswith("'=2+5"), scores
    assert written["Scores (CSV)"][1] == "scores_batch.csv"
