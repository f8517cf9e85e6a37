"""Every circuit a Best-of-N run evaluates, each once, and the memo of their faithfulness.

Variants often choose the same circuit (BoN at an anchor is iBoN there; a candidate's top-N may
equal the average's). ``CircuitPool`` keeps one entry per distinct mask and evaluates the new
ones in one batched call; L(C(q)) of every circuit evaluated on a prompt is memoised in the
run's result store (kind "circuit-metrics", keyed by ``metrics_key`` and ``circuit_digest``), so
switching the variant or adding a budget evaluates only circuits never seen before.
"""

from __future__ import annotations

import hashlib
import math

import numpy
import torch

from ..core.curves import Baseline, CurvePoint, ndf, nfs
from ..core.graph import GraphSpec
from ..core.keys import content_key
from ..core.tasks import PromptTask
from ..measure.evaluate import Evaluator, Progress
from ..models.adapter import backend_of, model_dtype


def circuit_digest(mask: torch.Tensor) -> str:
    """A short content hash of a circuit mask (read on the CPU)."""
    return _digest_of_bits(mask.flatten().cpu().numpy())


def _digest_of_bits(bits: numpy.ndarray) -> str:
    return hashlib.sha256(numpy.packbits(bits).tobytes()).hexdigest()[:24]


def prompt_key(kind: str, model, model_id: str, spec: GraphSpec, task: PromptTask, **more) -> str:
    """The store key of something computed for one (model, dtype, graph, prompt pair); the
    backend named only for the bridge, as in ``Request.key``."""
    backend = backend_of(model)
    return content_key(
        kind=kind,
        model=model_id,
        dtype=str(model_dtype(model)),
        graph=spec.to_cfg_dict(),
        task=task.to_dict(),
        **({"backend": backend} if backend != "hooked" else {}),
        **more,
    )


def metrics_key(model, model_id: str, spec: GraphSpec, task: PromptTask) -> str:
    """The store key of the circuit metrics memo of one (model, prompt)."""
    return prompt_key("circuit-metrics", model, model_id, spec, task)


class MetricsMemo:
    """L(C(q)) of the circuits evaluated before on one (model, prompt), read from the store and
    written back when new ones were added; ``values`` is None without a store."""

    def __init__(self, store, key: str):
        self.store, self.key = store, key
        state = store.load_state(key, kind="circuit-metrics") if store is not None else None
        self.values: dict | None = (
            None if store is None else dict(state.get("metrics", {})) if isinstance(state, dict) else {}
        )
        self._loaded = len(self.values or {})

    def save(self) -> None:
        if self.store is not None and self.values is not None and len(self.values) > self._loaded:
            self.store.save_state(self.key, {"metrics": self.values}, kind="circuit-metrics")


class CircuitPool:
    """Circuits to evaluate, each once however many variants chose it. Masks stay on their
    device; their identity is read on the CPU, one transfer per batch of masks added."""

    def __init__(self):
        self.masks: list[torch.Tensor] = []
        self.digests: list[str] = []
        self.sizes: list[int] = []
        self._index: dict[bytes, int] = {}
        self.values: list[float | None] = []

    def add(self, mask: torch.Tensor) -> int:
        return self.add_many(mask[None])[0]

    def add_many(self, masks: torch.Tensor) -> list[int]:
        """Add circuits [n, n_forward, n_backward]; returns each one's index in the pool."""
        bits = masks.flatten(1).cpu().numpy()
        indices = []
        for mask, row in zip(masks, bits):
            key = row.tobytes()
            if key not in self._index:
                self._index[key] = len(self.masks)
                self.masks.append(mask)
                self.digests.append(_digest_of_bits(row))
                self.sizes.append(int(row.sum()))
                self.values.append(None)
            indices.append(self._index[key])
        return indices

    def evaluate(
        self, evaluator: Evaluator, progress: Progress | None = None, memo: dict | None = None
    ) -> int:
        """Evaluate the circuits not evaluated yet, all in one batched call; ``memo`` maps
        ``circuit_digest`` to L(C(q)) of circuits evaluated before (and is updated). Returns how
        many circuits went through the model."""
        pending = [i for i, value in enumerate(self.values) if value is None]
        if memo is not None:
            for index in pending:
                self.values[index] = memo.get(self.digests[index])
            pending = [i for i in pending if self.values[i] is None]
        if pending:
            metrics = evaluator.metrics(torch.stack([self.masks[i] for i in pending]), progress)
            for index, value in zip(pending, metrics.tolist()):
                self.values[index] = float(value)
                if memo is not None:
                    memo[self.digests[index]] = float(value)
        return len(pending)

    def point(self, index: int, budget: int, baseline: Baseline) -> CurvePoint:
        value = self.values[index]
        return CurvePoint(
            budget=int(budget),
            n_edges=self.sizes[index],
            metric=value,
            nfs=nfs(value, baseline),
            ndf=ndf(value, baseline),
        )


def winner(points: list[CurvePoint], baseline: Baseline) -> int:
    """Highest NDF; among equals the smallest |L(M(q)) - L(C(q))|, then the lowest index (q)."""
    return min(
        range(len(points)),
        key=lambda i: (-points[i].ndf, abs(baseline.clean - points[i].metric), i),
    )


def _json_number(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def point_dict(point: CurvePoint) -> dict:
    return {
        key: _json_number(value) if isinstance(value, float) else value
        for key, value in point.to_dict().items()
    }
