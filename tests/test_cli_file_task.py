"""``evaluate --circuit FILE`` measures the circuit on the task the file keeps, for every part the
command line leaves out, so it reproduces the NDF ``discover`` wrote (an audit found ``--prompt``
required, a missing ``--corrupted`` proposed anew, and a circuit found with no corrupted prompt not
measurable against the neutral prompt its discover used)."""

import json

import pytest
from sentences import assert_one_sentence

from circuitviz.bench.toy_models import tiny_model
from circuitviz.entry import cli
from circuitviz.measure.task_validity import CHECK_ENV

PROMPT = ["--prompt", "When Mary and John went to the store , John gave a drink to", "--answer", " Mary"]
TINY = ["--model", "tiny-gpt2"]  # the fixture's model, named as the files name it
CORRUPTED = ["--corrupted", "When Alice and Bob went to the store , Carl gave a drink to", "--foil", " John"]


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    monkeypatch.setattr(cli, "_load", lambda args: (model, args.model, 0.0))
    monkeypatch.setenv(CHECK_ENV, "off")  # a random model's corruption changes little
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return model


def _ndf_rows(printed: str) -> dict[int, float]:
    """budget -> NDF of the table's rows (the last row of a budget wins: the method's circuit)."""
    rows = {}
    for line in printed.splitlines():
        parts = line.split()
        if (
            len(parts) >= 7 and parts[0].isdigit() and parts[2].endswith("%")
        ):  # budget, edges, %, L(C(q)), NFS, NDF
            rows[int(parts[0])] = float(parts[5])
    return rows


def _discover(tmp_path, capsys, method, task):
    out = tmp_path / f"{method}.json"
    argv = ["discover", *TINY, *task, "--method", method, "--budgets", "5,20", "--out", str(out)]
    assert cli.main([*argv, "--no-cache", "--transfer-paraphrases", "0"]) == 0
    capsys.readouterr()
    return out, {point["budget"]: point["ndf"] for point in json.loads(out.read_text())["curve"]}


@pytest.mark.parametrize("method, task", [("flow-routes", PROMPT), ("eap", [*PROMPT, *CORRUPTED])])
def test_evaluate_without_the_task_flags_reproduces_the_files_ndf(tmp_path, capsys, tiny, method, task):
    out, written = _discover(tmp_path, capsys, method, task)
    for argv in (["--circuit", str(out)], ["--circuit", str(out), *PROMPT]):
        assert cli.main(["evaluate", *TINY, *argv]) == 0
        captured = capsys.readouterr()
        assert "Using the task" in captured.err and "No --corrupted given" not in captured.err
        measured = _ndf_rows(captured.out)
        assert {b: measured[b] for b in written} == pytest.approx(written, abs=6e-4)
    if method == "flow-routes":  # made with no corrupted prompt: measured against the neutral one
        assert "neutral prompt" in captured.err


def test_evaluate_of_a_file_without_a_task_needs_a_prompt(tmp_path, capsys, tiny):
    path = tmp_path / "edges.txt"
    path.write_text("input->logits\n")
    assert cli.main(["evaluate", "--circuit", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "give --prompt" in error and "Traceback" not in error
    assert_one_sentence(error.removeprefix("error: "))


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"edges": [', "is not valid JSON (Expecting value at line 1)"),
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be a circuit"),
        ("[1, 2]", "a list circuit must hold edge names as strings"),
        ('{"nodes": {}}', "has no 'edges'"),
    ],
)
@pytest.mark.parametrize("with_prompt", [False, True])
def test_a_file_that_is_no_circuit_is_said_before_the_model_loads(
    text, says, with_prompt, tmp_path, capsys, monkeypatch
):
    """Without --prompt such a file read "keeps no task; give --prompt", and with it the file's
    real fault came after the model's load (an audit's, 2026-12-06)."""

    def refuse(args):
        raise AssertionError("the model must not load before the file is read")

    monkeypatch.setattr(cli, "_load", refuse)
    path = tmp_path / "c.json"
    path.write_text(text)
    prompt = ["--prompt", "a b", "--answer", " c"] if with_prompt else []
    assert cli.main(["evaluate", "--circuit", str(path), *prompt]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()
    assert error.startswith(f"error: {path} ") or error.startswith(f"error: {path}:"), error
    assert says in error and "give --prompt" not in error, error


def test_a_circuit_of_another_shape_names_the_model_it_was_made_on(tmp_path, capsys, tiny):
    """Evaluated on a model of another shape: one sentence, exit 2, naming the file's model as the
    flag that measures it (it said only 'choose the model it was made on')."""
    import torch

    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.results import eap_graph_json

    spec = GraphSpec.from_model(tiny_model("gpt2", n_layers=3, n_heads=2))
    mask = spec.mask_from_edge_names(["input->logits"])
    data = eap_graph_json(spec, torch.zeros(spec.n_forward, spec.n_backward, device="cpu"), mask)
    path = tmp_path / "three.json"
    path.write_text(json.dumps({**data, "model_id": "models/three-layers"}))
    argv = ["evaluate", "--circuit", str(path), *PROMPT, *CORRUPTED, "--other-model"]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("choose the model it was made on (--model 'models/three-layers')."), error
    assert_one_sentence(error.removeprefix("error: "))


def test_the_json_says_why_a_task_without_a_corruption_has_no_transfer(tmp_path, capsys, tiny):
    """--out asks for the transfer; with no corrupted prompt it is not measured, and the JSON's
    'transfer' was null while only stdout said why."""
    out = tmp_path / "routes.json"
    argv = ["discover", *PROMPT, "--method", "flow-routes", "--budgets", "5", "--out", str(out), "--no-cache"]
    assert cli.main(argv) == 0
    assert "transfer: not measured" in capsys.readouterr().out
    transfer = json.loads(out.read_text())["transfer"]
    assert transfer["budgets"] == {} and transfer["note"].startswith(
        "Transfer not measured: this task has no"
    )


@pytest.mark.parametrize(
    "flag, said", [("--positions", "circuits are over token positions"), ("--neurons", "neuron circuits")]
)
def test_evaluate_says_what_of_the_file_it_does_not_measure_as_discover_did(
    tmp_path, capsys, tiny, flag, said
):
    """A circuit over token positions was measured as edges at every position under 'edges kept'
    (NDF 0.366 where discover wrote 0.252), and a run's neuron circuits not at all, unsaid."""
    out, _ = _discover(tmp_path, capsys, "eap-ig", [*PROMPT, *CORRUPTED, flag, "--ig-steps", "2"])
    assert cli.main(["evaluate", *TINY, "--circuit", str(out)]) == 0
    assert f"The file's {said}" in capsys.readouterr().out


def test_a_circuit_of_another_model_is_refused_before_the_load_unless_asked_for(tmp_path, capsys, tiny):
    """A circuit found on one model measured on another of the same shape ran with only a note
    (a random-weight Llama's circuit on a Qwen, exit 0); now one sentence with both ways out."""
    out, written = _discover(tmp_path, capsys, "eap", [*PROMPT, *CORRUPTED])
    other = ["evaluate", "--circuit", str(out), "--model", "tiny-other"]
    assert cli.main(other) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "made on 'tiny-gpt2' and --model names 'tiny-other'" in error
    assert "--model 'tiny-gpt2'" in error and "--other-model" in error and "loading" not in error
    assert_one_sentence(error.removeprefix("error: "))
    assert cli.main([*other, "--other-model"]) == 0
    assert "The file was made on 'tiny-gpt2'; it is evaluated on 'tiny-other', of the same shape." in (
        capsys.readouterr().out
    )


def test_no_transfer_is_measured_when_asked_for_none_even_with_pairs_given(tmp_path, capsys, tiny):
    """--transfer-paraphrases 0 beside a paraphrase file (--transfer-file, or a method's own
    --paraphrases) printed a transfer block reading 'none measured' and a left-out note."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "When John and Mary went to the store , John gave a drink to\t"
        "When Alice and Bob went to the store , Carl gave a drink to\n"
    )
    out = tmp_path / "eap.json"
    argv = ["discover", *TINY, *PROMPT, *CORRUPTED, "--method", "eap", "--budgets", "5", "--out", str(out)]
    assert cli.main([*argv, "--no-cache", "--transfer-file", str(pairs), "--transfer-paraphrases", "0"]) == 0
    assert "held-out" not in capsys.readouterr().out
    assert json.loads(out.read_text())["transfer"] is None


def test_an_error_during_a_run_starts_its_own_line_after_the_progress(capsys, tiny, monkeypatch):
    """The progress line was left open: "  score        0.0%error: CD-T's decomposition diverged ..."."""

    def failing(model, request, store=None, progress=None):
        progress("score", 0.0)
        raise ValueError("The decomposition diverged.")

    monkeypatch.setattr(cli, "run_request", failing)
    argv = ["discover", *TINY, *PROMPT, *CORRUPTED, "--method", "eap", "--budgets", "5", "--no-cache"]
    assert cli.main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "error: The decomposition diverged." and lines[-2].endswith("0.0%")


def test_one_folder_written_two_ways_is_one_model(tmp_path, monkeypatch):
    """The file keeps --model as discover was given it: the same folder given to evaluate as
    './ckpt', 'ckpt/' or its absolute path is the file's model, not another one."""
    from circuitviz.entry.file_task import made_on_problem

    (tmp_path / "ckpt").mkdir()
    monkeypatch.chdir(tmp_path)
    text = json.dumps({"model_id": "./ckpt"})
    for given in ("./ckpt", "ckpt/", str(tmp_path / "ckpt"), "ckpt"):
        assert made_on_problem(text, given, other_model=False) is None, given
    assert "made on './ckpt'" in made_on_problem(text, "./other", other_model=False)
    assert made_on_problem(json.dumps({"model_id": "gemma-3-270m"}), "gemma-3-270m", False) is None


def test_evaluate_writes_its_figures_as_json_under_discovers_names(tmp_path, capsys, tiny):
    """A checker reading the command line's JSON could read discover's figures but not evaluate's
    (printed only); --json writes them, each curve point under discover's names."""
    out, written = _discover(tmp_path, capsys, "eap", [*PROMPT, *CORRUPTED])
    figures = tmp_path / "evaluation.json"
    assert cli.main(["evaluate", *TINY, "--circuit", str(out), "--json", str(figures)]) == 0
    assert f"wrote {figures}" in capsys.readouterr().out
    data = json.loads(figures.read_text())
    assert data["kind"] == "circuitviz evaluation" and data["circuit_file"] == str(out)
    assert data["task"]["answer"] == " Mary" and data["task"]["foils"] == [" John"]
    assert data["total_edges"] == tiny_model_edges(tiny)
    assert set(data["baseline"]) == {"clean", "corrupted"}
    discovered = json.loads(out.read_text())["curve"][0]
    assert set(data["curve"][0]) == set(discovered)  # the same names as discover's curve points
    ndf = {point["budget"]: point["ndf"] for point in data["curve"]}
    assert {b: ndf[b] for b in written} == pytest.approx(written, abs=6e-4)
    assert all(point["completeness"] is None for point in data["curve"])  # not asked: null, not NaN


def test_evaluate_json_says_which_circuit_each_point_measured(tmp_path, capsys, tiny):
    """The first point is the file's in_graph circuit, its edge count under 'budget': EAP-IG's
    budget 103 on an IOI prompt kept 76 edges, and the JSON read 'budget 76' then 'budget 103' with
    nothing saying that 76 was never asked for. Each point now has its circuit named, and the note
    printed under the table is kept."""
    out, _ = _discover(tmp_path, capsys, "eap", [*PROMPT, *CORRUPTED])
    figures = tmp_path / "evaluation.json"
    assert cli.main(["evaluate", *TINY, "--circuit", str(out), "--json", str(figures)]) == 0
    data = json.loads(figures.read_text())
    assert data["point_circuits"] == [
        "the file's in_graph circuit",
        "the circuit its method drew at budget 5",
        "the circuit its method drew at budget 20",
    ]
    assert len(data["curve"]) == 3 and [p["budget"] for p in data["curve"][1:]] == [5, 20]
    assert any(note.startswith("(first row: the file's in_graph circuit") for note in data["notes"])


def tiny_model_edges(model) -> int:
    from circuitviz.models.adapter import adapter_of

    return adapter_of(model).spec.n_edges


def test_discover_prints_the_sentences_the_app_writes_under_the_curve(tmp_path, capsys, tiny, monkeypatch):
    """RelP's NDF fell from 0.22 to 0.02 as the budget grew on a reviewer's prompt, and the command
    line said nothing where the app explains a dip under its curve; discover prints those sentences,
    each once (one the table already says is not repeated)."""
    from circuitviz.entry import outputs

    seen = []

    def notes(result):
        seen.append(result)
        return ["A sentence of the app's under the curve.", "A sentence of the app's under the curve."]

    monkeypatch.setattr(outputs, "curve_notes", notes)
    argv = ["discover", *TINY, *PROMPT, *CORRUPTED, "--method", "eap", "--budgets", "5,20", "--no-cache"]
    assert cli.main([*argv, "--transfer-paraphrases", "0"]) == 0
    printed = capsys.readouterr().out
    assert seen and printed.count("A sentence of the app's under the curve.") == 1


def test_held_out_transfer_over_positions_says_which_circuit_it_measured(tmp_path, capsys, tiny):
    """A circuit over positions is measured on a paraphrase (other positions) as the edges its
    units use at every position: EAP's 1,000 units on an IOI prompt of our own read NDF 0.000 on
    the prompt beside a held-out mean of 0.598, with nothing saying these were other circuits."""
    from circuitviz.entry.api import OVER_POSITIONS

    out = tmp_path / "c.json"
    argv = ["discover", *TINY, *PROMPT, *CORRUPTED, "--method", "eap", "--positions", "--budgets", "50"]
    assert cli.main([*argv, "--no-cache", "--out", str(out), "--transfer-paraphrases", "2"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "budget 50: mean" in printed and OVER_POSITIONS in printed
    assert json.loads(out.read_text())["transfer"]["note"].startswith(OVER_POSITIONS)
    pairs = tmp_path / "pairs.tsv"  # evaluate --transfer-file on the same file says it too
    pairs.write_text(
        "When Mary and John went to the park , John gave a drink to\t"
        "When Alice and Bob went to the park , Carl gave a drink to\n"
    )
    assert cli.main(["evaluate", *TINY, "--circuit", str(out), "--transfer-file", str(pairs)]) == 0
    assert OVER_POSITIONS in " ".join(capsys.readouterr().out.split())
