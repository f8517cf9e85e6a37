"""The command line end to end on the embedded model, and its one-sentence errors."""

import json

import pytest
from fresh_cache import fresh_cache
from sentences import assert_one_sentence

from circuitviz.entry import cli

IOI = [
    "--prompt",
    "When Mary and John went to the store, John gave a drink to",
    "--corrupted",
    "When Alice and Bob went to the store, Carl gave a drink to",
    "--answer",
    " Mary",
    "--foil",
    " John",
]


@pytest.fixture
def shared_model(monkeypatch, embedded_model):
    """Reuse the session's embedded model instead of loading it again per command."""
    monkeypatch.setattr(cli, "_load", lambda args: (embedded_model, "gemma-3-270m", 0.0))
    return embedded_model


@pytest.mark.slow
def test_discover_then_evaluate_round_trip(tmp_path, monkeypatch, capsys, embedded_model):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(fresh_cache(tmp_path / "cache")))
    out = tmp_path / "circuit.json"
    # the real loading path once, from the converted models (a new conversion is test_models's)
    code = cli.main(
        [
            "discover",
            *IOI,
            "--method",
            "eap-ig",
            "--ig-steps",
            "3",
            "--budgets",
            "100,1000",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "clean metric L(M(q))" in printed and "NDF" in printed
    rows = [line.split() for line in printed.splitlines() if line.strip().startswith(("100 ", "1000 "))]
    assert [row[0] for row in rows] == ["100", "1000"]
    data = json.loads(out.read_text())
    assert data["method"] == "eap-ig" and data["config"] == {"ig_steps": 3}
    assert data["score_meaning"].startswith("integrated gradients' estimate")  # what "score" is
    assert data["cfg"]["n_layers"] == 18 and len(data["edges"]) == 10_342
    assert data["clean_metric"] > 0
    kept = sum(edge["in_graph"] for edge in data["edges"].values())
    assert kept == data["curve"][-1]["n_edges"]
    # with --out, each circuit's NDF on held-out paraphrases (EAP-IG used none, so none left out)
    assert "NDF on held-out paraphrases" in printed
    held = data["transfer"]["budgets"]["100"]
    assert held["excluded_as_used"] == 0 and len(held["ndf"]) == len(held["paraphrases"]) > 0
    assert data["prompt" if "prompt" in data else "task"]["clean"] not in held["paraphrases"]

    # a second discover is served by the store
    monkeypatch.setattr(cli, "_load", lambda args: (embedded_model, "gemma-3-270m", 0.0))
    cli.main(["discover", *IOI, "--method", "eap-ig", "--ig-steps", "3", "--budgets", "100,1000"])
    assert "from the result store" in capsys.readouterr().out

    assert cli.main(["evaluate", "--circuit", str(out), *IOI]) == 0
    printed = capsys.readouterr().out
    rows = [line.split() for line in printed.splitlines() if line.strip().startswith(("in_graph ", "100"))]
    metrics = [float(row[3]) for row in rows]
    # row 0: the file's in_graph circuit (= budget 1000); rows 1-2: top-N of its scores at 100, 1000
    assert metrics[0] == pytest.approx(data["curve"][-1]["metric"], abs=1e-4)
    assert metrics[2] == pytest.approx(data["curve"][-1]["metric"], abs=1e-4)
    assert metrics[1] == pytest.approx(data["curve"][0]["metric"], abs=1e-4)


PAIRS = [  # IOI paraphrases of our own, each with its corruption; the last one's is a token longer
    ("When Mary and John went to the park, John gave a ball to", "When Alice and Bob went to the park, Carl gave a ball to"),
    ("After Mary and John sat down, John handed a cup to", "After Alice and Bob sat down, Carl handed a cup to"),
    ("When Mary and John went to the shop, John gave a gift to", "When Alice and Bob went to the shop, Carl gave a gift to"),
    ("When Mary and John went out, John gave a book to", "When Alice and Bob went out for a long walk, Carl gave a book to"),
]  # fmt: skip


@pytest.mark.slow
def test_transfer_is_measured_on_the_users_own_paraphrases(tmp_path, capsys, shared_model, monkeypatch):
    """--transfer-file: every circuit's NDF on the user's pairs instead of template paraphrases,
    those failing the check left out; a method that read its pairs from a file is measured on those
    pairs by default, never on one it used (here it used all: none is measured, and it says so)."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{clean}\t{corrupted}\n" for clean, corrupted in PAIRS), encoding="utf-8")
    out = tmp_path / "eap.json"
    args = ["discover", *IOI, "--method", "eap", "--budgets", "100", "--transfer-file", str(pairs)]
    assert cli.main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "NDF on held-out paraphrases from the given pairs" in printed
    transfer = json.loads(out.read_text())["transfer"]
    assert transfer["source"] == "given"
    held = transfer["budgets"]["100"]
    assert held["paraphrases"] == [clean for clean, _ in PAIRS[:3]]  # the longer corruption is refused
    assert len(held["ndf"]) == 3 and held["excluded_as_used"] == 0

    out = tmp_path / "average.json"  # Best-of-N's average scores its candidates on every pair it has
    args = ["discover", *IOI, "--method", "average", "--ig-steps", "2", "--budgets", "100"]
    assert cli.main([*args, "--paraphrases", str(pairs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    transfer = json.loads(out.read_text())["transfer"]
    held = transfer["budgets"]["100"]
    assert transfer["source"] == "given" and held["excluded_as_used"] == 3 and held["ndf"] == []
    assert (
        "budget 100: none measured" in printed
        # nobody asked for a number: it is the pairs given (the note said 'the 3 asked for')
        and "Measured on 0 held-out paraphrases, not the 4 given: the source gave 4 besides the prompt; "
        "1 failed a check; the method used 3 to fit or select (average at budget 100)."
        in printed
    )


@pytest.mark.slow
def test_a_given_pair_that_fails_the_task_check_is_not_counted_as_passing(
    tmp_path, capsys, shared_model, monkeypatch
):
    """Three pairs given, all of the file's check passed, one whose corruption barely lowers the
    metric refused by the next check: the note read "Measured on 2 held-out paraphrases, not the 3
    given that passed the check: ...; 1 failed a check", a count of passes beside a failure."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "on")  # the check that refuses the first pair
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "After Oscar and Greta reached the museum, Greta handed a ticket to\t"
        "After Hugo and Ingrid reached the museum, Felix handed a ticket to\n"
        "When Oscar and Greta visited the gallery, Greta gave a ticket to\t"
        "When Hugo and Ingrid visited the gallery, Felix gave a ticket to\n"
        "Oscar and Greta visited the museum. Greta handed a ticket to\t"
        "Hugo and Ingrid visited the museum. Felix handed a ticket to\n",
        encoding="utf-8",
    )
    task = [
        "--prompt",
        "When Oscar and Greta visited the museum, Greta handed a ticket to",
        "--answer",
        " Oscar",
    ]
    task += [
        "--corrupted",
        "When Hugo and Ingrid visited the museum, Felix handed a ticket to",
        "--foil",
        " Greta",
    ]
    args = ["discover", *task, "--method", "eap", "--budgets", "100", "--transfer-file", str(pairs)]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "passed the check" not in printed
    assert (
        "Measured on 2 held-out paraphrases, not the 3 given: the source gave 3 besides the prompt; "
        "1 failed a check." in printed
    )


def test_a_command_line_run_prices_the_next_runs_of_its_model(tmp_path, capsys, shared_model, monkeypatch):
    """A computed discover records its seconds under the model's size and shape, as the app's runs
    do: the next estimate of that method on that model is priced from it; a stored result is not.
    The first is priced from a forward pass timed before it, as the app's first run is (a nominal
    speed priced EAP-IG on the IOI prompt at 54 s for a 5.4 s run)."""
    from circuitviz.entry import calibration

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    args = ["discover", *IOI, "--method", "eap", "--budgets", "10"]
    assert cli.main(args) == 0
    assert "priced from a forward pass timed on this machine" in capsys.readouterr().err
    (run,) = json.loads(calibration.calibration_path().read_text())["cpu"]["eap"]
    assert run["seconds"] > 0 and run["model"].endswith("-10342e")
    assert cli.main(args) == 0  # from the store: nothing recorded
    assert "priced from 1 eap run on this machine" in capsys.readouterr().err
    assert len(json.loads(calibration.calibration_path().read_text())["cpu"]["eap"]) == 1


def test_evaluate_reads_a_plain_edge_list(tmp_path, capsys, shared_model):
    path = tmp_path / "edges.txt"
    path.write_text("input->logits\nm17->logits\n")
    assert cli.main(["evaluate", "--circuit", str(path), *IOI]) == 0
    assert "2 edges in graph" in capsys.readouterr().out
    # no --corrupted: the app's proposal, said, as discover does
    given = IOI.index("--corrupted")
    assert cli.main(["evaluate", "--circuit", str(path), *IOI[:given], *IOI[given + 2 :]]) == 0
    captured = capsys.readouterr()
    assert "No --corrupted given; using 'When" in captured.err and "2 edges in graph" in captured.out
    # no --foil either: the other name of an indirect-object prompt, said
    assert cli.main(["evaluate", "--circuit", str(path), *IOI[:given], *IOI[given + 2 : -2]]) == 0
    assert "No --foil given; using ' John'. The foil is the other name" in capsys.readouterr().err


def test_a_missing_foil_is_what_the_model_predicts_after_the_corrupted_prompt(tmp_path, capsys, shared_model):
    """As the app proposes it: a factual prompt's foil is the model's answer on the corruption
    (not a name from another task), said on stderr, and the run is the one given that foil."""
    from circuitviz.query.proposals import propose_foil

    path = tmp_path / "edges.txt"
    path.write_text("input->logits\n")
    prompt, corrupted = "The capital of Germany is the city of", "The capital of France is the city of"
    expected, note = propose_foil(shared_model, prompt, corrupted, " Berlin")  # the app's (``query.foils``)
    assert expected.strip() and note.startswith("The foil is ")
    args = ["evaluate", "--circuit", str(path), "--prompt", prompt, "--answer", " Berlin"]
    assert cli.main([*args, "--corrupted", corrupted]) == 0
    captured = capsys.readouterr()
    assert f"No --foil given; using {expected!r}. {note}" in captured.err
    assert cli.main([*args, "--corrupted", corrupted, "--foil", expected]) == 0
    given = capsys.readouterr()
    assert "No --foil given" not in given.err and given.out == captured.out  # the same figures


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--answer", " Maryanne"], "tokens"),
        (["--method", "magic"], "Unknown method 'magic'"),
        (["--budgets", "ten"], "not a whole number"),
        (["--corrupted", "When Alice went to the store, Carl gave a drink to"], "corrupted prompt"),
        (["--set", "ig_steps=0"], "--ig-steps must be between"),
        (["--set", "colour=red"], "has no setting colour"),
        (["--prompt", "  "], "The prompt is empty"),
    ],
)
def test_user_errors_end_in_one_sentence(extra, fragment, capsys, shared_model):
    code = cli.main(["discover", *IOI, "--no-cache", *extra])
    stderr = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in stderr
    # the error is the one line: no estimate of a run that will not happen comes before it
    errors = stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: ") and fragment in errors[0], stderr
    assert_one_sentence(errors[0].removeprefix("error: "))


def test_an_answer_the_model_barely_predicts_is_said_as_the_app_says_it(tmp_path, capsys, shared_model):
    """' Bob' after the IOI prompt: the app's sentence, with the command line's way out; the
    run goes on (the user may mean it). The model's own answer gets no such sentence."""
    path = tmp_path / "edges.txt"
    path.write_text("input->logits\n")
    given = IOI.index("--answer")
    unlikely = [*IOI[:given], "--answer", " Bob", *IOI[given + 2 :]]
    assert cli.main(["evaluate", "--circuit", str(path), *unlikely]) == 0
    said = capsys.readouterr().err
    assert "The model gives ' Bob' only " in said and "give one it predicts with --answer" in said
    assert cli.main(["evaluate", "--circuit", str(path), *IOI]) == 0
    assert "The model gives" not in capsys.readouterr().err


def test_a_missing_answer_is_the_one_the_app_proposes(tmp_path, capsys, shared_model):
    """No --answer: the app's proposal (the likeliest of the model's top tokens whose task is
    meaningful), said with its rank and probability; the figures are those of giving it."""
    from circuitviz.labels.logit_lens import next_token_probabilities
    from circuitviz.query.proposals import propose

    prompt = "The Eiffel Tower is located in the city of"
    likely = next_token_probabilities(shared_model, prompt, 8)
    expected = propose(shared_model, prompt, [token for token, _ in likely]).answer
    path = tmp_path / "edges.txt"
    path.write_text("input->logits\nm17->logits\n")
    assert cli.main(["evaluate", "--circuit", str(path), "--prompt", prompt]) == 0
    captured = capsys.readouterr()
    assert f"No --answer given; using {expected!r}, the model's most likely next token (" in captured.err
    assert "No --corrupted given" in captured.err and "No --foil given" in captured.err
    assert cli.main(["evaluate", "--circuit", str(path), "--prompt", prompt, "--answer", expected]) == 0
    given = capsys.readouterr()
    assert "No --answer given" not in given.err and given.out == captured.out  # the same figures


def test_eaps_estimate_names_no_ig_steps(shared_model):
    from circuitviz.entry.limits import estimate_run

    assert "IG steps" not in estimate_run(shared_model, "eap", n_tokens=1).summary()
    assert "(1 token;" in estimate_run(shared_model, "eap", n_tokens=1).summary()
    assert "20 IG steps" in estimate_run(shared_model, "eap-ig", n_tokens=16).summary()


def test_unknown_model_is_one_sentence(capsys):
    code = cli.main(["discover", *IOI, "--model", "no-such-model-anywhere", "--no-cache"])
    said = capsys.readouterr().err.strip().splitlines()  # no "loading ..." line: nothing loads
    assert code == 2 and len(said) == 1, said
    error = said[0]
    assert error.startswith("error: ")
    assert_one_sentence(error.removeprefix("error: "))


def test_bad_circuit_file_is_one_sentence(tmp_path, capsys, shared_model):
    path = tmp_path / "bad.json"
    path.write_text('{"cfg": {"n_layers": 12, "n_heads": 12}, "nodes": {}, "edges": {}}')
    assert cli.main(["evaluate", "--circuit", str(path), *IOI]) == 2
    assert "12 layers and 12 heads" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command, fragment",
    [
        (["evaluate", "--circuit", "{tmp}/none.json"], "Cannot read the circuit file"),
        (["evaluate", "--circuit", "{tmp}"], "Cannot read the circuit file"),
        (["discover", "--out", "{tmp}/no/such/folder.json"], "does not exist"),
        (["discover", "--html", "{tmp}"], "is a folder"),
        (["discover", "--transfer-file", "{tmp}/none.tsv"], "Cannot read the paraphrase file"),
        (["discover", "--method", "paraphrase-pruning", "--paraphrases", "{tmp}/none.tsv"], "Cannot read"),
        (
            ["discover", "--html-budget", "0", "--html", "{tmp}/g.html"],
            "--html-budget must be a whole number",
        ),
        (["discover", "--transfer-paraphrases", "-1"], "--transfer-paraphrases must be 0"),
    ],
)
def test_a_path_that_cannot_serve_is_said_before_the_model_loads(
    command, fragment, tmp_path, capsys, monkeypatch
):
    """A mistyped path is one sentence at once, not after a minute's run (``--out`` and
    ``--transfer-file`` were only used after the run; a missing circuit file was a raw OSError)."""

    def refuse(args):
        raise AssertionError("the model must not load before the paths are checked")

    monkeypatch.setattr(cli, "_load", refuse)
    args = [part.replace("{tmp}", str(tmp_path)) for part in command]
    assert cli.main([*args, *IOI]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()
    assert error.startswith("error: ") and fragment in error, error
    assert_one_sentence(error.removeprefix("error: "))


def test_methods_lists_the_registry(capsys):
    assert cli.main(["methods"]) == 0
    printed = capsys.readouterr().out
    for name in ("eap ", "eap-ig ", "eap-ig-activations", "exact"):
        assert name in printed
    # a method that needs no corrupted prompt says what its figures use without --corrupted
    lines = printed.splitlines()
    after = lines[next(i for i, line in enumerate(lines) if line.startswith("flow-routes ")) + 1]
    assert "use a neutral prompt as the corrupted run" in after and "--corrupted gives your own" in after
    assert not any(line.startswith(" ") for line in lines[: lines.index(after) - 1] if "eap-ig " in line)


def test_the_default_method_is_said_by_methods_and_discover_help(capsys):
    """Issue 31 checks "the default method" from the command line: neither ``methods`` nor
    ``discover --help`` named it (2026-12-07), and the flag's default was a literal beside the
    registry's ``DEFAULT_METHOD``."""
    from circuitviz.entry.parser import build_parser
    from circuitviz.methods import DEFAULT_METHOD

    assert cli.main(["methods"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"The default method (discover without --method, and the app's): {DEFAULT_METHOD}."
    parser = build_parser()
    assert parser.parse_args(["discover", "--prompt", "p"]).method == DEFAULT_METHOD
    with pytest.raises(SystemExit):
        parser.parse_args(["discover", "--help"])
    assert f"default: {DEFAULT_METHOD}, the app's default method" in " ".join(capsys.readouterr().out.split())


def test_discover_help_says_every_setting_from_its_field(capsys):
    """--help lists every method setting as a flag with the help its Config field declares and
    the methods it applies to (``methods/settings.setting``)."""
    import dataclasses

    from circuitviz.methods import available_methods
    from circuitviz.methods.settings import setting_help

    with pytest.raises(SystemExit) as done:
        cli.main(["discover", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for name, method in available_methods().items():
        for config_field in dataclasses.fields(method.Config):
            assert setting_help(config_field), f"{name}.{config_field.name} has no help"
            assert f"--{config_field.name.replace('_', '-')}" in text
    for words in ("quadrature nodes of the integrated gradients", "budgets whose BoN circuits iBoN"):
        assert words in text


def test_a_flag_several_methods_share_offers_every_methods_choices():
    """--warm-start is Edge Pruning's (a scoring method or none) and paraphrase pruning's (eap-ig,
    average or bon): the command line takes each method's own, and the method checks its own."""
    from circuitviz.methods import get_method

    parser = cli.build_parser()
    for value in ("average", "bon", "eap-ig", "none"):
        assert parser.parse_args(["discover", *IOI, "--warm-start", value]).setting_warm_start == value
    with pytest.raises(ValueError, match="warm_start must be one of"):
        get_method("paraphrase-pruning").make_config({"warm_start": "none"})


def test_list_settings_are_parsed_once_at_the_boundary():
    """A comma list on the command line, a list from a form or a URL's JSON and a tuple give the
    same typed config and the same request key."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.entry.request import Request
    from circuitviz.methods import get_method

    parsed = cli.build_parser().parse_args(
        ["discover", *IOI, "--method", "ibon", "--anchor-budgets", "10,50"]
    )
    assert parsed.setting_anchor_budgets == (10, 50)
    method = get_method("ibon")
    given = [method.make_config({"anchor_budgets": value}) for value in ("10, 50", [10, 50], (10, 50))]
    assert all(config.anchor_budgets == (10, 50) for config in given)
    task = PromptTask("a b", "c b", " d", (" e",))
    keys = {
        Request.of("ibon", config, model_id="m", dtype="torch.float32", task=task, budgets=(10, 50)).key
        for config in given
    }
    assert len(keys) == 1
    assert get_method("ensemble").make_config({"members": "EAP, eap-ig,eap"}).members == ("eap", "eap-ig")
    with pytest.raises(ValueError, match="not a whole number"):
        method.make_config({"anchor_budgets": "10,fifty"})


def random_task_arguments() -> list[str]:
    from circuitviz.bench.toy_models import IOI_TASK

    arguments = ["--prompt", IOI_TASK.clean, "--corrupted", IOI_TASK.corrupted, "--answer", IOI_TASK.answer]
    return arguments + [item for foil in IOI_TASK.foils for item in ("--foil", foil)]


@pytest.mark.slow
def test_a_random_models_weak_corruption_names_the_switch(monkeypatch, capsys, tmp_path):
    """A random-weight model's corruption changes its logit difference by a hair: refused with
    the sentence that names --no-task-check, which then runs it."""
    import torch

    from circuitviz.bench.toy_families import random_family_model

    model = random_family_model("llama3", seed=1, dtype=torch.float32)
    monkeypatch.setattr(cli, "_load", lambda args: (model, "random-llama3", 0.0))
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "on")
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path))
    command = ["discover", *random_task_arguments(), "--method", "eap", "--budgets", "4", "--no-cache"]
    assert cli.main(command) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "--no-task-check to run anyway" in errors[0], errors
    assert_one_sentence(errors[0].removeprefix("error: "))
    assert cli.main([*command, "--no-task-check"]) == 0


def test_progress_names_the_phase_by_its_plain_name(capsys):
    from circuitviz.core.phases import Report

    cli.progress_line(Report.SCORE, 0.5)
    assert capsys.readouterr().err.split() == ["score", "50.0%"]
    cli.end_progress_line()


def test_progress_is_redrawn_only_when_what_it_says_changes(capsys):
    """A run reports at every layer's cancel check; a log kept each repeat ('score 0.0%' about 50
    times on one line for EAP-IG on the CPU)."""
    for phase, fraction in [("prepare", 0.0)] * 18 + [("score", 0.0)] * 50 + [("score", 0.5), ("score", 1.0)]:
        cli.progress_line(phase, fraction)
    err = capsys.readouterr().err
    assert err.split("\r")[1:] == [
        "  prepare      0.0%",
        "  score        0.0%",
        "  score       50.0%",
        "  score      100.0%\n",
    ]
    cli.progress_line("score", 1.0)  # a finished phase reported again (after its last step)
    assert capsys.readouterr().err == ""
    cli.progress_line("evaluate", 0.0)  # a new run's line after a finished one is drawn
    cli.progress_line("evaluate", 0.0)
    assert capsys.readouterr().err == "\r  evaluate     0.0%"
    cli.end_progress_line()


def test_backend_reaches_the_load_of_discover_and_of_batch(monkeypatch):
    """``--backend bridge`` loads through TransformerLens's bridge, on every command that loads."""
    seen = []

    def load_model(model_id, **kwargs):
        seen.append(kwargs["backend"])
        raise cli.ModelLoadError("stopped after the load's arguments were seen.")

    monkeypatch.setattr(cli, "load_model", load_model)
    for backend in ("bridge", "hooked"):  # a name the loader knows: an unknown one is refused first
        assert cli.main(["discover", *IOI, "--model", "gpt2", "--backend", backend]) == 2
    assert cli.main(["discover", *IOI, "--model", "gpt2"]) == 2
    assert seen == ["bridge", "hooked", None]
    args = cli.build_parser().parse_args(["batch", "--backend", "bridge", "--dataset", "ioi", "--out", "x"])
    assert cli._batch_source(args).backend == "bridge"


def test_a_usage_error_is_one_sentence_and_where_to_read_more(capsys):
    """Not discover's whole usage (about a hundred lines of options) above the sentence that matters."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(["discover", "--answer", " Berlin"])  # the answer alone: the prompt is required
    assert stopped.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "python -m circuitviz discover: error: the following arguments are required: --prompt",
        "(`python -m circuitviz discover --help` lists every option.)",
    ]


def test_a_method_without_settings_is_named_alone_in_the_header():
    """EAP's header (Explore's "what was run", the command line's first line) read "method eap {}
    on smollm2-135m": an empty settings dict written as "{}"."""
    from circuitviz.core.text import method_settings

    assert method_settings("eap", {}) == "eap"
    assert method_settings("eap-ig", {"ig_steps": 20}) == 'eap-ig {"ig_steps": 20}'


def test_the_settings_header_gives_long_values_as_their_size():
    """The header line of a run (the command line, Explore) shows a method's settings as JSON, but
    a paraphrase file's pairs, a pasted list or a reference edge list only as their size: eight
    pairs of 120 characters each made one line of a thousand."""
    from circuitviz.core.text import settings_text

    pairs = [{"clean": f"When Mary and John went to the park {i}", "corrupted": "x" * 40} for i in range(8)]
    config = {
        "paraphrases": pairs,
        "text": "a\nb\n" + "c" * 90,
        "edges": list(range(9)),
        "seed": 0,
        "few": [1, 2],
    }
    assert json.loads(settings_text(config)) == {
        "paraphrases": "<8 items>",
        "text": "<3 lines>",
        "edges": "<9 items>",
        "seed": 0,
        "few": [1, 2],
    }


def test_a_quoted_text_is_cut_only_where_the_cut_shortens_it():
    """A held-out paraphrase of 61 characters was quoted as its first 60 and '… (61 characters)':
    longer than the text and missing its last letter."""
    from circuitviz.core.text import shown

    sixty_one = "When John and Mary went to the library, John gave a flower to"
    assert len(sixty_one) == 61 and shown(sixty_one) == repr(sixty_one)
    long = "x" * 500
    assert shown(long) == f"'{'x' * 60}'… (500 characters)"
    assert len(shown("y" * 78)) <= len(repr("y" * 78))  # whichever is shorter


@pytest.mark.slow
def test_evaluate_says_when_the_file_was_made_on_another_model(tmp_path, capsys, shared_model):
    """A file whose model_id names another model of the same shape was evaluated without a word."""
    import torch

    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.results import eap_graph_json

    spec = GraphSpec.from_model(shared_model)
    mask = spec.mask_from_edge_names(["input->logits", "m17->logits"])
    data = eap_graph_json(spec, torch.zeros(spec.n_forward, spec.n_backward, device="cpu"), mask)
    path = tmp_path / "other.json"
    path.write_text(json.dumps({**data, "model_id": "some-other-model"}))
    assert cli.main(["evaluate", "--circuit", str(path), *IOI]) == 2  # refused unless asked for
    assert "add --other-model" in capsys.readouterr().err
    assert cli.main(["evaluate", "--circuit", str(path), *IOI, "--other-model"]) == 0
    out = capsys.readouterr().out
    assert (
        "The file was made on 'some-other-model'; it is evaluated on 'gemma-3-270m', of the same shape."
        in out
    )
    path.write_text(json.dumps({**data, "model_id": "gemma-3-270m"}))
    assert cli.main(["evaluate", "--circuit", str(path), *IOI]) == 0
    assert "made on" not in capsys.readouterr().out


@pytest.mark.slow
def test_each_held_out_figure_keeps_the_task_it_was_measured_on(tmp_path, capsys, shared_model, monkeypatch):
    """The JSON's transfer kept only each template paraphrase's clean prompt: its corruption, answer
    and foils were nowhere, so a reviewer could not give evaluate the task behind a held-out NDF
    (a corruption proposed anew can differ). Each budget now keeps its tasks, and evaluate on the
    first gives the NDF discover wrote."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "eap.json"
    assert cli.main(["discover", *IOI, "--method", "eap", "--budgets", "100", "--out", str(out)]) == 0
    capsys.readouterr()
    held = json.loads(out.read_text())["transfer"]["budgets"]["100"]
    assert [task["clean"] for task in held["tasks"]] == held["paraphrases"] and held["tasks"]
    first = held["tasks"][0]
    assert first["corrupted"] and first["corrupted"] != first["clean"]
    task = ["--prompt", first["clean"], "--corrupted", first["corrupted"], "--answer", first["answer"]]
    task += [arg for foil in first["foils"] for arg in ("--foil", foil)]
    assert cli.main(["evaluate", "--circuit", str(out), *task, "--json", str(tmp_path / "ev.json")]) == 0
    row = next(p for p in json.loads((tmp_path / "ev.json").read_text())["curve"] if p["budget"] == 100)
    assert row["ndf"] == pytest.approx(held["ndf"][0], abs=1e-4)  # float32 sums in another batch


@pytest.mark.slow
def test_evaluate_measures_a_files_circuits_on_the_users_paraphrases(
    tmp_path, capsys, shared_model, monkeypatch
):
    """A reviewer holding a circuit file and paraphrases of their own had no evaluate flag for them:
    one evaluate per paraphrase, averaged by hand. --transfer-file gives discover's held-out figures
    from the file alone, leaving out the paraphrases the file's method used."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{clean}\t{corrupted}\n" for clean, corrupted in PAIRS), encoding="utf-8")
    out, figures = tmp_path / "eap.json", tmp_path / "figures.json"
    run = ["discover", *IOI, "--method", "eap", "--budgets", "100", "--transfer-file", str(pairs)]
    assert cli.main([*run, "--out", str(out)]) == 0
    made = json.loads(out.read_text())["transfer"]["budgets"]["100"]
    capsys.readouterr()
    assert (
        cli.main(["evaluate", "--circuit", str(out), "--transfer-file", str(pairs), "--json", str(figures)])
        == 0
    )
    assert "NDF on held-out paraphrases from the given pairs" in capsys.readouterr().out
    measured = json.loads(figures.read_text())["transfer"]["budgets"]["100"]
    assert measured["paraphrases"] == made["paraphrases"] and len(made["ndf"]) == 3
    assert measured["ndf"] == pytest.approx(made["ndf"], abs=1e-4)

    out = tmp_path / "average.json"  # its method scored every pair: none is held out
    run = ["discover", *IOI, "--method", "average", "--ig-steps", "2", "--budgets", "100"]
    assert cli.main([*run, "--paraphrases", str(pairs), "--out", str(out)]) == 0
    capsys.readouterr()
    assert (
        cli.main(["evaluate", "--circuit", str(out), "--transfer-file", str(pairs), "--json", str(figures)])
        == 0
    )
    assert "budget 100: none measured" in capsys.readouterr().out
    measured = json.loads(figures.read_text())["transfer"]["budgets"]["100"]
    assert measured["excluded_as_used"] == 3 and measured["ndf"] == []
