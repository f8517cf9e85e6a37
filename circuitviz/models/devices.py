"""Where a model runs and in which precision; the only place a device or dtype is chosen."""

from __future__ import annotations

import torch

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
            f"'{device}' is not a device name; use 'auto', 'cpu', 'cuda' or 'mps'."
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
                f"{torch.cuda.device_count()} CUDA GPU(s); choose 'cuda:0' or 'auto' instead."
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
    raise ModelLoadError(f"Precision '{dtype}' is not supported; use one of {', '.join(DTYPES)}.")
