"""The first estimate of a run of the user's own paraphrase list (an audit in Chromium, 2026-12-06,
Gemma-3-270M): it counted every listed pair but a repeat as scored and evaluated, though the run's
checks leave out a pair the model answers otherwise (and one of another token length than its
corruption, or over the token limit); such a list was priced as though every pair were a candidate.
The estimate now runs the run's own checks on the list (once per list) and prices the pairs they keep,
and its line says how many those are."""

from __future__ import annotations

import pytest
from test_bon import TINY_PAIRS, run

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.entry.limits import estimate_request
from circuitviz.methods import get_method
from circuitviz.methods.bon import paraphrases_scored
from circuitviz.query.pairs import paraphrase_records

SETTINGS = {"paraphrase_source": "file", "include_mismatched": False, "ig_steps": 5, "cache_scores": False}


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=1, n_heads=2)


def test_the_first_estimate_prices_the_pairs_the_checks_keep(tiny):
    method = get_method("bon")
    config = method.as_config({**SETTINGS, "paraphrases": paraphrase_records(TINY_PAIRS)})
    result = run(tiny, "bon", budgets=[8], include_mismatched=False)
    counts = result.details.counts
    scored = int(counts["scored_pairs"]) + int(counts.get("scores_from_store", 0))  # with the prompt's
    assert scored - 1 < paraphrases_scored(config)  # the tiny model answers some pairs otherwise
    estimate = estimate_request(tiny, IOI_TASK, "bon", config, n_budgets=1)
    # the passes priced are the passes the run reports it did (``passes_done``), no pair more (the
    # prompt's clean and corrupted runs, which this process now keeps, left out of both: beside_count)
    assert estimate.sequences == pytest.approx(method.passes_done(result) + estimate.beside_count)
    from circuitviz.methods.bon import listed_pairs_kept

    assert listed_pairs_kept(tiny, IOI_TASK, config) == scored - 1
    assert estimate.n_paraphrases == 3 and estimate.n_scored == scored - 1
    assert f"3 paraphrases of which the checks keep {scored - 1} to score" in estimate.summary()
    # mismatched answers let in: every listed pair is scored, and the line says nothing more
    mismatched = method.as_config({**SETTINGS, "include_mismatched": True, "paraphrases": config.paraphrases})
    every = estimate_request(tiny, IOI_TASK, "bon", mismatched, n_budgets=1)
    assert every.n_scored == 3 and "of which" not in every.summary()
    assert every.sequences > estimate.sequences


def test_a_generated_source_is_priced_as_before(tiny):
    from circuitviz.methods.bon import listed_pairs_kept

    config = get_method("bon").as_config({**SETTINGS, "paraphrase_source": "template", "n_paraphrases": 4})
    assert listed_pairs_kept(tiny, IOI_TASK, config) is None
    estimate = estimate_request(tiny, IOI_TASK, "bon", config, n_budgets=1)
    assert estimate.n_scored is None and estimate.n_paraphrases == 4


SHORT = "When Mary and John went to the park , John gave a ball to\tWhen Alice and Bob went to the park , Carl gave a ball to"
LONG = (
    "When Mary and John went to the park after a long walk past the old houses , the quiet gardens and the "
    "busy market , John gave a ball to\tWhen Alice and Bob went to the park after a long walk past the old "
    "houses , the quiet gardens and the busy market , Carl gave a ball to"
)


def test_a_long_paraphrase_is_priced_over_its_own_tokens(tiny):
    """Each pair is scored over its own tokens, and the estimate priced every pair as long as the
    prompt: a list with a 574-character paraphrase (117 tokens beside the prompt's 15) was
    priced at about 30 s and took 61 s. The finished run counts its passes the same way, so the
    calibration it records is not slowed by the long pair."""
    method = get_method("bon")
    settings = {**SETTINGS, "include_mismatched": True}
    short = estimate_request(
        tiny,
        IOI_TASK,
        "bon",
        method.as_config({**settings, "paraphrases": paraphrase_records(SHORT)}),
        n_budgets=1,
    )
    config = method.as_config({**settings, "paraphrases": paraphrase_records(LONG)})
    long = estimate_request(tiny, IOI_TASK, "bon", config, n_budgets=1)
    assert short.n_scored == long.n_scored == 1
    assert long.sequences > short.sequences * 1.3
    result = run(tiny, "bon", budgets=[8], paraphrases=LONG, include_mismatched=True)
    assert long.sequences == pytest.approx(method.passes_done(result) + long.beside_count)


def test_one_paraphrase_is_said_in_the_singular(tiny):
    """A list of one pair, which the checks leave out (its corruption is a token longer), read "1
    paraphrases of which the checks keep 0 to score" (session 43, in Chromium)."""
    longer = (
        "When Mary and John went to the park , John gave a ball to\t"
        "When Alice Smith and Bob went to the park , Carl gave a ball to"
    )
    config = get_method("bon").as_config({**SETTINGS, "paraphrases": paraphrase_records(longer)})
    said = estimate_request(tiny, IOI_TASK, "bon", config, n_budgets=1).summary()
    assert ", 1 paraphrase of which the checks keep 0 to score;" in said
