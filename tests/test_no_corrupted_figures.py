"""What a run with no corrupted prompt calls NDF's 0, and how it writes a task with no foil.

ACC++ without a corrupted prompt measures its curve by knocking signals out, so its 'corrupted'
figure is the metric with every found signal knocked out; Flow routes and CD-T measure against
the neutral prompt. Until 2026-12-06 Explore labelled that figure "corrupted L(M(q'))" two lines
under "corrupted  (none given)", discover printed "corrupted metric L(M(q'))", the task line read
"-> answer ' Paris' vs " with nothing after "vs", and evaluate said an ACC++ file was measured
"as discover measured it" while its figures were patching's, not the knockout's."""

import json

import pytest
from explore_session import explore_session, run_it

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.entry import cli
from circuitviz.measure.task_validity import CHECK_ENV

pytestmark = pytest.mark.usefixtures("tiny_app")


def test_explore_names_what_ndfs_zero_is_without_a_corrupted_prompt():
    query = {"prompt": IOI_TASK.clean, "corrupted": "", "answer": " Mary", "foil": "", "metric": "logprob"}
    at = run_it(explore_session({**query, "method": "acc++", "budgets": "5,10,20"}))
    assert not at.exception
    result = at.session_state["results"]["acc++"]
    assert not result.task.corrupted and result.details.faithfulness["kind"] == "signal-knockout"
    labels = [metric.label for metric in at.metric]
    assert "signals knocked out L" in labels and "corrupted L(M(q'))" not in labels
    shown = next(m for m in at.metric if m.label == "signals knocked out L")
    assert shown.value == f"{result.baseline.corrupted:+.3f}"
    line = next(text.value for text in at.text if text.value.startswith("prompt "))
    assert line.splitlines()[0].endswith("-> answer ' Mary' (logprob)"), line


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    monkeypatch.setenv(CHECK_ENV, "off")
    return model


# ACC++ on IOI's prompt alone: no corrupted prompt, no foil
ACC_DISCOVER = [
    "discover",
    "--prompt",
    IOI_TASK.clean,
    "--answer",
    " Mary",
    "--method",
    "acc++",
    "--budgets",
    "5,20",
]


def test_discover_and_evaluate_name_what_ndfs_zero_is(tmp_path, capsys, tiny):
    out = tmp_path / "acc.json"
    assert cli.main([*ACC_DISCOVER, "--transfer-paraphrases", "0", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    baseline = json.loads(out.read_text())["corrupted_metric"]
    assert (
        f"signals knocked out metric {baseline:+.4f}" in printed
        and "L(M(q'))" not in printed.split("budget")[0]
    )
    assert cli.main(["evaluate", "--circuit", str(out), "--model", "tiny-gpt2"]) == 0
    said = "".join(capsys.readouterr())  # the task taken from the file is said on stderr
    assert "as discover measured it" not in said
    assert "so these figures are not the NDF discover wrote" in said
    assert "neutral prompt metric" in said


def test_flow_routes_reads_the_neutral_prompt(tmp_path, capsys, tiny):
    out = tmp_path / "fr.json"
    argv = ["discover", "--prompt", IOI_TASK.clean, "--answer", " Mary", "--method", "flow-routes"]
    assert cli.main([*argv, "--budgets", "5,20", "--transfer-paraphrases", "0", "--out", str(out)]) == 0
    assert "neutral prompt metric" in capsys.readouterr().out
    assert cli.main(["evaluate", "--circuit", str(out), "--model", "tiny-gpt2"]) == 0
    said = "".join(capsys.readouterr())  # the task taken from the file is said on stderr
    assert "as discover measured it" in said and "not the NDF discover wrote" not in said


def test_acc_explanation_is_of_the_edges_it_found_not_its_completion():
    """On SmolLM2-135M's IOI prompt the five sentences were five completion edges into m2 ('The
    token embeddings feed the MLP m2 (the method's score +0.785)', 'm0 feeds the MLP m2', ...):
    edges ACC++ never found, whose score only ranks them after the node they feed."""
    from explore_session import LINK

    at = run_it(explore_session({**LINK, "method": "acc++", "budgets": "10,20,40"}))
    assert not at.exception
    result = at.session_state["results"]["acc++"]
    explained = next(e for e in at.expander if e.label.startswith("Explain this circuit"))
    sentences = [m.value for m in explained.markdown]
    assert sentences and not any("value input of" in s or "the MLP " in s for s in sentences), sentences
    caption = " ".join(c.value for c in explained.caption)
    traced, _ = result.details.found_edges(result)
    circuit = result.circuit(at.session_state["budget"])
    total, found = int(circuit.sum()), int((circuit & traced).sum())
    assert found < total  # the circuit shown holds completion edges
    assert f"circuit's {total:,} edges, the {found:,} it found, by |score|" in caption, caption
    assert f"The other {total - found:,} are its completion" in caption


def test_acc_edges_table_and_csv_mark_its_completion():
    """The edge table and CSV ranked the completion's edges first (their ranking scores are just
    below the node they feed) with nothing to tell them from the edges ACC++ found."""
    from explore_session import LINK

    from circuitviz import render
    from circuitviz.details.base import found_edges

    at = run_it(explore_session({**LINK, "method": "acc++", "budgets": "10,20,40"}))
    result = at.session_state["results"]["acc++"]
    circuit = result.circuit(at.session_state["budget"])
    table = next(frame.value for frame in at.dataframe if "edge" in frame.value.columns)
    traced = set(result.graph.edge_names_of(circuit & found_edges(result)))
    assert {row.edge for row in table.itertuples() if row.found == "found"} == traced
    assert set(table["found"]) == {"found", "completion"}
    csv_text = render.edges_csv(result.graph, result.scores, circuit, found_edges(result))
    assert csv_text.splitlines()[0] == "rank,edge,source,destination,kind,score,found"
    assert found_edges(at.session_state["results"]["acc++"]) is not None


def test_acc_explanation_without_a_corrupted_prompt_says_the_knockout_measures_it():
    """Without a corrupted prompt the caption said the completion was 'added so that patching can
    measure the circuit' above an NDF that no patching measured (the knockout's)."""
    query = {"prompt": IOI_TASK.clean, "corrupted": "", "answer": " Mary", "foil": "", "metric": "logprob"}
    at = run_it(explore_session({**query, "method": "acc++", "budgets": "5,10,20"}))
    explained = next(e for e in at.expander if e.label.startswith("Explain this circuit"))
    caption = " ".join(c.value for c in explained.caption)
    assert "are its completion" in caption and "this NDF is the knockout of its signals" in caption, caption


def test_discover_completeness_without_a_corrupted_prompt_says_it_is_not_measured(tmp_path, capsys, tiny):
    """discover --method acc++ --completeness with no corrupted prompt ran, then ended 'error: The
    corrupted prompt is empty' with status 2: completeness patched the halves to a prompt nobody gave."""
    assert cli.main([*ACC_DISCOVER, "--transfer-paraphrases", "0", "--completeness"]) == 0
    printed = capsys.readouterr().out
    assert "completeness: not measured: this task has no corrupted prompt" in printed


def test_no_paraphrase_pruning_offer_for_a_task_without_a_corrupted_prompt():
    """ACC++ on SmolLM2-135M with no corrupted prompt (NDF 0.74 by knockout at 200 edges) offered
    'Learn a small circuit that carries over: Paraphrase pruning', which opened Explore under 'The
    same corrupted prompt as the circuit you were reading' with no corrupted prompt to read."""
    from types import SimpleNamespace

    from circuitviz import render
    from circuitviz.core.curves import CurvePoint
    from circuitviz.core.tasks import PromptTask
    from circuitviz.ui.result_view import learn_offer

    curve = [
        CurvePoint(b, n, 0.0, ndf, ndf) for b, n, ndf in [(20, 20, 0.4), (200, 200, 0.74), (343, 343, 1.0)]
    ]
    budget = render.opening_view(curve).budget
    task = PromptTask("The capital of France is", "", " Paris", (), "logprob")
    result = SimpleNamespace(method="acc++", curve=curve, budgets=[20, 200, 343], task=task, details=None)
    assert learn_offer(result, budget) is None
    result.task = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",))
    assert learn_offer(result, budget) is not None
