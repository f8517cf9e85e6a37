"""A JSON text a user gives holding a whole number longer than Python reads (4,300 digits) raised
Python's own ValueError ("Exceeds the limit (4300 digits) for integer string conversion ...; use
sys.set_int_max_str_digits() to increase the limit") through every reader that says in one sentence
that a text is not JSON: a traceback on the Dataset page's upload, the Paraphrases page and the
graph file uploader (2026-12-06). Each says it in its own sentence now (``core.json_text``)."""

from __future__ import annotations

import pytest

from circuitviz.batch.dataset import DatasetError, parse_dataset
from circuitviz.core.graph import GraphError
from circuitviz.core.results import circuit_data
from circuitviz.core.tasks import PromptTask
from circuitviz.export.neuronpedia import GraphFileError, read_neuronpedia_bytes
from circuitviz.query.pairs import ParaphraseError, parse_paraphrases

NINES = "9" * 5000
SAID = "a number of 5,000 digits, over the 4,300 that can be read"
TASK = PromptTask(
    "When Mary and John went to the store, John gave a drink to",
    "When Alice and Bob went to the store, Carl gave a drink to",
    " Mary",
    (" John",),
)
READERS = {
    "dataset line": (
        lambda: parse_dataset('{"clean": "a", "corrupted": "b", "answer": ' + NINES + "}\n", "jsonl"),
        DatasetError,
        f"line 1 is not valid JSON ({SAID} at column 44)",
    ),
    "paraphrase list": (
        lambda: parse_paraphrases('[{"clean": "a", "corrupted": ' + NINES + "}]", TASK),
        ParaphraseError,
        f"The paraphrase list is not valid JSON ({SAID} at line 1).",
    ),
    "paraphrase lines": (
        lambda: parse_paraphrases('{"clean": "a", "corrupted": ' + NINES + "}\n", TASK),
        ParaphraseError,
        f"Line 1 of the paraphrase file is not valid JSON ({SAID});",
    ),
    "circuit file": (
        lambda: circuit_data('{"edges": {"input->m0": {"score": ' + NINES + "}}}"),
        GraphError,
        f"the circuit is not valid JSON ({SAID} at line 1).",
    ),
    "graph file": (
        lambda: read_neuronpedia_bytes(('{"nodes": [], "links": [], "x": ' + NINES + "}").encode(), "g.json"),
        GraphFileError,
        f"g.json is not valid JSON ({SAID} at line 1).",
    ),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_a_number_too_long_to_read_is_the_readers_one_sentence(reader):
    read, error, says = READERS[reader]
    with pytest.raises(error) as raised:
        read()
    assert says in str(raised.value) and "set_int_max_str_digits" not in str(raised.value)


def test_a_set_flags_value_too_long_to_read_is_its_text():
    """``--set ig_steps=<5,000 nines>`` printed Python's advice to raise its limit; the value is
    the flag's text, as any value that is not JSON, and the method's setting check names it."""
    import types

    from circuitviz.entry.settings_args import merged_settings

    args = types.SimpleNamespace(set=["ig_steps=" + NINES, "note=" + "[" * 100_000])
    settings = merged_settings(args)
    assert settings["ig_steps"] == NINES and settings["note"] == "[" * 100_000
