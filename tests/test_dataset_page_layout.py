"""The Dataset page at 1,000 px (about 540 px of table): the Prompts table's figures in view and
its warning saying where the check's sentence is, an empty circuit explained, the Curves tab's band
named and its scores table whole."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.batch import atlas  # noqa: E402
from circuitviz.core.text import markdown_text  # noqa: E402
from circuitviz.ui import dataset as ui  # noqa: E402

TABLE_PX = 540  # the main column at a 1,000 px window, less the borders
TICK_PX = 36  # the row's selection box
FIGURES = ["id", "NDF", "edges kept", "CPR", "cluster", "Jaccard to consensus"]


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
    at.switch_page("pages/dataset.py")
    return at.run()


def _shown(table) -> tuple[list[str], dict]:
    """(the columns the browser shows, in order; their column_config) of an AppTest dataframe."""
    return list(table.proto.column_order), json.loads(table.proto.columns)


def test_the_prompts_figures_come_first_and_fit_1000_px_and_an_empty_circuit_is_explained(
    monkeypatch, tmp_path
):
    """The IOI atlas at budget 103: the figures were the fifth to tenth columns, after a cut prompt,
    out of view; ioi-00120 keeps 0 edges there, and nothing said why. Its 103 edges ranked first hold
    two edges from the input (to m1 and a3.h3) and none out of either, so pruning drops them all."""
    at = _dataset(monkeypatch, tmp_path, "ioi")
    assert not at.exception, at.exception
    assert at.session_state["dataset.budget"] == 103
    table = at.dataframe[-1]
    order, config = _shown(table)
    assert order[: len(FIGURES)] == FIGURES and "validity check" not in order  # every task passes
    assert TICK_PX + sum(config[name]["width"] for name in FIGURES) <= TABLE_PX
    assert config["edges kept"]["label"] == "edges" and "pruning" in config["edges kept"]["help"]
    assert (
        config["Jaccard to consensus"]["label"] == "Jaccard"
        and "consensus" in config["Jaccard to consensus"]["help"]
    )
    empty = table.value[table.value["edges kept"] == 0]
    assert list(empty["id"]) == ["ioi-00120"] and list(empty["NDF"]) == [0.0]
    (sentence,) = [c.value for c in at.caption if "keeps no edge" in c.value]
    assert sentence.startswith(
        "ioi-00120 keeps no edge at budget 103 (sort by edges to find it): the 103 edges"
    )
    assert "hold no path from the input to the logits" in sentence and sentence.endswith("its NDF is 0.000.")


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
    assert order[2 : len(FIGURES) + 1] == FIGURES[1:]
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
