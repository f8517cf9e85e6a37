"""Progress follows the run: the scoring phase says it has begun when the clean and corrupted runs
are done, and before each chunk of gradient passes, not only when a chunk ends (on a CPU one
chunk can be all of EAP-IG's scoring: the app showed "clean and corrupted runs" for 16 s of it)."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.phases import Phase, Timing, phase_of_report, timing_words
from circuitviz.methods import RunContext, get_method


def test_a_scoring_run_reports_each_phase_as_it_begins():
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    reports = []
    get_method("eap-ig").run_on(
        model,
        IOI_TASK,
        {"ig_steps": 3},
        [5, 10],
        progress=lambda name, fraction: reports.append((name, fraction)),
    )
    names = [getattr(name, "value", name) for name, _ in reports]
    first_score = names.index("score")  # before it, the clean and corrupted runs before each block
    assert first_score > 0 and reports[:first_score] == [("prepare", 0.0)] * first_score
    assert phase_of_report(reports[0][0]) is Phase.PREPARE
    assert reports[first_score] == ("score", 0.0)  # the work has begun: step 2 of 3 from here on
    assert phase_of_report(reports[first_score][0]) is Phase.WORK
    first_evaluate = names.index("evaluate")
    assert all(name == "score" for name in names[first_score:first_evaluate])
    scoring = [fraction for _, fraction in reports[first_score:first_evaluate]]
    assert scoring == sorted(scoring) and scoring[-1] == 1.0
    assert reports[first_evaluate] == ("evaluate", 0.0) and reports[-1] == ("evaluate", 1.0)


@pytest.mark.parametrize(
    ("method", "config"),
    [("eap-ig", {"ig_steps": 3}), ("eap", {}), ("eap-gp", {}), ("eap-ig-activations", {"ig_steps": 3})],
)
def test_the_scoring_moves_through_each_block_of_its_one_chunk(method, config):
    """On a CPU one chunk of gradient passes is all of the scoring, and every report inside it
    said where the chunk began: the command line's line read 'score 0.0%' until the phase ended.
    Each block of the pass, forward and backward, and each layer's product after it now moves
    the figure on, never back, and short of 1 until the chunk is kept."""
    model = tiny_model("gpt2", n_layers=4, n_heads=2)
    reports = []
    get_method(method).run_on(
        model, IOI_TASK, config, [5, 10], progress=lambda name, fraction: reports.append((name, fraction))
    )
    scoring = [fraction for name, fraction in reports if getattr(name, "value", name) == "score"]
    assert scoring == sorted(scoring) and scoring[-1] == 1.0
    inside = sorted({fraction for fraction in scoring if 0 < fraction < 1})
    assert len(inside) >= 2 * 4, scoring  # forward and products: a step at each of 4 layers, and backward
    assert inside[-1] < 1 and inside[0] < 0.2 and inside[-1] > 0.75


def test_the_scoring_report_reads_the_share_of_the_pass_behind_it():
    """Forward, block l of n: a third of the pass times l / n; the backward pass reaching block l:
    the blocks from the last down to l behind it too; a chunk's pass its first ``PASS_SHARE``."""
    from circuitviz.engine.prefix import FORWARD_SHARE, pass_checks
    from circuitviz.engine.scores import PASS_SHARE, scoring_checks

    said = []
    x = torch.ones(1, requires_grad=True, device="cpu")
    for _, hook in pass_checks(4, said.append):  # four blocks, each doubling its input
        value = x * 1.0
        hook(value, None)
        x = value * 2.0
    x.sum().backward()
    forward, back = FORWARD_SHARE, 1 - FORWARD_SHARE
    expected = [0.0, forward / 4, forward / 2, forward * 3 / 4]
    expected += [forward + back / 4, forward + back / 2, forward + back * 3 / 4, 1.0]
    assert said == pytest.approx(expected)
    reports = []
    checks = scoring_checks(4, lambda name, fraction: reports.append((name, fraction)), slice(10, 20), 40)
    checks[0][1](torch.zeros(1, device="cpu"), None)  # the chunk of rows 10-19 of 40 begins
    assert reports == [("score", 0.25)]
    x = torch.ones(1, requires_grad=True, device="cpu")
    for _, hook in checks:
        value = x * 1.0
        hook(value, None)
        x = value * 2.0
    x.sum().backward()
    assert reports[-1] == ("score", pytest.approx((10 + 10 * PASS_SHARE) / 40))
    assert pass_checks(4, None) == [] and scoring_checks(4, None, slice(0, 1), 1) == []


def test_a_batch_reports_its_scoring_start_on_its_own_scale():
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    method = get_method("eap")
    reports = []
    contexts = [RunContext(model, IOI_TASK), RunContext(model, IOI_TASK)]
    method.run_batch(
        contexts,
        {},
        [5],
        progress=lambda name, fraction: reports.append((getattr(name, "value", name), fraction)),
    )
    assert reports[0] == ("score", 0.05)  # the batch's scoring spans 5 % to 85 % of its progress
    assert ("evaluate", 0.85) in reports


def test_a_phase_on_a_gpu_ends_when_its_kernels_have_run(monkeypatch):
    """Unsynchronised, a GPU phase carried the kernels queued by the one before it (Best-of-N's
    overlap step read 0.90 s on an H200; it takes 0.14 s on a CPU). Each phase waits for its own
    device once it has run, and not after an error (the failed kernel would raise again)."""
    import pytest
    import torch

    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(str(device)))
    context = RunContext(tiny_model("gpt2", seed=0), IOI_TASK)
    with context.timed("scoring_s"):
        pass
    assert waited == []  # a CPU run never waits
    monkeypatch.setattr(RunContext, "device", property(lambda self: torch.device("cuda", 1)))
    with context.timed("scoring_s"):
        pass
    assert waited == ["cuda:1"] and context.timings["scoring_s"] >= 0
    with pytest.raises(RuntimeError), context.timed("evaluation_s"):
        raise RuntimeError("a kernel failed")
    assert waited == ["cuda:1"] and "evaluation_s" in context.timings


def test_timings_read_in_words_in_the_result_caption():
    """The caption under a result said 'clean_corrupted_s 0.0s, scoring_s 6.5s': its keys, not words."""
    assert timing_words(Timing.CLEAN_CORRUPTED) == "clean and corrupted runs"
    assert timing_words("scoring_s") == "scoring"
    assert timing_words("ig_s") == "IG"
    assert timing_words("reduce_s") == "reduce"
    assert timing_words("a_method_own_s") == "a method own"  # any name a method records


def test_a_phase_under_a_tenth_of_a_second_is_not_shown_as_zero():
    """Explore's caption read "clean and corrupted runs 0.0 s" for two short passes on SmolLM2-135M
    (0.04 s), as if the phase had not run."""
    from circuitviz.ui.result_view import phase_seconds

    assert phase_seconds(0.04) == "0.04\u00a0s"
    assert phase_seconds(0.002) == "under\u00a00.01\u00a0s"
    assert phase_seconds(1.26) == "1.3\u00a0s"
    assert phase_seconds(0.1) == "0.1\u00a0s"


def test_the_clean_and_corrupted_runs_report_keeps_the_bar_at_step_one():
    """The clean and corrupted runs report before each block (so a Cancel is heard there): the bar
    stays at step 1 and names them, no part of the work is made of them, and a late one (a
    method whose evaluator is made during its work) moves nothing back."""
    from circuitviz.ui.run import RunProgress, work_parts

    clock = [0.0]
    progress = RunProgress({"prepare": 2.0, "work": 6.0, "evaluate": 2.0}, clock=lambda: clock[0])
    clock[0] = 1.0
    progress.report("prepare", 0.0)
    fraction, text = progress.update()
    assert "step 1 of 3, clean and corrupted runs" in text and 0.0 < fraction < 0.2
    clock[0] = 3.0
    progress.report("score", 0.5)
    progress.report("prepare", 0.0)
    assert progress.phase is Phase.WORK and progress.part == "score" and progress.reported == 0.5
    assert work_parts([("prepare", 0.0, 1.0), ("score", 1.0, 3.0)], 0.0) == {"score": 3.0}
