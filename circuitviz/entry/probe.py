"""The timed forward pass that prices a model's first run on this machine.

Before any run of a model has finished here, a run's estimate is priced from other models' runs
scaled to it, else from this pass, else from a nominal device speed (``limits.DEVICE_FLOPS``), and
the nominal figure was about ten times this machine's (EAP-IG on the IOI prompt priced at 54 s
for a 5.4 s run on two busy cores). The app times the pass once a model has loaded; the command
line times it before its first estimate of a model this machine has no rate for, so both price a
first run alike.
"""

from __future__ import annotations

import time

from . import calibration

PROBE_BATCH = 8  # sequences of the timed forward pass
PROBE_REPEATS = 3  # the median: one pass timed in a moment of load misprices every run
EXAMPLE_TEXT = "When Mary and John went to the store, John gave a drink to"


def device_kind(model) -> str:
    """'cpu', 'cuda', 'mps': the kind of device the model's weights are on (what rates are kept by)."""
    from ..models.adapter import model_device

    return model_device(model).type


def rate_key(model) -> str:
    """The model's size and shape as its runs are kept under (``calibration.model_key``)."""
    from ..models.adapter import adapter_of

    return calibration.model_key(sum(p.numel() for p in model.parameters()), adapter_of(model).spec.n_edges)


def probe_rate(model) -> None:
    """Time one batched forward pass and keep its FLOP rate (``calibration.record_probe``), with
    how busy the machine was as it began and over the timed passes (``cpu_share.Share.during``),
    the threads it ran with and the CPU seconds a pass used (``cpu_share.run_clock``): a pass
    beside other work is scaled to a quiet machine by them, as a run is (``calibration._at_quiet``)."""
    import torch

    from ..engine.prefix import final_residual
    from ..models.adapter import adapter_of, model_device
    from .cpu_share import allowed_cores, load_average, others_between, others_busy, run_clock, snapshot

    tokens = (
        adapter_of(model).to_tokens(EXAMPLE_TEXT).to(model_device(model)).repeat(PROBE_BATCH, 1)
    )  # [batch, pos]
    on_cpu = device_kind(model) == "cpu"
    threads = torch.get_num_threads() if on_cpu else None
    clock = run_clock(threads)
    with torch.no_grad():
        final_residual(model, tokens[:1], [])  # the first pass pays one-time set-up costs
        others, load = others_busy(), load_average()  # a pass beside other work is scaled to a quiet one
        cores = allowed_cores()
        began, timed, used = snapshot(cores, clock), [], []
        for _ in range(PROBE_REPEATS):
            start, start_cpu = time.perf_counter(), clock()
            final_residual(model, tokens, [])
            timed.append(time.perf_counter() - start)
            used.append(clock() - start_cpu)
        seconds = sorted(timed)[len(timed) // 2]
        during = others_between(began, snapshot(cores, clock), cores)
    parameters = sum(p.numel() for p in model.parameters())
    calibration.record_probe(
        device_kind(model),
        2.0 * parameters * tokens.numel(),
        seconds,
        rate_key(model),
        others,
        load,
        during,
        cpu=sorted(used)[len(used) // 2] if on_cpu else None,
        threads=threads,
    )


def probe_unmeasured(model) -> bool:
    """Time the pass when this machine has no rate for the model (no run, no earlier pass) and
    say whether it did; a model the pass cannot run keeps the nominal price."""
    try:
        if calibration.measured(device_kind(model), rate_key(model)):
            return False
        probe_rate(model)
    except Exception:  # noqa: BLE001 - an estimate's fallback must never stop a load or a run
        return False
    return True
