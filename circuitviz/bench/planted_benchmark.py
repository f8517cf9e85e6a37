"""The planted-circuit benchmark: every method's recovered edges against circuits known by construction.

Our stand-in for InterpBench (which cannot be downloaded here). Each case is a model from
``circuitviz.bench.toy_models.planted_model`` whose true circuit is known: models of 2 to 5 layers and 2 to
4 heads, sparse to dense circuits (1 to 3 parents per node, 1 to 3 circuit nodes per layer),
distractor heads that read the input or the circuit itself, distractor MLPs, and circuit units
pushed into their nonlinear regime. Every method runs on the same cases, and its recovered edge
set is compared with the true one:

- the method's own edge set: the edges it marks as its circuit (``result.details.circuit_edges``:
  CircuitLasso's selected support, ACDC's and the flow routes' circuits, Edge Pruning's and
  paraphrase pruning's learned masks at the budget |true|, not their mask scores, which are nonzero
  on nearly every edge), otherwise, for a method that only scores edges, every edge whose score is
  not zero (below ``ZERO_SCORE`` times the largest), pruned to paths from input to logits;
- the top-|true| edges of its scores, not pruned (an oracle budget: the quality of its ranking;
  pruning would turn one near miss on a chain into a whole missing chain).

For each: structural Hamming distance (edges to add plus edges to delete), precision and
recall; and the method's run time (its scoring, without the shared faithfulness evaluation).
CircuitLasso is observational: it also observes a corpus of random sentences over the planted
models' vocabulary (``CORPUS_TEXTS`` texts; the other methods use the prompt pair only).
"""

from __future__ import annotations

import json
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..acc.completion import claimed_mask
from ..core.graph import GraphSpec, prune, top_n
from ..methods import UnknownMethodError, get_method
from .toy_models import WORDS, planted_model

ZERO_SCORE = 1e-6
CORPUS_TEXTS = 80
DEFAULT_METHODS = ("eap", "eap-ig", "circuit-lasso", "acc++", "acdc", "flow-routes")


def _acc_claimed(spec: GraphSpec) -> torch.Tensor:
    return claimed_mask(spec)


# methods judged also on the edge kinds they claim to find: {name: the mask of those edges}
CLAIMED_KINDS = {"acc++": _acc_claimed}


@dataclass(frozen=True)
class PlantedCase:
    """The arguments of one planted model."""

    n_layers: int = 3
    n_heads: int = 2
    seed: int = 0
    parents: int = 2
    nodes_per_layer: tuple[int, int] = (1, 2)
    distractors: int = 2
    distractors_read: str = "input"
    distractor_mlps: int = 0
    nonlinear_gain: float = 1.0

    @property
    def name(self) -> str:
        extras = []
        if self.distractors_read == "circuit":
            extras.append("decoys")
        if self.distractor_mlps:
            extras.append(f"{self.distractor_mlps}dmlp")
        if self.nonlinear_gain != 1.0:
            extras.append(f"gain{self.nonlinear_gain:g}")
        density = f"p{self.parents}n{self.nodes_per_layer[0]}-{self.nodes_per_layer[1]}"
        return "-".join(
            [f"{self.n_layers}x{self.n_heads}", density, f"d{self.distractors}", *extras, f"s{self.seed}"]
        )

    def build(self):
        return planted_model(
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            seed=self.seed,
            parents=self.parents,
            distractors=self.distractors,
            nodes_per_layer=self.nodes_per_layer,
            distractors_read=self.distractors_read,
            distractor_mlps=self.distractor_mlps,
            nonlinear_gain=self.nonlinear_gain,
        )


# said wherever the seed's cases are reported: a user's own seed does not hold case 0 out
FIRST_CASE_NOTE = (
    f"case 0 is the engine's default planted model ({PlantedCase().name}) whatever the seed; "
    "the seed draws the others"
)


def default_cases(count: int = 20, seed: int = 0) -> list[PlantedCase]:
    """``count`` cases spread over size, density and difficulty; the same list for the same seed.

    Case 0 is the engine's default planted model; the rest draw each property from a seeded
    generator, cycling the sizes so that every size appears.
    """
    rng = random.Random(seed)
    sizes = [(2, 2), (3, 2), (3, 3), (4, 2), (4, 3), (5, 2), (3, 4), (5, 3)]
    cases = [PlantedCase()] if count > 0 else []
    for index in range(1, count):
        n_layers, n_heads = sizes[index % len(sizes)]
        low = rng.choice([1, 1, 2])
        cases.append(
            PlantedCase(
                n_layers=n_layers,
                n_heads=n_heads,
                seed=seed * 1000 + index,
                parents=rng.choice([1, 2, 3]),
                nodes_per_layer=(low, min(n_heads + 1, low + rng.choice([0, 1, 2]))),
                distractors=rng.choice([0, 2, 4]),
                distractors_read=rng.choice(["input", "circuit"]),
                distractor_mlps=rng.choice([0, 1, 2]),
                nonlinear_gain=rng.choice([1.0, 1.0, 3.0]),
            )
        )
    return cases


def word_corpus(count: int = CORPUS_TEXTS, seed: int = 0) -> list[str]:
    """Random sentences over the tiny models' vocabulary (what CircuitLasso observes)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))) for _ in range(count)]


def edge_set_metrics(found: torch.Tensor, true: torch.Tensor) -> dict:
    """SHD (additions + deletions), precision and recall of an edge set against the truth."""
    found, true = found.bool(), true.bool()
    hits = int((found & true).sum())
    false_positives = int((found & ~true).sum())
    misses = int((~found & true).sum())
    return {
        "shd": false_positives + misses,
        "precision": hits / (hits + false_positives)
        if hits + false_positives
        else (1.0 if not misses else 0.0),
        "recall": hits / (hits + misses) if hits + misses else 1.0,
        "edges": hits + false_positives,
    }


def own_edges(result, spec: GraphSpec) -> torch.Tensor:
    """The edges a result itself marks as its circuit (see the module docstring).  # bool"""
    names = getattr(result.details, "circuit_edges", None)
    if names is not None:
        return spec.mask_from_edge_names(names)
    scores = result.scores.abs() * spec.edge_mask
    top = float(scores.max()) if scores.numel() else 0.0
    return prune(spec, scores > ZERO_SCORE * top) if top > 0 else torch.zeros_like(spec.edge_mask)


@dataclass
class CaseResult:
    """One method on one case."""

    case: str
    method: str
    status: str  # "ok", "unavailable" or "error"
    message: str = ""
    true_edges: int = 0
    own: dict = field(default_factory=dict)
    at_true_budget: dict = field(default_factory=dict)
    seconds: float = math.nan
    claimed: dict = field(default_factory=dict)  # own edges on the kinds the method claims (ACC++)


def _method_config(method, name: str, corpus_path: str):
    if name == "circuit-lasso":
        return method.make_config({"corpus": corpus_path, "n_paraphrases": 0})
    return method.default_config()


def run_case(case: PlantedCase, methods: Sequence[str], corpus_path: str) -> list[CaseResult]:
    """Every method on one planted model."""
    planted = case.build()
    spec = GraphSpec.from_model(planted.model)
    n_true = int(planted.true_edges.sum())
    results = []
    for name in methods:
        try:
            method = get_method(name)
        except UnknownMethodError:
            results.append(CaseResult(case.name, name, "unavailable", "not registered in this build", n_true))
            continue
        start = time.perf_counter()
        try:
            result = method.run_on(
                planted.model, planted.task, _method_config(method, name, corpus_path), budgets=[n_true]
            )
        except Exception as error:  # a failing method is reported, the benchmark goes on
            results.append(CaseResult(case.name, name, "error", f"{type(error).__name__}: {error}", n_true))
            continue
        seconds = time.perf_counter() - start - float(result.timings.get("evaluation_s", 0.0))
        at_budget = top_n(spec, result.scores, n_true)
        own = own_edges(result, spec)
        kinds = CLAIMED_KINDS.get(name)
        claimed = kinds(spec) if kinds else None
        results.append(
            CaseResult(
                case.name,
                name,
                "ok",
                "",
                n_true,
                edge_set_metrics(own, planted.true_edges),
                edge_set_metrics(at_budget, planted.true_edges),
                seconds,
                edge_set_metrics(own & claimed, planted.true_edges & claimed) if claimed is not None else {},
            )
        )
    return results


@dataclass
class BenchReport:
    """All results of one benchmark run, and how it was made."""

    methods: list[str]
    cases: list[PlantedCase]
    results: list[CaseResult]
    command: str = ""
    seconds: float = 0.0

    def summary(self) -> list[dict]:
        """One row per method: means over the cases it ran on."""
        rows = []
        for name in self.methods:
            mine = [r for r in self.results if r.method == name]
            ok = [r for r in mine if r.status == "ok"]
            row = {
                "method": name,
                "cases": len(ok),
                "status": "ok" if ok else (mine[0].status if mine else "none"),
            }
            if not ok:
                row["message"] = mine[0].message if mine else ""
                rows.append(row)
                continue
            for prefix, key in (("", "own"), ("budget_", "at_true_budget")):
                for metric in ("shd", "precision", "recall"):
                    row[prefix + metric] = statistics.fmean(getattr(r, key)[metric] for r in ok)
            row["exact_recoveries"] = sum(r.own["shd"] == 0 for r in ok)
            if all(r.claimed for r in ok):
                for metric in ("shd", "precision", "recall"):
                    row["claimed_" + metric] = statistics.fmean(r.claimed[metric] for r in ok)
            row["seconds"] = statistics.fmean(r.seconds for r in ok)
            row["errors"] = sum(r.status == "error" for r in mine)
            rows.append(row)
        return rows

    def to_json(self) -> dict:
        return {
            "benchmark": "planted circuits (circuitviz.bench.planted_benchmark)",
            "command": self.command,
            "seconds": self.seconds,
            "methods": self.methods,
            "summary": self.summary(),
            "cases": [{"name": c.name, **asdict(c)} for c in self.cases],
            "results": [asdict(r) for r in self.results],
            "notes": [
                "own: the method's own edge set (the circuit it marks, a learned mask at |true|; else, for a "
                "method that only scores edges, its nonzero scores), pruned",
                "budget: its top-|true| edges, not pruned (ranking quality at the oracle budget)",
                "SHD: edges to add plus edges to delete; seconds: scoring only, per case",
                f"circuit-lasso also observes {CORPUS_TEXTS} random sentences over the models' vocabulary",
                FIRST_CASE_NOTE,
            ],
        }


def format_table(report: BenchReport) -> str:
    """The summary as a fixed-width table (what the CLI prints)."""
    rows = report.summary()
    width = max([16, *(len(row["method"]) for row in rows)])  # 'paraphrase-pruning' pushed its row right
    header = (
        f"{'method':<{width}} {'cases':>5} {'SHD':>6} {'prec':>6} {'recall':>6} {'exact':>6} "
        f"{'SHD@|T|':>8} {'prec@|T|':>8} {'rec@|T|':>8} {'s/case':>7}"
    )
    lines = [header]
    for row in rows:
        if row["status"] != "ok":
            lines.append(f"{row['method']:<{width}} {'-':>5}  {row['status']}: {row.get('message', '')}")
            continue
        lines.append(
            f"{row['method']:<{width}} {row['cases']:>5} {row['shd']:>6.2f} {row['precision']:>6.3f} "
            f"{row['recall']:>6.3f} {row['exact_recoveries']:>6} {row['budget_shd']:>8.2f} "
            f"{row['budget_precision']:>8.3f} {row['budget_recall']:>8.3f} {row['seconds']:>7.2f}"
            + (f"  ({row['errors']} errors)" if row["errors"] else "")
        )
    lines += [claimed_line(row) for row in rows if "claimed_shd" in row]
    return "\n".join(lines)


def claimed_line(row: dict) -> str:
    """A method's figures on the edge kinds it claims to find (ACC++: queries, keys, logits)."""
    return (
        f"on the edge kinds it claims (into queries, keys and logits), {row['method']}: SHD {row['claimed_shd']:.2f}, "
        f"precision {row['claimed_precision']:.3f}, recall {row['claimed_recall']:.3f}"
    )


def to_markdown(report: BenchReport) -> str:
    """The summary as a markdown table with a short legend (for the app's About page)."""
    lines = [
        "| method | cases | SHD | precision | recall | exact | SHD@\\|T\\| | precision@\\|T\\| | recall@\\|T\\| | s / case |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report.summary():
        if row["status"] != "ok":
            lines.append(f"| {row['method']} | - | {row['status']} | | | | | | | |")
            continue
        lines.append(
            f"| {row['method']} | {row['cases']} | {row['shd']:.2f} | {row['precision']:.3f} | "
            f"{row['recall']:.3f} | {row['exact_recoveries']} | {row['budget_shd']:.2f} | "
            f"{row['budget_precision']:.3f} | {row['budget_recall']:.3f} | {row['seconds']:.2f} |"
        )
    legend = [""] + [claimed_line(row) + "." for row in report.summary() if "claimed_shd" in row]
    legend += [
        "",
        f"{len(report.cases)} planted-circuit models (2-5 layers, 2-4 heads, 1-3 parents per node, "
        "distractor heads and MLPs, some with nonlinear units); truth known by construction; "
        f"{FIRST_CASE_NOTE}.",
        "SHD / precision / recall: the method's own edge set (the circuit it marks; else, for a method that only "
        "scores edges, its nonzero scores), "
        "pruned; exact: cases with SHD 0. @|T|: its top-|true| edges, not pruned (ranking quality).",
        "Every method runs with the true edge count |T| as its budget; a method whose own edge set is its "
        "circuit at that budget (Edge Pruning, paraphrase pruning) is told the circuit's size, so compare it with the @|T| columns too.",
        "s / case: scoring time (without the shared faithfulness evaluation), on the machine that ran it.",
        f"CircuitLasso also observes {CORPUS_TEXTS} random sentences over the models' vocabulary.",
        "",
        f"Made by: `{report.command}`" if report.command else "",
    ]
    return "\n".join(lines + legend).rstrip() + "\n"


def run_bench(
    methods: Sequence[str] = DEFAULT_METHODS,
    cases: int | Sequence[PlantedCase] = 20,
    seed: int = 0,
    progress: Callable[[str, float], None] | None = None,
    command: str = "",
) -> BenchReport:
    """Run every method on every case; methods that are not registered are reported, not fatal."""
    case_list = default_cases(cases, seed) if isinstance(cases, int) else list(cases)
    start = time.perf_counter()
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="circuitviz-planted-") as folder:
        corpus_path = str(Path(folder) / "corpus.txt")
        Path(corpus_path).write_text("\n".join(word_corpus(CORPUS_TEXTS, seed)), encoding="utf-8")
        for index, case in enumerate(case_list):
            results += run_case(case, list(methods), corpus_path)
            if progress:
                progress("cases", (index + 1) / max(len(case_list), 1))
    return BenchReport(list(methods), case_list, results, command, time.perf_counter() - start)


def write_report(report: BenchReport, json_path: str | Path | None, markdown_path: str | Path | None) -> None:
    """Write the JSON (every case) and the markdown summary."""
    if json_path:
        Path(json_path).write_text(json.dumps(report.to_json(), indent=1), encoding="utf-8")
    if markdown_path:
        Path(markdown_path).write_text(to_markdown(report), encoding="utf-8")
