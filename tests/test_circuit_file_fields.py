"""A circuit file's ``in_graph``, ``curve`` and ``circuits`` of the wrong kind (``evaluate
--circuit``): one sentence naming the field, before the model loads. An ``in_graph`` of ``"false"``
put the edge in the circuit, a budget of 1.5 read 1, and a ``curve`` or ``circuits`` of the wrong
kind raised ``TypeError``, ``AttributeError``, ``KeyError`` or ``OverflowError`` after the load
(2026-12-07)."""

import json

import pytest
from sentences import assert_one_sentence

from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.graph import GraphError, GraphSpec
from circuitviz.core.results import circuit_data, parse_circuit
from circuitviz.entry import cli


@pytest.fixture(scope="module")
def spec():
    return GraphSpec.from_model(tiny_model("gpt2", n_layers=2, n_heads=2))


def _file(spec, **fields) -> dict:
    """A circuit file as discover writes it: two edges in its circuit, a curve at 1 and 2 and the
    circuits stored there (one bit per edge)."""
    names = spec.edge_names
    data = {
        "edges": {name: {"score": 1.0 - i / 100, "in_graph": i < 2} for i, name in enumerate(names)},
        "curve": [{"budget": 1, "ndf": 0.5}, {"budget": 2, "ndf": 0.9}],
        "circuits": {"encoding": "bits-base64", "order": "edges", "budgets": {"1": "AA==", "2": "AA=="}},
    }
    data.update(fields)
    return data


def _refusal(data: dict) -> str:
    with pytest.raises(GraphError) as error:
        circuit_data(json.dumps(data, allow_nan=True), "c.json")
    message = str(error.value)
    assert_one_sentence(message)
    assert message.startswith("c.json: ")
    return message


@pytest.mark.parametrize("flag", ["false", "no", 0.5, 0, 1, [1], {"a": 1}])
def test_in_graph_of_another_kind_is_refused_not_read_as_in_the_circuit(spec, flag):
    data = _file(spec)
    first = spec.edge_names[0]
    data["edges"][first]["in_graph"] = flag
    assert f"edge '{first}' has 'in_graph' {json.dumps(flag)}, not true or false" in _refusal(data)


@pytest.mark.parametrize("value", ["false", 1.5, 0, None, [True]])
def test_an_edge_that_is_neither_an_object_nor_true_or_false_is_refused(spec, value):
    data = _file(spec)
    data["edges"][spec.edge_names[3]] = value
    assert "not true, false or an object with 'score' and 'in_graph'" in _refusal(data)


def test_true_false_absent_and_null_in_graph_still_read(spec):
    names = spec.edge_names
    data = _file(spec)
    data["edges"][names[0]] = True  # a bare flag
    data["edges"][names[1]] = {"score": 0.5}  # no in_graph: outside
    data["edges"][names[2]] = {"score": 0.5, "in_graph": None}
    data["edges"][names[3]] = {"score": 0.5, "in_graph": True}
    loaded = parse_circuit(json.dumps(data), spec, "c.json")
    assert spec.edge_names_of(loaded.mask) == [names[0], names[3]]


@pytest.mark.parametrize(
    ("curve", "said"),
    [
        ("x", "'curve' is \"x\", not a list of points"),
        (5, "'curve' is 5, not a list of points"),
        ([1], "point 1 of 'curve' is 1, not an object with a 'budget'"),
        ([{"budget": 1}, {}], "point 2 of 'curve' has the budget null, not a whole number of 1 or more"),
        ([{"budget": 1.5}], "the budget 1.5, not a whole number"),
        ([{"budget": "20"}], 'the budget "20", not a whole number'),
        ([{"budget": True}], "the budget true, not a whole number"),
        ([{"budget": 0}], "the budget 0, not a whole number of 1 or more"),
        ([{"budget": float("inf")}], "the budget Infinity, not a whole number"),
        ([{"budget": float("nan")}], "the budget NaN, not a whole number"),
    ],
)
def test_a_curve_of_the_wrong_kind_is_one_sentence(spec, curve, said):
    message = _refusal(_file(spec, curve=curve))
    assert said in message and "remove 'curve'" in message


@pytest.mark.parametrize(
    ("circuits", "said"),
    [
        ("x", "'circuits' is \"x\", not an object of circuits by budget"),
        ([1], "'circuits' is [1], not an object"),
        ({"encoding": "rle", "budgets": {}}, '\'circuits\' has the encoding "rle", not "bits-base64"'),
        ({"encoding": "bits-base64", "budgets": 3}, "'circuits' holds 'budgets' 3, not an object"),
        (
            {"encoding": "bits-base64", "budgets": {"x": "AA=="}},
            "'circuits' names the budget 'x', not a whole number",
        ),
        (
            {"encoding": "bits-base64", "budgets": {"9" * 5000: "AA=="}},
            "(5,000 characters), not a whole number",
        ),
        (
            {"encoding": "bits-base64", "budgets": {"1": 5}},
            "the circuit at budget 1 in 'circuits' is 5, not base64",
        ),
        ({"encoding": "bits-base64", "budgets": {"1": "A!"}}, 'is "A!", not base64 text'),
        (
            {"1": "a0.h0->logits"},
            "the circuit at budget 1 in 'circuits' is \"a0.h0->logits\", not a list of edge names",
        ),
        ({"1": [1]}, "is [1], not a list of edge names"),
    ],
)
def test_stored_circuits_of_the_wrong_kind_are_one_sentence(spec, circuits, said):
    message = _refusal(_file(spec, circuits=circuits))
    assert said in message and "remove 'circuits'" in message


def test_a_file_as_discover_writes_it_reads(spec):
    assert circuit_data(json.dumps(_file(spec)), "c.json")["curve"][1]["budget"] == 2
    old = _file(spec, circuits={"1": [spec.edge_names[0]], "2": spec.edge_names[:2]})  # version 2's names
    assert circuit_data(json.dumps(old), "c.json")["circuits"]["2"] == list(spec.edge_names[:2])


def test_evaluate_refuses_such_a_file_before_the_model_loads(tmp_path, capsys, monkeypatch, spec):
    def no_load(args):
        raise AssertionError("the model loaded before the file's fault was said")

    monkeypatch.setattr(cli, "_load", no_load)
    path = tmp_path / "c.json"
    data = _file(spec, curve=[{"budget": {"a": 1}}])
    data["task"] = {"clean": "When Mary and John went", "answer": " Mary", "corrupted": "", "foils": []}
    path.write_text(json.dumps(data))
    assert cli.main(["evaluate", "--model", "tiny-gpt2", "--circuit", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "point 1 of 'curve' has the budget {\"a\": 1}" in error
    assert_one_sentence(error.removeprefix("error: "))


TASK = {"clean": "When Mary and John went", "corrupted": "When Alice and Bob went", "answer": " Mary"}


@pytest.mark.parametrize(
    ("task", "said"),
    [
        (5, "c.json's 'task' is 5, not an object with the prompt and its answer; give --prompt"),
        ({**TASK, "clean": 7}, "c.json's task has the prompt 7, not text; give --prompt"),
        ({**TASK, "answer": ["Mary"]}, 'c.json\'s task has the answer ["Mary"], not text; give --answer'),
        (
            {**TASK, "corrupted": 1.5},
            "c.json's task has the corrupted prompt 1.5, not text; give --corrupted",
        ),
        ({**TASK, "foils": [1]}, "c.json's task has the foils [1], not a list of texts; give --foil"),
        ({**TASK, "foils": " John"}, 'c.json\'s task has the foils " John", not a list of texts'),
        (
            {**TASK, "foils": [" John"], "metric": "logit-diff"},
            'the metric "logit-diff", not one evaluate knows',
        ),
    ],
)
def test_a_file_task_of_the_wrong_kind_is_named_not_dropped(tmp_path, capsys, monkeypatch, spec, task, said):
    """Its prompt of a number read "keeps no task", foils [1] were dropped and a metric it does not
    know became logit_diff, unsaid."""

    def no_load(args):
        raise AssertionError("the model loaded before the task's fault was said")

    monkeypatch.setattr(cli, "_load", no_load)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**_file(spec), "task": task}))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["evaluate", "--model", "tiny-gpt2", "--circuit", "c.json"]) == 2
    error = capsys.readouterr().err.strip().removeprefix("error: ")
    assert said in error
    assert_one_sentence(error)


def test_the_flags_that_replace_a_file_task_part_leave_it_unread(spec):
    from argparse import Namespace

    from circuitviz.entry.file_task import fill_from_file

    text = json.dumps({**_file(spec), "task": {**TASK, "foils": [1], "metric": "x"}})
    args = Namespace(prompt=None, corrupted=None, answer=None, foil=[" John"], metric=None)
    fill_from_file(args, text, "c.json")  # --foil given: the file's foils and metric are not read
    assert (args.prompt, args.foil, args.metric) == (TASK["clean"], [" John"], None)
    other = Namespace(prompt="Another prompt", corrupted=None, answer=None, foil=[], metric=None)
    fill_from_file(other, json.dumps({**_file(spec), "task": 5}), "c.json")  # another prompt: not the file's


@pytest.mark.parametrize(
    ("details", "said"),
    [
        ({"fit": 5}, "(its fit is 5, not a list)"),
        ({"fit": "When Tom went"}, '(its fit is "When Tom went", not a list)'),  # read as 13 letters
        ({"fit": [1]}, "(it names the paraphrase 1, not text)"),
        ({"version": 99, "fit": ["a"]}, "(its version is 99, and this circuitviz reads 1)"),
        ({"version": "1", "fit": ["a"]}, '(its version is "1", and this circuitviz reads 1)'),
        ({"version": True, "fit": ["a"]}, "(its version is true, and this circuitviz reads 1)"),
    ],
)
def test_details_that_do_not_read_are_refused_not_read_as_naming_no_paraphrase(details, said):
    """The paraphrases the method fitted to were measured as held out, unsaid, or (a fit of 5)
    raised TypeError after every circuit was measured."""
    from circuitviz.entry.file_transfer import file_paraphrases_used

    source = {"details": {"kind": "paraphrase-pruning", "version": 1, **details}}
    with pytest.raises(ValueError) as error:
        file_paraphrases_used(source, "c.json")
    message = str(error.value)
    assert message.startswith("c.json's details (paraphrase-pruning) do not read ") and said in message
    assert "cannot be held out of --transfer-file" in message
    assert_one_sentence(message, limit=400)


def test_readable_or_foreign_details_still_name_what_they_name():
    from circuitviz.entry.file_transfer import file_paraphrases_used

    fitted = {"details": {"kind": "paraphrase-pruning", "version": 1, "fit": ["a b", "c d"]}}
    assert file_paraphrases_used(fitted) == {"a b", "c d"}
    assert file_paraphrases_used({"details": {"kind": "another tool's"}}) == frozenset()
    assert file_paraphrases_used({"details": None}) == frozenset()
    assert file_paraphrases_used({"details": {"kind": ["a list"]}}) == frozenset()  # raised TypeError


def test_evaluate_transfer_file_refuses_such_details_before_the_model_loads(
    tmp_path, capsys, monkeypatch, spec
):
    def no_load(args):
        raise AssertionError("the model loaded before the details' fault was said")

    monkeypatch.setattr(cli, "_load", no_load)
    monkeypatch.chdir(tmp_path)
    data = {**_file(spec), "task": TASK, "details": {"kind": "paraphrase-pruning", "version": 1, "fit": 5}}
    (tmp_path / "c.json").write_text(json.dumps(data))
    (tmp_path / "pairs.tsv").write_text("When Tom and Sue went\tWhen Tom and Ann went\n")
    argv = ["evaluate", "--model", "tiny-gpt2", "--circuit", "c.json", "--transfer-file", "pairs.tsv"]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(
        "error: c.json's details (paraphrase-pruning) do not read (its fit is 5, not a list)"
    )
