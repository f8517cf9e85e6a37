"""The Dataset page at 1,000 px (about 540 px of table): the Prompts table's figures, answer and
prompt in view (a long prompt cut visibly, whole in its cell) and its warning saying where the
check's sentence is, an empty circuit explained, the Curves tab's band named and its scores table
whole."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.batch import atlas  # noqa: E402
from circuitviz.core.text import markdown_text  # noqa: E402
from circuitviz.ui import dataset as ui  # noqa: E402
from circuitviz.ui import prompt_table  # noqa: E402

TABLE_PX = 540  # the main column at a 1,000 px window, less the borders
TICK_PX = 36  # the row's selection box
SHORT = ["id", "NDF", "edges kept", "CPR", "answer", "prompt"]  # in view at 1,000 px
SHORT_AFTER = ["cluster", "Jaccard to consensus", "family"]  # a scroll away there


def named(names: list[str], budget: int) -> list[str]:
    """The columns' names: each figure of the budget's circuits names it (the CSV download writes
    these names; its 'NDF' said no budget)."""
    return [prompt_table.at_budget(name, budget) for name in names]


FIGURES, AFTER = named(SHORT, 103), named(SHORT_AFTER, 103)  # the IOI atlas opens at budget 103
KEPT, JACCARD = FIGURES[2], AFTER[1]


def _refuse(model_id, device):
    raise AssertionError("the Dataset page must not load a model to show an atlas")


def _dataset(monkeypatch, tmp_path, source: str, folder=None) -> AppTest:
    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", _refuse)
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.session_state["dataset.source"] = source
    if folder is not None:
        at.session_state["dataset.folder"] = str(folder)
    at.session_state["dataset.tab"] = "Prompts"  # its table is drawn only while open; the others always
    at.switch_page("pages/dataset.py")
    return at.run()


def _shown(table) -> tuple[list[str], dict]:
    """(the columns the browser shows, in order; their column_config) of an AppTest dataframe."""
    return list(table.proto.column_order), json.loads(table.proto.columns)


def _drawn(table):
    """The text the grid draws in each cell of an AppTest dataframe: a styler's display values
    where it has them (the data, ``table.value``, is what sorting, search and copying use)."""
    from streamlit import dataframe_util

    drawn = table.proto.arrow_data.styler.display_values
    return dataframe_util.convert_arrow_bytes_to_pandas_df(drawn) if drawn else table.value.astype(str)


def test_the_prompts_figures_answer_and_prompt_fit_1000_px_and_an_empty_circuit_is_explained(
    monkeypatch, tmp_path
):
    """The IOI atlas at budget 103: the figures were the fifth to tenth columns, after a cut prompt,
    out of view; then the figures came first and the answer and the prompt, seventh and eighth, were
    out of view; each prompt is now whole on three lines. ioi-00120 keeps 0 edges there, and nothing said why. Its 103 edges ranked first hold
    two edges from the input (to m1 and a3.h3) and none out of either, so pruning drops them all."""
    at = _dataset(monkeypatch, tmp_path, "ioi")
    assert not at.exception, at.exception
    assert at.session_state["dataset.budget"] == 103
    table = at.dataframe[-1]
    order, config = _shown(table)
    assert order == FIGURES + AFTER  # every task passes: no check column
    assert TICK_PX + sum(config[name]["width"] for name in FIGURES) <= TABLE_PX
    # the prompt wraps onto three lines, and each IOI prompt is drawn whole there
    assert table.proto.row_height > 64 and config["prompt"]["width"] >= 180
    drawn = _drawn(table)
    assert (
        list(drawn["prompt"]) == list(table.value["prompt"]) and table.value["prompt"].str.len().max() == 76
    )
    assert config[KEPT]["label"] == "edges" and "pruning" in config[KEPT]["help"]
    assert config[JACCARD]["label"] == "Jaccard" and "consensus" in config[JACCARD]["help"]
    # the short headers shown stay short; the names (the CSV's header) say the budget
    assert config[FIGURES[1]]["label"] == "NDF" and config[AFTER[0]]["label"] == "cluster"
    empty = table.value[table.value[KEPT] == 0]
    assert list(empty["id"]) == ["ioi-00120"] and list(empty[FIGURES[1]]) == [0.0]
    (sentence,) = [c.value for c in at.caption if "keeps no edge" in c.value]
    # the ids are the dataset file's, as typed: the sentence reaches markdown escaped
    assert sentence.startswith(
        markdown_text("ioi-00120 keeps no edge at budget 103 (sort by edges to find it): the 103 edges")
    )
    assert "hold no path from the input to the logits" in sentence
    assert sentence.endswith(markdown_text("its NDF is 0.000."))


def test_the_empty_circuits_sentence_names_five_and_counts_the_rest():
    assert ui.empty_circuits([], [], 10) is None
    ids = [f"p{i}" for i in range(7)]
    sentence = ui.empty_circuits(ids, [0.0] * 6 + [0.002], 10)
    assert sentence.startswith(
        "p0, p1, p2, p3, p4 and 2 more keep no edge at budget 10 (sort by edges to find them)"
    )
    assert sentence.endswith("their NDF is at most 0.002.")


def test_the_refused_tasks_sentence_sits_beside_the_id_and_is_written_out(monkeypatch, tmp_path):
    """The warning said 'the sentence is in the last column', the tenth, out of view at 1,000 px."""
    from weakened_atlas import weakened_atlas

    from circuitviz.measure.task_validity import CHECK_ENV

    monkeypatch.setenv(CHECK_ENV, "on")
    folder = weakened_atlas(tmp_path / "ioi")
    at = _dataset(monkeypatch, tmp_path, "a batch folder…", folder)
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning if "fail the validity check" in w.value]
    assert "the check's sentence is in the column 'check' beside the id" in warning
    order, config = _shown(at.dataframe[-1])
    assert order[:2] == ["id", "validity check"] and config["validity check"]["label"] == "check"
    assert order[2:] == FIGURES[1:] + AFTER
    assert TICK_PX + sum(config[name]["width"] for name in order[: len(FIGURES) + 1]) <= TABLE_PX
    (expander,) = [e for e in at.expander if e.label == "Why the check refuses 3 prompts"]
    written = [m.value for m in expander.markdown]
    batch = atlas.BatchTable.load(folder)
    rows = {row["task_id"]: row for row in batch.rows(batch.labels[0]).to_pylist()}
    ids = ["ioi-00085", "ioi-00100", "ioi-00106"]
    assert written == [markdown_text(f"{task}: {ui.refusal(rows[task])}") for task in ids]
    assert all("The corruption lowers the logit difference" in ui.refusal(rows[task]) for task in ids)


def test_the_curves_band_is_named_and_unmarked_and_the_scores_headers_are_short(monkeypatch, tmp_path):
    """The MMLU atlas's band drew a marker at its limits at each budget (0.521 and 0.660 at 134), in
    no legend: plotly's default mode under 20 points is lines and markers."""
    at = _dataset(monkeypatch, tmp_path, "mmlu")
    assert not at.exception, at.exception
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    (band,) = [trace for trace in figure["data"] if trace.get("fill") == "toself"]
    assert band["mode"] == "lines" and band.get("showlegend", True)
    assert band["name"] == "bon: 95% interval of the mean"
    batch = atlas.BatchTable.load(ui.stored_atlases()["mmlu"])
    point = next(b for b in atlas.curve_bands(batch, batch.labels[0]) if b["budget"] == 134)
    assert (round(point["low"], 2), round(point["high"], 2)) == (0.52, 0.66)
    assert point["low"] in band["y"] and point["high"] in band["y"]
    scores = next(frame for frame in at.dataframe if "CMD per prompt" in frame.value.columns)
    _, config = _shown(scores)
    assert [
        config[name]["label"] for name in ("CPR (MIB)", "CMD (MIB)", "CPR per prompt", "CMD per prompt")
    ] == [
        "CPR",
        "CMD",
        "CPR each",
        "CMD each",
    ]
    assert all(
        config[name]["help"] for name in ("CPR (MIB)", "CMD (MIB)", "CPR per prompt", "CMD per prompt")
    )


def test_a_long_prompt_is_cut_visibly_to_its_cell_and_kept_whole(monkeypatch, tmp_path):
    """The MMLU atlas's prompts (about 320 characters, on six lines) at 1,000 px: the start they
    all share and the middle of each are cut to '…', the rest fits the cell's three lines, and the
    cell's data (what sorting, search, copying and the double-click view use) holds the prompt."""
    at = _dataset(monkeypatch, tmp_path, "mmlu")
    assert not at.exception, at.exception
    table = at.dataframe[-1]
    order, config = _shown(table)
    budget = at.session_state["dataset.budget"]
    assert order == named(SHORT + SHORT_AFTER, budget)
    assert TICK_PX + sum(config[name]["width"] for name in named(SHORT, budget)) <= TABLE_PX
    assert "double-click" in config["prompt"]["help"]
    assert any("double-click it to read it whole" in c.value for c in at.caption)
    whole, drawn = list(table.value["prompt"]), list(_drawn(table)["prompt"])
    batch = atlas.BatchTable.load(ui.stored_atlases()["mmlu"])
    assert whole == batch.rows(batch.labels[0]).column("clean").to_pylist()
    limit = prompt_table.prompt_chars(config["prompt"]["width"])
    for prompt, shown in zip(whole, drawn):
        assert shown.startswith("\u2026 ") and " \u2026 " in shown and len(shown) <= limit, shown
        start, end = shown[2:].split(" \u2026 ")
        one_line = prompt_table.flat(prompt)
        assert start in one_line and one_line.endswith(end)
    assert drawn[0].startswith("\u2026 marketing. Question: This form of marketing")


def test_the_shortened_prompt_keeps_words_its_end_and_any_markup_as_text():
    shortened, flat = prompt_table.shortened, prompt_table.flat
    text = "When Mary and John went to the store, John gave a drink to"
    assert shortened(text, 80) == text
    cut = shortened(text, 40)
    assert cut == "When Mary and John went \u2026 a drink to" and len(cut) <= 40
    assert shortened("a" * 200, 40) == "a" * 25 + " \u2026 " + "a" * 12  # no space near: cut in the word
    assert flat("Question: <b>x</b>\n\nA. <script>alert(1)</script>\nAnswer: ") == (
        "Question: <b>x</b> A. <script>alert(1)</script> Answer:"
    )
    mmlu = [f"The following is a multiple choice question about {s}. Question: q" for s in ("law", "art")]
    skip = prompt_table.shared_start(mmlu)
    assert mmlu[0][:skip] == "The following is a multiple choice question about "
    assert shortened(mmlu[0], 80, skip) == "\u2026 law. Question: q"
    assert prompt_table.shared_start(mmlu[:1]) == 0 and prompt_table.shared_start(["abc d", "abc e"]) == 0


def test_a_table_too_long_to_style_keeps_each_prompt_whole_in_its_last_column():
    import pandas

    prompts = [f"<i>prompt</i> {i} " + "word " * 40 for i in range(3)]
    order, config = prompt_table.prompt_columns(100, False, whole=True)
    assert order[-1] == "whole prompt" and "last column" in config["prompt"]["help"]
    shown = prompt_table.prompt_display(pandas.DataFrame({"prompt": prompts}), config, whole=True)
    assert list(shown["whole prompt"]) == prompts
    assert all(s.startswith("<i>prompt</i>") and " \u2026 " in s for s in shown["prompt"])
    styled = prompt_table.prompt_display(pandas.DataFrame({"prompt": prompts}), config, whole=False)
    assert list(styled.data["prompt"]) == prompts  # the styler draws the cut, the data keeps all


def test_the_prompts_table_shows_ten_of_its_tall_rows():
    """With rows tall enough for three lines of prompt, the grid's default 400 px showed five and a
    half of them; the table is now as tall as its header and ten rows (698 px in Chromium, checked),
    and a shorter table no taller than its rows."""
    from circuitviz.ui.prompt_table import HEADER_PX, ROW_PX, VISIBLE_ROWS, table_height

    assert VISIBLE_ROWS == 10 and table_height(200) == HEADER_PX + 10 * ROW_PX + 2 > 400
    assert table_height(3) == HEADER_PX + 3 * ROW_PX + 2 and table_height(0) == table_height(1)
