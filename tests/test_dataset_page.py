"""The Dataset page through streamlit's AppTest: a stored atlas opens without a model, a batch
folder shows its bands, consensus, clusters and prompts, and a click opens a prompt in Explore."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from graph_data import graph_data  # noqa: E402
from ioi_batch_folder import ioi_batch  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.batch import atlas  # noqa: E402
from circuitviz.core.text import markdown_text  # noqa: E402
from circuitviz.models.catalog import EMBEDDED_MODEL  # noqa: E402
from circuitviz.ui import dataset as ui  # noqa: E402

TIMEOUT = 300
NAMES = [
    ("Mary", "John"),
    ("Tom", "Anna"),
    ("John", "Mary"),
    ("Anna", "Tom"),
    ("Alice", "Bob"),
    ("Bob", "Carl"),
]


@pytest.fixture
def batch_folder(tmp_path, monkeypatch):
    return ioi_batch(
        tmp_path, monkeypatch, NAMES, ["eap-ig"], {"ig_steps": 3}, [4, 10, 25, 60], 60, batch_tasks=4
    )


def _dataset(folder=None, source: str = "a batch folder…") -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.session_state["dataset.source"] = source
    if folder is not None:
        at.session_state["dataset.folder"] = str(folder)
    at.session_state["dataset.tab"] = "Prompts"  # its table is drawn only while open; the others always
    at.switch_page("pages/dataset.py")
    return at.run()


def _refuse(model_id, device):
    raise AssertionError("the Dataset page must not load a model to show an atlas")


def _checked(folder, monkeypatch, table, corrupted: list[float]) -> AppTest:
    """The page on the batch ``folder`` whose results are ``table`` with these corrupted metrics,
    as a batch run with the validity check (the tests run theirs without it, and the atlas then
    counts every task)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from circuitviz.measure.task_validity import CHECK_ENV

    index = table.column_names.index("corrupted_metric")
    column = pa.array(corrupted, type=pa.float64())
    pq.write_table(table.set_column(index, "corrupted_metric", column), folder / "results.parquet")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps(dict(manifest, task_check=True)))
    monkeypatch.setenv(CHECK_ENV, "on")
    return _dataset(folder)


def test_a_batch_folder_shows_its_atlas_and_opens_a_prompt_in_explore(batch_folder):
    at = _dataset(batch_folder)
    assert not at.exception, at.exception
    batch = atlas.BatchTable.load(batch_folder)
    label = batch.labels[0]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["prompts"] == "6"
    # the batch's own model is named (the sidebar's is the app's, for new runs)
    assert markdown_text(ui.model_line(batch.manifest, EMBEDDED_MODEL)) in [c.value for c in at.caption]
    assert metrics["CPR (MIB)"] == f"{atlas.mib_scores(batch, label)['cpr']:.3f}"
    curves = json.loads(at.get("plotly_chart")[0].proto.spec)
    bands = atlas.curve_bands(batch, label)
    mean_line = next(t for t in curves["data"] if t.get("name") == ui.short_labels(batch.labels)[label])
    assert mean_line["y"] == pytest.approx([b["mean"] for b in bands])
    assert any("consensus" in (t.get("name") or "") for t in curves["data"])
    budget = at.session_state["dataset.budget"]
    assert budget == 60  # the kept budget nearest 100 edges
    frequency = atlas.edge_frequency(atlas.circuit_matrix(batch, label, budget))
    consensus = atlas.consensus_edges(atlas.circuit_matrix(batch, label, budget), 0.5)
    assert any(f"**{len(consensus):,} edges** are in at least 50%" in m.value for m in at.markdown)
    assert graph_data(at), "no consensus graph"
    edges = at.dataframe[1].value
    assert edges["share of prompts"].iloc[0] == pytest.approx(frequency.max())
    prompts = at.dataframe[-1].value
    assert list(prompts["id"]) == [f"p{i}" for i in range(6)]
    rows = batch.rows(label).to_pylist()
    # the CSV download writes column names: each figure of the budget's circuits names the budget
    assert list(prompts["NDF at a budget of 60 edges"]) == pytest.approx([row["ndf"][3] for row in rows])
    assert "edges kept at a budget of 60 edges" in prompts and "cluster at a budget of 60 edges" in prompts
    # one click on a row opens that prompt on Explore, which finds the batch's result in the store
    at.session_state["dataset.budget"] = budget = 10  # not the result's own opening budget
    at.run()
    at.session_state["dataset.prompts.0.False"] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    # the one shared state holds the row's prompt and its own answer, foil and corrupted prompt
    assert at.session_state["prompt"] == rows[2]["clean"] and at.session_state["answer"] == " John"
    assert at.session_state["foil"] == " Mary" and at.session_state["corrupted"] == rows[2]["corrupted"]
    assert at.session_state["inputs_for"] == rows[2]["clean"]  # Explore proposes nothing over them
    assert at.session_state["budgets"] == "4,10,25,60" and at.session_state["method"] == "eap-ig"
    opened = at.session_state["results"]["eap-ig"]
    assert opened.task.clean == rows[2]["clean"] and opened.config == {"ig_steps": 3}
    assert opened.timings["batch_tasks"] == 4  # the batch's own result, read from the store
    assert [point.ndf for point in opened.curve] == pytest.approx(rows[2]["ndf"])
    # at the page's budget, whose NDF and edges the row showed (it opened at its own readable one)
    assert at.session_state["budget"] == budget


def test_a_folder_that_is_no_batch_is_one_sentence(tmp_path, monkeypatch):
    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", _refuse)
    folder = tmp_path / "**runs** [a](https:" / "example.com)"  # a typed name is shown as typed
    folder.mkdir(parents=True)
    typed = str(folder).replace("https:/", "https://")  # the same folder, as a user may type it
    at = _dataset(typed)
    assert not at.exception
    # the folder escaped where it is text, and quoted for a shell inside the command's code span
    assert [e.value for e in at.error] == [
        f"{markdown_text(repr(typed))} holds no results\\.parquet; run `circuitviz batch --out '{typed}'` "
        "first\\."
    ]


def test_stored_atlases_open_without_a_model(monkeypatch, tmp_path):
    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", _refuse)
    stored = ui.stored_atlases()
    assert {"ioi", "arithmetic", "mmlu"} <= set(stored)
    for name, folder in stored.items():
        at = _dataset(source=name)
        assert not at.exception, at.exception
        batch = atlas.BatchTable.load(folder)
        assert {m.label: m.value for m in at.metric}["prompts"] == f"{len(batch.rows(batch.labels[0])):,}"
        assert batch.manifest["model"]["model_id"] == "gemma-3-270m"
        assert graph_data(at) and len(at.dataframe[-1].value) == len(batch.rows(batch.labels[0]))


def test_the_page_names_the_model_the_batch_ran_on():
    """A SmolLM2-135M batch was read under a sidebar naming Gemma-3-270M, and nothing on the page
    named the batch's model; a prompt opened in Explore loads the batch's, as the line says."""
    smol = {"model": {"model_id": "smollm2-135m", "device": "cpu"}}
    assert ui.model_line(smol, EMBEDDED_MODEL) == (
        "This batch ran on 'smollm2-135m' on cpu. The sidebar's model, 'gemma-3-270m', is for new "
        "runs; a prompt opened in Explore from this batch loads 'smollm2-135m'."
    )
    assert ui.model_line(smol, "smollm2-135m") == "This batch ran on 'smollm2-135m' on cpu."
    # a model the app cannot load: its prompts open nowhere (explore_problem says so), no promise
    assert ui.model_line({"model": {"model_id": "my-lab/model"}}, EMBEDDED_MODEL) == (
        "This batch ran on 'my-lab/model'."
    )
    # a hand-edited device: cut as a typed text is (8,000 characters were said whole), none if no text
    long = {"model": {"model_id": "smollm2-135m", "device": "<b>x</b>" * 1000}}
    assert ui.model_line(long, "smollm2-135m") == (
        "This batch ran on 'smollm2-135m' on <b>x</b><b>x</b><b>x</b><b>x</b><b>x</b>… (8,000 characters)."
    )
    odd = {"model": {"model_id": "smollm2-135m", "device": [1, 2]}}
    assert ui.model_line(odd, "smollm2-135m") == "This batch ran on 'smollm2-135m'."


def test_a_batch_of_a_model_the_app_cannot_load_does_not_open_in_explore():
    """Explore would fall back to the embedded model; the page says why instead of opening another model."""
    assert ui.explore_problem({"model": {"model_id": EMBEDDED_MODEL}}) is None
    problem = ui.explore_problem({"model": {"model_id": "my-lab/finetune-" + "x" * 200}})
    assert problem.startswith("This batch ran on 'my-lab/finetune-") and "(216 characters)" in problem
    assert len(problem) < 300 and problem.count(". ") == 0


def test_the_atlas_curve_ticks_its_budgets():
    """The band chart's log axis was ticked at the powers of ten only: a chart of budgets 10 to 500
    read '10, 100' (500 unticked), and MMLU's first point, at 21, had no tick. Every budget with a
    point is ticked where its label has room on a 1,000 px page's plot (570 px), as Explore's
    curve is, the slider's budget (the dotted line) first; never plotly's own '2, 5' ticks."""
    from circuitviz.render.atlas import band_figure

    def ticks(budgets, current=None):
        bands = [{"budget": b, "mean": 0.5, "low": 0.4, "high": 0.6, "n": 3} for b in budgets]
        axis = band_figure({"eap-ig": bands}, current_budget=current).layout.xaxis
        assert list(axis.ticktext) == [f"{v:,}" if v % 1000 else f"{v // 1000}k" for v in axis.tickvals]
        return list(axis.ticktext)

    assert ticks((10, 20, 50, 100, 200, 500)) == ["10", "20", "50", "100", "200", "500"]
    # 100 between 50 and 200, and the gaps filled by a power of ten's 2 and 5 times (20, 500)
    assert ticks((10, 50, 200, 1000)) == ["10", "20", "50", "100", "200", "500", "1k"]
    mmlu = ticks((21, 52, 134, 310, 1034, 5347, 10342), current=134)  # the stored MMLU atlas's grid
    # 500 and 2k fill the gaps past 310 (over 80 px); 134 to 310 is too near for a 200
    assert mmlu == ["21", "52", "134", "310", "500", "1,034", "2k", "5,347", "10,342"], mmlu
    # the stored IOI atlas's MIB budgets at 1,000 px: the page's narrower side margins (24 px)
    # give the plot 572 px, and 2,068 and 5,171, left unticked on the 460 px it had, have room
    ioi = ticks((10, 20, 51, 103, 206, 517, 1034, 2068, 5171, 10342), current=103)
    assert ioi == ["10", "20", "51", "103", "206", "517", "1,034", "2,068", "5,171", "10,342"], ioi
    # where labels would meet, the slider's budget is kept before its neighbours
    crowded = [20 + 20 * i for i in range(24)]
    assert "260" in ticks(crowded, current=260) and "260" not in ticks(crowded)


def test_one_prompt_draws_no_interval_and_says_so():
    """A batch of one prompt: the atlas gives its mean as both limits, and the legend named a band
    of no width while the hover read '95% interval 0.247 to 0.247, 1 prompts'."""
    from circuitviz.render.atlas import band_figure

    one = [{"budget": b, "mean": 0.5, "low": 0.5, "high": 0.5, "n": 1} for b in (10, 100)]
    (line,) = band_figure({"eap-ig": one}).data
    assert line.name == "eap-ig" and line.customdata[0][0] == "1 prompt: no interval"
    three = [dict(b, low=0.4, high=0.6, n=3) for b in one]
    band, line = band_figure({"eap-ig": three}).data
    assert band.name == "eap-ig: 95% interval of the mean"
    assert line.customdata[0][0] == "95% interval 0.400 to 0.600, 3 prompts"


def test_a_series_label_is_a_value_of_the_hover_never_its_template():
    """A series label holds its settings, read from the batch folder: in the hover's template a
    '%{y}' in it was filled in by plotly (a number where the label's text stood); it is a value the
    template reads now, escaped as HTML."""
    from circuitviz.render.atlas import band_figure

    label = "eap-ig (note=%{y} <b>)"
    (line,) = band_figure({label: [{"budget": 10, "mean": 0.5, "low": 0.5, "high": 0.5, "n": 1}]}).data
    assert "%{y}" not in line.hovertemplate.replace("%{y:.3f}", "")
    assert line.hovertemplate.startswith("%{customdata[1]}<br>")
    assert line.customdata[0][1] == "eap-ig (note=%{y} &lt;b&gt;)"


def test_a_stored_row_the_validity_check_refuses_says_so_beside_it(monkeypatch, tmp_path):
    """Tasks of an atlas built before the check that fail it (three of the IOI atlas, weakened in a
    copy: the stored one was built again on 2026-12-05 and has none left): their rows carry their
    stored metrics, so the table says which tasks the check now refuses, in the check's own
    sentence. The arithmetic atlas, built again with ``--generate`` drawing tasks until they pass,
    holds none (it held 157 of 200 before)."""
    from weakened_atlas import weakened_atlas

    from circuitviz.measure.task_validity import CHECK_ENV

    monkeypatch.setenv(CHECK_ENV, "on")
    batch = atlas.BatchTable.load(weakened_atlas(tmp_path / "ioi"))
    rows = batch.rows(batch.labels[0]).to_pylist()
    found = [ui.refusal(row) for row in rows]
    refused = [i for i, sentence in enumerate(found) if sentence]
    assert [rows[i]["task_id"] for i in refused] == ["ioi-00085", "ioi-00100", "ioi-00106"]
    first = rows[refused[0]]
    assert found[refused[0]].startswith(
        f"The corruption lowers the logit difference of {first['answer']!r} by only"
    )
    assert (
        f"{first['clean_metric']:+.3f} clean, {first['corrupted_metric']:+.3f} corrupted" in found[refused[0]]
    )
    arithmetic = atlas.BatchTable.load(ui.stored_atlases()["arithmetic"])
    assert not any(ui.refusal(row) for row in arithmetic.rows(arithmetic.labels[0]).to_pylist())


def test_the_figures_are_over_the_tasks_that_pass_the_check(batch_folder, monkeypatch):
    """A stored batch where the check now refuses two tasks: the page says so in one sentence and
    every figure it shows equals the atlas's over the four passing tasks alone."""
    import pyarrow.parquet as pq

    table = pq.read_table(batch_folder / "results.parquet")
    ids = table.column("task_id").to_pylist()
    clean = table.column("clean_metric").to_pylist()
    # the tiny model's tasks: two refused (the corruption raising the metric), the others passing
    raised = [c + 0.5 if i in ("p0", "p3") else c - 2.0 for i, c in zip(ids, clean)]
    at = _checked(batch_folder, monkeypatch, table, raised)
    assert not at.exception, at.exception
    batch = atlas.BatchTable.load(batch_folder)
    label = batch.labels[0]
    passing = batch.rows(label, passing=True)
    assert passing.column("task_id").to_pylist() == ["p1", "p2", "p4", "p5"]
    assert any(
        m.value.startswith(
            "4 of 6 stored tasks pass the validity check; the figures are over those (2 refused: "
            "2 because the corruption raises the answer's logit difference)"
        )
        for m in at.markdown
    )
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["prompts"] == "4"
    scores = atlas.mib_scores(batch, label)
    assert scores["n_prompts"] == 4 and metrics["CPR (MIB)"] == f"{scores['cpr']:.3f}"
    curves = json.loads(at.get("plotly_chart")[0].proto.spec)
    mean_line = next(t for t in curves["data"] if t.get("name") == ui.short_labels(batch.labels)[label])
    ndf = [row["ndf"] for row in passing.to_pylist()]
    assert mean_line["y"] == pytest.approx([sum(v[c] for v in ndf) / 4 for c in range(4)])
    prompts = at.dataframe[-1].value  # the table still lists every task, with the check's sentence
    assert len(prompts) == 6 and (prompts["validity check"] != "passes").sum() == 2
    # one switch lists the refused ones alone (three among the IOI atlas's 200 were found only by
    # scrolling), and a click on one of them opens that one
    at.toggle(key="dataset.refused").set_value(True).run()
    refused = at.dataframe[-1].value
    assert list(refused["id"]) == ["p0", "p3"] and (refused["validity check"] != "passes").all()
    at.session_state["dataset.prompts.0.True"] = {"selection": {"rows": [1], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    p3 = next(row for row in batch.rows(label, done=False).to_pylist() if row["task_id"] == "p3")
    assert at.session_state["prompt"] == p3["clean"]


def test_the_clusters_sentence_of_prompts_whose_circuits_are_alike():
    """Three prompts of one circuit at the budget read "1 clusters (the number chosen) of 3 prompts
    ... Silhouette 0.00" under 'auto' (seen in Chromium): k-medoids found no second circuit, and
    with 3 prompts 2 is the only number 'auto' can try."""
    alike = {"k": 1, "silhouette": 0.0, "sizes": [3], "tried": {2: 0.0}}
    assert ui.clusters_sentence(alike, 60, auto=True) == (
        "1 cluster of 3 prompts: at budget 60 their circuits are all the same, so there are no more "
        "groups to find."
    )
    two = {"k": 2, "silhouette": 0.5, "sizes": [3, 2], "tried": {3: 0.5}}
    assert "are only 2 different ones" in ui.clusters_sentence(two, 60, auto=False)
    only = {"k": 2, "silhouette": 0.3, "sizes": [2, 1], "tried": {2: 0.3}}
    assert ui.clusters_sentence(only, 60, auto=True).startswith(
        "2 clusters (the only number 3 prompts allow) of 2, 1 prompts"
    )


def test_the_clusters_sentence_says_when_the_groups_are_not_distinct():
    """A silhouette of 0.09 (the stored arithmetic atlas at 103 edges) is no finding of groups:
    the sentence says so; one above about 0.25 is called distinct; a chosen k is not 'the best'."""
    weak = {
        "k": 2,
        "silhouette": 0.09,
        "sizes": [35, 8],
        "tried": {2: 0.09, 3: 0.05, 4: 0.04, 5: 0.03, 6: 0.02},
    }
    text = ui.clusters_sentence(weak, 103, auto=True)
    assert text.startswith("2 clusters (the number of 2 to 6 with the highest silhouette) of 35, 8 prompts")
    assert (
        "at budget 103" in text
        and "0.09, below about 0.25" in text
        and "not fall into distinct groups" in text
    )
    strong = dict(weak, silhouette=0.41, tried={2: 0.41})  # k 2 chosen (k is the one tried)
    text = ui.clusters_sentence(strong, 1034, auto=False)
    assert "(the number chosen)" in text and "at budget 1,034" in text
    assert "Silhouette 0.41: distinct groups" in text and "not fall" not in text


@pytest.mark.parametrize(
    "change, says",
    [  # each raised on the page before (found by mutating a real manifest at random)
        (lambda m: m.update(n_edges="x"), "its n_edges is 'x', but its graph has 46 edges"),
        (lambda m: m["model"].pop("model_id"), "its model's model_id is None"),
        (lambda m: m["model"]["graph"].update(n_heads=0), "not n_layers and n_heads as whole numbers from 1"),
        (lambda m: m.update(budgets=None), "its budgets are None"),
        (lambda m: m.update(budgets=[-1, 10]), "its budgets are [-1, 10]"),  # 0 is a budget the runner takes
        (lambda m: m.update(consensus=-1), "its consensus is -1"),
    ],
)
def test_a_damaged_manifest_is_one_sentence_naming_its_field(batch_folder, change, says):
    path = batch_folder / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    change(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(atlas.AtlasError, match="manifest.json is not a batch's manifest") as refused:
        atlas.BatchTable.load(batch_folder)
    assert says in str(refused.value)
    at = _dataset(batch_folder)
    assert not at.exception, at.exception
    assert len(at.error) == 1 and "is not a batch's manifest" in at.error[0].value.replace("\\", "")


def test_a_manifest_budget_of_0_is_one_the_runner_takes():
    from circuitviz.batch.folder_check import manifest_problem

    manifest = {"model": {"model_id": "m", "graph": {"n_layers": 2, "n_heads": 2}}, "budgets": [0, 10]}
    assert manifest_problem(manifest) is None  # 'batch --budgets 0,10' writes it; it was refused
    assert "its budgets are [-1, 10]" in manifest_problem(dict(manifest, budgets=[-1, 10]))


def test_damaged_rows_are_named_and_left_out_and_the_rest_is_shown(batch_folder):
    """A row the atlas cannot read (an edited or truncated table, a row of another model's batch)
    raised on the page (a reshape, an index out of range); now it is named and left out."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = batch_folder / "results.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[1]["ndf"] = rows[1]["ndf"][:1]  # one value for four budgets
    rows[3]["circuit_edges"] = [10**6] * len(rows[3]["circuit_edges"])  # edges the graph lacks
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    batch = atlas.BatchTable.load(batch_folder)
    assert batch.table.num_rows == len(rows) - 2
    (note,) = batch.notes
    assert note.startswith("2 of the 6 rows of results.parquet are damaged")
    assert "row 2 ('p1'): its ndf does not hold one value per budget" in note
    assert "row 4 ('p3'): its circuit_edges are not edges of the graph's 46" in note
    assert atlas.consensus_bands(batch, batch.labels[0]) == []  # the batch's consensus counted them
    at = _dataset(batch_folder)
    assert not at.exception, at.exception
    assert [w.value for w in at.warning if "damaged" in w.value] == [markdown_text(note)]
    for row in rows:
        row["ndf"] = row["ndf"][:1]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    with pytest.raises(atlas.AtlasError, match="Every row of results.parquet is damaged"):
        atlas.BatchTable.load(batch_folder)


def test_a_series_is_named_by_what_sets_it_apart():
    """The MMLU atlas's one series is 'bon (anchor_budgets=[], base_method=eap-ig, ...)': at
    1,000 px the legend cut it before the words that tell it from its consensus."""
    long = "bon (anchor_budgets=[], base_method=eap-ig, ig_steps=2, seed=0)"
    assert ui.short_labels([long]) == {long: "bon"}
    two = ["eap-ig (ig_steps=20)", "eap-ig (ig_steps=5)", "eap (no_settings=1)"]
    assert ui.short_labels(two) == {
        "eap-ig (ig_steps=20)": "eap-ig (ig_steps=20)",
        "eap-ig (ig_steps=5)": "eap-ig (ig_steps=5)",
        "eap (no_settings=1)": "eap",
    }
    assert ui.short_labels(["x (a=1, b=2)", "x (a=1, b=3)"]) == {
        "x (a=1, b=2)": "x (b=2)",
        "x (a=1, b=3)": "x (b=3)",
    }


def test_a_small_batch_of_a_typed_file_says_what_it_left_out_and_shows_its_ids_as_typed(batch_folder):
    """A batch of two prompts from a file with two lines that were no tasks: the page names those
    lines (it said nothing of them), shows an id holding markdown as typed where its circuit is
    empty, says that two prompts do not cluster (it drew '1 clusters (the number chosen)' with a
    silhouette of 0 for one prompt), and counts one failed prompt as one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = batch_folder / "results.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()[:3]
    rows[0]["task_id"] = "**p0** [a](http://x)"
    rows[0]["edges_kept"] = [0, *rows[0]["edges_kept"][1:]]  # nothing kept at budget 4
    rows[2].update(status="failed", error="The answer is 2 tokens, not one.")
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    manifest = json.loads((batch_folder / "manifest.json").read_text())
    manifest["dataset"] = {
        "source": "/data/tasks.jsonl",
        "problems": ["line 4 is not valid JSON (Expecting value at column 1).", "line 5 has no 'answer'."],
    }
    (batch_folder / "manifest.json").write_text(json.dumps(manifest))
    assert ui.left_out(manifest)[0] == (
        "2 lines of tasks.jsonl were left out before the batch ran, as not tasks: no figure on this "
        "page is of them."
    )
    at = _dataset(batch_folder)
    at.session_state["dataset.budget"] = 4
    at.run()
    assert not at.exception, at.exception
    labels = [e.label for e in at.expander]
    assert markdown_text(ui.left_out(manifest)[0]) in labels and "1 prompt failed" in labels
    assert any(m.value == markdown_text("line 5 has no 'answer'.") for m in at.markdown)
    # the failed prompt's reason whole (the table's column cut it at 1,000 px)
    assert any(
        m.value == markdown_text(f"{rows[2]['task_id']}: The answer is 2 tokens, not one.")
        for m in at.markdown
    )
    captions = [c.value for c in at.caption]
    assert any(
        c.startswith(markdown_text("**p0** [a](http://x) keeps no edge at budget 4")) for c in captions
    )
    assert "Clustering needs at least 3 prompts with a circuit at budget 4; this batch has 2." in captions
    assert any("of the 2 prompts' circuits at budget 4" in m.value for m in at.markdown)


@pytest.mark.parametrize("keep", [1, 6])
def test_a_batch_without_a_consensus_ndf_says_why(batch_folder, keep):
    """One prompt (its consensus is its own circuit) or a batch run with --consensus 0: the page
    drew no dashed line and no consensus NDF, and said nothing of either."""
    import pyarrow.parquet as pq

    path = batch_folder / "results.parquet"
    pq.write_table(pq.read_table(path).slice(0, keep), path)
    (batch_folder / "consensus.parquet").unlink(missing_ok=True)
    manifest = json.loads((batch_folder / "manifest.json").read_text())
    (batch_folder / "manifest.json").write_text(json.dumps(dict(manifest, consensus=None)))
    at = _dataset(batch_folder)
    assert not at.exception, at.exception
    captions = [c.value for c in at.caption]
    if keep == 1:
        assert "One prompt's consensus is its own circuit: the batch measured no NDF of its own." in captions
        # it read '... in at least 50% of the one prompt's circuit ...; a Jaccard similarity of 1.00 on average'
        assert any(m.value.startswith("One prompt: its own circuit at budget") for m in at.markdown)
        assert not any("Jaccard similarity" in m.value for m in at.markdown)
    else:
        assert any(c.startswith("The batch measured no consensus circuit's NDF") for c in captions)


def test_the_atlas_curve_spans_0_to_1_at_least():
    """A curve near 0 (one MMLU question with EAP on Gemma-3-270M: mean NDF 5e-7 at 20 edges, 0 at
    100) filled the chart's height, ticked '0, 100n, ... 500n' as if it rose to something; the axis
    spans 0 to 1 at least (as Explore's curve), and further where a figure lies outside."""
    from circuitviz.render.atlas import band_figure

    near = [{"budget": b, "mean": m, "low": m, "high": m, "n": 1} for b, m in ((20, 5e-7), (100, 0.0))]
    low, high = band_figure({"eap": near}).layout.yaxis.range
    assert low < 0 < 1 < high < 1.1
    over = [
        {"budget": 10, "mean": 1.3, "low": 1.1, "high": 1.5, "n": 3},
        {"budget": 100, "mean": -0.2, "low": -0.4, "high": 0.0, "n": 3},
    ]
    low, high = band_figure({"eap": over}).layout.yaxis.range
    assert low < -0.4 and high > 1.5


def test_the_prompts_cpr_is_said_as_the_batch_computes_it(batch_folder):
    """The Prompts tab said a prompt's CPR was 'MIB's area under the prompt's NFS curve over the
    share of edges kept, 0 to 100 %'; the row's CPR is that area over the span its circuits cover,
    divided by the span (core.curves.cpr): with budgets of 4 to 60 edges no curve reaches 100 %."""
    from circuitviz.core.curves import area_under_curve

    at = _dataset(batch_folder)
    assert not at.exception, at.exception
    said = " ".join(c.value for c in at.caption)
    assert "0 to 100 %" not in said
    assert "divided by the span they cover (the curve's mean height, as discover gives it" in said
    batch = atlas.BatchTable.load(batch_folder)
    row, n_edges = batch.rows(batch.labels[0]).to_pylist()[0], batch.n_edges
    fractions = [kept / n_edges for kept in row["edges_kept"]]
    assert row["cpr_nfs"] == pytest.approx(area_under_curve(fractions, row["nfs"]))


def test_the_atlas_curves_legend_sits_under_the_axis_title_with_room_of_its_own():
    """Four methods on a page batch (twelve legend entries: band, mean, consensus each) at y -0.2
    inside 400 px lay over 'edge budget (log scale)' and scrolled, at 1,000 px (Chromium)."""
    from circuitviz.render.atlas import band_figure

    bands = [{"budget": b, "mean": 0.5, "low": 0.4, "high": 0.6, "n": 3} for b in (20, 100)]
    consensus = [dict(b, n_edges=10, threshold=0.5) for b in bands]
    names = ["eap", "eap-gp", "eap-ig", "eap-ig-activations"]
    figure = band_figure(dict.fromkeys(names, bands), dict.fromkeys(names, consensus))
    assert len([t for t in figure.data if t.name]) == 12
    assert figure.layout.legend.yref == "container" and figure.layout.legend.yanchor == "bottom"
    assert figure.layout.height == 400 + 18 * 12


def test_a_one_task_batch_the_check_refuses_says_so_in_the_singular(batch_folder, monkeypatch):
    """'None of the 1 stored tasks of eap-ig passes the validity check' (a one-prompt batch)."""
    import pyarrow.parquet as pq

    table = pq.read_table(batch_folder / "results.parquet").slice(0, 1)
    raised = [c + 0.5 for c in table.column("clean_metric").to_pylist()]  # the corruption raises it
    at = _checked(batch_folder, monkeypatch, table, raised)
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning if "validity check" in w.value]
    assert (
        warning.startswith("The one stored task of ") and " fails the validity check, so the atlas" in warning
    )


def test_the_tasks_whose_answer_the_model_barely_predicts_are_named(batch_folder):
    """The batch's manifest names the tasks whose answer the model barely predicts (discover's
    check); the page lists them under one sentence, each answer as typed (never markup)."""
    from circuitviz.batch.unlikely import unlikely_summary

    manifest = json.loads((batch_folder / "manifest.json").read_text())
    assert "unlikely_answers" in manifest["dataset"]  # the batch wrote the record
    manifest["dataset"]["unlikely_answers"] = {
        "threshold": 0.05,
        "tasks": [
            {
                "index": 1,
                "task_id": "p1",
                "answer": " **Tom**",
                "chance": 0.001,
                "top": "\n",
                "top_chance": 0.2,
            }
        ],
    }
    (batch_folder / "manifest.json").write_text(json.dumps(manifest))
    sentence, lines = unlikely_summary(manifest)
    assert sentence.startswith(
        "The model gives the answer under 5% after the prompt, and not as its most likely next token, in 1 of 6 tasks:"
    )
    assert lines == ["p1: ' **Tom**' 0.1% (top '\\n' 20.0%)"]
    at = _dataset(batch_folder)
    assert not at.exception, at.exception
    assert markdown_text(sentence) in [e.label for e in at.expander]
    assert any(m.value == markdown_text(lines[0]) for m in at.markdown)


@pytest.mark.parametrize(
    "record, says",
    [  # each raised on the page (Python's own words), or read a missing chance as 0.0%
        ({"threshold": "x", "tasks": []}, 'its threshold is "x", not a share from 0 to 1'),
        ([1], "it is [1], not an object with a threshold and tasks"),
        ({"threshold": 0.05, "tasks": {"a": 1}}, 'its tasks are {"a": 1}, not a list'),
        ({"threshold": 0.05, "tasks": ["p1"]}, 'its task 1 is "p1", not an object'),
        (
            {
                "threshold": 0.05,
                "tasks": [{"task_id": "p1", "answer": " Tom", "top": " a", "top_chance": 0.2}],
            },
            "its task 1's chance is null, not a share from 0 to 1",
        ),
        (
            {"tasks": [{"task_id": 7, "answer": " Tom", "chance": 0.01, "top": " a", "top_chance": 0.2}]},
            "its task 1's task_id is 7, not text",
        ),
    ],
)
def test_an_unreadable_unlikely_answers_record_is_one_sentence(batch_folder, record, says):
    """The manifest's dataset.unlikely_answers (the tasks whose answer the model barely predicts)
    is read from a file the user names: a record of the wrong kinds raised on the page ("could not
    convert string to float: 'x'") where every other field of the manifest is one sentence."""
    from circuitviz.batch.unlikely import unlikely_problem, unlikely_summary

    manifest = json.loads((batch_folder / "manifest.json").read_text())
    manifest["dataset"]["unlikely_answers"] = record
    (batch_folder / "manifest.json").write_text(json.dumps(manifest))
    problem = unlikely_problem(manifest)
    assert problem == (
        f"The manifest's dataset.unlikely_answers cannot be read ({says}), so the tasks whose answer the "
        "model barely predicts are not listed here; running the batch again on its folder writes it afresh."
    )
    assert unlikely_summary(manifest) is None
    at = _dataset(batch_folder)
    assert not at.exception, at.exception
    assert markdown_text(problem) in [w.value for w in at.warning]


def test_a_long_task_id_in_the_unlikely_answers_is_cut():
    from circuitviz.batch.unlikely import unlikely_problem, unlikely_summary

    entry = {"task_id": "q" * 500, "answer": " Tom", "chance": 0.01, "top": " a", "top_chance": 0.2}
    manifest = {"dataset": {"n_tasks": 2, "unlikely_answers": {"threshold": 0.05, "tasks": [entry]}}}
    assert unlikely_problem(manifest) is None
    assert unlikely_summary(manifest)[1] == [f"{'q' * 40}… (500 characters): ' Tom' 1.0% (top ' a' 20.0%)"]
