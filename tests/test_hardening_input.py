"""Hostile and odd input: every request ends in a result or one clear sentence, never another
exception and never a hang (hypothesis property tests on a tiny model, bounded examples)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from circuitviz.api import discover, parse_budgets
from circuitviz.graph import GraphError, GraphSpec
from circuitviz.query.pairs import ParaphraseError, parse_paraphrases
from circuitviz.results import parse_circuit
from circuitviz.tasks import PromptTask, TaskError, prepare_task
from circuitviz.testing import IOI_TASK, WORDS, tiny_model

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


def clear_sentence(error: Exception) -> None:
    message = str(error)
    assert message.strip(), f"{type(error).__name__} without a message"
    assert "Traceback" not in message
    assert len(message) < 2000, f"the message quotes too much ({len(message)} characters)"


def ends_well(call):
    """The call's result, or None after a clear one-sentence refusal; any other exception fails."""
    try:
        return call()
    except CLEAR as error:
        clear_sentence(error)
        return None


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
    for text in ("", "a,b", "-3", "1.5", "1e9999", "٣", "1" * 5000):
        ends_well(lambda text=text: parse_budgets(text))


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
    ends_well(lambda: load_paraphrases(path, IOI_TASK))
    ends_well(lambda: load_paraphrases(tmp_path / "missing.jsonl", IOI_TASK))


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
    ends_well(lambda: parse_circuit(text, spec))
    ends_well(lambda: parse_paraphrases(text, IOI_TASK))
