"""A run of a generated paraphrase source priced after another source's run of the same prompt (an
audit in Chromium, 2026-12-06, Gemma-3-270M): the template source's run after a run of a typed list
read "about 6 s ... without the paraphrases' scores and evaluations an earlier run stored" and took
34 s. The prompt's own pair stood for every pair, though the list's run had scored other pairs than
the templates give. A generated source's run keeps the pairs it scored per source setting, and the
estimate prices off only those of them the store holds."""

from __future__ import annotations

import pytest
from test_bon import run

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.methods import get_method
from circuitviz.services.store import ResultStore

TEMPLATE = {
    "paraphrase_source": "template",
    "n_paraphrases": 3,
    "include_mismatched": True,
    "ig_steps": 5,
    "cache_scores": True,
}


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=1, n_heads=2)


def test_a_template_run_is_not_priced_as_stored_by_a_typed_lists_run(tiny, tmp_path):
    store = ResultStore(tmp_path)
    model_id = run(tiny, "bon", store=store, budgets=[8]).model_id  # the typed list (test_bon's pairs)
    method = get_method("bon")
    template = method.as_config(TEMPLATE)
    work = method.stored_work(tiny, model_id, IOI_TASK, template, 16, 1, store)
    # only the prompt's own pair is stored: one of the four pairs the template run scores
    assert work.timings["scoring_s"] == pytest.approx(1 / 4)
    assert work.what == "the scores of the 1 of its 4 pairs"
    result = run(tiny, "bon", store=store, budgets=[8], **TEMPLATE)
    scored = len(result.details.candidates)
    # the same source again: its pairs are stored, priced off whole (iBoN after BoN alike)
    for name in ("bon", "ibon"):
        again = get_method(name).stored_work(tiny, model_id, IOI_TASK, template, 16, 1, store)
        assert again.timings["scoring_s"] == 1.0, name
    # another seed draws other pairs: only the prompt's is stored
    other = method.as_config({**TEMPLATE, "seed": 7})
    assert method.stored_work(tiny, model_id, IOI_TASK, other, 16, 1, store).timings["scoring_s"] < 1.0
    assert scored > 1


class _Recording(ResultStore):
    """A result store that lists the kinds saved, in order."""

    def __init__(self, root):
        super().__init__(root)
        self.kinds: list[str] = []

    def save_state(self, key, state, kind="result"):
        self.kinds.append(kind)
        return super().save_state(key, state, kind=kind)


@pytest.mark.parametrize("source", ["file", "template"])
def test_nothing_is_kept_before_the_pairs_scores(tiny, tmp_path, source):
    """A run keeps its pairs' checks (a typed list) or its pairs (a generated source) after their
    scores: kept before them, a run cancelled while scoring said "the work it had stored on the way
    stays for the next run", though the next run reads neither (the page's Cancel says whether
    anything was stored from the first thing the run stores)."""
    store = _Recording(tmp_path)
    values = TEMPLATE if source == "template" else {"include_mismatched": False, "cache_scores": True}
    run(tiny, "bon", store=store, budgets=[8], **values)
    assert store.kinds and store.kinds[0] == "scores", store.kinds
    assert ("source-pairs" if source == "template" else "pair-check") in store.kinds


def test_a_template_run_is_priced_over_its_pairs_own_tokens(tiny):
    """The run counts each pair's scoring over its own tokens (``passes_done``, which the calibration
    records), so the template source's estimate, at the prompt's length, read short of the runs it
    is calibrated from by their paraphrases' extra length (the factual template's on Gemma-3-270M
    are 9 to 14 tokens beside the prompt's 10). It prices the rewrites the run draws first."""
    from circuitviz.entry.limits import estimate_request

    method = get_method("bon")
    values = {**TEMPLATE, "cache_scores": False, "seed": 4}  # rewrites of 17, 16 and 15 tokens
    config = method.as_config(values)
    result = run(tiny, "bon", budgets=[8], **values)
    pairs = result.details.pairs
    assert sum(pairs[i]["n_tokens"] for i in result.details.candidates) > len(pairs) * pairs[0]["n_tokens"]
    estimate = estimate_request(tiny, IOI_TASK, "bon", config, n_budgets=1)
    # (the prompt's runs, kept by the run, are left out of the estimate: ``beside_count``)
    assert estimate.sequences == pytest.approx(method.passes_done(result) + estimate.beside_count, rel=0.02)
