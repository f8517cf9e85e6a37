"""The Paraphrases page's downloads (``ui.paraphrase_downloads``) hold what the page draws: the
paraphrase table's rows and columns with the candidates' NDF from the bar chart, and the UpSet's
intersections with the sizes its bars draw. Built from a Best-of-N run on a tiny toy model."""

from __future__ import annotations

import csv
import io
import json

import pytest

pytest.importorskip("streamlit")

from circuitviz import render  # noqa: E402
from circuitviz.bench.toy_models import IOI_TASK, tiny_model  # noqa: E402
from circuitviz.entry.api import bon_candidates  # noqa: E402
from circuitviz.methods import get_method  # noqa: E402
from circuitviz.methods.bon import QueryCircuitConfig  # noqa: E402
from circuitviz.services.store import ResultStore  # noqa: E402
from circuitviz.ui import bon  # noqa: E402
from circuitviz.ui.paraphrase_downloads import (  # noqa: E402
    LEFT_OUT,
    candidates_csv,
    candidates_rows,
    shared_edges_json,
)

PAIRS = "\n".join(
    [
        "When John and Mary went to the store , John gave a drink to\tWhen Bob and Alice went to the store , Carl gave a drink to",
        "When Mary and John went to the park , John gave a ball to\tWhen Alice and Bob went to the park , Carl gave a ball to",
        "When John and Mary went to the store , John gave a drink to\tWhen Bob and Alice went to the store , Carl gave a drink to",
    ]
)  # the third repeats the first: left out, with its reason
BUDGET = 16


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    model = tiny_model("gpt2", seed=0)
    store = ResultStore(tmp_path_factory.mktemp("store"))
    config = QueryCircuitConfig(paraphrase_source="file", paraphrases=PAIRS, ig_steps=3, cache_scores=True)
    result = get_method("bon").run_on(model, IOI_TASK, config, budgets=[8, BUDGET], store=store)
    # what the page draws: the bar chart's figures and the UpSet's edge sets (paraphrase_view)
    scores = bon_candidates(model, result, BUDGET, store)
    sets = bon.candidate_edge_sets(model, result.model_id, result, BUDGET, store)
    return result, scores, sets


def test_the_candidates_csv_is_the_table_shown_with_the_bar_charts_figures(run):
    result, scores, _ = run
    text = candidates_csv(candidates_rows(result, scores, BUDGET))
    read = list(csv.DictReader(io.StringIO(text, newline="")))
    shown = bon.table_rows(result)
    assert list(read[0]) == [
        *bon.TABLE_COLUMNS,
        LEFT_OUT,
        f"NDF at budget {BUDGET}",
        f"edges at budget {BUDGET}",
        "winner",
    ]
    assert [row["pair"] for row in read] == [row["pair"] for row in shown] == ["q", "p1", "p2", "p3"]
    for row, table in zip(read, shown):
        assert row["paraphrase"] == table["paraphrase"] and row["corrupted"] == table["corrupted"]
        assert row["candidate"] == str(table["candidate"])
    left_out = [row for row in read if row["candidate"] == "False"]
    assert [row["pair"] for row in left_out] == ["p3"] and left_out[0][LEFT_OUT], left_out
    assert not left_out[0][f"NDF at budget {BUDGET}"]
    drawn = {score["name"]: score for score in scores}  # render.candidate_figure's bars
    assert set(drawn) == {row["pair"] for row in read if row["candidate"] == "True"}
    for row in read:
        if row["pair"] in drawn:
            assert float(row[f"NDF at budget {BUDGET}"]) == pytest.approx(drawn[row["pair"]]["ndf"], abs=1e-5)
            assert int(row[f"edges at budget {BUDGET}"]) == drawn[row["pair"]]["n_edges"]
            assert row["winner"] == str(bool(drawn[row["pair"]]["winner"]))


def test_the_shared_edges_json_holds_the_upsets_bars(run):
    result, scores, sets = run
    assert sets and len(sets) == 3
    data = json.loads(json.dumps(shared_edges_json(result, BUDGET, sets, scores)))
    figure, drawn = render.upset_figure(sets)
    bars = [item for item in data["intersections"] if item["drawn"]]
    assert [item["size"] for item in bars] == list(figure.data[0].y)  # the heights the plot draws
    assert [item["label"] for item in bars] == list(figure.data[0].customdata)
    assert [item["members"] for item in bars] == [list(item.members) for item in drawn]
    assert sum(item["size"] for item in data["intersections"]) == len(set().union(*sets.values()))
    for item in data["intersections"]:
        assert item["size"] == len(item["edges"])
        inside = set.intersection(*(set(data["candidates"][name]["edges"]) for name in item["members"]))
        assert set(item["edges"]) <= inside
    by_name = {score["name"]: score for score in scores}
    for name, candidate in data["candidates"].items():
        assert set(candidate["edges"]) == sets[name]
        assert candidate["n_edges"] == by_name[name]["n_edges"]  # the bar chart's edge count
        assert candidate["ndf"] == pytest.approx(by_name[name]["ndf"])
    assert data["candidates"]["q"]["clean"] == IOI_TASK.clean
    assert data["in_every_candidate"] == sorted(render.shared_by_all(sets))
    assert data["budget"] == BUDGET and data["bars_drawn"] == len(bars)


def test_paraphrase_text_stays_data_in_the_csv():
    """Commas, quotes and line breaks stay inside their cell; a text a spreadsheet would run as a
    formula gets a leading "'"; numbers (a negative NDF) are written as they are."""
    hostile = ['=HYPERLINK("https://evil","x")', "+1+2", "-2+3", "@SUM(A1)", 'a, "quoted"\nline']
    rows = [
        {"pair": f"p{i}", "paraphrase": text, "corrupted": "plain", "NDF": -0.25}
        for i, text in enumerate(hostile, start=1)
    ]
    read = list(csv.DictReader(io.StringIO(candidates_csv(rows), newline="")))
    assert [row["paraphrase"] for row in read] == ["'" + text for text in hostile[:4]] + [hostile[4]]
    assert all(row["NDF"] == "-0.25" and row["corrupted"] == "plain" for row in read)


def _downloads_page(with_sets: bool):
    import types

    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.ui.paraphrase_downloads import paraphrase_downloads

    result = types.SimpleNamespace(model_id="m", method="bon", task=IOI_TASK, config={})
    paraphrase_downloads(result, 10, [], {"q": {"a"}, "p1": {"a", "b"}} if with_sets else None)


def test_the_page_offers_both_files_and_the_shared_edges_only_with_two_candidates():
    """One candidate (no paraphrase usable) or no kept scores: the page draws no UpSet, and the
    JSON of its intersections is not offered; the candidates' CSV is, and the drawn circuit's JSON
    (Explore's; the page offered none, so a Best-of-N circuit seen here had to be run again there)."""
    from streamlit.testing.v1 import AppTest

    for with_sets, labels in (
        (True, ["Candidates (CSV)", "Circuit (JSON)", "Shared edges (JSON)"]),
        (False, ["Candidates (CSV)", "Circuit (JSON)"]),
    ):
        at = AppTest.from_function(_downloads_page, args=(with_sets,)).run()
        assert not at.exception, at.exception
        assert [button.proto.label for button in at.get("download_button")] == labels
