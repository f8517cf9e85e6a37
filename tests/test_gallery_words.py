"""The Gallery's stored examples say what today's code says, in today's words, at the source.

Until 2026-12-07 the IOI and arithmetic examples stored their held-out notes in older words ("neither
the answer ' Mary' nor its answer on the original prompt (' Mary')", a weak pair's reason with its
capital after a colon) and the page re-worded them as it drew them; the examples are rebuilt
(``scripts/build_gallery.py``) and the Gallery re-words nothing, so a stored sentence in older words
fails here, naming the rebuild. The result view still re-words a result stored in users' own caches
before the wording changed (``query.pairs.reason_as_now``, ``tests/test_held_out_view.py``)."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from circuitviz.core.results import CircuitResult
from circuitviz.entry.api import transfer_note
from circuitviz.query.pairs import reason_as_now
from circuitviz.services.assets import gallery_dir

REBUILD = "rebuild the gallery with `python scripts/build_gallery.py`"
INDEX = json.loads((gallery_dir() / "index.json").read_text(encoding="utf-8"))


def stored(slug: str) -> CircuitResult:
    state = torch.load(gallery_dir() / f"{slug}.pt", map_location="cpu", weights_only=True)
    return CircuitResult.from_state(state["result"])


def stale_sentences(transfer: dict | None) -> list[str]:
    """The stored held-out note and left-out reasons that today's code would word otherwise."""
    transfer = transfer or {}
    note = str(transfer.get("note") or "")
    texts = [note] if note and (transfer_note(transfer) != note or reason_as_now(note) != note) else []
    reasons = [str(row.get("reason", "")) for row in transfer.get("left_out", [])]
    return texts + [reason for reason in reasons if reason_as_now(reason) != reason]


def test_an_older_note_is_found_stale():
    """The IOI example's note as it was stored until 2026-12-07."""
    old = (
        "1 of 6 paraphrases left out, 5 kept: 'Yesterday Mary and John went to the library, and John "
        "gave a key to': the model answers ' the' here, neither the answer ' Mary' nor its answer on "
        "the original prompt (' Mary')."
    )
    reason = "the model answers ' the' here, neither the answer ' Mary' nor its answer on the original prompt (' Mary')"
    transfer = {"note": old, "left_out": [{"paraphrase": "x", "reason": reason}], "budgets": {}}
    assert stale_sentences(transfer) == [old, reason]
    shortfall = {
        "note": "Fewer than 5 held-out paraphrases passed both checks (4 for some circuits).",
        "budgets": {},
    }
    assert stale_sentences(shortfall) == [shortfall["note"]]


@pytest.mark.parametrize("slug", [entry["slug"] for entry in INDEX])
def test_a_stored_examples_notes_are_in_todays_words(slug):
    stale = stale_sentences(stored(slug).transfer)
    assert not stale, f"The Gallery's {slug} example stores {stale!r} in older words; {REBUILD}."


def _build_gallery():
    spec = importlib.util.spec_from_file_location("build_gallery", "scripts/build_gallery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("slug", [entry["slug"] for entry in INDEX])
def test_the_index_says_what_its_stored_example_holds(slug):
    """index.json's line (headline, opening sentence, held-out figure) is what the build script
    reads off the stored result today: an opening rule or sentence changed since the build fails
    here, as a stored result would."""
    build = _build_gallery()
    entry = next(e for e in INDEX if e["slug"] == slug)
    example = next(e for e in build.EXAMPLES if e["slug"] == slug)
    assert entry == build.index_entry(example, stored(slug), entry["model_id"]), REBUILD
