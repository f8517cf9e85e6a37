"""The Dataset page's prompts table draws a dataset file's invisible characters as their codes and
says which rows hold them: it drew a right-to-left override's prompt reordered ('the ,erots'), a
zero-width space and a NUL as nothing, unmarked, while the batch's printed line named them."""

from __future__ import annotations

import pandas
import pytest

pytest.importorskip("streamlit")
from ioi_batch_folder import ioi_batch  # noqa: E402
from test_dataset_page import NAMES, _dataset  # noqa: E402

from circuitviz.core.text import invisible_characters, markdown_text  # noqa: E402
from circuitviz.ui import prompt_table  # noqa: E402

RTL = "When John and Mary went to the \u202estore , Mary gave a drink to"
HIDDEN = "When Anna and\u200b Tom went to the store ,\x00 Tom gave a drink to"
CONFIG = {"prompt": {"width": 400}}


def _table() -> pandas.DataFrame:
    return pandas.DataFrame(
        {"id": ["p0", "p\u202e1", "p2"], "prompt": ["plain", RTL, HIDDEN], "answer": [" a", " b", " c\u200b"]}
    )


def test_a_styled_table_draws_each_invisible_character_as_its_code_and_keeps_the_text():
    styled = prompt_table.prompt_display(_table(), CONFIG, whole=False)
    drawn = styled.to_string()  # what the grid draws: the styler's display values
    assert "\\u202estore" in drawn and "\\u200b" in drawn and "\\x00" in drawn and "p\\u202e1" in drawn
    assert not any(invisible_characters(line) for line in drawn.splitlines())
    assert list(styled.data["prompt"]) == ["plain", RTL, HIDDEN]  # sorting, copying, the CSV: as written
    whole = prompt_table.prompt_display(_table(), CONFIG, whole=True)
    assert "\\u202estore" in whole["prompt"][1] and whole["whole prompt"][1] == RTL


def test_the_rows_holding_them_are_named_with_what_the_table_does():
    said = prompt_table.invisible_rows(_table(), whole=False)
    assert said.startswith(
        "p\\u202e1 and p2 hold invisible characters (U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE, "
        "U+0000 CONTROL CHARACTER): the table draws each as its code, such as \\u202e,"
    ), said
    assert "the prompt column draws each" in prompt_table.invisible_rows(_table(), whole=True)
    assert prompt_table.invisible_rows(_table().iloc[:1], whole=False) is None
    one = prompt_table.invisible_rows(_table().iloc[2:], whole=False)
    assert one.startswith("p2 holds invisible characters") and "such as \\u200b" in one


def test_the_dataset_page_says_so_above_the_prompts(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = ioi_batch(tmp_path, monkeypatch, NAMES, ["eap-ig"], {"ig_steps": 3}, [4, 10, 25, 60], 60)
    path = folder / "results.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[2]["clean"], rows[3]["clean"] = RTL, HIDDEN
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    at = _dataset(folder)
    assert not at.exception, at.exception
    warnings = [w.value for w in at.warning]
    said = prompt_table.invisible_rows(
        pandas.DataFrame({"id": ["p2", "p3"], "prompt": [RTL, HIDDEN], "answer": [" John", " Anna"]}),
        whole=False,
    )
    assert markdown_text(said) in warnings, warnings


def test_no_invisible_character_is_one_python_calls_printable():
    """``invisible_characters`` returns at once for a text Python calls printable: that holds only
    while every format (Cf) and control (Cc) character is unprintable to Python."""
    import sys
    import unicodedata

    printable = [
        hex(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cf", "Cc") and chr(code).isprintable()
    ]
    assert printable == []
