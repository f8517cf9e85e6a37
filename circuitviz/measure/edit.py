"""Edit a circuit and measure it: remove or restore nodes and edges, keep only a pinned subgraph,
and the edited circuit's NDF and necessity on the real model.

``CircuitEdit`` is plain data (what was removed, restored, pinned), applied to a circuit mask by
``edited_mask``; ``read_edit`` checks one read from a URL or a file and says in one sentence what
it dropped (unknown nodes or edges, a list too long). ``measure`` evaluates the edited circuit and
its complement (necessity) in ONE batched call of the shared evaluator, exactly as
``circuitviz evaluate --circuit`` does (``api.evaluate_circuits``: the mask as given, no pruning),
so the two give the same numbers; the clean and corrupted runs of a task are made once and kept
(``kept_evaluator``), so every edit after the first costs only the patched pass.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from ..core.graph import GraphSpec

MAX_ITEMS = 2000  # nodes or edges one edit may name (a longer list from a URL is refused)
KEPT_EVALUATORS = 4


@dataclass(frozen=True)
class CircuitEdit:
    """What the user changed: nodes and edges removed, edges restored (added back or added),
    and the pinned nodes of a keep-only subgraph (empty: no subgraph)."""

    removed_nodes: tuple[str, ...] = ()
    removed_edges: tuple[str, ...] = ()
    restored_edges: tuple[str, ...] = ()
    keep_only: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not (self.removed_nodes or self.removed_edges or self.restored_edges or self.keep_only)

    def to_dict(self) -> dict:
        return {
            "removed_nodes": list(self.removed_nodes),
            "removed_edges": list(self.removed_edges),
            "restored_edges": list(self.restored_edges),
            "keep_only": list(self.keep_only),
        }

    def with_node_removed(self, node: str) -> CircuitEdit:
        return CircuitEdit(
            tuple(dict.fromkeys((*self.removed_nodes, node))),
            self.removed_edges,
            self.restored_edges,
            self.keep_only,
        )

    def with_node_restored(self, node: str) -> CircuitEdit:
        return CircuitEdit(
            tuple(n for n in self.removed_nodes if n != node),
            self.removed_edges,
            self.restored_edges,
            self.keep_only,
        )

    def with_edge_removed(self, edge: str) -> CircuitEdit:
        restored = tuple(e for e in self.restored_edges if e != edge)
        return CircuitEdit(
            self.removed_nodes, tuple(dict.fromkeys((*self.removed_edges, edge))), restored, self.keep_only
        )

    def with_edge_restored(self, edge: str) -> CircuitEdit:
        removed = tuple(e for e in self.removed_edges if e != edge)
        return CircuitEdit(
            self.removed_nodes, removed, tuple(dict.fromkeys((*self.restored_edges, edge))), self.keep_only
        )

    def keeping_only(self, nodes) -> CircuitEdit:
        return CircuitEdit(
            self.removed_nodes, self.removed_edges, self.restored_edges, tuple(dict.fromkeys(nodes))
        )


@dataclass
class ReadEdit:
    """An edit read from untrusted data, and the one sentence saying what was left out."""

    edit: CircuitEdit
    problem: str = ""
    dropped: list[str] = field(default_factory=list)


def _names(value, known: set[str], what: str, dropped: list[str], problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        problems.append(f"the {what} are not a list of names")
        return ()
    if len(value) > MAX_ITEMS:
        problems.append(f"{len(value):,} {what} is more than the {MAX_ITEMS:,} an edit may name")
        return ()
    kept = [item for item in value if item in known]
    dropped.extend(item for item in value if item not in known)
    return tuple(dict.fromkeys(kept))


def read_edit(data, spec: GraphSpec) -> ReadEdit:
    """A ``CircuitEdit`` from a dict read from a URL or a file: names the model does not have are
    dropped, and the sentence says which (never an exception)."""
    if data is None or data == {}:
        return ReadEdit(CircuitEdit())
    if not isinstance(data, dict):
        return ReadEdit(CircuitEdit(), "The edit is not an object of lists; it was left out.")
    nodes, edges = set(spec.node_names), set(spec.edge_names)
    dropped: list[str] = []
    problems: list[str] = []
    edit = CircuitEdit(
        _names(data.get("removed_nodes"), nodes, "removed nodes", dropped, problems),
        _names(data.get("removed_edges"), edges, "removed edges", dropped, problems),
        _names(data.get("restored_edges"), edges, "restored edges", dropped, problems),
        _names(data.get("keep_only"), nodes, "pinned nodes", dropped, problems),
    )
    if dropped:
        shown = ", ".join(repr(name[:40]) for name in dropped[:3]) + (" …" if len(dropped) > 3 else "")
        problems.append(f"{len(dropped):,} names this model does not have were left out ({shown})")
    problem = ("The edit: " + "; ".join(problems) + ".") if problems else ""
    return ReadEdit(edit, problem, dropped)


def reader_node(backward_name: str) -> str:
    """The node a reader belongs to: 'a3.h1<q>' -> 'a3.h1'."""
    return backward_name.split("<")[0]


def node_edge_mask(spec: GraphSpec, nodes) -> torch.Tensor:
    """[n_forward, n_backward] bool: the edges into or out of any of ``nodes``."""
    nodes = set(nodes)
    out = torch.zeros(
        spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu"
    )  # masks live on the CPU
    writers = [i for i, name in enumerate(spec.forward_names) if name in nodes]
    readers = [i for i, name in enumerate(spec.backward_names) if reader_node(name) in nodes]
    if writers:
        out[writers, :] = True
    if readers:
        out[:, readers] = True
    return out & spec.edge_mask.to(out.device)


def edited_mask(spec: GraphSpec, mask: torch.Tensor, edit: CircuitEdit) -> torch.Tensor:
    """The circuit ``mask`` [n_forward, n_backward] after ``edit``: restored edges added, then
    removed nodes' edges and removed edges taken out, then (with pins) only the edges between
    pinned nodes, the embeddings and the logits kept. On the mask's device."""
    out = mask.clone().bool()
    for name in edit.restored_edges:
        out[spec.edge_position(name)] = True
    if edit.removed_nodes:
        out &= ~node_edge_mask(spec, edit.removed_nodes).to(out.device)
    for name in edit.removed_edges:
        out[spec.edge_position(name)] = False
    if edit.keep_only:
        keep = set(edit.keep_only) | {"input", "logits"}
        writers = torch.tensor(
            [name in keep for name in spec.forward_names], dtype=torch.bool, device=out.device
        )
        readers = torch.tensor(
            [reader_node(name) in keep for name in spec.backward_names], dtype=torch.bool, device=out.device
        )
        out &= writers[:, None] & readers[None, :]
    return out & spec.edge_mask.to(out.device)


# ----- measuring ---------------------------------------------------------------------------------
_KEPT: OrderedDict[tuple, object] = OrderedDict()
_GUARD = threading.Lock()


def _task_key(model, task, max_tokens: int) -> tuple:
    import json

    return (id(model), json.dumps(task.to_dict(), sort_keys=True, default=str), int(max_tokens))


def kept_evaluator(model, task, max_tokens: int | None = None):
    """The task's ``Evaluator`` (its clean and corrupted runs made once), kept for the last few
    tasks; raises TaskError in one sentence when the corruption does not change the metric."""
    from ..core.tasks import DEFAULT_MAX_TOKENS, prepare_task
    from ..models.adapter import adapter_of
    from .evaluate import Evaluator
    from .task_validity import require_meaningful

    max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    key = _task_key(model, task, max_tokens)
    with _GUARD:
        if key in _KEPT:
            _KEPT.move_to_end(key)
            return _KEPT[key]
    spec = adapter_of(model).spec
    evaluator = Evaluator(model, spec, prepare_task(model, task, max_tokens=max_tokens))
    require_meaningful(task, evaluator.baseline.clean, evaluator.baseline.corrupted)
    with _GUARD:
        _KEPT[key] = evaluator
        while len(_KEPT) > KEPT_EVALUATORS:
            _KEPT.popitem(last=False)
    return evaluator


def measure(model, task, mask: torch.Tensor, max_tokens: int | None = None):
    """(baseline, CurvePoint) of the circuit ``mask`` on ``task``: its NDF, NFS and necessity (its
    complement in the same batched pass), as ``circuitviz evaluate --circuit`` computes them."""
    from .evaluate import curves_of_tasks

    evaluator = kept_evaluator(model, task, max_tokens)
    circuit = mask.bool().to(evaluator.device) & evaluator.spec.edge_mask.to(evaluator.device)
    (point,) = curves_of_tasks([evaluator], circuit[None, None], [int(circuit.sum())])[0]
    return evaluator.baseline, point
