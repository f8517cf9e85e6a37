"""What every benchmark and maintenance script shares: offline defaults, threads, the embedded model,
the IOI prompt and the timers.

The scripts in benchmarks/ and scripts/ import this module first; the package itself never does.
It lives in the package rather than beside the scripts so that both folders import it the same
way, as the installed ``circuitviz`` (``pip install -e .``), with no path manipulation.

Importing it sets the offline defaults (the embedded models come from pip packages; the hub is
reached only when the caller sets ``HF_HUB_OFFLINE=0``) and nothing heavier: torch is imported by
the functions that need it, so a script that times its own imports (bench_load.py) measures
them, not this module's.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from circuitviz.core.tasks import PromptTask

# set before transformers or huggingface_hub is imported (they read them once, at import)
OFFLINE_DEFAULTS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
for _name, _value in OFFLINE_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


def fresh_cache(prefix: str) -> str:
    """Point ``$CIRCUITVIZ_CACHE`` at a new empty folder unless the caller chose one; its path.

    For runs that must start cold (no converted model, no stored SVD or result) without touching
    the user's ~/.cache/circuitviz.
    """
    return os.environ.setdefault("CIRCUITVIZ_CACHE", tempfile.mkdtemp(prefix=prefix))


def history_free_cache(prefix: str) -> str:
    """Point ``$CIRCUITVIZ_CACHE`` at a new folder whose ``models`` links to the converted models
    of the cache in use (no conversion), with no stored result or timing history; its path. For
    benchmarks of the estimates, which must start from no recorded run."""
    from pathlib import Path

    base = os.environ.get("CIRCUITVIZ_CACHE")
    models = (Path(base).expanduser() if base else Path.home() / ".cache" / "circuitviz") / "models"
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if models.exists():
        (root / "models").symlink_to(models, target_is_directory=True)
    os.environ["CIRCUITVIZ_CACHE"] = str(root)
    return str(root)


def estimate_case(prefix: str):
    """The estimate benchmarks' case, from no recorded run (``history_free_cache``): the embedded
    model, the IOI task, Explore's default budgets for it and EAP-IG's settings; the machine's
    line printed first."""
    from circuitviz.models.loading import load_model

    history_free_cache(prefix)
    print(machine_line(), flush=True)
    budgets = [20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 10342]
    return load_model("gemma-3-270m"), ioi_task(), budgets, {"ig_steps": 20}


# ----- threads ---------------------------------------------------------------------------------
def add_threads_argument(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    """``--threads N``: torch's CPU threads (on a shared, busy CPU one thread is often fastest)."""
    chosen = str(default) if default else "torch's choice"
    parser.add_argument("--threads", type=int, default=default, help=f"torch CPU threads (default: {chosen})")


def apply_threads(threads: int | None) -> None:
    """Set torch's CPU threads when a number was given; otherwise leave torch's choice."""
    if threads:
        import torch

        torch.set_num_threads(threads)


# ----- the machine -----------------------------------------------------------------------------
def load_average() -> str:
    """The 1, 5 and 15 minute load averages: timings taken on a busy machine are slower."""
    try:
        return "load average " + " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "load average unknown"


def machine_line() -> str:
    """One line naming what the figures below were measured on."""
    import torch

    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"torch {torch.__version__} with {torch.get_num_threads()} threads, {load_average()}"
    )


# ----- timers and memory -----------------------------------------------------------------------
def _is_cuda(device: str | torch.device | None) -> bool:
    return device is not None and str(device).startswith("cuda")


def synchronise(device: str | torch.device | None) -> None:
    """Wait for the device's queued work, so that a wall-clock time covers it (no-op off CUDA)."""
    if _is_cuda(device):
        import torch

        torch.cuda.synchronize(device)


def timed(function: Callable[..., Any], *args, sync=None, **kwargs) -> tuple[Any, float]:
    """(function's value, wall seconds); ``sync``: a device whose queued work the time must cover."""
    synchronise(sync)
    start = time.perf_counter()
    value = function(*args, **kwargs)
    synchronise(sync)
    return value, time.perf_counter() - start


def peak_rss_gib() -> float:
    """Peak resident memory of this process in GiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def reset_peak_memory(device: str | torch.device | None) -> None:
    """Start a new peak for ``peak_memory_gib`` (CUDA only; the CPU's peak RSS cannot be reset)."""
    if _is_cuda(device):
        import torch

        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_gib(device: str | torch.device | None) -> float:
    """Peak memory torch allocated on a CUDA device since the last reset, in GiB; nan elsewhere."""
    if not _is_cuda(device):
        return float("nan")
    import torch

    return torch.cuda.max_memory_allocated(device) / 2**30


def verdict(ok: bool) -> str:
    """The word a check's line ends with."""
    return "PASS" if ok else "FAIL"


# ----- the embedded model and its prompt -------------------------------------------------------
def load_timed(
    model_id: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    backend: str | None = None,
):
    """(model, seconds): ``load_model`` of ``model_id`` (default: the embedded Gemma-3-270M), timed.

    The first load converts the GGUF (about a minute); later ones read the disk cache.
    """
    # here, not at the top: importing this module must not load torch (bench_load times that)
    from circuitviz.models import EMBEDDED_MODEL, load_model

    return timed(
        load_model, model_id or EMBEDDED_MODEL, device=device, dtype=dtype, backend=backend, sync=device
    )


def ioi_task() -> PromptTask:
    """The indirect-object prompt the benchmarks measure on the embedded model (15 tokens)."""
    from circuitviz.core.tasks import PromptTask  # here: circuitviz.core.tasks loads torch

    return PromptTask(
        clean="When Mary and John went to the store, John gave a drink to",
        corrupted="When Alice and Bob went to the store, Carl gave a drink to",
        answer=" Mary",
        foils=(" John",),
    )
