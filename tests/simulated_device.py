"""Simulated devices on a CPU-only torch, strict the way CUDA is, so CPU-only CI sees device mix-ups.

On a GPU every tensor that meets the model must live on the device of the data it meets; a tensor
made with ``torch.zeros(...)`` and no ``device=`` lands on the CPU, and the first operation that
meets a CUDA tensor raises "Expected all tensors to be on the same device"; a model split over
cuda:0 and cuda:1 raises the same when a tensor of block 3 meets one of block 20. A CPU-only
machine never sees that: everything is on the CPU. ``SimulatedDevice`` brings the failure back.

While the mode is active, every tensor is in one *place*: a simulated device (numbered 0, 1, ...;
the model's parameters and buffers, everything computed from them, gradients of them, tensors made
with ``device=`` a simulated device) or the *host* (made without a device or with
``device="cpu"``, moved there by ``.cpu()``/``.to("cpu")``, loaded from disk), or unknown (made
where torch functions are not seen, such as autograd's and torch.func's own tensors, which read as
on the device of what they meet, as they would be on a GPU). The data stays on the CPU; only the
bookkeeping differs. As on CUDA:

- an operation that meets a device tensor and a host tensor of one or more dimensions raises
  ``DeviceMixError``; zero-dimensional host tensors mix freely (CUDA treats them as scalars);
- an operation that meets tensors of two simulated devices raises, whatever their dimensions;
- host index tensors may index a device tensor (so may indices of the tensor's own device), and
  copies between any two places are allowed (``copy_``, ``.to``, a slice assignment);
- ``x.device`` of a device tensor reads that device, so ``torch.zeros(n, device=x.device)`` lands
  beside ``x``, and a device tensor refuses ``.numpy()``.

One device (``SimulatedDevice(model)``) reads ``meta``, as before. Several (``SimulatedDevice(kind=
"xpu", n_devices=2)`` with ``split(hf_model, {module: index})``) read ``xpu:0``, ``xpu:1``...: a
TransformerBridge refuses to read weights on ``meta``, and no code here asks an xpu anything.
``split`` moves each module's inputs to its device as ``accelerate``'s hooks do in a model loaded
with a ``device_map`` (the whole model's output back to its input's device); the hooks are removed
when the mode ends.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

SIMULATED = torch.device("meta")
HOST = "host"
DEVICE = 0  # the first (or only) simulated device

FACTORIES = frozenset(
    "zeros ones empty full arange tensor randn rand randint eye linspace logspace as_tensor "
    "scalar_tensor randperm tril_indices triu_indices empty_strided from_numpy frombuffer".split()
)
LIKE_FACTORIES = frozenset(
    "zeros_like ones_like empty_like full_like rand_like randn_like randint_like "
    "new_zeros new_ones new_empty new_full new_tensor".split()
)
TRANSFERS = frozenset(("to", "cpu", "cuda", "type_as"))
# operations that may take a tensor of another place beside a device one, as on CUDA
CROSS_DEVICE_OK = frozenset(("copy_", "__repr__", "__format__", "__str__"))
# keyword arguments accelerate's hooks leave where they are (transformers' _skip_keys_device_placement)
SKIP_KEYS = frozenset(("past_key_values", "past_key_value", "cache"))


def _or(place, default):
    """``place``, or ``default`` when unknown (device 0 is a place, though falsy)."""
    return default if place is None else place


class DeviceMixError(RuntimeError):
    """Tensors of two places (two simulated devices, or a device and the host) met in one operation."""


class SimulatedDevice(TorchFunctionMode):
    """Use as ``with SimulatedDevice(model) as device: ...``; the model then counts as on the device.

    ``kind`` and ``n_devices`` give several devices (``kind:0``, ``kind:1``...); ``adopt(module,
    index)`` puts a module on one of them, ``split(model, {module name: index})`` spreads a model.
    """

    def __init__(self, *modules, kind: str = "meta", n_devices: int = 1):
        super().__init__()
        self.kind, self.n_devices = kind, n_devices
        self.indexed = n_devices > 1 or kind != SIMULATED.type
        self.places = WeakTensorKeyDictionary()
        self._restore: list[tuple[object, object]] = []  # (cfg, its device before)
        self._handles: list = []  # hooks of split(), removed on exit
        self.moves: list[tuple[object, object]] = []  # (from, to) of every move between devices
        for module in modules:
            self.adopt(module)

    # ----- places and devices ------------------------------------------------------------------
    def device(self, place: int = DEVICE) -> torch.device:
        """The torch.device a tensor of simulated device ``place`` reads."""
        return torch.device(self.kind, place) if self.indexed else torch.device(self.kind)

    def place_of_device(self, device) -> object:
        device = torch.device(device)
        if device.type != self.kind:
            return HOST
        index = device.index or 0
        if index >= self.n_devices:
            raise RuntimeError(f"{device} is not one of the {self.n_devices} simulated devices")
        return index

    def place(self, tensor) -> object:
        return self.places.get(tensor) if isinstance(tensor, torch.Tensor) else None

    def on_device(self, tensor) -> bool:
        return self.place(tensor) not in (None, HOST)

    def adopt(self, module, place: int = DEVICE) -> None:
        """Count a module's parameters and buffers as on device ``place`` (the data stays where it is)."""
        for tensor in list(module.parameters()) + list(module.buffers()):
            self.places[tensor] = place
        cfg = getattr(module, "cfg", None)
        if cfg is not None and hasattr(cfg, "device") and all(seen is not cfg for seen, _ in self._restore):
            self._restore.append((cfg, cfg.device))
            cfg.device = self.device(place)

    def split(self, model, device_map: dict[str, int]) -> None:
        """Spread ``model`` (a ``transformers`` model) over the devices as ``from_pretrained(...,
        device_map=...)`` does: each named module's weights on its device, its inputs (and those of
        every submodule holding weights) moved there before it runs, the whole model's output
        moved back to the device of its input. Call inside the mode."""
        for name, place in device_map.items():
            module = model.get_submodule(name)
            self.adopt(module, place)
            for inner in module.modules():
                if inner is module or len(inner.state_dict()) > 0:
                    self._handles.append(
                        inner.register_forward_pre_hook(self._mover(place), with_kwargs=True)
                    )

    def _mover(self, place: int):
        target = self.device(place)

        def move(module, args, kwargs):
            def to(value):
                return value.to(target) if isinstance(value, torch.Tensor) else value

            kept = {key: value for key, value in kwargs.items() if key in SKIP_KEYS}
            moved = {key: tree_map(to, value) for key, value in kwargs.items() if key not in SKIP_KEYS}
            return tree_map(to, args), {**moved, **kept}

        return move

    def __exit__(self, *exc_info):
        """Leave the model as it was: its config names its real device again, no hook is left."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for cfg, device in reversed(self._restore):
            cfg.device = device
        self._restore.clear()
        return super().__exit__(*exc_info)

    def _mark(self, value, place):
        if place is not None:
            for item in tree_flatten(value)[0]:
                if isinstance(item, torch.Tensor):
                    self.places[item] = place
        return value

    # ----- every torch call ---------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        owner = getattr(func, "__self__", None)
        if name == "__get__" and owner is torch.Tensor.device:
            place = self.place(args[0])
            return func(*args, **kwargs) if place == HOST else self.device(DEVICE if place is None else place)
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
        if name == "grad" and owner is None and getattr(func, "__module__", "").startswith("torch.autograd"):
            return self._gradients(func, args, kwargs)
        tensors = [item for item in tree_flatten((args, kwargs))[0] if isinstance(item, torch.Tensor)]
        places = [self.place(tensor) for tensor in tensors]
        self._check(name, args, tensors, places)
        out = func(*args, **kwargs)
        if name == "grad" and not places:
            return out
        devices = [place for place in places if place not in (None, HOST)]
        if name == "__setitem__" or (name in CROSS_DEVICE_OK and args):
            result_place = self.place(args[0])  # the destination keeps its place
        else:
            result_place = devices[0] if devices else HOST if HOST in places else None
        return self._mark(out, result_place)

    def _gradients(self, func, args, kwargs):
        """``torch.autograd.grad``: inputs may sit on several devices (as on CUDA); each gradient
        lands on its input's device."""
        out = func(*args, **kwargs)
        inputs = kwargs.get("inputs", args[1] if len(args) > 1 else ())
        inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
        for gradient, tensor in zip(out, inputs):
            if isinstance(gradient, torch.Tensor):
                self._mark(gradient, self.place(tensor))
        return out

    def _factory(self, func, name, args, kwargs):
        device = kwargs.pop("device", None)
        if device is not None:
            place = self.place_of_device(device)
        elif name in LIKE_FACTORIES:
            place = _or(self.place(args[0]), HOST)
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
                    target = _or(self.place(item), HOST)
                    kwargs.setdefault("dtype", item.dtype)
                elif isinstance(item, (str, torch.device, int)) and not isinstance(item, bool):
                    device = item
                else:
                    kept.append(item)
            if device is not None:
                target = self.place_of_device(device)
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
        if target != _or(current, HOST):
            self.moves.append((_or(current, HOST), target))
            if out is tensor:
                out = tensor.view_as(tensor)  # a new tensor object on the other side
        return self._mark(out, target)

    def _check(self, name, args, tensors, places) -> None:
        if name in CROSS_DEVICE_OK:
            return
        devices = {place for place in places if place not in (None, HOST)}
        host = [t for t, p in zip(tensors, places) if p == HOST and t.dim() > 0]
        if len(devices) <= 1 and (not devices or not host):
            return
        if name in ("__getitem__", "__setitem__") and args and self._indexing_allowed(name, args):
            return
        if len(devices) > 1:
            raise DeviceMixError(
                f"Expected all tensors to be on the same device, but {name} got tensors on "
                f"{', '.join(str(self.device(p)) for p in sorted(devices))} (simulated devices); "
                "make each tensor on the device of the data it meets."
            )
        raise DeviceMixError(
            f"Expected all tensors to be on the same device, but {name} got tensor(s) on "
            f"{self.device(next(iter(devices)))} and {len(host)} on the host (shapes "
            f"{[tuple(t.shape) for t in host][:3]}); make the host tensor on the device of the data "
            "it meets (simulated device)."
        )

    def _indexing_allowed(self, name, args) -> bool:
        """x[i] and x[i] = v across places, as CUDA allows them: indices on the host or on x's
        device; a value of another place only into slices (a copy), never through index tensors."""
        target = self.place(args[0])
        indices = [t for t in tree_flatten(args[1])[0] if isinstance(t, torch.Tensor)]
        value = args[2] if name == "__setitem__" and len(args) > 2 else None
        if any(self.place(i) not in (None, HOST, target) for i in indices):
            return False
        if isinstance(value, torch.Tensor):
            value_place = self.place(value)
            foreign = value_place not in (None, target) and not (value_place == HOST and value.dim() == 0)
            return not (foreign and indices)
        return target not in (None, HOST) or not indices


# ----- what the device tests share: a light configuration of a method, and a result compared with the host's
# fewer of what a method repeats (paraphrases, IG steps, optimisation steps): a tensor on the wrong
# device fails the first repeat as it does the last
LIGHT = {"n_paraphrases": 4, "ig_steps": 5, "steps": 3}
# and wider passes where a method batches its patched runs (ACDC's speculative rows): the same rows
# and decisions in fewer passes, each of which costs a tiny model little more than its overhead
WIDE = {"max_batch": 256}


def light_config(method):
    """``method``'s configuration with at most LIGHT of what it repeats, passes at least WIDE, no score cache."""
    fields = set(method.Config.__dataclass_fields__)
    defaults = method.make_config({})
    settings = {"cache_scores": False} if "cache_scores" in fields else {}
    settings.update(
        {name: value for name, value in LIGHT.items() if name in fields and getattr(defaults, name) > value}
    )
    settings.update(
        {name: value for name, value in WIDE.items() if name in fields and getattr(defaults, name) < value}
    )
    return method.make_config(settings)


def assert_same_result(on_device, on_host) -> None:
    """Scores, curve and every budget's circuit equal the host run's, the scores back on the host."""
    assert on_device.scores.device.type == "cpu"  # results are stored and drawn on the host
    assert torch.equal(on_device.scores, on_host.scores)
    assert [p.to_dict() for p in on_device.curve] == [p.to_dict() for p in on_host.curve]
    for budget in on_host.budgets:
        assert torch.equal(on_device.circuit(budget).cpu(), on_host.circuit(budget))
