"""A run stops at its next progress report once Cancel is pressed (``ui/run.py``), so the long
steps of a method report inside themselves: each block of a batched pass (forward and backward),
each head of a first ACC++ SVD, each chunk of CircuitLasso's reduction, each batch of a
paraphrase check, each block of the clean and corrupted runs before a method's first report.
Each test stops the step at a report inside it: before, none came until it ended."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model


class Stop(BaseException):
    """Raised by a progress callback, as the app's ``RunCancelled`` is."""


def _stopping_at(n: int, seen: list):
    def progress(phase, fraction):
        seen.append((str(getattr(phase, "value", phase)), fraction))
        if len(seen) >= n:
            raise Stop

    return progress


# method: (settings, the work's report inside a pass, reports of it at least: 2 blocks of a pass)
PASSES = {
    # one chunk of IG steps, forward and back, each layer's product with the differences, its own 2
    "eap-ig": ({}, "score", 2 + 2 * 2 + 2),
    "edge-pruning": ({"steps": 3}, "learning masks", 3 + 3 * 2 * 2),
    "acc++": ({}, "knockout", 1 + 2),  # the knockout passes
    "circuit-lasso": ({}, "observe", 1 + 2),  # the observation pass
    # the path's target, 5 steps forward and back; then one chunk of its 5 points, and its own 2
    "eap-gp": ({}, "score", 2 + 5 * 2 * 2 + 2 * 2 + 2),
    # the QK fix's observation; one chunk of its rows forward, back (to the last block: the first
    # block's input is the leaf), each layer's product and pattern changes; its own 2
    "atp-star": ({}, "score", 2 + 2 + 1 + 2 + 2 + 2),
}


@pytest.mark.parametrize("method", list(PASSES))
def test_a_pass_reports_before_each_block_and_scores_the_same(method, tmp_path, monkeypatch):
    """A batched pass (every IG step's; every budget's patched pass; a mask-learning step; ACC++'s
    knockouts; CircuitLasso's observations) ran as one silent step on a CPU: the progress callback
    now hears of each block of it (both ways where a backward follows), and a run stops inside
    it; the scores and curve are those of a run without a callback."""
    from circuitviz.acc import svd as acc_svd
    from circuitviz.methods import get_method

    monkeypatch.setattr(acc_svd, "cache_dir", lambda: tmp_path)  # a first SVD is not the user's
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    config, work, least = PASSES[method]
    seen = []

    def run(progress=None):
        return get_method(method).run_on(model, IOI_TASK, config, budgets=[5, 10], progress=progress)

    alone = run()  # first: ACC++'s SVD is then in memory for every run below
    watched = run(lambda *report: seen.append(report))
    assert torch.equal(watched.scores, alone.scores)
    assert [p.metric for p in watched.curve] == [p.metric for p in alone.curve]
    assert sum(1 for phase, _ in seen if phase == work) >= least, seen
    assert sum(1 for phase, _ in seen if phase == "evaluate") >= 1 + 2  # the 2 blocks of its pass
    fractions = [f for phase, f in seen if phase == work]
    assert fractions == sorted(fractions)  # a check inside a pass says what was said last
    first = next(i for i, (phase, _) in enumerate(seen) if phase == work)
    for at in (first + 2, len(seen) - 2):  # inside the work's pass, inside the evaluation's
        with pytest.raises(Stop):
            run(_stopping_at(at, []))


def test_a_first_svd_reports_each_head_and_stops_there_storing_nothing(tmp_path):
    from circuitviz.acc import svd as acc_svd

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    seen = []
    with pytest.raises(Stop):
        acc_svd.load_svd(model, directory=tmp_path, progress=_stopping_at(3, seen))
    assert seen == [("svd", 0.25), ("svd", 0.5), ("svd", 0.75)]
    assert list(tmp_path.iterdir()) == []  # nothing stored of a stopped computation
    done = []
    acc_svd.load_svd(model, directory=tmp_path, progress=lambda phase, f: done.append(f))
    assert done == [0.25, 0.5, 0.75, 1.0] and len(list(tmp_path.iterdir())) == 1


def test_lasso_reduction_reports_before_each_chunk(monkeypatch):
    from circuitviz.lasso import units

    monkeypatch.setattr(units, "_CPU_CHUNK_BYTES", 1)  # one unit a chunk: 6 chunks
    x = torch.randn(6, 20, 8, dtype=torch.float64, device="cpu")  # the CPU path is the one cut in chunks
    seen = []
    with pytest.raises(Stop):
        units.principal_scores(x, 3, progress=_stopping_at(4, seen))
    assert seen == [("regress", 0.0)] * 4
    assert units.principal_scores(x, 3).shape == (6, 20, 3)


def test_a_paraphrase_check_reports_before_each_batch():
    from circuitviz.query.checks import validate_pairs
    from circuitviz.query.pairs import ParaphrasePair

    model = tiny_model()
    pair = ParaphrasePair(IOI_TASK.clean, IOI_TASK.corrupted, IOI_TASK.answer, IOI_TASK.foils, "file")
    seen = []
    checked = validate_pairs(model, IOI_TASK, [pair] * 3, batch_size=2)
    assert len(checked) == 3
    with pytest.raises(Stop):
        validate_pairs(model, IOI_TASK, [pair] * 3, batch_size=2, progress=_stopping_at(2, seen))
    assert seen == [("paraphrases", 0.0)] * 2  # 6 sequences in batches of 2: stopped at the second


def test_the_clean_and_corrupted_runs_report_before_each_block_and_stop_there():
    """A run's clean and corrupted runs came before its first report: a Cancel there waited for
    them (2-9 s of a busy CPU on Gemma-3-270M). Now they say before each block that they are
    under way (``prepare``, the progress bar's step 1), and a run stops inside them."""
    from circuitviz.core.phases import Phase, phase_of_report
    from circuitviz.methods import RunContext, get_method

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    for method in ("eap-ig", "edge-pruning"):  # a scoring method's batch; another's ``ctx.evaluator``
        seen = []
        with pytest.raises(Stop):
            get_method(method).run_on(
                model,
                IOI_TASK,
                {"steps": 2} if method == "edge-pruning" else {},
                budgets=[5],
                progress=_stopping_at(2, seen),
            )
        assert seen == [("prepare", 0.0)] * 2, method
        assert phase_of_report(seen[0][0]) is Phase.PREPARE
    seen = []
    with pytest.raises(Stop):
        assert RunContext(model, IOI_TASK, progress=_stopping_at(1, seen)).evaluator is None  # never reached
    assert seen == [("prepare", 0.0)]
    assert (
        RunContext(model, IOI_TASK).evaluator.baseline
        == RunContext(model, IOI_TASK, progress=lambda *report: None).evaluator.baseline
    )


def test_best_of_n_pair_groups_report_inside_their_clean_and_corrupted_runs(monkeypatch):
    """Best-of-N's pairs run their clean and corrupted prompts as a group before the group's
    scoring reports: a Cancel there waited for them. They report the scoring under way before
    each block now, so a run stops before those runs end."""
    from circuitviz.core.tasks import prepare_task
    from circuitviz.methods import get_method, scoring
    from circuitviz.models.adapter import adapter_of

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    spec = adapter_of(model).spec
    pairs = [prepare_task(model, IOI_TASK)] * 2
    made = []
    evaluators = scoring.evaluators_of_tasks

    def counted(*args, **kwargs):
        found = evaluators(*args, **kwargs)
        made.append(len(found))
        return found

    monkeypatch.setattr(scoring, "evaluators_of_tasks", counted)
    method = get_method("eap-ig")
    config = method.make_config({})
    seen = []
    with pytest.raises(Stop):
        scoring.pair_scores(model, spec, pairs, method, config, progress=_stopping_at(1, seen))
    assert made == [] and seen == [("score", 0.0)]  # stopped inside the group's runs
    alone = scoring.pair_scores(model, spec, pairs, method, config)
    watched = scoring.pair_scores(model, spec, pairs, method, config, progress=lambda *report: None)
    assert all(torch.equal(a, b) for a, b in zip(alone, watched))


def test_lasso_solver_reports_before_each_block_and_stops_there(monkeypatch):
    """CircuitLasso's solver ran silent after the reduction's last report (3-9 s of a busy CPU):
    it reports before each block it solves now, and a run stops inside it, with the
    scores of a run without a callback otherwise."""
    from circuitviz.methods import get_method, lasso

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    seen, inside, solving = [], [], []
    fit = lasso.fit_adaptive

    def watched(*args, **kwargs):
        start = len(seen)
        solving.append(True)
        try:
            return fit(*args, **kwargs)
        finally:
            solving.clear()
            inside.append(seen[start:])

    monkeypatch.setattr(lasso, "fit_adaptive", watched)

    def run(progress=None):
        return get_method("circuit-lasso").run_on(model, IOI_TASK, {}, budgets=[5, 10], progress=progress)

    alone = run()
    assert run(lambda *report: seen.append(report)).scores.equal(alone.scores)
    assert len(inside[-1]) >= 1 and set(inside[-1]) == {("regress", 0.0)}

    def stop_in_solver(phase, fraction):
        if solving:
            raise Stop

    with pytest.raises(Stop):
        run(stop_in_solver)


def test_paraphrase_pruning_paraphrases_clean_and_corrupted_runs_report_before_each_block():
    """Paraphrase pruning runs every checked paraphrase's clean and corrupted prompts (and, for
    the learning, each the other way round) in batched passes that were silent: they report
    before each block now, so a run stops inside them."""
    from circuitviz.core.tasks import prepare_task
    from circuitviz.methods import RunContext
    from circuitviz.methods import paraphrase_pruning as pp

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    tasks = [prepare_task(model, IOI_TASK)] * 2
    seen = []
    with pytest.raises(Stop):
        pp._evaluators(RunContext(model, IOI_TASK, progress=_stopping_at(1, seen)), tasks)
    assert seen == [("prepare", 0.0)]
    made = pp._evaluators(RunContext(model, IOI_TASK, progress=lambda *report: None), tasks)
    assert [e.baseline for e in made] == [
        e.baseline for e in pp._evaluators(RunContext(model, IOI_TASK), tasks)
    ]
