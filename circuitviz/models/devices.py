"""Where a model runs and in which precision; the only place a device or dtype is chosen."""

from __future__ import annotations

import os

import torch

from circuitviz.core.text import counted, shown
from circuitviz.models.errors import ModelLoadError

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def _mps_available() -> bool:
    """Whether Apple's Metal backend can run tensors (absent from some torch builds)."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def default_device() -> str:
    """The fastest device this machine offers: a CUDA GPU, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return "cuda"
    if _mps_available():
        return "mps"
    return "cpu"


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Turn a user's device choice into a torch.device that exists on this machine.

    None, "" and "auto" mean default_device(); a device this machine lacks is refused here,
    at the boundary, rather than failing later inside a forward pass.
    """
    if device is None or (isinstance(device, str) and device.strip().lower() in ("", "auto")):
        return torch.device(default_device())
    try:
        resolved = torch.device(device.strip() if isinstance(device, str) else device)
    except (RuntimeError, TypeError, ValueError) as error:
        raise ModelLoadError(
            f"{shown(str(device), 30)} is not a device name; use 'auto', 'cpu', 'cuda' or 'mps'."
        ) from error
    if resolved.type == "cpu":
        return resolved
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(
                f"Device '{device}' was requested but this machine has no CUDA GPU "
                "that torch can use; choose 'cpu' or 'auto' instead."
            )
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"Device '{device}' was requested but this machine has only "
                f"{counted(torch.cuda.device_count(), 'CUDA GPU')}; choose 'cuda:0' or 'auto' instead."
            )
        return resolved
    if resolved.type == "mps":
        if not _mps_available():
            raise ModelLoadError(
                f"Device '{device}' was requested but Apple's MPS backend is not available "
                "here; choose 'cpu' or 'auto' instead."
            )
        return resolved
    raise ModelLoadError(
        f"Device type '{resolved.type}' is not supported; use 'auto', 'cpu', 'cuda' or 'mps'."
    )


def default_dtype(device: str | torch.device | None = None) -> torch.dtype:
    """float32 on every device.

    Circuit scores are differences between nearby activations and logits; half precision
    turns those differences into rounding noise, so lower precision is only used when asked
    for. The device argument is kept so a caller never has to special-case one.
    """
    del device
    return torch.float32


def resolve_dtype(dtype: str | torch.dtype | None, device: str | torch.device | None = None) -> torch.dtype:
    """Turn "float32" / "float16" / "bfloat16" (or a torch.dtype, or None) into a torch.dtype."""
    if dtype is None:
        return default_dtype(device)
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
        raise ModelLoadError(f"Precision {dtype} is not supported; use one of {', '.join(DTYPES)}.")
    name = str(dtype).strip().lower().removeprefix("torch.")
    if name in DTYPES:
        return DTYPES[name]
    raise ModelLoadError(
        f"Precision {shown(str(dtype), 30)} is not supported; use one of {', '.join(DTYPES)}."
    )


# ----- working memory -----------------------------------------------------------------------------
WORKING_MEMORY_ENV = "CIRCUITVIZ_WORKING_MEMORY_GB"
# On the CPU, batches past this size are no faster (the passes are compute-bound already) and
# only crowd the machine; on an accelerator a batch may use a share of the free memory.
CPU_WORKING_MEMORY = 2e9
ACCELERATOR_SHARE = 0.6


def free_memory_bytes(device: str | torch.device) -> float | None:
    """Memory free on ``device`` now, in bytes; None when the device cannot say."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        free, _total = torch.cuda.mem_get_info(device)
        return float(free)
    if device.type == "mps" and _mps_available():
        return float(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    if device.type == "cpu":
        try:
            with open("/proc/meminfo", encoding="ascii") as stream:
                for line in stream:
                    if line.startswith("MemAvailable:"):
                        return float(line.split()[1]) * 1024
        except OSError:
            return None
    return None


def model_working_memory_bytes(model) -> float:
    """The working memory of a batched pass through ``model``: the least of its devices'.

    A model split over several devices runs every batch through each of them in turn, so a batch
    must fit the device with the least room, not only the first one (where the embedding sits).
    """
    devices = {parameter.device for parameter in model.parameters()}
    return min(working_memory_bytes(device) for device in devices)


def working_memory_bytes(device: str | torch.device) -> float:
    """How much memory one batched pass (IG steps, circuits, positions) may use on ``device``.

    ``$CIRCUITVIZ_WORKING_MEMORY_GB`` when set; on the CPU 2 GB (or less when less is free); on
    an accelerator 60 % of what is free when the pass starts, so a long prompt or a large model
    is cut into as many chunks as the device needs and no more.
    """
    text = os.environ.get(WORKING_MEMORY_ENV, "").strip()
    if text:
        try:
            value = float(text)
        except ValueError:
            raise ModelLoadError(
                f"{WORKING_MEMORY_ENV}={shown(text, 30)} is not a number of gigabytes; set e.g. 4."
            ) from None
        if value > 0:
            return value * 1e9
    device = torch.device(device)
    free = free_memory_bytes(device)
    if device.type == "cpu" or free is None:
        return min(CPU_WORKING_MEMORY, free / 4) if free else CPU_WORKING_MEMORY
    return max(ACCELERATOR_SHARE * free, 256e6)
