"""Sentences the Paraphrases page writes beside its figures when Best-of-N had one candidate or
one paraphrase, checked against what the run holds (an audit found them untrue)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402


def _shared_edges_page(shared):
    """``paraphrase_view.shared_edges`` over the run's stored shared-edge entry ``shared``, as the
    page draws it (the candidates' edge sets: the test's)."""
    import types

    from circuitviz.ui import paraphrase_view

    details = types.SimpleNamespace(shared=[shared])
    result = types.SimpleNamespace(model_id="none", method="bon", any_budget=False, details=details)
    paraphrase_view.shared_edges(None, result, 10, set())


def _captions(monkeypatch, sets, shared) -> list[str]:
    """The captions drawn, the candidates' edge sets being ``sets`` (None: no score matrix kept)."""
    from circuitviz.ui import bon

    monkeypatch.setattr(bon, "candidate_edge_sets", lambda *args, **kwargs: sets)
    at = AppTest.from_function(_shared_edges_page, args=(shared,)).run()
    assert not at.exception, at.exception
    return [caption.value for caption in at.caption]


def test_one_candidate_is_not_said_to_share_edges_with_others(monkeypatch):
    """No usable paraphrase left the prompt as the only candidate: the page said "188 edges are
    common to all candidates (their score matrices were not kept)", with the scores kept."""
    shared = {"budget": 10, "n_common": 188, "set_sizes": [188]}
    for sets in ({"q": {"a", "b"}}, None):
        said = " ".join(_captions(monkeypatch, sets, shared))
        assert "were not kept" not in said and "common to all" not in said, said
        assert "one candidate at budget 10, the prompt itself" in said, said


def test_candidates_without_kept_scores_still_say_what_they_share(monkeypatch):
    said = " ".join(_captions(monkeypatch, None, {"budget": 10, "n_common": 40, "set_sizes": [50, 60]}))
    assert "40 edges are common to all candidates (their score matrices were not kept)" in said
