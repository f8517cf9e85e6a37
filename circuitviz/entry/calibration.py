"""How fast runs go on this machine, measured, so a run's estimate is priced from what ran here.

``limits.estimate_run`` counts a run's work in FLOPs (forward-pass equivalents x 2 x parameters x
tokens) and divides by a rate. The rate is measured, not assumed, wherever something was
measured: each finished run records (FLOPs, seconds, and how its time split into phases) under
its device kind and method; the rate of a method is the median of its last runs, else the median
over the device's methods, else a rate timed from one batched forward pass when the app loaded
the model, else the nominal figure ``limits`` holds; in each, runs that began on a quiet machine
price where there are any, else the runs beside other work scaled to a quiet machine
(``_pick``, ``slowdown``). Records live in one small JSON file in the
cache folder (``$CIRCUITVIZ_CACHE/calibration.json``), written atomically, so every session and
restart on this machine shares them.

A run's FLOPs are counted with the pass weights of its day (``core.pass_weights``), so each run
keeps their version (``weights``) and only runs counted with today's price the next: a run
counted with other weights is left out when the file is read (its record keeps its FLOPs, not
the passes they were counted from, so it cannot be recounted) and dropped at the next write. A
forward pass's probe counts plain passes only and is kept whatever its version.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.pass_weights import WEIGHTS_VERSION
from ..core.text import counted, joined
from ..services import assets
from .cpu_share import IDLE, allowed_cores

KEEP = 8  # runs kept per (device kind, method): recent enough to follow the machine's load
QUIET = IDLE  # other work keeping less than this many cores busy: a quiet machine, as a run's threads see it
PROBE = "forward-pass probe"
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Rate:
    """FLOPs per second and where the figure comes from."""

    flops_per_second: float
    runs: int  # measured runs behind it (0: a probe or the nominal figure)
    source: (
        str  # 'method' (its runs), 'family' (its variants'), 'device' (other methods'), 'probe', 'nominal'
    )

    other_models: bool = False  # the runs were of other models (none of this one yet)
    quiet_only: bool = False  # runs that began beside other work were left out (``_pick``)
    scaled: bool = False  # other models' runs scaled by a forward pass of each model timed here
    kin: tuple[str, ...] = ()  # source 'family': the methods whose runs priced it
    # 'quiet': priced from runs (or a pass) that began on a quiet machine; 'scaled': from runs
    # that began beside other work, each scaled to a quiet machine (``slowdown``); '': load unknown
    machine: str = ""

    @property
    def assumes_quiet(self) -> bool:
        """Whether the price is a quiet machine's (what a machine busy now should be told)."""
        return self.machine in ("quiet", "scaled")

    def describe(self, method: str) -> str:
        """A few words on how the estimate was priced, for the sentence beside it."""
        runs = counted(self.runs, "run")
        machine = ""  # how busy the machine was, said where the runs are
        if self.quiet_only:
            machine = " while it was quiet"
        elif self.machine == "scaled":
            machine = " beside other work, scaled to a quiet machine by how busy it was"
        where = f" on this machine{machine}"
        if self.other_models and self.scaled:
            where = (
                f" of other models on this machine{machine}, scaled to this model by a forward pass of each "
                "timed here, which leaves out the work that grows with the graph's edges (a first "
                "run of this model refines it)"
            )
        elif self.other_models:
            where = (
                f" of other models on this machine{machine}, not scaled to this model (no forward passes of "
                "both timed alike here), so it may be several times off; a first run of this model refines it"
            )
        if self.source == "method":
            return f"priced from {counted(self.runs, f'{method} run')}{where}"
        if self.source == "family":
            return f"priced from {runs} of {joined(self.kin)} (the same passes as this method){where}"
        if self.source == "device":
            return f"priced from {runs} of other methods{where}"
        if self.source == "probe":
            scaled = " beside other work, scaled to a quiet machine" if self.machine == "scaled" else ""
            return f"priced from a forward pass timed on this machine{scaled}; a first run refines it"
        return "priced at a nominal speed; the first run calibrates it for this machine"


def calibration_path() -> Path:
    """``$CIRCUITVIZ_CACHE/calibration.json``, else ``~/.cache/circuitviz/entry/calibration.json``."""
    return assets.cache_dir() / "calibration.json"


def _read(path: Path) -> dict:
    """The kept runs and loads, every value of the kind the estimates read: a file cut short, edited
    or written by other code keeps what is sound of it (a run whose figures are not finite positive
    numbers is left out; a phase, part or timing that is not a number is left out of its run),
    rather than stopping every estimate with a traceback (a list where a run's phases belong
    raised at the next Run)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    sound: dict = {"loads": {k: float(v) for k, v in _items(data.get("loads")) if _positive(v)}}
    for kind, by_method in data.items():
        if kind != "loads" and isinstance(by_method, dict):
            sound[kind] = {
                method: [
                    run for run in map(_sound_run, runs) if run is not None and _counted_alike(method, run)
                ]
                for method, runs in by_method.items()
                if isinstance(runs, list)
            }
    return sound


def _counted_alike(method: str, run: dict) -> bool:
    """Whether ``run``'s FLOPs were counted with today's pass weights (``WEIGHTS_VERSION``): a run
    of an earlier version (none recorded before the weights were) would price a method whose
    counted passes changed by the change, EAP 1.6-1.8 times short. A probe's plain passes carry over."""
    return method == PROBE or run.get("weights") == WEIGHTS_VERSION


def _items(value) -> list:
    return list(value.items()) if isinstance(value, dict) else []


def _positive(value) -> bool:
    return _from_zero(value) and value > 0


def _from_zero(value) -> bool:
    """A finite number from 0 (never true/false, which JSON keeps apart)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _sound_run(run) -> dict | None:
    """``run`` with only the fields the estimates can read, or None when its work or time is not."""
    if not isinstance(run, dict) or not (_positive(run.get("flops")) and _positive(run.get("seconds"))):
        return None
    kept = {"flops": float(run["flops"]), "seconds": float(run["seconds"])}
    if isinstance(run.get("model"), str):
        kept["model"] = run["model"]
    for field in ("others", "during", "load", "cpu"):
        if _from_zero(run.get(field)):
            kept[field] = float(run[field])
    for field in ("cores", "threads", "default_threads"):
        if _positive(run.get(field)):
            kept[field] = int(run[field])
    if type(run.get("weights")) is int:  # the pass weights' version its FLOPs were counted with
        kept["weights"] = run["weights"]
    for field in ("phases", "parts", "timings"):
        values = {k: float(v) for k, v in _items(run.get(field)) if _from_zero(v)}
        if values:
            kept[field] = values
    return kept


def _write(path: Path, data: dict) -> None:
    """Atomically: a temporary file in the same folder, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".calibration-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        json.dump(data, stream)
    os.replace(temporary, path)


def one_off_seconds(result) -> float:
    """Seconds a finished run spent filling a cache its model's next runs read (its details'
    ``one_off_seconds``: ACC++'s first SVD of the heads), to be left out of the seconds ``record``
    keeps: 12.6 s of a first Gemma-3-270M run's 15.9 s priced the next one at "about 24 s" for
    3.2 s."""
    details = getattr(result, "details", None)
    found = getattr(details, "one_off_seconds", None)
    return float(found()) if callable(found) else 0.0


def share_figures(share) -> dict:
    """``record``'s figures of how busy the machine was (``others``, ``cores``, ``load``,
    ``threads``, ``during``, ``cpu``) from a ``cpu_share.Share``; none without one."""
    if share is None:
        return {}
    return {
        "others": share.others,
        "cores": share.cores,
        "load": share.load,
        "threads": (share.threads, share.default),
        "during": share.during,
        "cpu": share.cpu,
    }


def record(
    device_kind: str,
    method: str,
    flops: float,
    seconds: float,
    phases: dict | None = None,
    parts: dict | None = None,
    timings: dict | None = None,
    model: str = "",
    others: float | None = None,
    cores: int | None = None,
    load: float | None = None,
    threads: tuple[int | None, int | None] = (None, None),
    during: float | None = None,
    cpu: float | None = None,
) -> None:
    """Keep one finished run: its work, its wall time, its phases' seconds and the seconds of
    the parts of its work that report on their own (Edge Pruning's warm start, then its masks);
    ``model`` names the model's size and shape (``model_key``), whose runs price its next ones;
    ``others``: the cores other work kept busy when it began (``cpu_share.others_busy``), of its
    ``cores``, ``load`` the one-minute load average then, ``threads`` the threads it used and
    torch's default (``slowdown``), ``during`` the cores other work kept busy over the whole run
    (``cpu_share.Share.during``), ``cpu`` the CPU seconds the run itself used (``Share.cpu``:
    what a run beside other work is scaled to a quiet machine by, ``_at_quiet``)."""
    if flops <= 0 or seconds <= 0:
        return
    entry = {"flops": float(flops), "seconds": float(seconds), "weights": WEIGHTS_VERSION}
    if model:
        entry["model"] = str(model)
    if others is not None:
        entry["others"] = round(float(others), 3)
    if during is not None:
        entry["during"] = round(float(during), 3)
    if cpu is not None:
        entry["cpu"] = round(float(cpu), 3)
    if cores:
        entry["cores"] = int(cores)
    if load is not None:
        entry["load"] = round(float(load), 2)
    for name, value in zip(("threads", "default_threads"), threads):
        if value:
            entry[name] = int(value)
    if phases:
        entry["phases"] = {name: float(value) for name, value in phases.items() if value >= 0}
    if parts:
        entry["parts"] = {name: float(value) for name, value in parts.items() if value >= 0}
    if timings:  # the method's own timings (Best-of-N's scoring_s: what a later variant may find stored)
        entry["timings"] = {name: float(value) for name, value in timings.items() if value >= 0}
    path = calibration_path()
    with _LOCK:
        data = _read(path)
        runs = data.setdefault(device_kind, {}).setdefault(method, [])
        runs.append(entry)
        del runs[:-KEEP]
        try:
            _write(path, data)
        except OSError:  # a read-only cache folder: estimates stay as they were
            return


def record_probe(
    device_kind: str,
    flops: float,
    seconds: float,
    model: str = "",
    others: float | None = None,
    load: float | None = None,
    during: float | None = None,
    cpu: float | None = None,
    threads: int | None = None,
) -> None:
    """The rate of one timed forward pass, the fallback before any run has finished; ``others``:
    the cores other work kept busy when it began, ``load`` the load average then, ``during`` the
    cores it kept busy over the timed passes, ``cpu`` the CPU seconds the pass used on the
    ``threads`` it ran with (torch's own: the pass changes none), which scale a pass beside other
    work to a quiet machine as they scale a run (``_at_quiet``)."""
    record(
        device_kind,
        PROBE,
        flops,
        seconds,
        model=model,
        others=others,
        load=load,
        during=during,
        cpu=cpu,
        threads=(threads, threads),
    )


def model_key(n_parameters: int, n_edges: int) -> str:
    """What a run's speed depends on besides the machine: the model's size and its graph's edges.
    A rate in FLOPs a second (2 x parameters x tokens a pass) is not the same across models on
    a CPU: SmolLM2-135M (30 layers x 9 heads, 126,000 edges) ran EAP-IG at about a fifth of
    Gemma-3-270M's rate (18 x 4, 10,342 edges), so each model's runs price its own first."""
    return f"{int(n_parameters)}p-{int(n_edges)}e"


def record_load(model_id: str, seconds: float) -> None:
    """How long loading ``model_id`` took, so the next start can say how long to expect."""
    path = calibration_path()
    with _LOCK:
        data = _read(path)
        data.setdefault("loads", {})[model_id] = float(seconds)
        try:
            _write(path, data)
        except OSError:
            return


def last_load(model_id: str) -> float | None:
    """Seconds the last load of ``model_id`` on this machine took, or None before any."""
    value = _read(calibration_path()).get("loads", {}).get(model_id)
    return float(value) if isinstance(value, (int, float)) else None


def recorded_runs(device_kind: str, method: str) -> list[dict]:
    """The runs of ``method`` on ``device_kind`` kept here, oldest first."""
    return list(_read(calibration_path()).get(device_kind, {}).get(method) or [])


def measured(device_kind: str, model: str = "") -> bool:
    """Whether this machine has a rate for ``device_kind`` already (a run or a timed forward
    pass), of ``model`` (``model_key``) when named: a start that finds one skips timing a pass
    before the model is announced. A model with none of its own is timed once, so the first
    estimate on it can scale other models' runs by it (``rate``)."""
    by_method = _read(calibration_path()).get(device_kind) or {}
    return any(
        isinstance(runs, list) and any(not model or run.get("model") == model for run in runs)
        for runs in by_method.values()
    )


def _median_rate(runs: list) -> float | None:
    rates = [run["flops"] / run["seconds"] for run in runs if run.get("seconds", 0) > 0]
    return statistics.median(rates) if rates else None


THREAD_GAIN = 0.6  # n threads run a run n**0.6 times as fast as one here (two: 1.5x, measured 1.5-1.6x)


def slowdown(
    others: float,
    cores: int,
    load: float | None = None,
    threads: int | None = None,
    default: int | None = None,
) -> float:
    """How many times as long a run with ``threads`` threads (every core when not known) takes
    beside other work keeping ``others`` of its ``cores`` busy as the same run on a quiet machine
    with torch's ``default`` threads: its fair share of the cores, (threads + others) / cores when
    that is over 1, times what the threads it gave up for the others cost (``THREAD_GAIN``).
    Measured on the two cores (``cpu_share``; quiet, two threads 2.3-2.5 s): one other process,
    the run on the free core, 1.5x (this gives 1.52); two, two threads 2.1x (2.0), one 2.4x
    (2.3); threads fixed at one: one other 1.0x (1.0), two 1.6x (1.5). Where the others fill
    every core, ``others`` stops at the cores and the load average (the work waiting too) stands
    for them when it is larger: six jobs on two cores are not two."""
    cores = max(int(cores), 1)
    used = min(max(int(threads or cores), 1), cores)
    quiet = min(max(int(default or used), used), cores)
    demand = others
    if load is not None and others >= cores - QUIET:
        demand = max(others, load)
    return max(1.0, (used + demand) / cores) * (quiet / used) ** THREAD_GAIN


def _quiet(run: dict) -> bool:
    """Whether a run (its ``others`` known) had the machine to itself: other work kept less than
    ``QUIET`` of a core busy both in the 0.1 s sampled as it began and, where recorded, on average
    over the whole run (``during``). The sample alone flickers on a shared machine: a run counted
    quiet on 0.09 cores at its start took 8.4 s, twice a quiet run, and priced the next ones
    alone."""
    return run["others"] < QUIET and run.get("during", 0.0) < QUIET


def _busy(run: dict) -> float:
    """The cores other work kept busy beside a run: the larger of the sample at its start and the
    average over the run (a burner started just after the sample is in the second)."""
    return max(run["others"], run.get("during", 0.0))


def _at_quiet(run: dict) -> dict:
    """A run that began beside other work, as long as it would have taken on a quiet machine
    (its cores, or this machine's where the run did not record them): the CPU seconds it used
    where it kept them (``cpu``), per thread it ran with, and what its threads gave up against
    torch's default (``THREAD_GAIN``); else its time over ``slowdown``.

    The share of the cores that ``slowdown`` reckons from how busy other work kept them was short
    on a busy machine: other work beside a run on two cores kept 1.25 of them busy over the run,
    a fair share of 1.125 times a quiet run, and the run took 2.0-2.2 times as long (7.26 s
    against 3.35-3.71 s quiet, one thread). What the others used is what they got, not what they
    asked for (the run got 0.70 of a core), and beside them the run's own CPU time grew 1.3-1.5
    times. Its CPU seconds (5.09) hold both the share it lost and none of the waiting."""
    cores = run.get("cores") or len(allowed_cores())
    if run.get("cpu"):
        used = min(max(int(run.get("threads") or cores), 1), cores)
        quiet = min(max(int(run.get("default_threads") or used), used), cores)
        seconds = run["cpu"] / used * (used / quiet) ** THREAD_GAIN
        return {**run, "seconds": min(run["seconds"], seconds)}
    factor = slowdown(_busy(run), cores, run.get("load"), run.get("threads"), run.get("default_threads"))
    return {**run, "seconds": run["seconds"] / factor}


def _pick(runs: list, among: list | None = None) -> tuple[list, bool, str]:
    """(the runs an estimate is priced from, whether runs beside other work were left out, and
    the machine the price is for: 'quiet', 'scaled' or '' (no run's load known)). ``among``: the
    runs the choice is made over (every method's, for the other methods' tier), else ``runs``.

    A run beside other work took up to 1.5x as long with one other process, 2x and more with
    the cores full; such runs priced a quiet machine's next run at several times its length. So
    where some runs had a quiet machine (other work kept less than ``QUIET`` of a core busy as
    each began and over the run, ``_quiet``), only those price; where none did, each is scaled to
    a quiet machine (``slowdown``): a first run on a busy machine no longer prices every later one
    as busy. A machine busy now
    is said beside the estimate (``limits.busy_note``). Runs whose load is unknown count only
    where no run's load is known (a GPU's, a system without /proc/stat): beside known ones they
    are older runs of older, slower code (the dev machine's four such Best-of-N runs: 0.07-0.27
    TFLOP/s; the next two 0.40-0.47)."""
    among = runs if among is None else among
    loads = [_quiet(run) for run in among if run.get("others") is not None]
    if not loads:
        return runs, False, ""
    known = [run for run in runs if run.get("others") is not None]
    if any(loads):
        return [run for run in known if _quiet(run)], not all(loads), "quiet"
    return [_at_quiet(run) for run in known], False, "scaled"


def rate(device_kind: str, method: str, nominal: float, family: Sequence[str] = (), model: str = "") -> Rate:
    """The rate to price ``method`` on ``device_kind`` with: measured where possible, from the
    method's own runs, else its family's (the Best-of-N variants run one pipeline), else other
    methods', each first among the runs of this ``model`` (``model_key``; every run when none is
    named), then among every model's; else the probe's (this model's first), else the nominal
    figure."""
    by_method = _read(calibration_path()).get(device_kind) or {}
    tiers = [True, False] if model else [False]
    for same in tiers:
        scale = _probe_scale(by_method.get(PROBE) or [], model) if model and not same else None

        def kept(name: str, same=same, scale=scale) -> list:
            runs = by_method.get(name) or []
            if same:
                return [run for run in runs if run.get("model") == model]
            if scale is None:
                return [run for run in runs if _comparable(run.get("model"), model)]
            return [
                {**run, "flops": run["flops"] * scale[run["model"]]}
                for run in runs
                if run.get("model") in scale
            ]

        other = bool(model) and not same
        scaled = scale is not None
        own, quiet, machine = _pick(kept(method))
        if own:
            return Rate(_median_rate(own), len(own), "method", other, quiet, scaled, machine=machine)
        union = [run for name in family if name != method for run in kept(name)]
        by_kin = {name: _pick(kept(name), union) for name in family if name != method}
        kin = [run for runs, _, _ in by_kin.values() for run in runs]
        if kin:
            names = tuple(name for name, (runs, _, _) in by_kin.items() if runs)
            _, quiet, machine = _pick(union)
            return Rate(_median_rate(kin), len(kin), "family", other, quiet, scaled, names, machine)
        # other methods: each's median over the same choice of runs (quiet ones where any are)
        union = [run for name in by_method if name != PROBE for run in kept(name)]
        others = {name: _pick(kept(name), union)[0] for name in by_method if name != PROBE}
        others = {name: runs for name, runs in others.items() if runs}
        if others:
            medians = [_median_rate(runs) for runs in others.values()]
            count = sum(len(r) for r in others.values())
            _, quiet, machine = _pick(union)
            return Rate(statistics.median(medians), count, "device", other, quiet, scaled, machine=machine)
    probes = by_method.get(PROBE) or []
    probes, _, machine = _pick([run for run in probes if run.get("model") == model] or probes)
    probe = _median_rate(probes)
    if probe:
        return Rate(probe, 0, "probe", machine=machine)
    return Rate(nominal, 0, "nominal")


SIZE_SPAN = 10  # another model's runs price this one unscaled only within this factor of its size


def _parameters(key: str | None) -> int | None:
    """The parameter count a ``model_key`` names, or None for a key of another form."""
    head = str(key or "").split("p-", 1)[0]
    return int(head) if head.isdigit() and int(head) > 0 else None


def _comparable(other: str | None, model: str) -> bool:
    """Whether a run of model ``other`` may price ``model`` without a forward pass of each to
    scale it: both sizes known and within ``SIZE_SPAN`` of each other, or either unknown. A
    2-layer random model of 83,000 parameters runs a few hundred million FLOPs a second (its time
    is the passes' fixed costs), and its runs priced Gemma-3-270M's first RelP run at "about 28
    min"; it took 6 s."""
    mine, theirs = _parameters(model), _parameters(other)
    if mine is None or theirs is None:
        return True
    return max(mine, theirs) <= SIZE_SPAN * min(mine, theirs)


def _probe_scale(probes: list, model: str) -> dict[str, float] | None:
    """{other model's key: how much faster ``model`` runs a forward pass than it} from the forward
    passes timed here, or None without a pass of ``model``'s own. A rate in FLOPs a second does not
    carry over between models (SmolLM2-135M ran EAP-IG at about a fifth of Gemma-3-270M's rate:
    a FLOP here is 2 x parameters, and Gemma's include a 262,144-token vocabulary that costs a
    forward pass little); their forward passes' rates differ the same way, so another model's run
    counts as this model's at its work x (this model's pass rate / its model's), passes timed alike
    only (both on a quiet machine, or both beside other work: one timed beside the load of two
    test runs took 2.4 times as long and priced SmolLM2's first run at 41 s; it took 18 s). A pass
    that kept its CPU seconds is scaled to a quiet machine by them (``_at_quiet``) and stands with
    the quiet ones: busy passes read 0.45-0.47 s so, as quiet ones timed minutes apart did
    (0.46-0.49 s), where the fair share read 0.37 s."""
    by_model: dict[str, dict[bool, list]] = {}
    for run in probes:  # each model's passes by whether other work kept the machine busy
        if run.get("model"):
            busy = not _quiet({**run, "others": run.get("others") or 0})  # unknown load: a start's, quiet
            if busy and run.get("cpu") and run.get("others") is not None:
                run, busy = _at_quiet(run), False
            by_model.setdefault(run["model"], {}).setdefault(busy, []).append(run)
    own = by_model.get(model) or {}
    if not own:
        return None
    busy = False not in own  # this model's quiet passes where it has some
    scale = {
        other: _median_rate(own[busy]) / _median_rate(passes[busy])
        for other, passes in by_model.items()
        if other != model and busy in passes  # a pass beside other work against a quiet one: no
    }
    return scale or None


def phase_shares(device_kind: str, method: str) -> dict[str, float] | None:
    """How this method's last runs split their time ({phase: share}), or None before any."""
    runs = [
        run for run in _read(calibration_path()).get(device_kind, {}).get(method) or [] if run.get("phases")
    ]
    if not runs:
        return None
    phases = runs[-1]["phases"]
    total = sum(phases.values())
    return {name: value / total for name, value in phases.items()} if total > 0 else None


def part_shares(device_kind: str, method: str) -> dict[str, float] | None:
    """How this method's last run split its work into parts ({part: share of the work}), or None
    before a run that reported its parts."""
    runs = [
        run for run in _read(calibration_path()).get(device_kind, {}).get(method) or [] if run.get("parts")
    ]
    if not runs:
        return None
    parts = runs[-1]["parts"]
    total = sum(parts.values())
    return {name: value / total for name, value in parts.items()} if total > 0 else None


def last_run(device_kind: str, methods: Sequence[str]) -> dict | None:
    """The newest run among ``methods`` that recorded its timings ({seconds, timings, ...}), or None."""
    by_method = _read(calibration_path()).get(device_kind) or {}
    for name in methods:  # the first method named first: a variant's own run is the closest
        runs = [run for run in by_method.get(name) or [] if run.get("timings")]
        if runs:
            return runs[-1]
    return None
