"""Two parts of a run's work its estimate counted wrong (session 46): a gradient pass the device's
memory cuts into chunks pays its set-up once a chunk, and a second method on a prompt reads the
clean and corrupted runs an earlier run made instead of making them again."""

from __future__ import annotations

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core import pass_weights
from circuitviz.entry.limits import estimate_request
from circuitviz.measure.chunks import chunk_size
from circuitviz.measure.evaluate import forget_prompt_runs
from circuitviz.methods import RunContext
from circuitviz.models.devices import WORKING_MEMORY_ENV


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=1, n_heads=2)


def test_a_gradient_pass_pays_its_set_up_once_a_chunk():
    """Measured on a CPU's 2 GB (IOI prompt, alternated): the 38th IG step on Gemma-3-270M, which
    opens a second chunk of 37 rows, cost 9.2 plain passes where the 37th cost 2.5; the 13th on
    SmolLM2-135M (chunks of 12) 8.0. A set-up and a row, 9.5."""
    assert pass_weights.gradient_passes(38, 2) - pass_weights.gradient_passes(37, 1) == pytest.approx(9.5)
    assert pass_weights.gradient_passes(40) == pass_weights.gradient_passes(40, 1)


def test_an_estimate_counts_the_chunks_its_gradient_pass_runs_in(tiny, monkeypatch):
    """40 IG steps counted as one chunk came out 10-18 % short on both embedded models."""
    forget_prompt_runs(tiny)
    whole = estimate_request(tiny, IOI_TASK, "eap-ig", {"ig_steps": 40}, n_budgets=1)
    eap = estimate_request(tiny, IOI_TASK, "eap", n_budgets=1)
    n_tokens = whole.n_tokens
    monkeypatch.setenv(WORKING_MEMORY_ENV, "0.000001")  # a chunk of a row or a few
    from circuitviz.engine.memory import gradient_bytes_per_position

    size = chunk_size(tiny, "gradient", n_tokens, gradient_bytes_per_position(tiny, n_tokens))
    chunks = -(-40 // size)
    assert chunks > 1
    cut = estimate_request(tiny, IOI_TASK, "eap-ig", {"ig_steps": 40}, n_budgets=1)
    extra = (chunks - 1) * pass_weights.GRADIENT_SETUP_PASSES
    assert cut.sequences == pytest.approx(whole.sequences + extra)
    assert cut.flops / cut.sequences == pytest.approx(whole.flops / whole.sequences)
    # EAP's one row never runs in more than one chunk
    assert estimate_request(tiny, IOI_TASK, "eap", n_budgets=1).sequences == eap.sequences


@pytest.mark.parametrize("method", ["eap", "eap-ig", "flow-routes"])
def test_a_prompts_kept_runs_are_not_priced_again(tiny, method):
    """Compare in the app runs a second method on the prompt: its clean and corrupted runs are read
    back (0.05 s where they took 3.7 s), and the estimate counted them (7 passes), so it came out
    long and its record priced the next runs short."""
    forget_prompt_runs(tiny)
    fresh = estimate_request(tiny, IOI_TASK, method, n_budgets=2)
    assert RunContext(tiny, IOI_TASK).evaluator is not None  # an earlier run's clean and corrupted runs, kept
    second = estimate_request(tiny, IOI_TASK, method, n_budgets=2)
    assert second.sequences == pytest.approx(fresh.sequences - pass_weights.PREPARE_PASSES)
    assert second.seconds < fresh.seconds
    forget_prompt_runs(tiny)
    assert estimate_request(tiny, IOI_TASK, method, n_budgets=2).sequences == pytest.approx(fresh.sequences)


def test_a_method_that_does_not_count_the_prompts_runs_keeps_its_price(tiny):
    """Only what a cost names as the prompt's runs (``Cost.prompt_passes``) is left out."""
    forget_prompt_runs(tiny)
    fresh = estimate_request(tiny, IOI_TASK, "circuit-lasso", n_budgets=2)
    assert RunContext(tiny, IOI_TASK).evaluator is not None
    assert estimate_request(tiny, IOI_TASK, "circuit-lasso", n_budgets=2).sequences == fresh.sequences
    forget_prompt_runs(tiny)
