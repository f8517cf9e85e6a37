"""Batch discovery: shared passes over many tasks equal the one-prompt path; the batch folder,
its store keys, resuming, failing items and bad input rows."""

import json

import pyarrow.parquet as pq
import pytest
import torch

from circuitviz.batch import (
    DatasetError,
    DatasetTask,
    ModelSource,
    ProgressBar,
    read_dataset,
    run,
)
from circuitviz.batch.dataset import parse_dataset
from circuitviz.batch.executors import ExecutorError, import_ray
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.entry import cli
from circuitviz.entry.api import discover, request_key
from circuitviz.measure.evaluate import Evaluator, curves_of_tasks, evaluators_of_tasks
from circuitviz.methods import RunContext, get_method
from circuitviz.services.store import ResultStore

IOI_TASKS = [
    PromptTask(
        "When Mary and John went to the store , John gave a drink to",
        "When Alice and Bob went to the store , Carl gave a drink to",
        " Mary",
        (" John",),
    ),
    PromptTask(
        "When Tom and Anna went to the park , Anna gave a ball to",
        "When Alice and Bob went to the park , Carl gave a ball to",
        " Tom",
        (" Anna",),
    ),
    PromptTask(
        "When John and Mary went to the store , Mary gave a drink to",
        "When Alice and Bob went to the store , Carl gave a drink to",
        " John",
        (" Mary",),
    ),
]
SHORT_TASKS = [
    PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",)),
    PromptTask("The capital of Italy is", "The capital of France is", " Rome", (" Paris",)),
]
BAD_TASK = PromptTask("The capital of Italy is", "The capital of France is", " Mary John", (" Paris",))
BUDGETS = [3, 8, 20, 60]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2")


@pytest.fixture(scope="module")
def tiny_gemma():
    return tiny_model("gemma")


def _tasks(tasks):
    return [DatasetTask(f"t{i}", task) for i, task in enumerate(tasks)]


# ----- the engine: several tasks in shared passes ------------------------------------------------
@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
@pytest.mark.parametrize("method_name", ["eap", "eap-ig"])
def test_run_batch_equals_one_prompt_runs(shape, method_name, tiny, tiny_gemma, monkeypatch):
    model = tiny if shape == "gpt2" else tiny_gemma
    # a tiny working memory cuts every batched pass into chunks that split tasks and steps
    monkeypatch.setenv("CIRCUITVIZ_WORKING_MEMORY_GB", "0.0000002")
    method = get_method(method_name)
    config = method.make_config({"ig_steps": 4} if method_name == "eap-ig" else {})
    contexts = [RunContext(model, task) for task in IOI_TASKS]
    together = method.run_batch(contexts, config, BUDGETS)
    for task, mine in zip(IOI_TASKS, together):
        alone = method.run_on(model, task, config, BUDGETS)
        assert torch.allclose(mine.scores.double(), alone.scores.double(), rtol=1e-9, atol=1e-12)
        assert mine.scores.abs().sum() > 0
        assert mine.baseline.clean == pytest.approx(alone.baseline.clean, abs=1e-10)
        assert mine.baseline.corrupted == pytest.approx(alone.baseline.corrupted, abs=1e-10)
        for budget in BUDGETS:
            assert torch.equal(mine.circuit(budget), alone.circuit(budget))
        for a, b in zip(mine.curve, alone.curve):
            assert (a.budget, a.n_edges) == (b.budget, b.n_edges)
            assert a.metric == pytest.approx(b.metric, abs=1e-10)
            assert a.ndf == pytest.approx(b.ndf, abs=1e-9)
        assert mine.timings["batch_tasks"] == len(IOI_TASKS)
    # each task really has its own answer: the three baselines differ
    assert len({round(r.baseline.clean, 6) for r in together}) == 3


@pytest.mark.parametrize("method_name", ["ensemble", "edge-pruning"])
def test_methods_with_their_own_run_give_that_run_in_a_batch(method_name, tiny):
    """Ensemble (a ScoringMethod whose run adds agreement and paraphrase selection) and Edge
    Pruning (a Method of its own) run task by task inside a batch, each result its ``run``'s."""
    method = get_method(method_name)
    settings = {"steps": 2, "ig_steps": 2} if method_name == "edge-pruning" else {"ig_steps": 2}
    config = method.make_config(
        {k: v for k, v in settings.items() if k in method.Config.__dataclass_fields__}
    )
    together = method.run_batch([RunContext(tiny, task) for task in IOI_TASKS[:2]], config, BUDGETS)
    for task, mine in zip(IOI_TASKS[:2], together):
        alone = method.run_on(tiny, task, config, BUDGETS)
        assert mine.details.to_dict() == alone.details.to_dict()
        assert [p.ndf for p in mine.curve] == pytest.approx([p.ndf for p in alone.curve], abs=1e-9)
        assert "batch_tasks" not in mine.timings
    if method_name == "ensemble":
        assert together[0].details.agreement  # what the shared passes would have left out


def test_a_batch_mixes_metrics_only_when_they_agree(tiny):
    prepared = [prepare_task(tiny, task) for task in IOI_TASKS[:2] + SHORT_TASKS[:1]]
    spec = GraphSpec.from_model(tiny)
    with pytest.raises(ValueError, match="share the prompt length"):
        evaluators_of_tasks(tiny, spec, prepared)
    logprob = PromptTask(IOI_TASKS[0].clean, IOI_TASKS[0].corrupted, " Mary", (), metric="logprob")
    with pytest.raises(ValueError, match="share the prompt length, the metric"):
        evaluators_of_tasks(tiny, spec, [prepared[0], prepare_task(tiny, logprob)])


def test_logprob_rows_match_their_tasks_alone(tiny):
    spec = GraphSpec.from_model(tiny)
    tasks = [PromptTask(t.clean, t.corrupted, t.answer, (), metric="logprob") for t in IOI_TASKS]
    prepared = [prepare_task(tiny, task) for task in tasks]
    evaluators = evaluators_of_tasks(tiny, spec, prepared)
    shape = (len(tasks), 2, spec.n_forward, spec.n_backward)
    masks = torch.rand(shape, generator=torch.Generator().manual_seed(1), device="cpu") < 0.5
    curves = curves_of_tasks(evaluators, masks, [1, 2])
    for task, together, evaluator, circuits in zip(prepared, curves, evaluators, masks):
        alone = Evaluator(tiny, spec, task)
        assert evaluator.baseline.clean == pytest.approx(alone.baseline.clean, abs=1e-10)
        for point, expected in zip(together, curves_of_tasks([alone], circuits[None], [1, 2])[0]):
            assert point.metric == pytest.approx(expected.metric, abs=1e-10)


# ----- datasets ----------------------------------------------------------------------------------
def test_bad_rows_are_reported_by_line_and_left_out(tmp_path):
    lines = [
        json.dumps({"clean": "a b", "corrupted": "c d", "answer": " x", "foil": " y", "id": "one"}),
        "",
        "{not json",
        json.dumps({"clean": "a b", "corrupted": "c d", "foil": " y"}),
        json.dumps(
            {"prompt": "a b", "corrupted": "c d", "answer": " x", "foils": [" y", " z"], "metric": "nope"}
        ),
        json.dumps({"prompt": "e f", "corrupted": "g h", "answer": " x", "foils": " y| z", "family": "toy"}),
        json.dumps({"clean": "a b", "corrupted": "c d", "answer": " x", "foil": " y", "id": "one"}),
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines))
    loaded = read_dataset(path)
    assert [t.id for t in loaded.tasks] == ["one", "row-6"]
    assert loaded.tasks[1].task.foils == (" y", " z") and loaded.tasks[1].family == "toy"
    assert loaded.tasks[1].line == 6
    problems = loaded.problems
    assert [p.split(" ")[1].rstrip(":") for p in problems] == ["3", "4", "5", "7"]
    assert "not valid JSON" in problems[0] and "no 'answer'" in problems[1]
    assert "unknown metric" in problems[2] and "already used on line 1" in problems[3]
    assert all(len(p) < 300 for p in problems)
    # an id that is no text nor whole number was taken as its str(): JSON's 1e400 became 'inf'
    odd = [
        '{"clean": "a b", "corrupted": "c d", "answer": " x", "foil": " y", "id": 1e400}',
        '{"clean": "a b", "corrupted": "c d", "answer": " x", "foil": " y", "id": 7, "family": ["f"]}',
        '{"clean": "a b", "corrupted": "c d", "answer": " x", "foil": " y", "id": 12345678901234567890}',
        # an answer or prompt of the wrong kind was said to be missing ("line 4 has no 'answer'")
        '{"clean": "a b", "corrupted": "c d", "answer": 5, "foil": " y"}',
        '{"prompt": ["a b"], "corrupted": "c d", "answer": " x", "foil": " y"}',
    ]
    path.write_text("\n".join(odd))
    loaded = read_dataset(path)
    assert [t.id for t in loaded.tasks] == ["12345678901234567890"]
    assert loaded.problems == [
        "line 1: 'id' must be text or a whole number, not inf.",
        "line 2: 'family' must be text, not ['f'].",
        "line 4: 'answer' must be text in quotes, not 5.",
        "line 5: the prompt must be text in quotes, not ['a b'].",
    ]


def test_csv_rows_and_a_missing_header(tmp_path):
    text = 'clean,corrupted,answer,foil\na b,c d, x, y\n,,,\n"e, f",g h, x,\n'
    loaded = parse_dataset(text, "csv")
    assert len(loaded.tasks) == 1 and loaded.tasks[0].task.answer == " x"
    assert loaded.problems == ["line 4 has no 'foil'; the logit-difference metric needs a wrong answer."]
    with pytest.raises(DatasetError, match="header row"):
        parse_dataset("prompt_text,target\na,b\n", "csv")
    with pytest.raises(DatasetError, match="no usable task"):
        parse_dataset("{}\n", "jsonl")
    # the csv module's own errors were no DatasetError: a traceback on the command line
    huge = "clean,corrupted,answer,foil\n" + "x " * 80_000 + ",c d, x, y\n"
    with pytest.raises(DatasetError, match="cannot be read at line 2: field larger than field limit"):
        parse_dataset(huge, "csv")
    old_mac = "clean,corrupted,answer,foil\ra b,c d, x, y\r"  # carriage returns alone end its lines
    assert [t.task.clean for t in parse_dataset(old_mac, "csv").tasks] == ["a b"]


# ----- the batch folder --------------------------------------------------------------------------
def _run(tmp_path, model, tasks, **options):
    options.setdefault("methods", ["eap-ig", "eap"])
    options.setdefault("settings", {"ig_steps": 4})
    options.setdefault("keep_edges", 20)
    return run(
        tmp_path / "out",
        tasks=_tasks(tasks),
        budgets=BUDGETS,
        model=model,
        store=ResultStore(tmp_path / "store"),
        **options,
    )


def test_batch_folder_rows_store_and_resume(tmp_path, tiny):
    tasks = IOI_TASKS + SHORT_TASKS + [BAD_TASK]
    report = _run(tmp_path, tiny, tasks, batch_tasks=2)
    assert (report.items, report.failed, report.skipped) == (12, 2, 0)
    table = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    assert len(table) == 12
    failed = [row for row in table if row["status"] == "failed"]
    assert {row["task_id"] for row in failed} == {"t5"}
    assert all("answer ' Mary John' is 2 tokens" in row["error"] for row in failed)
    store = ResultStore(tmp_path / "store")
    spec = GraphSpec.from_model(tiny)
    for row in table:
        if row["status"] != "done":
            continue
        task = tasks[row["task_index"]]
        method = get_method(row["method"])
        config = method.make_config(json.loads(row["config"]))
        # the full result is in the store under the key discover (and Explore) would use
        key = request_key(tiny, "tiny-gpt2-0", task, row["method"], config, BUDGETS, 256)
        assert row["key"] == key
        stored = store.get(key)
        alone, cached = discover(
            tiny, task, row["method"], config, BUDGETS, model_id="tiny-gpt2-0", store=store
        )
        assert cached and stored is not None
        fresh = method.run_on(tiny, task, config, BUDGETS)
        assert torch.allclose(stored.scores.double(), fresh.scores.double(), atol=1e-9)
        # the row's curve, top edges and kept circuits are the result's
        assert row["ndf"] == pytest.approx([p.ndf for p in fresh.curve], abs=1e-9)
        forward, backward = spec.edge_index
        values = fresh.scores[forward, backward]
        assert row["top_edges"][0] == int(values.abs().argmax())
        assert row["circuit_budgets"] == [3, 8, 20]
        for bit, budget in enumerate(row["circuit_budgets"]):
            edges = {e for e, b in zip(row["circuit_edges"], row["circuit_bits"]) if b >> bit & 1}
            expected = set(torch.nonzero(fresh.circuit(budget)[forward, backward]).flatten().tolist())
            assert edges == expected
        assert row["batch_tasks"] in (1, 2) and row["executor"] == "local"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["budgets"] == BUDGETS and manifest["kept_budgets"] == [3, 8, 20]
    assert manifest["consensus"]["prompts"] == 5
    consensus = pq.read_table(tmp_path / "out" / "consensus.parquet").to_pylist()
    assert len(consensus) == 5 * 2 * 3  # prompts x methods x kept budgets

    again = _run(tmp_path, tiny, tasks, batch_tasks=2)
    assert again.skipped == 10 and again.computed == 0  # only the refused task is tried again
    assert again.manifest["consensus"]["digest"] == manifest["consensus"]["digest"]


def test_a_batch_of_a_method_with_list_settings_resumes(tmp_path, tiny):
    """A method whose settings hold a list (the ensemble's members; Best-of-N's anchor budgets)
    resumes its own folder: request.json reads the list back as a list, and the run's own was a
    tuple, so every second run was refused as 'another batch' (the MMLU atlas's rebuild among them)."""
    first = _run(tmp_path, tiny, IOI_TASKS[:2], methods=["ensemble"])
    again = _run(tmp_path, tiny, IOI_TASKS[:2], methods=["ensemble"])
    assert (first.computed, again.computed, again.skipped) == (2, 0, 2)
    with pytest.raises(ValueError, match="holds the results of another batch"):
        _run(
            tmp_path, tiny, IOI_TASKS[:2], methods=["ensemble"], settings={"ig_steps": 4, "members": ["eap"]}
        )


def test_interrupted_batch_resumes(tmp_path, tiny):
    class StopAfterFirstGroup(ProgressBar):
        def __call__(self, state):
            if state.phase == "discover" and state.done >= 2:  # not the tokenize line before it
                raise KeyboardInterrupt

    report = _run(
        tmp_path,
        tiny,
        IOI_TASKS + SHORT_TASKS,
        methods=["eap-ig"],
        batch_tasks=2,
        progress=StopAfterFirstGroup(),
    )
    assert report.interrupted and 0 < report.computed < 5
    rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    assert len(rows) == report.computed
    resumed = _run(tmp_path, tiny, IOI_TASKS + SHORT_TASKS, methods=["eap-ig"], batch_tasks=2)
    assert not resumed.interrupted
    assert resumed.skipped == report.computed and resumed.computed == 5 - report.computed
    assert len(pq.read_table(tmp_path / "out" / "results.parquet")) == 5


def test_a_damaged_batch_folder_resumes_from_the_store_and_keeps_the_damaged_file(tmp_path, tiny):
    """Found by re-running 80 randomly damaged folders: a results.parquet emptied or of another
    file's bytes stopped the batch ("Could not open Parquet input source ..."), and a manifest whose
    consensus is not an object raised AttributeError. The damaged table is set aside, never
    overwritten, the log says so in one line, and its rows come back from the result store."""
    tasks = IOI_TASKS[:3]
    first = _run(tmp_path, tiny, tasks, methods=["eap"], settings={})
    out = tmp_path / "out"
    table = out / "results.parquet"
    kept = pq.read_table(table).to_pylist()
    table.write_bytes(b"PAR1 not a table at all")
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "consensus": 1.5}))
    said = []
    again = _run(tmp_path, tiny, tasks, methods=["eap"], settings={}, log=said.append)
    assert again.computed == 0 and again.skipped == first.items == 3 and again.failed == 0
    assert (out / "results.parquet.damaged").read_bytes() == b"PAR1 not a table at all"
    (line,) = [text for text in said if "did not read" in text]
    assert (
        line.startswith("results.parquet did not read (") and "set aside as results.parquet.damaged" in line
    )
    rows = pq.read_table(table).to_pylist()
    assert [(row["key"], row["ndf"]) for row in rows] == [(row["key"], row["ndf"]) for row in kept]
    assert json.loads((out / "manifest.json").read_text())["consensus"]["prompts"] == 3


def test_the_command_line_says_what_the_system_refused_in_one_sentence():
    from circuitviz.core.text import os_error_sentence

    refused = PermissionError(13, "Permission denied", "/data/out")
    assert (
        os_error_sentence(refused) == "Permission denied ('/data/out'); check the path and its permissions."
    )
    assert os_error_sentence(FileNotFoundError("no dataset at x.jsonl.")) == "no dataset at x.jsonl."


def test_a_group_that_fails_runs_its_tasks_one_by_one(tmp_path, tiny, monkeypatch):
    method = get_method("eap-ig")
    original_score, original_run = type(method).score_batch, type(method).run_batch

    def score_batch(self, contexts, config, progress=None):
        if any("Tom" in ctx.task.clean for ctx in contexts):
            raise RuntimeError("planted failure")
        return original_score(self, contexts, config, progress)

    def run_batch(self, contexts, *args, **kwargs):
        if len(contexts) > 1:  # the shared pass of several tasks; one task is a batch of one
            raise RuntimeError("the shared pass broke")
        return original_run(self, contexts, *args, **kwargs)

    monkeypatch.setattr(type(method), "score_batch", score_batch)
    monkeypatch.setattr(type(method), "run_batch", run_batch)
    report = _run(tmp_path, tiny, IOI_TASKS, methods=["eap-ig"])
    rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    assert [row["status"] for row in rows] == ["done", "failed", "done"]
    assert rows[1]["error"] == "RuntimeError: planted failure" and report.failed == 1


def test_settings_no_method_has_are_refused(tmp_path, tiny):
    with pytest.raises(ValueError, match="setting n_paraphrases"):
        _run(tmp_path, tiny, IOI_TASKS, methods=["eap"], settings={"n_paraphrases": 3})


def test_without_ray_the_executor_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)
    with pytest.raises(ExecutorError, match=r"pip install 'circuitviz\[ray\]'") as error:
        import_ray()
    assert len(str(error.value)) < 300 and str(error.value).count(". ") == 0


def test_cli_batch_end_to_end(tmp_path, monkeypatch, capsys):
    path = tmp_path / "tasks.jsonl"
    rows = [dict(t.to_dict(), id=f"p{i}") for i, t in enumerate(IOI_TASKS + SHORT_TASKS)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    monkeypatch.setattr(
        cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=lambda: tiny_model("gpt2"))
    )
    argv = ["batch", "--dataset", str(path), "--out", str(tmp_path / "out"), "--methods", "eap-ig"]
    argv += [
        "--ig-steps",
        "3",
        "--budgets",
        "3,8,20",
        "--keep-edges",
        "20",
        "--store",
        str(tmp_path / "store"),
    ]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "skipped line 6 is not valid JSON" in captured.err
    assert "5 finished (0 found in the store), 0 failed" in captured.out
    assert "eap-ig (ig_steps=3): 5 prompts; CPR" in captured.out
    assert "\n  mean NDF  " in captured.out  # a mean over the prompts, not the dataset's NDF
    # the budgets in edges, as the Dataset page's CSV names them ('NDF at a budget of 20 edges')
    assert "\n  budget (edges)      3       8      20\n" in captured.out
    assert cli.main(argv) == 0
    assert "5 finished (5 found in the store)" in capsys.readouterr().out
    assert cli.main([*argv, "--strict"]) == 2
    strict = capsys.readouterr().err  # the row is named, not called skipped, and the file refused
    assert "error: 1 row of tasks.jsonl is bad (listed above) and --strict refuses the file" in strict
    assert "line 6 is not valid JSON" in strict and "skipped" not in strict
    assert cli.main(["batch", "--generate", "poems", "--out", str(tmp_path / "g")]) == 2
    assert "--generate knows ioi, arithmetic, factual" in capsys.readouterr().err


def test_a_batch_that_cannot_start_says_so_before_any_model_loads(tmp_path, monkeypatch, capsys):
    """An unknown family, an --out that is a file or lies under one: one sentence at once (the
    family was refused after the model's load, behind 'drawing 100 poems tasks'; a file as --out
    was a FileExistsError traceback), and no folder is made."""

    def refuse(args):
        raise AssertionError("the model must not load before the batch's arguments are checked")

    monkeypatch.setattr(cli, "_batch_source", refuse)
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    cases = [
        (["--generate", "poems", "--out", str(tmp_path / "g")], "--generate knows ioi, arithmetic, factual"),
        (["--generate", "ioi", "--out", str(afile)], "is a file; the batch writes a folder"),
        (["--generate", "ioi", "--out", str(afile / "sub")], f"cannot be made: {afile} is a file"),
    ]
    for argv, fragment in cases:
        assert cli.main(["batch", *argv]) == 2
        captured = capsys.readouterr()
        (error,) = captured.err.strip().splitlines()
        assert fragment in error and not captured.out, captured
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{broken\n")
    assert cli.main(["batch", "--dataset", str(bad), "--out", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err.strip().endswith("column 2)).")  # one full stop, not '.).'


def test_generated_tasks_fit_the_embedded_model(embedded_model):
    from circuitviz.batch import generate_tasks

    for family in ("ioi", "arithmetic", "factual"):
        tasks = generate_tasks(embedded_model, family, 12, seed=3)
        assert len({t.task.clean for t in tasks}) == 12
        for item in tasks:
            prepared = prepare_task(embedded_model, item.task)  # one-token answer/foil, equal lengths
            assert prepared.answer_id not in prepared.foil_ids
        assert [t.task for t in generate_tasks(embedded_model, family, 12, seed=3)] == [t.task for t in tasks]
    ioi = generate_tasks(embedded_model, "ioi", 5, seed=0)
    for item in ioi:
        task = item.task
        assert task.answer.strip() in task.clean and task.clean.count(task.foils[0].strip()) == 2
    # more than the templates make is refused before drawing (running dry is tested with a small
    # pool: test_a_family_that_runs_out_says_so_after_a_stall_not_every_attempt)
    with pytest.raises(DatasetError, match="more than the factual family's templates make: 682 distinct"):
        generate_tasks(embedded_model, "factual", 5000, seed=0)


def test_generated_tasks_pass_the_validity_check_and_the_refused_are_counted(embedded_model, monkeypatch):
    """Asking for n tasks gives n the batch will run: the arithmetic family on the embedded model
    drew 200 of which the validity check refuses 157 (the stored atlas of 2026-11-30); now it is
    drawn until n pass, and the summary says how many were tried and why the rest were refused."""
    import random

    import circuitviz.batch.generate as generate
    from circuitviz.measure.task_validity import task_verdict

    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "on")
    found = generate.generated_dataset(embedded_model, "arithmetic", 8, seed=0)
    assert len(found.tasks) == 8
    for item in found.tasks:
        assert task_verdict(embedded_model, item.task) is None, item.task
    row = found.summary["per_subject"]["arithmetic"]
    assert row["kept"] == 8 and row["tried"] == 8 + sum(row["refusals"].values()) > 8
    assert all(kind.startswith("the corruption") for kind in row["refusals"])
    # a family that runs out says how many passed and why the others did not
    pool = [generate._arithmetic(embedded_model, random.Random(k)) for k in range(12)]
    pool = [task for task in pool if task is not None]
    monkeypatch.setitem(generate.DRAWS, "arithmetic", lambda model, rng: rng.choice(pool))
    with pytest.raises(
        DatasetError,
        match=r"distinct prompts that fit this model's tokenizer and pass the validity check \(\d+ refused, most because the corruption ",
    ) as refused:
        generate.generated_dataset(embedded_model, "arithmetic", len(pool), seed=0)
    from sentences import assert_one_sentence

    assert_one_sentence(str(refused.value))


def test_a_family_that_runs_out_says_so_after_a_stall_not_every_attempt(tiny, monkeypatch):
    """Asking a family for more prompts than it holds ends once draws stop finding new ones (the
    coupon rule in batch/generate.py), with the count found; a request it can fill still gets
    every prompt, however rare the last ones are to draw."""
    import random

    import circuitviz.batch.generate as generate

    pool = [PromptTask(f"The number {k} is", f"The number {k + 1} is", " a", (" the",)) for k in range(7)]
    draws = []

    def draw(model, rng: random.Random) -> PromptTask:
        draws.append(1)
        return pool[0] if rng.random() < 0.9 else rng.choice(pool)  # most draws repeat one prompt

    monkeypatch.setitem(generate.DRAWS, "ioi", draw)
    assert len(generate.generate_tasks(tiny, "ioi", 7, seed=1)) == 7
    draws.clear()
    with pytest.raises(DatasetError, match="gave only 7 distinct prompts"):
        generate.generate_tasks(tiny, "ioi", 5000, seed=1)
    # all 7 are found within a few hundred draws; then 2,000 draws without news end it, where
    # the old rule drew 40 a task asked for (200,000)
    assert len(draws) < 3000


def test_a_token_limit_below_every_generated_prompt_is_named(tiny):
    """--max-tokens 5 (the Dataset form's 'longest prompt') below every IOI prompt ended 'gave only
    0 distinct prompts that fit this model's tokenizer ...; ask for at most 0, or give a dataset
    file', the limit unnamed; the prompts over it are counted and the flag named."""
    from circuitviz.batch.generate import generated_dataset

    with pytest.raises(DatasetError) as error:
        generated_dataset(tiny, "ioi", 2, seed=0, max_tokens=5)
    said = str(error.value)
    assert said.startswith("The ioi family gave only 0 distinct prompts that fit this model's tokenizer")
    assert " longer than 5 tokens)" in said and said.endswith("; raise --max-tokens, or give a dataset file.")


def test_acc_rows_hold_the_batchs_budgets_not_each_prompts_own(tmp_path, tiny):
    """ACC++ adds its whole circuit's budget, one per prompt (SmolLM2-135M's factual batch: 144 edges
    on one prompt, 1,313 on the next); each row kept its own, and the folder check then called every
    row but the first 'damaged' ('its budgets [20, 50, 200, 1313] are not the ones the other rows of
    acc++ hold') and left it out of every figure, with 'rerun the batch' as the way out."""
    from circuitviz.batch.folder_check import row_problems

    report = _run(tmp_path, tiny, IOI_TASKS[:2], methods=["acc++"], settings={"n_random": 0})
    assert report.failed == 0
    table = pq.read_table(tmp_path / "out" / "results.parquet")
    rows = table.to_pylist()
    assert [row["budgets"] for row in rows] == [BUDGETS, BUDGETS]
    assert row_problems(table, GraphSpec.from_model(tiny).n_edges) == []
