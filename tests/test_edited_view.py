"""A circuit the user edited is said to be edited, and the edit's caption names each part of the
edit present. Before: the caption read "edited: ; kept only m3, a12.h2, a11.h1"."""

from __future__ import annotations

import re

from circuitviz.measure.edit import CircuitEdit


def test_the_edits_caption_names_each_part_present_and_no_empty_one():
    from circuitviz.ui.instrument import edit_words

    assert edit_words(CircuitEdit(keep_only=("m3", "a12.h2", "a11.h1"))) == (
        "edited: kept only m3, a12.h2, a11.h1 (with the embeddings and the logits)"
    )
    assert edit_words(CircuitEdit(removed_nodes=("m3",), removed_edges=("input->m0",))) == (
        "edited: removed m3, input->m0"
    )
    both = edit_words(CircuitEdit(removed_nodes=("m3",), restored_edges=("m0->m1",), keep_only=("m1",)))
    assert both == "edited: removed m3; added back m0->m1; kept only m1 (with the embeddings and the logits)"
    for edit in (CircuitEdit(keep_only=("m1",)), CircuitEdit(restored_edges=("m0->m1",))):
        assert not re.search(r"edited: ;|; ;|;\s*$", edit_words(edit)), edit_words(edit)
