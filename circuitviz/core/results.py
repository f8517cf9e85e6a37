"""A circuit-discovery result: a plain value that can be cached, exported, compared and drawn.

It holds the edge scores of the method, the circuit the run chose at every budget it evaluated
(top-N-and-prune of the scores for a scoring method, the method's own for Best-of-N, ACC++,
Edge Pruning, a bootstrap ensemble), the faithfulness curve, the timings, and the method
family's own typed details (``MethodDetails``: Best-of-N's pairs and candidates, ACC++'s
position graph, CircuitLasso's regression). A result is data: it never runs the model.
``circuit(budget)`` reads a stored circuit (a budget the run did not evaluate is derived once
from the result's own data and kept), ``point(budget)`` a stored curve point; evaluating a circuit
at a new budget is ``api.evaluate_circuits``. Circuits are stored compactly, one bit per edge of
the graph. It converts to the public EAP-IG library's JSON (``Graph.from_json`` reads it) with our
own keys beside EAP-IG's, and reads such files and plain edge lists back.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..details.base import MethodDetails, ResultFormatError, details_to_state
from ..details.kinds import details_from_state, legacy_details
from ..positions.graph import units_at_budgets
from . import json_text
from .circuit_fields import circuit_fields_problem
from .curves import Baseline, CurvePoint, cmd, cpr
from .graph import GraphError, GraphSpec, prune, top_n
from .tasks import PromptTask
from .text import counted, read_user_file, shown, shown_number

# 3: every evaluated budget's circuit stored, one bit per edge (``pack_circuits``);
# 2: full boolean masks of the circuits a method chose itself, the others derived on reading;
# 1: details as an untyped ``extra`` dict. All three are read.
FORMAT_VERSION = 3


@dataclass
class CircuitResult:
    """Everything one discovery produced. Tensors live on the CPU."""

    model_id: str
    graph: GraphSpec
    task: PromptTask
    method: str
    config: dict
    scores: torch.Tensor  # [n_forward, n_backward] float32, zero off the edge mask
    baseline: Baseline
    curve: list[CurvePoint]
    timings: dict[str, float] = field(default_factory=dict)
    # budget -> [n_fwd, n_bwd] bool: the circuit the run chose at each budget of its curve
    circuits: dict[int, torch.Tensor] = field(default_factory=dict)
    tokens: dict[str, list[str]] = field(default_factory=dict)
    device: str = "cpu"
    details: MethodDetails | None = None
    backend: str = "hooked"  # "bridge": computed through TransformerLens's TransformerBridge
    # a position-resolved run (``--positions``): scores per (edge, position) unit, whose sum over
    # positions is ``scores``, and the clean run's attention the drawing shares key/value units by
    position_scores: torch.Tensor | None = None  # [n_forward, n_backward, pos] float32
    attention: torch.Tensor | None = None  # [n_layers, n_heads, pos, pos]
    # each circuit's NDF on held-out paraphrases (``measure.transfer.transfer_record``), when measured
    transfer: dict | None = None
    # circuits at budgets the run did not evaluate, each derived once (not stored)
    _derived: dict[int, torch.Tensor] = field(default_factory=dict, repr=False, compare=False)

    @property
    def budgets(self) -> list[int]:
        return [point.budget for point in self.curve]

    @property
    def positions(self) -> bool:
        """Whether the circuits are position-resolved: budgets and sizes count (edge, position) units."""
        return self.position_scores is not None

    def position_circuit(self, budget: int) -> torch.Tensor:
        """The position circuit at ``budget`` units: pruned top-N of the position scores.
        # [n_forward, n_backward, pos] bool"""

        if self.position_scores is None:
            raise ValueError("This circuit is not position-resolved; run it again with positions on.")
        return units_at_budgets(self.graph, self.position_scores, [int(budget)])[0]

    def circuit(self, budget: int) -> torch.Tensor:
        """The circuit at ``budget``: the one the run chose, else (a budget it did not evaluate)
        its family's rule or pruned top-N of the scores, derived once from the result's data and
        kept.  # [n_forward, n_backward] bool"""
        budget = int(budget)
        found = self.circuits.get(budget)
        if found is None:
            found = self._derived.get(budget)
        if found is None:
            found = derived_circuit(self, budget)
            self._derived[budget] = found
        return found

    @property
    def any_budget(self) -> bool:
        """Whether the family builds a circuit at any budget (iBoN, BoN-CSM, the baselines)."""
        return self.details is not None and self.details.any_budget(self)

    def point(self, budget: int) -> CurvePoint | None:
        """The faithfulness point the run evaluated at ``budget``, or None (a result never runs
        the model: ``api.evaluate_circuits`` measures a circuit at a new budget)."""
        return next((p for p in self.curve if p.budget == int(budget)), None)

    def summary(self) -> dict:
        """CPR and CMD of the curve (NFS and NDF flavours)."""
        total = self.graph.n_edges
        return {
            "cpr_nfs": cpr(self.curve, total, "nfs"),
            "cmd_nfs": cmd(self.curve, total, "nfs"),
            "cpr_ndf": cpr(self.curve, total, "ndf"),
            "cmd_ndf": cmd(self.curve, total, "ndf"),
        }

    # ----- our own storage (store.py): plain types and tensors, loadable with weights_only ----
    def to_state(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "model_id": self.model_id,
            "graph": self.graph.to_cfg_dict(),
            "task": self.task.to_dict(),
            "method": self.method,
            "config": self.config,
            "scores": self.scores.float().cpu(),
            "baseline": {"clean": self.baseline.clean, "corrupted": self.baseline.corrupted},
            "curve": [point.to_dict() for point in self.curve],
            "timings": dict(self.timings),
            "circuits": pack_circuits(self.graph, self.circuits),
            "tokens": self.tokens,
            "device": self.device,
            "backend": self.backend,
            "details": details_to_state(self.details),
            "position_scores": None if self.position_scores is None else self.position_scores.float().cpu(),
            "attention": None if self.attention is None else self.attention.float().cpu(),
            "transfer": self.transfer,
        }

    @classmethod
    def from_state(cls, state: dict) -> CircuitResult:
        version = state.get("format_version")
        if version not in (1, 2, FORMAT_VERSION):
            raise ResultFormatError(
                f"This stored result has format {version!r}, which this circuitviz cannot read; run it again."
            )
        details = (
            legacy_details(state.get("extra") or {})
            if version == 1
            else details_from_state(state.get("details"))
        )
        graph = GraphSpec.from_cfg_dict(state["graph"])
        if version == FORMAT_VERSION:
            circuits = unpack_circuits(graph, state["circuits"])
        else:
            circuits = {int(k): v for k, v in state["circuits"].items()}
        result = cls(
            model_id=state["model_id"],
            graph=graph,
            task=PromptTask.from_dict(state["task"]),
            method=state["method"],
            config=state["config"],
            scores=state["scores"],
            baseline=Baseline(**state["baseline"]),
            curve=[CurvePoint(**point) for point in state["curve"]],
            timings=state["timings"],
            circuits=circuits,
            tokens=state["tokens"],
            device=state["device"],
            backend=state.get("backend", "hooked"),  # results stored before backends were named
            details=details,
            position_scores=state.get("position_scores"),
            attention=state.get("attention"),
            transfer=state.get("transfer"),
        )
        # an older result kept only the circuits a method chose itself: derive the rest once
        for budget in result.budgets:
            if budget not in result.circuits:
                result.circuits[budget] = derived_circuit(result, budget)
        return result

    # ----- EAP-IG JSON ------------------------------------------------------------------------
    def to_eap_json(self, budget: int | None = None, score_meaning: str = "") -> dict:
        """EAP-IG's ``{"cfg", "nodes", "edges"}`` with our keys beside them.

        ``in_graph`` marks the circuit at ``budget`` (default: the largest budget of the curve);
        ``score_meaning``: what the edges' ``score`` is (the method's trait; this layer knows no
        method), under ``"score_meaning"``.
        """
        if budget is None:
            budget = max(self.budgets) if self.curve else 0
        data = eap_graph_json(self.graph, self.scores, self.circuit(budget))
        data.update(
            {
                "circuitviz_version": FORMAT_VERSION,
                "model_id": self.model_id,
                "task": self.task.to_dict(),
                "method": self.method,
                "config": self.config,
                "score_meaning": score_meaning,
                "budget": int(budget),
                # position-resolved: budgets and curve sizes count (edge, position) units, and
                # in_graph marks the edges the position circuit uses at some position
                "positions": self.positions,
                "clean_metric": self.baseline.clean,
                "corrupted_metric": self.baseline.corrupted,
                "curve": [json_safe(point.to_dict()) for point in self.curve],
                "summary": json_safe(self.summary()),
                "summary_note": summary_note(self.curve),
                "timings": self.timings,
                "timings_note": TIMINGS_NOTE,
                "device": self.device,
                "backend": self.backend,
                "tokens": self.tokens,
                "circuits": circuits_json(self.graph, self.circuits),
                # NDF on paraphrases the method never fitted to or selected on, per budget
                "transfer": self.transfer,
                "details": None
                if self.details is None
                else {"kind": self.details.kind, "version": self.details.version, **self.details.to_dict()},
            }
        )
        return data


def summary_note(curve) -> str:
    """What the JSON's ``summary`` figures are over ``curve``: areas where two budgets or more
    keep different edge counts; else (``discover --budgets 103``) the one point's NFS and NDF and 1
    minus them, which read as areas with nothing said (a reviewer's check, 2026-12-07)."""
    if len({point.n_edges for point in curve}) >= 2:
        return (
            "CPR and CMD are areas under the curve (and under |1 - the curve|) over the fraction of "
            "the graph kept, divided by the span of fractions the budgets cover"
        )
    return (
        "one point on the curve: CPR is its NFS or NDF and CMD |1 - it|, not areas; give two or more "
        "budgets for areas"
    )


# what a reader adding the timings up needs: ACDC's walk_s, CD-T's decomposition_s and
# CircuitLasso's observe_s/reduce_s/solve_s are each within scoring_s (an audit added them twice)
TIMINGS_NOTE = (
    "seconds by phase of the run, the model's load not included; a method's own phases (walk_s, "
    "decomposition_s, observe_s, reduce_s, solve_s, ...) are parts of scoring_s, so the phases do not "
    "add up to a total"
)


def derived_circuit(result: CircuitResult, budget: int) -> torch.Tensor:
    """The circuit at a budget the run did not evaluate, from the result's data alone: the
    family's rule when it has one (iBoN, BoN-CSM, ACC++), the edges a position circuit uses at
    some position, else pruned top-N of the scores."""
    if result.position_scores is not None:
        return result.position_circuit(budget).any(-1)
    chosen = result.details.circuit(result, budget) if result.details is not None else None
    if chosen is not None:
        return chosen
    return prune(result.graph, top_n(result.graph, result.scores, int(budget)))


# ----- circuits as bits: one bit per edge of the graph, in ``GraphSpec.edge_names`` order ----
_BIT_VALUES = (128, 64, 32, 16, 8, 4, 2, 1)


def pack_bits(spec: GraphSpec, masks: torch.Tensor) -> torch.Tensor:
    """Circuit masks [n, n_forward, n_backward] as bytes [n, ceil(n_edges / 8)] uint8 (CPU)."""
    forward, backward = spec.edge_index
    bits = masks.bool().cpu()[:, forward, backward]  # [n, n_edges]
    padding = (-bits.shape[1]) % 8
    bits = torch.nn.functional.pad(bits.to(torch.uint8), (0, padding)).view(bits.shape[0], -1, 8)
    values = torch.tensor(_BIT_VALUES, dtype=torch.uint8, device="cpu")  # the weight of each bit
    return (bits * values).sum(-1).to(torch.uint8)


def unpack_bits(spec: GraphSpec, packed: torch.Tensor) -> torch.Tensor:
    """``pack_bits`` undone.  # [n, n_forward, n_backward] bool"""
    forward, backward = spec.edge_index
    values = torch.tensor(_BIT_VALUES, dtype=torch.uint8, device="cpu")  # the weight of each bit
    bits = (packed.to(torch.uint8)[..., None] & values).ne(0).flatten(1)[:, : spec.n_edges]  # [n, n_edges]
    masks = torch.zeros(bits.shape[0], spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu")
    masks[:, forward, backward] = bits
    return masks


def pack_circuits(spec: GraphSpec, circuits: dict[int, torch.Tensor]) -> dict:
    """A result's circuits as the store keeps them: {"budgets": [...], "bits": [n, bytes] uint8}."""
    budgets = sorted(int(b) for b in circuits)
    if not budgets:
        return {"budgets": [], "bits": torch.zeros(0, 0, dtype=torch.uint8, device="cpu")}
    return {"budgets": budgets, "bits": pack_bits(spec, torch.stack([circuits[b] for b in budgets]))}


def unpack_circuits(spec: GraphSpec, stored: dict) -> dict[int, torch.Tensor]:
    """``pack_circuits`` undone: {budget: [n_forward, n_backward] bool}."""
    budgets = [int(b) for b in stored.get("budgets", [])]
    if not budgets:
        return {}
    bits = stored["bits"]
    if tuple(bits.shape) != (len(budgets), (spec.n_edges + 7) // 8):
        raise ResultFormatError(
            f"This stored result's circuits have shape {tuple(bits.shape)} for {len(budgets)} budgets of "
            f"{spec.n_edges} edges; run it again."
        )
    return dict(zip(budgets, unpack_bits(spec, bits)))


def circuits_json(spec: GraphSpec, circuits: dict[int, torch.Tensor]) -> dict:
    """The circuits as JSON: each budget's bits (one per entry of ``edges``, most significant
    first), base64."""
    packed = pack_circuits(spec, circuits)
    return {
        "encoding": "bits-base64",
        "order": "edges",
        "budgets": {
            str(b): base64.b64encode(row.numpy().tobytes()).decode("ascii")
            for b, row in zip(packed["budgets"], packed["bits"])
        },
    }


def circuits_from_json(spec: GraphSpec, data: dict) -> dict[int, torch.Tensor]:
    """The circuits of an exported result: this format's bits, or (circuitviz_version 2 and
    before) edge names per budget."""
    circuits = data.get("circuits") or {}
    if circuits.get("encoding") == "bits-base64":
        width = (spec.n_edges + 7) // 8
        found = {}
        for budget, text in circuits.get("budgets", {}).items():
            raw = base64.b64decode(text)
            if len(raw) != width:
                raise GraphError(
                    f"The circuit at budget {budget} has {len(raw) * 8} bits for {spec.n_edges} edges."
                )
            row = torch.frombuffer(bytearray(raw), dtype=torch.uint8)[None]  # [1, bytes]
            found[int(budget)] = unpack_bits(spec, row)[0]
        return found
    return {int(budget): spec.mask_from_edge_names(names) for budget, names in circuits.items()}


def json_safe(data: dict) -> dict:
    """NaN is not JSON; write it as null."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in data.items()}


def eap_graph_json(spec: GraphSpec, scores: torch.Tensor, in_graph: torch.Tensor) -> dict:
    """The three keys EAP-IG's ``Graph.from_json`` reads, for every node and edge of the model."""
    in_graph = in_graph & spec.edge_mask
    forward, backward = spec.edge_index
    edge_scores = scores[forward, backward].tolist()
    edge_in = in_graph[forward, backward].tolist()
    edges = {
        name: {"score": float(score), "in_graph": bool(keep)}
        for name, score, keep in zip(spec.edge_names, edge_scores, edge_in)
    }
    node_in = in_graph.any(dim=1).clone()  # writers with an outgoing edge
    owners = spec.backward_to_forward[in_graph.any(dim=0)]
    node_in[owners[owners >= 0]] = True  # and writers whose inputs are read
    nodes = {name: {"in_graph": bool(flag)} for name, flag in zip(spec.forward_names, node_in.tolist())}
    nodes["logits"] = {"in_graph": True}
    return {"cfg": spec.to_cfg_dict(), "nodes": nodes, "edges": edges}


@dataclass
class LoadedCircuit:
    """A circuit read from a file: its membership and, when the file had them, edge scores."""

    mask: torch.Tensor  # [n_forward, n_backward] bool
    scores: torch.Tensor | None
    source: dict  # the whole parsed file when it was a JSON object, else {}
    notes: list[str] = field(default_factory=list)  # what the reader should know of the file


def load_circuit(path: str | Path, spec: GraphSpec) -> LoadedCircuit:
    """Read an EAP-IG-style JSON circuit, a JSON list of edge names, or a text file of them.

    Names the first problem in one sentence (GraphError): unreadable JSON, a graph of another
    shape, an edge the model does not have.
    """
    return parse_circuit(read_circuit_text(path), spec, origin=str(path))


def read_circuit_text(path: str | Path) -> str:
    """A circuit file's text; GraphError in one sentence when it cannot be read as text. A
    byte-order mark (Notepad, Excel) is no text: a JSON list behind one was read as a text file of
    one edge named '\ufeff["a0.h0->logits"]' (2026-12-06)."""
    text = read_user_file(path, "the circuit file", GraphError, "give a JSON or text file")
    return text.removeprefix("\ufeff")


def circuit_data(text: str, origin: str = "the circuit") -> list[str] | dict:
    """A circuit file's content, checked as far as it can be without the model: a list of edge
    names, or an object with 'edges'; GraphError in one sentence otherwise. ``evaluate`` says it
    before the model loads (a file that was not JSON read "keeps no task; give --prompt", and with
    --prompt given its real fault came after the load)."""
    stripped = text.strip()
    if not stripped:
        raise GraphError(f"{origin} is empty; give an EAP-IG JSON circuit or a list of edge names.")
    if stripped[0] in "[{":
        try:
            data = json_text.loads(stripped)
        except json.JSONDecodeError as error:
            raise GraphError(f"{origin} is not valid JSON ({error.msg} at line {error.lineno}).") from None
        except RecursionError:
            raise GraphError(f"{origin} is nested too deeply to be a circuit; give EAP-IG's JSON.") from None
    else:
        data = [line.strip() for line in stripped.splitlines() if line.strip() and not line.startswith("#")]
    if isinstance(data, list):
        if not all(isinstance(name, str) for name in data):
            raise GraphError(f"{origin}: a list circuit must hold edge names as strings.")
        return data
    if not isinstance(data, dict) or "edges" not in data:
        raise GraphError(
            f"{origin} has no 'edges'; give a circuit JSON (`circuitviz discover --out`, EAP-IG's format) "
            "or a list of edge names."
        )
    problem = circuit_fields_problem(data, origin)  # in_graph, curve, circuits: of their kinds
    if problem:
        raise GraphError(problem)
    return data


def parse_circuit(text: str, spec: GraphSpec, origin: str = "the circuit") -> LoadedCircuit:
    data = circuit_data(text, origin)
    if isinstance(data, list):
        return LoadedCircuit(mask=spec.mask_from_edge_names(data), scores=None, source={})
    if "cfg" in data:
        other = GraphSpec.from_cfg_dict(data["cfg"])
        if (other.n_layers, other.n_heads) != (spec.n_layers, spec.n_heads):
            made_on = data.get("model_id")  # named, so the way out is one flag away
            which = f" (--model {shown(made_on)})" if isinstance(made_on, str) and made_on.strip() else ""
            raise GraphError(
                f"{origin} is for a model with {shown_number(other.n_layers)} layers and {shown_number(other.n_heads)} "
                f"heads and this model has {spec.n_layers} and {spec.n_heads}; choose the model it was made on{which}."
            )
    edges = data["edges"]
    if not isinstance(edges, dict):
        raise GraphError(f"{origin}: 'edges' must map edge names to {{'score', 'in_graph'}}.")
    mask = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu")  # read from JSON
    scores = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")
    unscored = 0
    for name, info in edges.items():
        position = spec.edge_position(name)
        if isinstance(info, dict):
            mask[position] = bool(info.get("in_graph", False))
            score = _score_of(info.get("score"), name, origin)
            unscored += score is None
            scores[position] = 0.0 if score is None else score
        else:
            mask[position] = bool(info)
    notes = []
    if len(edges) < spec.n_edges:  # the top-N rows rank only the edges the file lists
        notes.append(
            f"{origin} lists {len(edges):,} of the model's {spec.n_edges:,} edges; the other "
            f"{spec.n_edges - len(edges):,} are read as outside its circuit with score 0."
        )
    if unscored:
        notes.append(
            f"{counted(unscored, 'edge')} of {origin} {'has' if unscored == 1 else 'have'} no score (read as 0)."
        )
    return LoadedCircuit(mask=mask, scores=scores, source=data, notes=notes)


FLOAT32_MAX = 3.4028234663852886e38  # scores are float32 tensors: a larger one cannot be held


def _score_of(score, name: str, origin: str) -> float | None:
    """An edge's score from a circuit file: a finite number a float32 holds, or None where the file
    gives none (absent or null); GraphError in one sentence for anything else. Strings and NaN
    were read as 0 without a word (an audit), and 1e300 raised a traceback."""
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise GraphError(
            f"{origin}: edge {name!r} has the score {str(score)[:40]!r}, not a number; give each "
            "edge's score as a number (EAP-IG's format)."
        )
    value = float(score) if not isinstance(score, int) or abs(score) < 10**39 else math.inf
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        raise GraphError(
            f"{origin}: edge {name!r} has the score {str(score)[:40]}, not a finite number of at most "
            f"{FLOAT32_MAX:.3g} in size; give finite scores."
        )
    return value
