"""A run measured on a busy machine does not price later runs as busy: the estimate prefers runs
that began on a quiet machine, in every tier, and scales the others by how busy the machine was;
a machine busy now is told the estimate is a quiet machine's."""

from __future__ import annotations

import pytest

from circuitviz.bench.toy_models import tiny_model
from circuitviz.entry import calibration, limits
from circuitviz.entry.limits import busy_note, estimate_run


@pytest.fixture(autouse=True)
def _fresh_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))


def test_how_much_longer_a_run_takes_beside_other_work():
    """The run's fair share of the cores and the threads it gave up, against what was measured on
    the two cores (docs/benchmarks.md, "A run's threads on a busy CPU"); with the cores full the
    load average says how full."""
    slowdown = calibration.slowdown
    assert slowdown(0.0, 2) == 1.0 and slowdown(0.0, 2, threads=2, default=2) == 1.0
    assert slowdown(1.0, 2, threads=1, default=2) == pytest.approx(1.52, abs=0.01)  # measured 1.5x
    assert slowdown(2.0, 2, threads=2, default=2) == pytest.approx(2.0)  # measured 2.1x
    assert slowdown(2.0, 2, threads=1, default=2) == pytest.approx(2.27, abs=0.01)  # measured 2.4x
    assert slowdown(1.0, 2, threads=1, default=1) == 1.0  # threads fixed at one: measured 1.0x
    assert slowdown(2.0, 2, threads=1, default=1) == pytest.approx(1.5)  # measured 1.6x
    assert slowdown(1.0, 2) == pytest.approx(1.5)  # threads not recorded: every core
    assert slowdown(1.0, 2, load=6.0) == pytest.approx(1.5)  # cores left free: the others' figure
    assert slowdown(2.0, 2, load=6.0) == pytest.approx(4.0)  # six jobs on two cores
    assert slowdown(2.0, 2, load=1.0) == pytest.approx(2.0)  # a load that lags: never less
    assert slowdown(1.0, 16, threads=15, default=16) == pytest.approx((16 / 15) ** 0.6)


def test_a_first_run_on_a_busy_machine_is_scaled_to_a_quiet_one():
    """EAP-IG's only run began with the two cores full (load 6): 40 s. Priced as it was, the
    next run on a quiet machine would be 40 s (it was 73 s for a 13 s run in the app); scaled by
    how busy the machine was, 10 s, and the sentence says so."""
    calibration.record("cpu", "eap-ig", 4e11, 40.0, model="m", others=2.0, cores=2, load=6.0)
    rate = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert rate.flops_per_second == pytest.approx(4e11 / 10.0)
    assert rate.machine == "scaled" and rate.assumes_quiet and not rate.quiet_only
    assert rate.describe("eap-ig") == (
        "priced from 1 eap-ig run on this machine beside other work, scaled to a quiet machine by how busy it was"
    )
    stored = calibration.recorded_runs("cpu", "eap-ig")[0]
    assert (stored["others"], stored["cores"], stored["load"]) == (2.0, 2, 6.0)
    # a quiet run comes: it alone prices, as before
    calibration.record("cpu", "eap-ig", 4e11, 12.0, model="m", others=0.1, cores=2, load=0.3)
    quiet = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert quiet.flops_per_second == pytest.approx(4e11 / 12.0) and quiet.quiet_only
    assert quiet.machine == "quiet" and quiet.describe("eap-ig").endswith("while it was quiet")


def test_a_busy_run_is_scaled_to_a_quiet_machine_by_the_cpu_it_used():
    """The share of the cores from how busy other work kept them was short on a busy machine:
    other work kept 1.25 of two cores busy over a one-thread EAP-IG run, a fair share of 1.125,
    and the run took 7.26 s, 2.0-2.2 times the 3.35-3.71 s of the quiet runs after it; scaled by
    1.125 it priced them at 6.45 s. The CPU seconds the run used (5.09) price them now; a run
    with torch's two threads given up for one, its CPU time less what one thread loses."""
    calibration.record(
        "cpu",
        "eap-ig",
        4e11,
        7.26,
        model="m",
        others=0.0,
        cores=2,
        load=1.8,
        threads=(1, 1),
        during=1.25,
        cpu=5.09,
    )
    assert calibration.recorded_runs("cpu", "eap-ig")[0]["cpu"] == 5.09
    rate = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert 4e11 / rate.flops_per_second == pytest.approx(5.09) and rate.machine == "scaled"
    calibration.record(
        "cpu",
        "eap",
        4e11,
        7.26,
        model="m",
        others=2.0,
        cores=2,
        load=5.0,
        threads=(1, 2),
        during=1.5,
        cpu=5.09,
    )
    rate = calibration.rate("cpu", "eap", 1.0, model="m")
    assert 4e11 / rate.flops_per_second == pytest.approx(5.09 / 2**0.6)
    # no CPU seconds kept (a run recorded before): the fair share, as before
    calibration.record(
        "cpu", "acdc", 4e11, 7.26, model="m", others=0.0, cores=2, load=1.8, threads=(1, 1), during=1.25
    )
    rate = calibration.rate("cpu", "acdc", 1.0, model="m")
    assert 4e11 / rate.flops_per_second == pytest.approx(7.26 / 1.125)


def test_the_other_methods_tier_prefers_quiet_runs():
    """A method with no run of its own is priced from other methods' runs: those that began on a
    quiet machine where there are any (an EAP run beside other work at a quarter of the speed was
    half the median before), each method's median over them."""
    calibration.record("cpu", "eap", 1e10, 4.0, model="m", others=2.0)  # busy
    calibration.record("cpu", "acc++", 1e10, 1.0, model="m", others=0.0)  # quiet
    calibration.record("cpu", "acc++", 1e10, 1.0, model="m", others=1.5)  # busy
    rate = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert rate.source == "device" and rate.runs == 1 and rate.flops_per_second == pytest.approx(1e10)
    assert rate.quiet_only and rate.describe("eap-ig").endswith("while it was quiet")
    assert rate.machine == "quiet"
    assert rate.describe("eap-ig") == "priced from 1 run of other methods on this machine while it was quiet"


def test_the_other_methods_tier_scales_runs_that_were_all_busy():
    calibration.record("cpu", "eap", 1e10, 3.0, model="m", others=1.0, cores=2)
    calibration.record("cpu", "acc++", 1e10, 4.0, model="m", others=2.0, cores=2, load=2.0)
    rate = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert rate.source == "device" and rate.machine == "scaled"
    assert rate.flops_per_second == pytest.approx(1e10 / 2.0)  # 3 s / 1.5 and 4 s / 2.0: 2 s each


def test_the_probe_prefers_a_quiet_pass():
    calibration.record_probe("cpu", 1e9, 1.0, model="m", others=2.0, load=4.0)
    calibration.record_probe("cpu", 1e9, 0.25, model="m", others=0.0)
    rate = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert rate.source == "probe" and rate.flops_per_second == pytest.approx(4e9)
    assert rate.machine == "quiet"


def test_runs_of_unknown_load_are_priced_as_they_were():
    """A GPU's runs (no load measured): as recorded, and nothing said of a quiet machine."""
    calibration.record("cuda", "eap", 1e9, 2.0)
    rate = calibration.rate("cuda", "eap", 1.0)
    assert rate.flops_per_second == pytest.approx(5e8) and rate.machine == "" and not rate.assumes_quiet


def test_a_machine_busy_now_is_told_the_estimate_is_a_quiet_machines(monkeypatch):
    """Priced for a quiet machine, the estimate of a run on a busy one says so, and how many times
    as long a run takes beside the other tasks running or waiting now (its fair share of the
    cores)."""
    assert busy_note(waiting=2.9, cores=2, quiet=True) == (
        " The machine is busy now (2.9 other tasks running or waiting for its 2 cores) and the estimate "
        "is for a quiet machine: at this load a run takes about 2.5 times as long."
    )
    assert busy_note(waiting=6.2, cores=2, quiet=True, threads=1).endswith("about 3.6 times as long.")
    assert busy_note(waiting=1.0, cores=2, quiet=True, threads=1) == ""  # one other task, a core each
    assert busy_note(waiting=1.4, cores=2, quiet=True, threads=1).endswith("about 1.2 times as long.")
    assert (
        busy_note(waiting=2.9, cores=2)
        == " The machine is busy now (2.9 other tasks running or waiting for its 2 cores): the run may take longer."
    )
    model = tiny_model("gpt2", seed=4)
    first = estimate_run(model, "eap-ig", {"ig_steps": 5}, n_tokens=8)
    calibration.record("cpu", "eap-ig", first.flops, 3.0, model=first.model, others=1.0, cores=2)
    monkeypatch.setattr(limits, "others_wanting", lambda: 5.0)
    monkeypatch.setattr(limits, "load_average", lambda: 7.0)  # larger: the moment's count is said
    monkeypatch.setattr(limits.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(limits, "_threads", lambda: 1)
    busy = estimate_run(model, "eap-ig", {"ig_steps": 5}, n_tokens=8)
    assert busy.seconds == pytest.approx(2.0)  # 3 s beside one other process: 2 s quiet
    assert busy.summary().endswith(
        "scaled to a quiet machine by how busy it was). The machine is busy now (5.0 other tasks running or "
        "waiting for its 2 cores) and the estimate is for a quiet machine: at this load a run takes about 3.0 "
        "times as long."
    )


def test_the_tasks_wanting_the_cpu_are_read_now_less_the_reader(monkeypatch):
    """The one-minute load average lagged a minute and held the command line's own model load (a
    run priced at load 5.0 as 3.0 times as long took 2.0-2.5 times its CPU seconds): the tasks
    running or ready to run are read now, the reading one left out, their median over the reads."""
    from circuitviz.entry import cpu_share

    counts = iter([4, 4, 9, 4, 3])
    monkeypatch.setattr(cpu_share, "_running_tasks", lambda: next(counts))
    assert cpu_share.others_wanting(reads=5, gap=0.0) == 3.0  # a burst of 8 others in one read: not taken
    monkeypatch.setattr(cpu_share, "_running_tasks", lambda: None)
    assert cpu_share.others_wanting(reads=5, gap=0.0) is None
    monkeypatch.setattr(limits, "others_wanting", lambda: None)
    assert busy_note(cores=2, quiet=True) == ""  # nothing to read: nothing said
    # a moment's burst (the browser drawing the page the estimate is on) is damped by the load average
    monkeypatch.setattr(limits, "others_wanting", lambda: 9.5)
    monkeypatch.setattr(limits, "load_average", lambda: 6.4)
    assert "(6.4 other tasks running or waiting" in busy_note(cores=2, quiet=True, threads=1)
    monkeypatch.setattr(limits, "load_average", lambda: None)
    assert "(9.5 other tasks running or waiting" in busy_note(cores=2, quiet=True, threads=1)


def test_a_run_quiet_only_in_the_sample_at_its_start_does_not_price_alone():
    """The 0.1 s sample at a run's start flickers on a shared machine (0.09 cores busy, then 1.99
    a minute later): a run counted quiet on it took 8.4 s, twice a quiet run, and priced every
    next run alone at its own slow rate. The others' average over the whole run (``during``)
    says it was not alone: it is scaled with the honest busy runs, by that average."""
    for _ in range(2):  # one other process through each: 6 s, 4 s on a quiet machine
        calibration.record("cpu", "eap-ig", 4e11, 6.0, model="m", others=1.0, cores=2, during=1.0)
    calibration.record("cpu", "eap-ig", 4e11, 8.4, model="m", others=0.09, cores=2, load=0.4, during=1.2)
    assert calibration.recorded_runs("cpu", "eap-ig")[-1]["during"] == 1.2
    rate = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert rate.machine == "scaled" and not rate.quiet_only and rate.runs == 3
    assert 4e11 / rate.flops_per_second == pytest.approx(4.0)  # 4.0, 4.0 and 8.4 / 1.6 = 5.25 s
    # a run quiet at its start and through: it alone prices, as before
    calibration.record("cpu", "eap-ig", 4e11, 4.2, model="m", others=0.05, cores=2, during=0.2)
    quiet = calibration.rate("cpu", "eap-ig", 1.0, model="m")
    assert quiet.quiet_only and quiet.runs == 1 and 4e11 / quiet.flops_per_second == pytest.approx(4.2)


def test_other_work_that_began_after_the_sample_is_scaled_by_the_runs_average():
    """A burner started just after a run's start sample: the run is scaled to a quiet machine by
    the cores the others kept busy over the run, not the sample's 0."""
    calibration.record("cpu", "eap", 1e10, 3.0, model="m", others=0.0, cores=2, during=1.0)
    rate = calibration.rate("cpu", "eap", 1.0, model="m")
    assert rate.machine == "scaled" and 1e10 / rate.flops_per_second == pytest.approx(2.0)  # 3 s / 1.5
