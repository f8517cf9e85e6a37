"""The circuit atlas against planted clusters and brute-force recomputation."""

import math
from pathlib import Path

import numpy
import pytest

from circuitviz.batch import atlas, task_check
from circuitviz.batch.planted import planted_batch


@pytest.fixture(scope="module")
def planted():
    return planted_batch(sizes=(36, 24), seed=1)


def _sets(matrix):
    rows = matrix.members.tolil().rows
    return [set(row) for row in rows]


def test_circuit_matrix_holds_each_prompts_circuit(planted):
    batch = planted.batch
    label = batch.labels[0]
    assert label == "eap-ig (ig_steps=20)"
    matrix = atlas.circuit_matrix(batch, label, 51)
    sets = _sets(matrix)
    assert all(len(s) == 51 for s in sets)
    for cluster, members in zip(planted.labels, sets):
        assert set(planted.shared) <= members  # the shared edges come first in every ranking
        assert set(planted.cores[cluster]) <= members  # then the cluster's 40, then 3 random ones
        assert not members & set(planted.cores[1 - cluster])
    with pytest.raises(atlas.AtlasError, match="budget 2068 is not one"):
        atlas.circuit_matrix(batch, label, 2068)


def test_frequency_consensus_and_stability(planted):
    batch = planted.batch
    matrix = atlas.circuit_matrix(batch, batch.labels[0], 103)
    sets = _sets(matrix)
    frequency = atlas.edge_frequency(matrix)
    for edge in list(planted.shared) + list(planted.cores[0][:5]) + list(planted.cores[1][:5]) + [0, 1, 2]:
        assert frequency[edge] == pytest.approx(sum(edge in s for s in sets) / len(sets))
    consensus = set(atlas.consensus_edges(matrix, 0.5).tolist())
    assert consensus == {e for e in range(batch.n_edges) if frequency[e] >= 0.5}
    # at 103 edges every prompt holds all of its cluster's core: the larger cluster's core is in
    # 60 % of circuits, the smaller one's in 40 %
    assert set(planted.shared) | set(planted.cores[0]) <= consensus
    assert not consensus & set(planted.cores[1])
    stability = atlas.edge_stability(matrix, 0.5, resamples=40)
    assert stability[planted.shared].min() == 1.0
    assert stability[planted.cores[1]].max() < 0.2
    noise = numpy.setdiff1d(numpy.arange(batch.n_edges), numpy.concatenate([planted.shared, *planted.cores]))
    assert stability[noise].max() == 0.0


def test_jaccard_matches_sets(planted):
    matrix = atlas.circuit_matrix(planted.batch, planted.batch.labels[0], 20)
    sets = _sets(matrix)
    similarity = atlas.jaccard(matrix.members[:7], matrix.members[5:12])
    for i in range(7):
        for j in range(7):
            a, b = sets[i], sets[5 + j]
            assert similarity[i, j] == pytest.approx(len(a & b) / len(a | b))


def test_clusters_recover_the_planted_groups(planted):
    batch = planted.batch
    matrix = atlas.circuit_matrix(batch, batch.labels[0], 103)
    found = atlas.cluster_prompts(matrix, max_k=5, seed=0)
    assert found.k == 2 and found.sizes == [36, 24]
    assert numpy.array_equal(found.labels, planted.labels)  # cluster 0 is the larger one
    assert found.silhouette > 0.2 and max(found.tried, key=found.tried.get) == 2
    for cluster in range(2):
        assert set(found.consensus[cluster].tolist()) == set(planted.shared) | set(planted.cores[cluster])
    assert found.similarity[0, 0] > found.similarity[0, 1] < found.similarity[1, 1]
    # within a cluster: the mean over pairs of two prompts, never a prompt with itself (an audit: a
    # one-prompt cluster read 1.00, the darkest cell, and every diagonal was raised)
    inside = numpy.flatnonzero(found.labels == 1)
    pairs = atlas.jaccard(matrix.members[inside], matrix.members[inside])
    expected = pairs[~numpy.eye(len(inside), dtype=bool)].mean()
    assert found.similarity[1, 1] == pytest.approx(expected, abs=1e-6) and expected < pairs.mean()
    coords = atlas.circuit_map(matrix, landmarks=25)
    centres = [coords[planted.labels == c].mean(0) for c in range(2)]
    spread = max(numpy.linalg.norm(coords[planted.labels == c] - centres[c], axis=1).mean() for c in range(2))
    assert numpy.linalg.norm(centres[0] - centres[1]) > 2 * spread


def test_curve_bands_and_mib_scores_recomputed(planted):
    from scipy import stats  # here: 0.6 CPU s of import every test worker paid at collection

    batch = planted.batch
    label = batch.labels[0]
    rows = batch.rows(label).to_pylist()
    bands = atlas.curve_bands(batch, label)
    budgets = rows[0]["budgets"]
    for column, band in enumerate(bands):
        values = numpy.array([row["ndf"][column] for row in rows])
        half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
        assert band["budget"] == budgets[column]
        assert band["mean"] == pytest.approx(values.mean())
        assert (band["low"], band["high"]) == pytest.approx((values.mean() - half, values.mean() + half))
    scores = atlas.mib_scores(batch, label)
    assert scores["mib_grid"]  # the planted budgets are MIB's ten fractions of 10,342 edges
    clean = numpy.mean([row["clean_metric"] for row in rows])
    corrupted = numpy.mean([row["corrupted_metric"] for row in rows])
    f = [
        (numpy.mean([row["metric_values"][c] for row in rows]) - corrupted) / (clean - corrupted)
        for c in range(len(budgets))
    ]
    x = [b / batch.n_edges for b in budgets]
    cpr = sum((x[i + 1] - x[i]) * (f[i] + f[i + 1]) / 2 for i in range(len(x) - 1))
    cmd = sum((x[i + 1] - x[i]) * (abs(1 - f[i]) + abs(1 - f[i + 1])) / 2 for i in range(len(x) - 1))
    assert scores["faithfulness"] == pytest.approx(f)
    assert (scores["cpr"], scores["cmd"]) == pytest.approx((cpr, cmd))
    assert atlas.mib_budgets(10342) == [10, 20, 51, 103, 206, 517, 1034, 2068, 5171, 10342]


def test_the_stored_atlases_say_which_tasks_todays_check_refuses(monkeypatch, tmp_path):
    """An atlas built before the meaningful-task check keeps tasks it now refuses; the check is
    read off the metrics the batch stored (no model), so the Dataset page shows it beside them (on
    a copy of the IOI atlas whose three tasks are weakened: the stored one, built again since,
    has none left)."""
    from weakened_atlas import WEAKENED, weakened_atlas

    from circuitviz.batch.atlas import BatchTable, task_refusals
    from circuitviz.measure.task_validity import CHECK_ENV, MIN_GAP

    monkeypatch.setenv(CHECK_ENV, "on")  # the suite turns the check off for its random models
    root = Path(__file__).resolve().parent.parent / "assets" / "atlas"
    ioi = BatchTable.load(weakened_atlas(tmp_path / "ioi"))
    rows = ioi.rows(ioi.labels[0])
    refusals = task_refusals(rows)
    by_id = dict(zip(rows.column("task_id").to_pylist(), refusals))
    assert [task for task, why in by_id.items() if why] == list(WEAKENED)
    assert "by only 0.5 (" in by_id["ioi-00085"]
    gaps = [
        c - k
        for c, k in zip(rows.column("clean_metric").to_pylist(), rows.column("corrupted_metric").to_pylist())
    ]
    assert [why is not None for why in refusals] == [gap < MIN_GAP["logit_diff"] for gap in gaps]
    for drawn_valid in ("mmlu", "arithmetic", "ioi"):  # drawn until the check passes (since 2026-12-05)
        batch = BatchTable.load(root / drawn_valid)
        assert not any(task_refusals(batch.rows(batch.labels[0])))


def _with_refused(batch, refused):
    """The batch with the rows ``refused`` (positions) made tasks today's check refuses: their
    corrupted metric raised above the clean one (the arithmetic atlas's commonest case)."""
    import pyarrow as pa

    table = batch.table
    clean = table.column("clean_metric").to_pylist()
    corrupted = [
        c + 0.5 if i in refused else k
        for i, (c, k) in enumerate(zip(clean, table.column("corrupted_metric").to_pylist()))
    ]
    index = table.column_names.index("corrupted_metric")
    return table.set_column(index, "corrupted_metric", pa.array(corrupted, type=pa.float64()))


def test_every_aggregate_is_over_the_tasks_that_pass_the_check(planted, monkeypatch):
    """A stored batch holding tasks the check refuses: its curves, MIB scores, circuits, consensus
    and clusters equal those of a batch of the passing rows alone, and it says how many pass."""
    import pyarrow as pa

    from circuitviz.batch.task_check import validity_sentence
    from circuitviz.measure.task_validity import CHECK_ENV

    monkeypatch.setenv(CHECK_ENV, "on")
    source = planted.batch
    refused = set(range(0, source.table.num_rows, 4))
    table = _with_refused(source, refused)
    mixed = atlas.BatchTable(table=table, manifest=source.manifest)
    alone = atlas.BatchTable(
        table=table.filter(pa.array([i not in refused for i in range(table.num_rows)])),
        manifest=source.manifest,
    )
    label = mixed.labels[0]
    assert mixed.rows(label).num_rows == 60 and alone.rows(label).num_rows == 45
    assert (
        mixed.rows(label, passing=True).column("task_id").to_pylist()
        == alone.rows(label).column("task_id").to_pylist()
    )
    for score in ("ndf", "nfs"):
        assert atlas.curve_bands(mixed, label, score) == atlas.curve_bands(alone, label, score)
    assert atlas.mib_scores(mixed, label) == atlas.mib_scores(alone, label)
    assert atlas.mib_scores(mixed, label)["n_prompts"] == 45
    matrix, reference = atlas.circuit_matrix(mixed, label, 51), atlas.circuit_matrix(alone, label, 51)
    assert (matrix.members != reference.members).nnz == 0 and matrix.task_id == reference.task_id
    assert numpy.array_equal(atlas.consensus_edges(matrix, 0.5), atlas.consensus_edges(reference, 0.5))
    assert numpy.array_equal(atlas.cluster_prompts(matrix).labels, atlas.cluster_prompts(reference).labels)
    assert atlas.circuit_matrix(mixed, label, 51, passing=False).n_prompts == 60
    found = task_check.validity(mixed, label)
    assert found == {
        "stored": 60,
        "passing": 45,
        "refused": {"the corruption raises the answer's logit difference": 15},
        "checked": True,
    }
    assert validity_sentence(found) == (
        "45 of 60 stored tasks pass the validity check; the figures are over those (15 refused: 15 because "
        "the corruption raises the answer's logit difference)."
    )
    monkeypatch.setenv(CHECK_ENV, "off")  # the check switched off: every stored task counts again
    assert atlas.mib_scores(mixed, label)["n_prompts"] == 60


def test_a_folder_that_cannot_be_read_is_one_whole_sentence(tmp_path):
    """Nothing there, a file, a damaged table: each its own sentence, none cut mid-word."""
    with pytest.raises(atlas.AtlasError, match=r"^Nothing exists at '.*/nowhere'; give the folder"):
        atlas.BatchTable.load(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(atlas.AtlasError, match=r"notes\.txt' is a file; give the folder"):
        atlas.BatchTable.load(tmp_path / "notes.txt")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "results.parquet").write_bytes(b"not parquet")
    (damaged / "manifest.json").write_text("{}")
    with pytest.raises(atlas.AtlasError) as raised:
        atlas.BatchTable.load(damaged)
    sentence = str(raised.value)
    # the file named, with the way out; pyarrow's "Parquet magic bytes not found in footer" was quoted
    assert sentence == (
        f"{str(damaged / 'results.parquet')!r} is damaged (it does not read as a table: cut short, "
        "emptied or another file's bytes); rerun the `circuitviz batch` command that wrote this folder, "
        "which sets it aside and reads its rows from the result store or computes them again, or open "
        "another folder."
    )
    assert "magic" not in sentence and sentence.count(". ") == 0
    (damaged / "results.parquet").unlink()
    atlas.pq.write_table(atlas.SCHEMA.empty_table(), damaged / "results.parquet")
    (damaged / "manifest.json").write_text("{model: 1")  # a hand edit that broke the JSON
    with pytest.raises(atlas.AtlasError) as raised:
        atlas.BatchTable.load(damaged)
    assert str(raised.value) == (
        f"{str(damaged / 'manifest.json')!r} does not read as JSON at line 1; rerun the `circuitviz "
        "batch` command that wrote this folder to write it again, or open another folder."
    )
    typed = "http://evil.example/"  # as typed: a Path read it 'http:/evil.example'
    with pytest.raises(atlas.AtlasError, match="^Nothing exists at 'http://evil.example/'; give"):
        atlas.BatchTable.load(typed)


def test_the_validity_sentence_takes_the_number_it_counts():
    """A batch of one MMLU question, run from the Dataset page, read '1 of 1 stored tasks pass the
    validity check'."""
    from circuitviz.batch.task_check import validity_sentence

    assert (
        validity_sentence({"passing": 1, "stored": 1, "refused": {}})
        == "The stored task passes the validity check."
    )
    assert validity_sentence({"passing": 1, "stored": 3, "refused": {"x": 2}}).startswith(
        "1 of 3 stored tasks passes the validity check; the figures are over those (2 refused: 2 because x)"
    )
    assert (
        validity_sentence({"passing": 3, "stored": 3, "refused": {}})
        == "3 of 3 stored tasks pass the validity check."
    )


def test_a_batch_run_without_the_check_counts_every_task_and_says_so(planted, monkeypatch):
    """A batch run with --no-task-check (the Dataset form's 'skip the validity check') had the atlas
    apply the check anyway: its tasks, run on purpose, were left out of every figure, and a batch of
    a random-weight model's tasks opened as 'None of the N stored tasks passes the validity check'."""
    from circuitviz.measure.task_validity import CHECK_ENV

    monkeypatch.setenv(CHECK_ENV, "on")
    source = planted.batch
    table = _with_refused(source, set(range(0, source.table.num_rows, 4)))
    skipped = atlas.BatchTable(table=table, manifest=dict(source.manifest, task_check=False))
    label = skipped.labels[0]
    assert not skipped.checked and skipped.rows(label, passing=True).num_rows == 60
    found = task_check.validity(skipped, label)
    assert found["passing"] == 60 and found["checked"] is False
    assert task_check.validity_sentence(found) == (
        "The batch ran without the validity check (--no-task-check), so the figures are over all 60 "
        "stored tasks, 15 of which the check refuses (15 because the corruption raises the answer's logit "
        "difference): such a task's circuit explains little."
    )
    assert atlas.BatchTable(table=table, manifest=source.manifest).checked  # a manifest without the key


def test_necessity_measured_on_no_task_is_said_not_averaged(planted, recwarn):
    """A batch of tasks with no corrupted prompt holds NaN necessity (not null): its summary read
    'mean necess.    nan     nan     nan' under a numpy 'All-NaN slice' warning. No band is made of
    it, and the summary says why there is none."""
    import pyarrow as pa

    from circuitviz.batch.command import summary_lines

    table = planted.batch.table
    nan = pa.array([[math.nan] * len(row) for row in table.column("edges_kept").to_pylist()])
    field = table.schema.field("necessity")
    table = table.set_column(table.schema.get_field_index("necessity"), field, nan.cast(field.type))
    empty = pa.array([""] * table.num_rows, type=table.schema.field("corrupted").type)
    table = table.set_column(table.schema.get_field_index("corrupted"), "corrupted", empty)
    batch = atlas.BatchTable(table=table, manifest=planted.batch.manifest)
    label = batch.labels[0]
    assert atlas.curve_bands(batch, label, "necessity") == []
    lines = summary_lines(batch)
    assert not any("nan" in line for line in lines)
    assert (
        "  mean necess.  not measured: no task has a corrupted prompt, and without one this method measures none"
        in lines
    )
    assert not [w for w in recwarn if "All-NaN" in str(w.message)]
