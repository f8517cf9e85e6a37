"""A second device on a CPU-only torch, strict the way CUDA is, so CPU-only CI sees device mix-ups.

On a GPU every tensor that meets the model must live on the model's device; a tensor made with
``torch.zeros(...)`` and no ``device=`` lands on the CPU and the first operation that meets a
CUDA tensor raises "Expected all tensors to be on the same device". A CPU-only machine never
sees that: everything is on the CPU. ``SimulatedDevice`` brings the failure back.

While the mode is active, every tensor is *on the device* (the model's parameters and buffers,
everything computed from them, gradients of them, tensors made with ``device=`` the model's
device) or *on the host* (made without a device or with ``device="cpu"``, moved there by
``.cpu()``/``.to("cpu")``, loaded from disk), or unknown (made where torch functions are not
seen, such as autograd's and torch.func's own tensors, which read as on the device, as they
would be on a GPU). The data stays on the CPU; only the bookkeeping differs. An operation that meets a device
tensor and a host tensor of one or more dimensions raises ``DeviceMixError``, as CUDA would;
zero-dimensional host tensors mix freely (CUDA treats them as scalars), host index tensors may
index a device tensor, and copies across devices are allowed. ``x.device`` of a device tensor
reads ``meta``, so ``torch.zeros(n, device=x.device)`` makes a device tensor, and a device tensor
refuses ``.numpy()`` as a CUDA tensor does.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakTensorKeyDictionary

SIMULATED = torch.device("meta")
DEVICE, HOST = "device", "host"

FACTORIES = frozenset(
    "zeros ones empty full arange tensor randn rand randint eye linspace logspace as_tensor "
    "scalar_tensor randperm tril_indices triu_indices empty_strided from_numpy frombuffer".split()
)
LIKE_FACTORIES = frozenset(
    "zeros_like ones_like empty_like full_like rand_like randn_like randint_like "
    "new_zeros new_ones new_empty new_full new_tensor".split()
)
TRANSFERS = frozenset(("to", "cpu", "cuda", "type_as"))
# operations that may take a host argument beside a device one, as on CUDA
CROSS_DEVICE_OK = frozenset(("copy_", "__repr__", "__format__", "__str__"))


class DeviceMixError(RuntimeError):
    """Tensors on the simulated device and on the host met in one operation."""


def _place_of_device(device) -> str:
    return DEVICE if torch.device(device).type == SIMULATED.type else HOST


class SimulatedDevice(TorchFunctionMode):
    """Use as ``with SimulatedDevice(model) as device: ...``; the model then counts as on the device."""

    def __init__(self, *modules):
        super().__init__()
        self.places = WeakTensorKeyDictionary()
        self._restore: list[tuple[object, object]] = []  # (cfg, its device before)
        for module in modules:
            self.adopt(module)

    def adopt(self, module) -> None:
        """Count a module's parameters and buffers as on the device (its data stays where it is)."""
        for tensor in list(module.parameters()) + list(module.buffers()):
            self.places[tensor] = DEVICE
        cfg = getattr(module, "cfg", None)
        if cfg is not None and hasattr(cfg, "device"):
            self._restore.append((cfg, cfg.device))
            cfg.device = SIMULATED

    def __exit__(self, *exc_info):
        """Leave the model as it was: its config names its real device again."""
        for cfg, device in reversed(self._restore):
            cfg.device = device
        self._restore.clear()
        return super().__exit__(*exc_info)

    def place(self, tensor) -> str | None:
        return self.places.get(tensor) if isinstance(tensor, torch.Tensor) else None

    def on_device(self, tensor) -> bool:
        return self.place(tensor) == DEVICE

    def _mark(self, value, place: str | None):
        if place is not None:
            for item in tree_flatten(value)[0]:
                if isinstance(item, torch.Tensor):
                    self.places[item] = place
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        owner = getattr(func, "__self__", None)
        if name == "__get__" and owner is torch.Tensor.device:
            return func(*args, **kwargs) if self.place(args[0]) == HOST else SIMULATED
        if name == "__get__" and owner in (torch.Tensor.is_cpu,):
            return self.place(args[0]) == HOST
        if name in FACTORIES or name in LIKE_FACTORIES:
            return self._factory(func, name, args, kwargs)
        if name in TRANSFERS:
            return self._transfer(func, name, args, kwargs)
        if name == "numpy" and self.on_device(args[0]):
            raise TypeError(
                "can't convert a device tensor to numpy; use Tensor.cpu() first (simulated device)"
            )
        tensors = [item for item in tree_flatten((args, kwargs))[0] if isinstance(item, torch.Tensor)]
        places = [self.place(tensor) for tensor in tensors]
        self._check(name, args, tensors, places)
        out = func(*args, **kwargs)
        if name == "grad" and not places:
            return out
        return self._mark(out, DEVICE if DEVICE in places else HOST if HOST in places else None)

    def _factory(self, func, name, args, kwargs):
        device = kwargs.pop("device", None)
        if device is not None:
            place = _place_of_device(device)
        elif name in LIKE_FACTORIES:
            place = self.place(args[0]) or HOST
        else:
            place = HOST
        return self._mark(func(*args, **kwargs), place)

    def _transfer(self, func, name, args, kwargs):
        tensor, rest = args[0], list(args[1:])
        target = {"cpu": HOST, "cuda": DEVICE}.get(name)
        if name in ("to", "type_as"):
            device = kwargs.pop("device", None)
            kept = []
            for item in rest:
                if isinstance(item, torch.Tensor):
                    target = self.place(item) or HOST
                    kwargs.setdefault("dtype", item.dtype)
                elif isinstance(item, (str, torch.device)):
                    device = item
                else:
                    kept.append(item)
            if device is not None:
                target = _place_of_device(device)
            # what is left is (dtype, non_blocking, copy) positionally; pass it by name
            flags = iter(("non_blocking", "copy"))
            for item in kept:
                if item is None or isinstance(item, torch.dtype):
                    if item is not None:
                        kwargs.setdefault("dtype", item)
                elif isinstance(item, bool):
                    kwargs[next(flags)] = item
            rest = []
        if name in ("cpu", "cuda"):
            out = tensor
        elif name == "type_as":
            out = tensor.to(kwargs["dtype"])
        else:
            out = func(tensor, *rest, **kwargs) if (rest or kwargs) else tensor
        current = self.place(tensor)
        if target is None:  # a change of dtype only: the result stays where the tensor is
            return self._mark(out, current)
        if out is tensor and target != (current or HOST):
            out = tensor.view_as(tensor)  # a new tensor object on the other side
        return self._mark(out, target)

    def _check(self, name, args, tensors, places) -> None:
        device = [t for t, p in zip(tensors, places) if p == DEVICE]
        host = [t for t, p in zip(tensors, places) if p == HOST and t.dim() > 0]
        if not device or not host or name in CROSS_DEVICE_OK:
            return
        if name in ("__getitem__", "__setitem__") and args:
            indices = [t for t in tree_flatten(args[1])[0] if isinstance(t, torch.Tensor)]
            value = args[2] if name == "__setitem__" and len(args) > 2 else None
            if self.on_device(args[0]):
                # host indices may index a device tensor; a host value only into slices (a copy)
                bad_value = (
                    isinstance(value, torch.Tensor)
                    and self.place(value) == HOST
                    and value.dim() > 0
                    and bool(indices)
                )
                if not bad_value:
                    return
            elif name == "__setitem__" and not indices:
                return  # host[slice] = device value: a copy
        raise DeviceMixError(
            f"Expected all tensors to be on the same device, but {name} got {len(device)} tensor(s) on "
            f"the device and {len(host)} on the host (shapes {[tuple(t.shape) for t in host][:3]}); "
            "make the host tensor on the device of the data it meets (simulated device)."
        )
