"""Hostile and odd input: every request ends in a result or one clear sentence, never another
exception and never a hang (hypothesis property tests on a tiny model, bounded examples)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sentences import assert_one_sentence

from circuitviz.bench.toy_models import IOI_TASK, WORDS, tiny_model
from circuitviz.core.graph import GraphError, GraphSpec
from circuitviz.core.results import parse_circuit
from circuitviz.core.tasks import PromptTask, TaskError, prepare_task
from circuitviz.entry.api import discover, parse_budgets
from circuitviz.query.pairs import ParaphraseError, parse_paraphrases

CLEAR = (TaskError, GraphError, ParaphraseError, ValueError)
FAST = settings(
    max_examples=60,
    deadline=5000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

SPECIALS = [
    "",
    " ",
    "\t\n\r ",
    "\x00\x01\x1b[31m\x7f",
    "\u200b\u200e\u202e\ufeff",
    "Ωμέγα и кириллица 中文 العربية עברית",
    "🙂🏳️‍🌈👩🏽‍🔬",
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(1)</script>",
    "\ud7ff\ue000\uffff",
    "Mary" * 25_000,  # 100 kB
    "é𝒳🙂 " * 20_000,  # 100 kB of mixed scripts
    " Mary",
    " John",
]

hostile_text = st.one_of(
    st.sampled_from(SPECIALS),
    st.text(max_size=40),
    st.lists(st.sampled_from(WORDS), max_size=20).map(" ".join),
    st.lists(st.sampled_from(WORDS + ["🙂", "\x00", "中", "<b>"]), max_size=12).map(" ".join),
)


def ends_well(call):
    """The call's result, or None after a refusal in one sentence (one line, at most
    ``MAX_SENTENCE`` characters); any other exception fails."""
    try:
        return call()
    except CLEAR as error:
        assert_one_sentence(str(error))
        return None


def refuses(call, error_type):
    """The call must refuse with ``error_type`` in one sentence; returning anything fails."""
    with pytest.raises(error_type) as refused:
        call()
    assert_one_sentence(str(refused.value))
    return str(refused.value)


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", seed=1)


@FAST
@given(
    clean=hostile_text, corrupted=hostile_text, answer=hostile_text, foils=st.lists(hostile_text, max_size=3)
)
def test_prepare_task_on_hostile_strings(tiny, clean, corrupted, answer, foils):
    task = PromptTask(clean, corrupted, answer, tuple(foils))
    prepared = ends_well(lambda: prepare_task(tiny, task))
    if prepared is not None:
        assert prepared.clean_tokens.shape == prepared.corrupted_tokens.shape
        assert prepared.n_positions <= 256
        assert prepared.answer_id not in prepared.foil_ids


def test_a_prompt_longer_than_the_context_is_refused_not_truncated(tiny):
    long = " ".join(["Mary"] * (tiny.cfg.n_ctx + 10))
    with pytest.raises(TaskError, match="tokens"):
        prepare_task(tiny, PromptTask(long, long, " Mary", (" John",)))


@settings(
    max_examples=25,
    deadline=20000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    clean=hostile_text,
    answer=st.sampled_from([" Mary", " John", "Mary", "", " 🙂", " Mary John"]),
    budgets=st.lists(st.integers(min_value=-5, max_value=10**7), min_size=0, max_size=4),
    method=st.sampled_from(["eap", "eap-ig"]),
)
def test_discover_on_hostile_tasks_and_budgets(tiny, clean, answer, budgets, method):
    task = PromptTask(clean, clean, answer, (" John",))
    result = ends_well(
        lambda: discover(
            tiny, task, method, {"ig_steps": 2} if method == "eap-ig" else None, budgets=budgets
        )[0]
    )
    if result is not None:
        spec = GraphSpec.from_model(tiny)
        for budget in result.budgets:
            assert int(result.circuit(budget).sum()) <= min(max(budget, 0), spec.n_edges)


def test_budgets_of_zero_and_beyond_the_edge_count(tiny):
    spec = GraphSpec.from_model(tiny)
    result, _ = discover(tiny, IOI_TASK, "eap", budgets=(0, spec.n_edges, spec.n_edges * 10))
    assert int(result.circuit(0).sum()) == 0
    assert int(result.circuit(spec.n_edges * 10).sum()) <= spec.n_edges
    for text in ("", "a,b", "-3", "1.5", "1e9999", "1" * 5000, "-" + "1" * 4000, "5," * 3000 + "x"):
        refuses(lambda text=text: parse_budgets(text), ValueError)
    assert parse_budgets("٣, 7,7") == [3, 7]  # any script's digits; repeats collapse (the app says so)
    # the command line's rules (entry.budgets): a gap and '10 20' were read as 3,7 and 1020, unsaid
    for text, said in [
        ("٣, 7,,7", "has an empty item"),
        ("10 20", "separate budgets with commas, as in 10,20"),
    ]:
        with pytest.raises(ValueError, match=said):
            parse_budgets(text)


@pytest.mark.parametrize(
    "build, says",
    [  # 2,700 random calls of discover with one or two values of the wrong kind found these
        (lambda: PromptTask("a b", "c d", " Mary", " John"), "give [' John'], not ' John'"),  # five foils
        (lambda: PromptTask(5, "c d", " Mary", (" John",)), "clean is text, not 5"),
        (lambda: PromptTask("a b", {}, " Mary", (" John",)), "corrupted is text, not {}"),  # AttributeError
        (lambda: PromptTask("a b", "c d", " Mary", 5), "foils are a list of tokens' text, not 5"),
        (lambda: PromptTask("a b", "c d", " Mary", (" John",), 1.5), "metric is text, not 1.5"),
    ],
)
def test_a_task_of_the_wrong_kind_is_one_sentence(build, says):
    with pytest.raises(TaskError) as refused:
        build()
    assert says in str(refused.value)
    assert_one_sentence(str(refused.value))


@pytest.mark.parametrize(
    "arguments, says",
    [
        ({"budgets": "10"}, "budgets are a list of edge counts, not '10'"),  # read as 1 and 0
        ({"budgets": [1.5]}, "not 1.5"),  # read as 1
        ({"budgets": [True]}, "not True"),
        ({"budgets": None}, "not None"),
        ({"budgets": [-3]}, "from 0, not -3"),
        ({"max_tokens": float("inf")}, "token limit is a whole number from 1, not inf"),  # OverflowError
        ({"max_tokens": "x"}, "not 'x'"),
        ({"config": 5}, "eap's settings are a dict of setting names and values, not 5"),
        ({"config": [("ig_steps", 3)]}, "not [('ig_steps', 3)]"),
    ],
)
def test_the_apis_arguments_of_the_wrong_kind_are_one_sentence(tiny, arguments, says):
    with pytest.raises(ValueError) as refused:
        discover(tiny, IOI_TASK, "eap", **arguments)
    assert says in str(refused.value)
    assert_one_sentence(str(refused.value))


# ----- uploaded circuits -------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def circuit_documents(spec: GraphSpec):
    names = st.one_of(
        st.sampled_from(spec.edge_names[:50]),
        st.sampled_from(
            [
                "a9.h0->logits",
                "input->a0.h7<q>",
                "m99->logits",
                "a0.h0->m0",
                "input->logits",
                "->",
                "logits->input",
            ]
        ),
        st.text(max_size=30),
    )
    edges = st.dictionaries(
        names,
        st.one_of(json_values, st.fixed_dictionaries({"score": json_values, "in_graph": json_values})),
        max_size=8,
    )
    cfg = st.one_of(
        st.just(spec.to_cfg_dict()),
        st.fixed_dictionaries({"n_layers": json_values, "n_heads": json_values}),
        json_values,
    )
    documents = st.one_of(
        st.fixed_dictionaries({"cfg": cfg, "edges": edges}),
        st.fixed_dictionaries({"edges": json_values}),
        st.lists(names, max_size=8),
        json_values,
    )
    return documents.map(lambda d: json.dumps(d, allow_nan=True))


@pytest.fixture(scope="module")
def spec(tiny):
    return GraphSpec.from_model(tiny)


@FAST
@given(data=st.data())
def test_parse_circuit_on_hostile_json(spec, data):
    text = data.draw(
        st.one_of(
            circuit_documents(spec),
            hostile_text,
            st.sampled_from(["{", "[", '{"edges": ', "[" * 100_000, "{" * 5000 + "}" * 5000]),
        )
    )
    loaded = ends_well(lambda: parse_circuit(text, spec))
    if loaded is not None:
        assert loaded.mask.shape == (spec.n_forward, spec.n_backward)
        assert not (loaded.mask & ~spec.edge_mask).any()


def test_circuits_naming_nodes_the_model_lacks_are_refused(spec):
    for name in ("a9.h0->logits", "input->a0.h7<q>", "m99->logits", "a0.h0->a0.h1<q>"):
        with pytest.raises(GraphError):
            parse_circuit(json.dumps([name]), spec)
    big = {"cfg": {"n_layers": 1e400, "n_heads": 2}, "edges": {}}
    with pytest.raises(GraphError):
        parse_circuit(json.dumps(big), spec)


# ----- paraphrase files --------------------------------------------------------------------------
def paraphrase_documents():
    record = st.dictionaries(
        st.sampled_from(["clean", "corrupted", "paraphrase", "prompt", "answer", "foils", "source", "other"]),
        json_values | hostile_text,
        max_size=5,
    )
    jsonl = st.lists(record, max_size=4).map(lambda rows: "\n".join(json.dumps(r) for r in rows))
    json_list = st.lists(record | json_values, max_size=4).map(json.dumps)
    csv_text = st.lists(
        st.lists(hostile_text, min_size=1, max_size=3).map(lambda c: ",".join(c)), max_size=4
    ).map(lambda rows: "clean,corrupted,foils\n" + "\n".join(rows))
    typed = st.lists(st.tuples(hostile_text, hostile_text), max_size=4).map(
        lambda rows: "\n".join(f"{a}\t{b}" if i % 2 else f"{a} || {b}" for i, (a, b) in enumerate(rows))
    )
    return st.one_of(
        jsonl,
        json_list,
        csv_text,
        typed,
        hostile_text,
        st.sampled_from(["[" * 100_000, "{" * 50, "clean,corrupted\n" + "x" * 200_000 + ",y"]),
    )


@FAST
@given(text=paraphrase_documents())
def test_parse_paraphrases_on_hostile_files(text):
    pairs = ends_well(lambda: parse_paraphrases(text, IOI_TASK))
    if pairs is not None:
        for pair in pairs:
            assert isinstance(pair.clean, str) and pair.clean.strip()
            assert isinstance(pair.corrupted, str) and pair.corrupted.strip()


def test_paraphrase_file_source_reads_a_hostile_file(tmp_path):
    from circuitviz.query.pairs import load_paraphrases

    path = tmp_path / "p.jsonl"
    path.write_bytes(b"\xff\xfe not utf-8 \x00")
    assert "UTF-8" in refuses(lambda: load_paraphrases(path, IOI_TASK), ParaphraseError)
    refuses(lambda: load_paraphrases(tmp_path / "missing.jsonl", IOI_TASK), ParaphraseError)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"edges": ' + "[" * 100_000,
        "{" * 5000 + "}" * 5000,
        "clean,corrupted\n" + "x" * 200_000 + ",y",
        "x" * 200_000,
    ],
)
def test_parsers_refuse_what_json_and_csv_choke_on(spec, text):
    """None of these is a circuit or a paraphrase list: each parser must say so, not return."""
    refuses(lambda: parse_circuit(text, spec), GraphError)
    refuses(lambda: parse_paraphrases(text, IOI_TASK), ParaphraseError)


# ----- every boundary quotes long input briefly ---------------------------------------------------
LONG_WORDS = " ".join(list(WORDS) * 4)  # 164 word-tokens
WITHIN_CONTEXT = " ".join(list(WORDS) + list(WORDS[:20]))  # 61 word-tokens: the tiny models' n_ctx is 64
LONG_NAME = "a0.h0" * 1000  # 5,000 characters of a node-like name


def boundary_calls(tiny, spec, tmp_path, monkeypatch):
    """(what, call, the error it must raise) for every place a user's text or file comes in,
    each fed input long enough that quoting it whole would make a message of kilobytes."""
    from circuitviz.entry.limits import LimitError, Limits
    from circuitviz.lasso.sae_units import parse_layers
    from circuitviz.methods import get_method
    from circuitviz.models import ModelLoadError, resolve_device, resolve_dtype
    from circuitviz.models.devices import working_memory_bytes
    from circuitviz.models.loading import resolve_source
    from circuitviz.query.variants import parse_anchor_budgets

    limits_file = tmp_path / "limits.json"
    limits_file.write_text(json.dumps({f"key_{i}_" + "x" * 40: 1 for i in range(100)}))
    return [
        (
            "tokenisations of unequal length (each within the context)",
            lambda: prepare_task(
                tiny, PromptTask(WITHIN_CONTEXT, "Mary " + WITHIN_CONTEXT, " Mary", (" John",))
            ),
            TaskError,
        ),
        (
            "an answer of many tokens",
            lambda: prepare_task(tiny, PromptTask("Mary", "John", LONG_WORDS)),
            TaskError,
        ),
        (
            "a foil of control characters",
            lambda: prepare_task(tiny, PromptTask("Mary", "John", " Mary", ("\x00\x1b " * 800,))),
            TaskError,
        ),
        (
            "an unknown metric",
            lambda: prepare_task(tiny, PromptTask("Mary", "John", " Mary", (), "m" * 5000)),
            TaskError,
        ),
        (
            "an edge from a long unknown node",
            lambda: parse_circuit(json.dumps([LONG_NAME + "->m1"]), spec),
            GraphError,
        ),
        (
            "an edge into a long unknown node",
            lambda: parse_circuit(json.dumps(["input->" + LONG_NAME]), spec),
            GraphError,
        ),
        (
            "a circuit of a huge model",
            lambda: parse_circuit(
                json.dumps({"cfg": {"n_layers": 10**4000, "n_heads": 2}, "edges": {}}), spec
            ),
            GraphError,
        ),
        ("a negative budget of 4,000 digits", lambda: parse_budgets("-" + "9" * 4000), ValueError),
        (
            "an anchor budget of 4,000 digits",
            lambda: parse_anchor_budgets("9" * 4000, range(0, 5000, 5)),
            ValueError,
        ),
        ("an SAE layer of 4,000 digits", lambda: parse_layers("9" * 4000, 2), ValueError),
        ("a typed paraphrase line", lambda: parse_paraphrases("x" * 5000, IOI_TASK), ParaphraseError),
        ("an unknown method", lambda: get_method("m" * 5000), ValueError),
        ("an unknown setting", lambda: get_method("eap-ig").make_config({"s" * 5000: 1}), ValueError),
        ("an unknown model", lambda: resolve_source("model-" * 1000), ModelLoadError),
        ("a path that does not exist", lambda: resolve_source("/no/" + "such/" * 900), ModelLoadError),
        ("a device name", lambda: resolve_device("cuda" + "x" * 5000), ModelLoadError),
        ("a precision", lambda: resolve_dtype("float" + "9" * 5000), ModelLoadError),
        (
            "a working-memory setting",
            lambda: (
                monkeypatch.setenv("CIRCUITVIZ_WORKING_MEMORY_GB", "g" * 5000),
                working_memory_bytes("cpu"),
            ),
            ModelLoadError,
        ),
        (
            "a limit that is not a number",
            lambda: Limits.load({"CIRCUITVIZ_MAX_TOKENS": "t" * 5000}),
            LimitError,
        ),
        (
            "a limits file of unknown keys",
            lambda: Limits.load({"CIRCUITVIZ_LIMITS_FILE": str(limits_file)}),
            LimitError,
        ),
    ]


def test_every_boundary_refuses_long_input_in_one_short_sentence(tiny, spec, tmp_path, monkeypatch):
    """The sentence names the problem and quotes the input briefly (at most ``MAX_SENTENCE``
    characters, one line), so the fix stays visible; each call must refuse, not pass."""
    failures = []
    for what, call, error_type in boundary_calls(tiny, spec, tmp_path, monkeypatch):
        try:
            call()
        except error_type as error:
            try:
                assert_one_sentence(str(error))
            except AssertionError as problem:
                failures.append(f"{what}: {problem}")
        except Exception as error:  # noqa: BLE001 (any other exception is a failure to report)
            failures.append(
                f"{what}: {type(error).__name__} instead of {error_type.__name__}: {str(error)[:200]}"
            )
        else:
            failures.append(f"{what}: accepted")
    assert not failures, "\n".join(failures)


def test_a_circuit_files_scores_are_numbers_or_refused_and_a_partial_file_is_said(spec):
    """An audit: scores of 'high' or NaN were read as 0 without a word (the top-N rows then blamed
    the method), 1e300 raised a traceback, and a file of 100 of the edges was evaluated unsaid."""
    from circuitviz.core.results import eap_graph_json

    whole = eap_graph_json(spec, torch.zeros(spec.n_forward, spec.n_backward, device="cpu"), spec.edge_mask)
    name = spec.edge_names[0]
    for bad in ("high", 1e300, -1e39, 10**400, True, [1.0]):
        data = json.loads(json.dumps(whole))
        data["edges"][name]["score"] = bad
        message = refuses(lambda data=data: parse_circuit(json.dumps(data), spec), GraphError)
        assert repr(name) in message, message
    for bad in ("NaN", "Infinity"):  # tokens Python's json writes and reads
        text = json.dumps(whole).replace('"score": 0.0', f'"score": {bad}', 1)
        refuses(lambda text=text: parse_circuit(text, spec), GraphError)
    assert parse_circuit(json.dumps(whole), spec).notes == []  # a whole file: nothing to say
    partial = {**whole, "edges": dict(list(whole["edges"].items())[:3])}
    (note,) = parse_circuit(json.dumps(partial), spec, origin="p.json").notes
    assert note == (
        f"p.json lists 3 of the model's {spec.n_edges:,} edges; the other {spec.n_edges - 3:,} are read "
        "as outside its circuit with score 0."
    )
    unscored = json.loads(json.dumps(whole))
    unscored["edges"][name]["score"] = None
    assert parse_circuit(json.dumps(unscored), spec, origin="u.json").notes == [
        "1 edge of u.json has no score (read as 0)."
    ]
