"""Where a circuit over token positions opens, and what discover says under its table of units."""

from __future__ import annotations

from types import SimpleNamespace

from circuitviz.core.curves import CurvePoint
from circuitviz.positions import present


def _result(monkeypatch, rows):
    """A result whose curve is ``rows`` of (budget, units kept, NDF, drawn nodes)."""
    curve = [CurvePoint(budget=b, n_edges=n, metric=0.0, nfs=ndf, ndf=ndf) for b, n, ndf, _ in rows]
    monkeypatch.setattr(present, "nodes_at_budgets", lambda result: {b: nodes for b, _, _, nodes in rows})
    return SimpleNamespace(curve=curve)


def test_an_empty_circuit_is_not_where_the_view_opens(monkeypatch):
    """The IOI prompt's EAP over positions (Gemma-3-270M, budgets 20 to 1,000) opened at budget 20,
    'the most faithful circuit of at most 40 nodes (0 nodes, NDF 0.00)', a blank drawing over 'no
    path from a token to the answer', and discover --html --neuronpedia wrote both files empty;
    budget 50's 20 units were as faithful (NDF 0) and drawn."""
    rows = [
        (20, 0, 0.0, 0),
        (50, 20, 0.0, 14),
        (100, 66, 0.0, 30),
        (200, 157, 0.805, 46),
        (500, 407, 0.9, 90),
    ]
    chosen = present.readable_position_budget(_result(monkeypatch, rows))
    assert chosen.budget == 50 and chosen.n_nodes == 14
    assert "Opened at 50 units, the smallest (14 nodes)" in chosen.reason


# the IOI prompt's EAP-IG over positions on Gemma-3-270M, the default unit budgets (Chromium,
# 2026-12-06): (budget, units kept, NDF, drawn nodes)
IOI_ROWS = [
    (20, 16, 0.0, 12),
    (50, 43, 0.0005, 18),
    (100, 82, 0.0, 27),
    (200, 147, 0.0, 43),
    (500, 454, 0.4284, 114),
    (2000, 1891, 0.566, 282),
    (10000, 9883, 0.8764, 728),
    (20000, 19963, 0.9671, 907),
    (100000, 100000, 0.9964, 1113),
    (153856, 147780, 1.0, 1296),
]


def test_when_no_readable_circuit_is_faithful_at_all_it_says_so_and_offers_the_faithful_one(monkeypatch):
    """Every circuit of at most 40 nodes has NDF 0.00 there: the view opened at 50 units as "the
    most faithful circuit of at most 40 nodes (18 nodes, NDF 0.00)" (0.0005 against 0.0 at 20 and
    100 units). It opens at the smallest, says none of them is faithful, and offers the
    smallest budget reaching NDF 0.8 one click away, each figure the curve's."""
    chosen = present.readable_position_budget(_result(monkeypatch, IOI_ROWS))
    assert (chosen.budget, chosen.n_nodes, chosen.offer) == (20, 12, 10000)
    assert chosen.reason == (
        "No circuit of at most 40 nodes is faithful: NDF is 0.00 at each of them (20, 50 and 100 "
        "units), each deviating from the model about as much as the corruption does, or more. Opened "
        "at 20 units, the smallest (12 nodes); the smallest budget whose circuit reaches NDF 0.8 is "
        "10,000 units (728 nodes, NDF 0.88, on the slider)."
    )
    assert "most faithful" not in chosen.reason
    # none reaching 0.8: the run's most faithful is offered; none carrying any: nothing offered
    rows = [row if row[2] < 0.8 else (*row[:2], 0.7, row[3]) for row in IOI_ROWS]
    chosen = present.readable_position_budget(_result(monkeypatch, rows))
    assert (
        chosen.offer == 10000
        and "no budget of this run reaches NDF 0.8; the most faithful is 10,000" in chosen.reason
    )
    rows = [(b, n, 0.0, nodes) for b, n, _, nodes in IOI_ROWS]
    chosen = present.readable_position_budget(_result(monkeypatch, rows))
    assert chosen.offer is None and chosen.reason.endswith("no budget of this run is faithful either.")


def test_a_readable_circuit_that_carries_some_keeps_the_most_faithful_sentence(monkeypatch):
    rows = [(20, 16, 0.0, 12), (50, 43, 0.31, 18), (200, 147, 0.5, 60), (500, 454, 0.85, 114)]
    chosen = present.readable_position_budget(_result(monkeypatch, rows))
    assert chosen.budget == 50 and chosen.offer == 500
    assert chosen.reason.startswith(
        "Opened at 50 units, the most faithful circuit of at most 40 nodes (18 nodes, NDF 0.31)"
    )


def test_when_every_small_circuit_is_empty_it_opens_at_the_first_drawn_one(monkeypatch):
    rows = [(20, 0, 0.0, 0), (50, 0, 0.0, 0), (100, 66, 0.3, 45), (200, 157, 0.805, 60)]
    chosen = present.readable_position_budget(_result(monkeypatch, rows))
    assert chosen.budget == 100
    assert "the budgets up to 50 keep no unit" in chosen.reason and "(45 nodes, NDF 0.30)" in chosen.reason


def test_discovers_notes_under_a_table_of_units_count_units_once():
    """Under discover --positions' table the empty budgets were said twice, 'top-ranked units' then
    'top-ranked edges', and the dip read 'at 901 edges (budget 1,000)' of a table counting units."""
    from circuitviz.render.curve_notes import curve_notes

    rows = [(20, 0, 0.0), (50, 20, 0.0), (200, 157, 0.805), (500, 407, 0.901), (1000, 901, 0.642)]
    curve = [CurvePoint(budget=b, n_edges=n, metric=0.0, nfs=ndf, ndf=ndf) for b, n, ndf in rows]
    notes = curve_notes(SimpleNamespace(positions=True, curve=curve, method="eap"))
    assert len(notes) == 2 and not any(" edges" in note for note in notes), notes
    assert notes[0].startswith("At budget 20 the method's top-ranked units hold no path")
    assert notes[1].startswith("The curve is not monotone: at 901 units (budget 1,000) NDF is 0.64")


def test_the_table_of_units_says_necessity_of_units():
    from circuitviz.core.curves import Baseline
    from circuitviz.entry.tables import format_table

    curve = [CurvePoint(budget=50, n_edges=20, metric=1.0, nfs=0.5, ndf=0.5)]
    table = format_table(Baseline(2.0, 0.0), curve, 1000, kept="units")
    assert "removing only the circuit's units removes" in table and "circuit's edges" not in table


def test_a_drawing_at_a_budget_not_run_counts_the_units_pruning_kept(tmp_path, capsys, monkeypatch):
    """discover --positions --html-budget 999 (SmolLM2-135M, budgets 20,50) titled its page '999
    units' over the 779 units pruning kept, and said nothing of the NDF it does not have."""
    import re

    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.entry import cli
    from circuitviz.measure.task_validity import CHECK_ENV

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    monkeypatch.setenv(CHECK_ENV, "off")
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    html = tmp_path / "g.html"
    task = [
        "--prompt",
        IOI_TASK.clean,
        "--corrupted",
        IOI_TASK.corrupted,
        "--answer",
        " Mary",
        "--foil",
        " John",
    ]
    argv = [
        "discover",
        *task,
        "--method",
        "eap",
        "--positions",
        "--budgets",
        "5,10",
        "--transfer-paraphrases",
        "0",
    ]
    assert cli.main([*argv, "--html", str(html), "--html-budget", "400"]) == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith(f"wrote {html}"))
    kept = int(re.search(r"budget 400: ([\d,]+) units kept", line).group(1).replace(",", ""))
    assert kept < 400 and "not among the evaluated budgets, so no NDF" in line
    assert f"{kept:,} units kept (budget 400), not evaluated: no NDF" in html.read_text()


def test_a_circuit_that_is_not_empty_never_reads_0_00_percent():
    """SmolLM2-135M's ACC++ circuit of 2 edges of 123,211 read '2 (0.00%)' on Explore and 0.00% in
    discover's table, as an empty one does."""
    from types import SimpleNamespace as Result

    from circuitviz.core.curves import Baseline
    from circuitviz.core.tasks import PromptTask
    from circuitviz.entry.tables import format_table
    from circuitviz.ui.result_figures import metric_values

    point = CurvePoint(budget=20, n_edges=2, metric=0.0, nfs=0.0, ndf=0.0)
    table = format_table(Baseline(5.0, -0.5), [point], 123_211)
    assert "<0.01%" in table and "0.00%" not in table
    task = PromptTask("a b", "a c", " d", (" e",))
    result = Result(
        baseline=Baseline(5.0, -0.5), graph=Result(n_edges=123_211), task=task, details=None, transfer=None
    )
    assert metric_values(result, point)["edges kept"] == "2 (<0.01%)"
    empty = CurvePoint(budget=20, n_edges=0, metric=0.0, nfs=0.0, ndf=0.0)
    assert metric_values(result, empty)["edges kept"] == "0 (0.00%)"
