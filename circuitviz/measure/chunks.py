"""How much work one batched pass may carry, so long prompts and big models fit one device.

Every batched pass of the engine (IG steps through a forward/backward, circuits through the
patched evaluation, paraphrase pairs) goes through ``run_in_chunks``: items are cut into chunks
that fit the working memory of the model's devices (``models.devices.model_working_memory_bytes``:
the least of its devices' when it is split, each following the memory free on an accelerator). The size of a chunk starts from the caller's estimate of the
bytes one item needs; on a CUDA device the first chunk's real peak is measured and replaces the
estimate for the rest of the run and for later runs on the same model, and a chunk that runs out
of memory is halved and tried again, so an estimate that is off never ends a run.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

import torch

from ..models.devices import model_working_memory_bytes

Result = TypeVar("Result")

_LEARNT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {kind: bytes per unit}
_LEARNT_GUARD = threading.Lock()
_PEAK_SEEN: dict[str, int] = {}


class ChunkMemoryError(RuntimeError):
    """Not even one item of a batched pass fits the device's memory."""


def peak_memory_bytes(device: torch.device | str) -> int:
    """Peak memory allocated on a CUDA device since the process started, in bytes (0 elsewhere).

    ``run_in_chunks`` resets CUDA's peak counter to measure its chunks; this keeps the true peak
    for benchmarks that read it afterwards.
    """
    device = torch.device(device)
    if device.type != "cuda":
        return 0
    return max(_PEAK_SEEN.get(str(device), 0), int(torch.cuda.max_memory_allocated(device)))


def learnt_bytes(model, kind: str) -> float | None:
    """Bytes per unit of ``kind`` measured on this model's device, when a run has measured it."""
    with _LEARNT_GUARD:
        return _LEARNT.get(model, {}).get(kind)


def _learn(model, kind: str, value: float) -> None:
    with _LEARNT_GUARD:
        _LEARNT.setdefault(model, {})[kind] = value


def chunk_size(model, kind: str, units_per_item: float, estimated_bytes_per_unit: float) -> int:
    """How many items fit the working memory, from what was measured or else the estimate."""
    per_unit = learnt_bytes(model, kind) or estimated_bytes_per_unit
    per_item = max(per_unit * units_per_item, 1.0)
    return max(1, int(model_working_memory_bytes(model) // per_item))


def run_in_chunks(
    model,
    kind: str,
    n_items: int,
    units_per_item: float,
    estimated_bytes_per_unit: float,
    compute: Callable[[slice], Result],
    commit: Callable[[slice, Result], None],
    max_chunk: int | None = None,
) -> None:
    """compute(rows) for consecutive slices of ``n_items`` items, then commit(rows, result).

    ``units_per_item`` x ``estimated_bytes_per_unit`` is the first guess of one item's working
    memory (units are e.g. positions, so one measurement serves prompts of any length).
    ``compute`` must change nothing outside itself: a chunk that runs out of memory is halved
    and computed again; ``commit`` then records what it returned.
    """
    device = next(model.parameters()).device
    measure = device.type == "cuda"
    size = min(chunk_size(model, kind, units_per_item, estimated_bytes_per_unit), max_chunk or n_items)
    start = 0
    while start < n_items:
        rows = slice(start, min(n_items, start + size))
        count = rows.stop - rows.start
        try:
            if measure:
                _PEAK_SEEN[str(device)] = peak_memory_bytes(device)
                torch.cuda.reset_peak_memory_stats(device)
                before = torch.cuda.memory_allocated(device)
            result = compute(rows)
            if measure:
                used = torch.cuda.max_memory_allocated(device) - before
                _learn(model, kind, max(used, 1) / (count * max(units_per_item, 1e-9)))
        except torch.OutOfMemoryError:
            if size == 1:
                raise ChunkMemoryError(
                    f"One item of this run does not fit the {device} device's memory; shorten the "
                    "prompt, use a smaller model or a lower precision, or run on a larger device."
                ) from None
            size = max(1, count // 2)
            torch.cuda.empty_cache()
            continue
        commit(rows, result)
        start = rows.stop
        if measure:
            size = min(
                chunk_size(model, kind, units_per_item, estimated_bytes_per_unit), max_chunk or n_items
            )
