"""The methods that build their own cost (session 47): those whose run reads the prompt's clean and
corrupted runs off the run's evaluator are priced without them when this process kept them (ACDC,
Edge Pruning, paraphrase pruning, Best-of-N, the ensemble, exact patching, ACC++'s patching curve),
those whose run makes them again keep their price (CircuitLasso's observation pass); Edge Pruning's warm start and
the ensemble's members count the chunks of their gradient passes; a run's record holds the passes
it made (``Estimate.flops_done``, ``Estimate.as_run_finds``)."""

from __future__ import annotations

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core import pass_weights
from circuitviz.engine.memory import gradient_bytes_per_position
from circuitviz.entry.limits import estimate_request
from circuitviz.measure.chunks import chunk_size
from circuitviz.measure.evaluate import forget_prompt_runs
from circuitviz.methods import RunContext, get_method
from circuitviz.models.devices import WORKING_MEMORY_ENV

PREPARE = pass_weights.PREPARE_PASSES


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=1, n_heads=2)


def _fresh_and_kept(model, method: str, config=None):
    """(the estimate before the prompt's runs are made, the estimate once they are kept)."""
    forget_prompt_runs(model)
    fresh = estimate_request(model, IOI_TASK, method, config, n_budgets=2)
    assert RunContext(model, IOI_TASK).evaluator is not None  # an earlier run's clean and corrupted runs
    kept = estimate_request(model, IOI_TASK, method, config, n_budgets=2)
    forget_prompt_runs(model)
    return fresh, kept


@pytest.mark.parametrize(
    ("method", "left_out"),
    [
        ("acdc", PREPARE),  # the walk starts from the evaluator's runs
        ("edge-pruning", PREPARE),  # its EAP-IG warm start scores on the run's evaluator
        ("paraphrase-pruning", PREPARE),  # the prompt's evaluator (the paraphrases' are made anew)
        ("bon", PREPARE),  # the prompt's evaluator
        ("ensemble", 2 * PREPARE),  # EAP-IG and EAP each count the one evaluator's runs they read
        ("exact", 2.0),  # its count gives the evaluator's runs 2 passes
        ("acc++", PREPARE),  # its patching curve's evaluator, where the prompt has a corrupted one
    ],
)
def test_a_method_reading_the_evaluators_runs_is_priced_without_kept_ones(tiny, method, left_out):
    """Before, these were priced as making the runs again (7 passes), and Compare's plan line did
    not say a later one shares them."""
    fresh, kept = _fresh_and_kept(tiny, method)
    assert kept.sequences == pytest.approx(fresh.sequences - left_out)
    assert kept.prompt_passes == pytest.approx(left_out) and kept.kept_passes == pytest.approx(left_out)
    if fresh.seconds_range is not None:  # a range moves with its estimate
        assert kept.seconds_range[1] < fresh.seconds_range[1]


@pytest.mark.parametrize("method", ["circuit-lasso"])
def test_a_method_making_the_runs_again_keeps_its_price(tiny, method):
    """CircuitLasso's clean and corrupted runs are rows of its observation pass, made every run.
    (ACC++ runs its own forward, but its patching curve reads the evaluator's runs: above.)"""
    fresh, kept = _fresh_and_kept(tiny, method)
    assert kept.sequences == pytest.approx(fresh.sequences)


@pytest.mark.parametrize(
    ("method", "config"), [("edge-pruning", {"ig_steps": 40}), ("ensemble", {"ig_steps": 40})]
)
def test_a_warm_start_and_an_ensemble_member_count_their_chunks(tiny, monkeypatch, method, config):
    """Edge Pruning's warm start and the ensemble's EAP-IG run one gradient pass of 40 rows each,
    chunked as EAP-IG's own (EAP's one row never is)."""
    forget_prompt_runs(tiny)
    whole = estimate_request(tiny, IOI_TASK, method, config, n_budgets=1)
    monkeypatch.setenv(WORKING_MEMORY_ENV, "0.000001")  # a chunk of a row or a few
    n_tokens = whole.n_tokens
    size = chunk_size(tiny, "gradient", n_tokens, gradient_bytes_per_position(tiny, n_tokens))
    chunks = -(-40 // size)
    assert chunks > 1
    cut = estimate_request(tiny, IOI_TASK, method, config, n_budgets=1)
    extra = (chunks - 1) * pass_weights.GRADIENT_SETUP_PASSES
    assert cut.sequences == pytest.approx(whole.sequences + extra)
    assert cut.beside_count == pytest.approx(extra)


def test_a_counted_run_records_the_passes_it_made(tiny, monkeypatch):
    """ACDC counts its run's passes as they went (``passes_done``) in its count's terms, prompt runs
    included: a run on kept runs recorded 7 passes it did not make, and a chunked one left out its
    chunks."""
    fresh, kept = _fresh_and_kept(tiny, "acdc")
    acdc = get_method("acdc")
    done = 40.0
    monkeypatch.setattr(type(acdc), "passes_done", lambda self, result: done)
    per_pass = fresh.flops / fresh.sequences
    assert fresh.flops_done("acdc", None) == pytest.approx(per_pass * done)
    assert kept.flops_done("acdc", None) == pytest.approx(per_pass * (done - PREPARE))


def test_the_record_follows_the_kept_runs_the_run_finds(tiny):
    """An estimate priced before another run made the prompt's runs (Compare's plan prices every
    method at once; a page drawn before) counted 7 passes the run read back; one priced on kept
    runs that were dropped before it started counted 7 too few."""
    fresh, kept = _fresh_and_kept(tiny, "eap")
    assert fresh.as_run_finds(tiny, IOI_TASK) is fresh  # still none kept
    assert RunContext(tiny, IOI_TASK).evaluator is not None
    found = fresh.as_run_finds(tiny, IOI_TASK)
    assert found.sequences == pytest.approx(kept.sequences)
    assert found.flops == pytest.approx(kept.flops) and found.seconds < fresh.seconds
    assert found.flops_done("eap", None) == pytest.approx(kept.flops)
    assert kept.as_run_finds(tiny, IOI_TASK) is kept
    forget_prompt_runs(tiny)
    again = kept.as_run_finds(tiny, IOI_TASK)
    assert again.sequences == pytest.approx(fresh.sequences) and again.flops == pytest.approx(fresh.flops)


def test_the_apps_run_records_with_the_kept_runs_it_found(tiny, monkeypatch):
    """The page prices a request as it draws (Compare's plan line, every method before any runs):
    the run then found the prompt's runs an earlier run made, and its record counted them."""
    pytest.importorskip("streamlit")
    from types import SimpleNamespace

    from circuitviz.ui import loaders, run

    forget_prompt_runs(tiny)
    fresh = estimate_request(tiny, IOI_TASK, "eap", n_budgets=2)
    assert RunContext(tiny, IOI_TASK).evaluator is not None  # made after the pricing, before the run
    recorded = []
    monkeypatch.setattr(loaders, "get_store", lambda: None)
    monkeypatch.setattr(loaders, "discover", lambda *args, **kwargs: (SimpleNamespace(timings={}), False))
    monkeypatch.setattr(run, "record_run", lambda estimate, *args: recorded.append(estimate))
    request = SimpleNamespace(
        key="kept-runs-found", method="eap", estimate=fresh, budgets=[5, 9], task=IOI_TASK
    )
    run._start(tiny, request).thread.join(timeout=30)
    forget_prompt_runs(tiny)
    assert len(recorded) == 1
    assert recorded[0].sequences == pytest.approx(fresh.sequences - PREPARE)


def test_a_failure_finding_the_kept_runs_is_the_runs_error(tiny, monkeypatch):
    """Looking the kept runs up tokenises the prompt in the run's thread: a failure there ends the
    run with its error on the page, not a thread that died with neither result nor error."""
    pytest.importorskip("streamlit")
    from types import SimpleNamespace

    from circuitviz.entry.limits import Estimate
    from circuitviz.ui import loaders, run

    def fails(self, model, task):
        raise RuntimeError("the tokenizer failed")

    monkeypatch.setattr(Estimate, "as_run_finds", fails)
    monkeypatch.setattr(loaders, "get_store", lambda: None)
    estimate = estimate_request(tiny, IOI_TASK, "eap", n_budgets=2)
    request = SimpleNamespace(
        key="kept-runs-fail", method="eap", estimate=estimate, budgets=[5, 9], task=IOI_TASK
    )
    job = run._start(tiny, request)
    job.thread.join(timeout=30)
    assert isinstance(job.error, RuntimeError) and job.result is None
