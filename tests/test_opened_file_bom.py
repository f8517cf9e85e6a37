"""A file the user names on the command line (``evaluate --circuit``, ``--paraphrases``,
``--transfer-file``) saved with a byte-order mark (Notepad, Excel) reads as the same file without
one: the mark is no text. A circuit file's JSON list behind it was read as a text file of one edge
named '\\ufeff["a0.h0->logits"]', and a paraphrase file's first paraphrase began with an invisible
U+FEFF that the model read as a token of the prompt (2026-12-06)."""

from __future__ import annotations

import json

from circuitviz.core.graph import GraphSpec
from circuitviz.core.results import load_circuit
from circuitviz.core.tasks import PromptTask
from circuitviz.query.pairs import load_paraphrases

BOM = b"\xef\xbb\xbf"
TASK = PromptTask(
    "When Mary and John went to the store, John gave a drink to",
    "When Alice and Bob went to the store, Carl gave a drink to",
    " Mary",
    (" John",),
)
PAIR = "When Tom and Anna went to the park, Anna gave a ball to\tWhen Jim and Kate went to the park, Carl gave a ball to\n"


def test_a_circuit_file_with_a_byte_order_mark_reads_as_without(tmp_path):
    spec = GraphSpec(n_layers=2, n_heads=2)
    edges = sorted(spec.edge_names)[:3]
    for name, text in (("list.json", json.dumps(edges)), ("edges.txt", "\n".join(edges))):
        plain, marked = tmp_path / f"plain-{name}", tmp_path / f"marked-{name}"
        plain.write_bytes(text.encode("utf-8"))
        marked.write_bytes(BOM + text.encode("utf-8"))
        read, expected = load_circuit(marked, spec), load_circuit(plain, spec)
        assert int(expected.mask.sum()) == len(edges) and read.notes == expected.notes
        assert (read.mask == expected.mask).all()


def test_a_paraphrase_file_with_a_byte_order_mark_reads_as_without(tmp_path):
    marked = tmp_path / "pairs.tsv"
    marked.write_bytes(BOM + PAIR.encode("utf-8"))
    pairs = load_paraphrases(marked, TASK)
    assert [pair.clean for pair in pairs] == [PAIR.split("\t")[0]]  # no '\ufeff' before 'When'
