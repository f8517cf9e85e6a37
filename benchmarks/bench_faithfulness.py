"""The faithfulness yardstick: every method on the embedded Gemma-3-270M over the README's 9 prompts.

The prompts are ``bench_bon.PROMPTS`` (imported, so both benchmarks measure the same 9: the
gallery's IOI, factual, arithmetic and inline multiple-choice prompts, one more of each of those
kinds, and the gender-bias prompt). For each method and prompt:

(a) NDF on the prompt at 0.5, 1, 2, 5 and 10 % of the edges, and CPR / CMD (MIB's areas under the
    NFS curve, and |1 - NFS| for CMD, over the edge fraction those budgets cover, divided by its
    span, so 1 / 0 is a circuit as faithful as the model at every budget);
(b) how well its node scores (a node's outgoing edge scores summed) track the effect of patching
    that node alone in the model's own computation (Spearman over the 72 heads and 18 MLPs;
    |score| against |effect| for every method, signed for the methods whose scores estimate the
    metric's change), plus EAP with each head's output taken before Gemma's post-attention norm;
(c) transfer: the NDF of every row's circuits on template paraphrases of each prompt, those
    that pass their checks and whose corruption lowers the metric clearly
    (``circuitviz.measure.task_validity``): a circuit fitted to one sentence shows up here;
(d) necessity at the same budgets: the full model with only the circuit's edges patched to the
    corrupted run, min(|L(M(q)) - L((M\\C)(q))| / |L(M(q)) - L(M(q'))|, 1) (1: removing the
    circuit removes the behaviour), from the same batched evaluation as NDF;
the share of valid tasks (prompts and paraphrases that pass the meaningful-task check), and
Edge Pruning's seconds per prompt (all five budgets). The planted-circuit part of the
yardstick is ``python -m circuitviz planted-bench`` (assets/planted_bench.md).

Exact patching is left out: one patched run per edge is 10,342 runs per prompt on this model.

    .venv/bin/python benchmarks/bench_faithfulness.py --threads 1 --json yardstick.json
    .venv/bin/python benchmarks/bench_faithfulness.py --prompts 2 --methods eap-ig,edge-pruning
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch
from bench_bon import PROMPTS  # the same 9 prompts as the Best-of-N benchmark (a script beside this one)

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_timed
from circuitviz.bench.yardstick import YARDSTICK_ROWS, node_effects, node_tracking, prenorm_eap_scores
from circuitviz.core.curves import CurvePoint, cmd, cpr
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.measure.completeness import completeness
from circuitviz.measure.evaluate import Evaluator, curves_of_tasks
from circuitviz.measure.task_validity import gap_problem
from circuitviz.measure.transfer import held_out_transfer, paraphrases_used
from circuitviz.methods import available_methods, get_method, method_traits
from circuitviz.query.variants import edge_matrix

FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.10)
BON_VARIANTS = ("single", "average", "bon", "ibon", "bon-csm")
METHODS = YARDSTICK_ROWS  # row name: (registered method, settings), in the order they run
TRANSFER_ALL = True  # every row's circuits are measured on the paraphrases (rows of ``transfer_rows``)
# rows whose circuits are fitted to the prompt itself: the registry's trait of each row's method (a
# learned mask, a pick by the prompt's own NDF, ACDC's removals each judged on the prompt)
FITTED_TO_PROMPT = tuple(
    row
    for row in [*METHODS, *BON_VARIANTS]  # a Best-of-N variant's row is its method's name
    if row != "bon-family" and method_traits(METHODS[row][0] if row in METHODS else row).fitted_to_prompt
)
# rows whose edge scores have no sign, so (b)'s signed columns say nothing about them
MAGNITUDES = (
    "edge-pruning",
    "edge-pruning-from-eap",
    "ensemble",
    "ensemble-bootstrap",
    "atp-star",
    "flow-routes",
)
N_PARAPHRASES = 5
# rows whose method fits to or selects on paraphrases: their (c) is held out only when rerun since issue 31
USES_PARAPHRASES = ("single", "average", "bon", "ibon", "bon-csm", "ensemble-bootstrap", "paraphrase-pruning")


def _figure(value: float) -> str:
    """Three decimals, with a tiny negative written as 0.000 (an area of -1e-17 is zero, not
    '-0.000')."""
    text = f"{value:.3f}"
    return "0.000" if text == "-0.000" else text


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def curve_areas(curve: list[CurvePoint], n_edges: int) -> dict[str, float]:
    return {
        "cpr": cpr(curve, n_edges, "nfs"),
        "cmd": cmd(curve, n_edges, "nfs"),
        "cpr_ndf": cpr(curve, n_edges, "ndf"),
    }


def prepare_prompt(
    model, spec: GraphSpec, task, with_effects: bool = True
) -> tuple[dict, torch.Tensor | None]:
    """A prompt's entry (baseline, the pre-norm EAP row of (b)) and its node effects (None and
    no (b) row without ``with_effects``)."""
    evaluator = Evaluator(model, spec, prepare_task(model, task))
    entry: dict = {
        "baseline": [evaluator.baseline.clean, evaluator.baseline.corrupted],
        "valid": gap_problem(task, evaluator.baseline.clean, evaluator.baseline.corrupted) is None,
        "curves": {},
        "tracking": {},
        "seconds": {},
    }
    if not with_effects:
        return entry, None
    start = time.perf_counter()
    effects = node_effects(model, spec, evaluator)
    log(f"    node effects of 90 components: {time.perf_counter() - start:.1f} s")
    entry["tracking"]["eap (heads before the post-norm)"] = node_tracking(
        spec, prenorm_eap_scores(model, spec, evaluator), effects
    )
    return entry, effects


def run_row(model, spec: GraphSpec, task, row: str, budgets: list[int], entry: dict, effects) -> dict:
    """One row on one prompt: its curve and node tracking into ``entry``; returns its circuits."""
    name, settings = METHODS[row]
    start, cpu = time.perf_counter(), time.process_time()
    try:
        result = get_method(name).run_on(model, task, settings, budgets=budgets)
    except Exception as error:  # a failing method is reported, the benchmark goes on
        log(f"    {row}: {type(error).__name__}: {error}")
        entry["curves"][row] = {"error": f"{type(error).__name__}: {error}"}
        return {}
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    entry["seconds"][row] = seconds
    # the process's CPU seconds: what the run cost on a loaded machine (recorded since 2026-12-02)
    entry.setdefault("cpu_seconds", {})[row] = cpu
    entry.setdefault("load", {})[row] = os.getloadavg()[0]
    entry.setdefault("timings", {})[row] = dict(result.timings)  # wall seconds by phase
    counts = getattr(result.details, "counts", None)
    # the method's own tally (ACDC: patched rows, batched passes, edges tested and kept)
    if counts and all(isinstance(v, int) for v in counts.values()):
        entry.setdefault("counts", {})[row] = dict(counts)
    circuits = {}
    if row == "bon-family":
        for variant in BON_VARIANTS:
            entry["curves"][variant] = [CurvePoint(**p).to_dict() for p in result.details.curves[variant]]
        for variant in ("single", "average") if effects is not None else ():
            scores = edge_matrix(spec, result.details.edge_scores[variant])
            entry["tracking"][variant] = node_tracking(spec, scores, effects)
        circuits["bon"] = {b: result.circuit(b) for b in budgets}
    else:
        entry["curves"][row] = [p.to_dict() for p in result.curve]
        if effects is not None:  # else (b) keeps the merged run's row
            entry["tracking"][row] = node_tracking(spec, result.scores, effects)
        circuits[row] = {b: result.circuit(b) for b in budgets}
    fill_necessity(model, spec, task, entry["curves"]["bon" if row == "bon-family" else row], circuits)
    for name in circuits:  # the paraphrases the method fitted to or selected on: never held out
        entry.setdefault("seen", {})[name] = sorted(paraphrases_used(result))
    fill_completeness(model, spec, task, entry, circuits)
    if row == "edge-pruning":
        entry["edge_pruning"] = {"timings": result.timings, "budgets": result.details.budgets}
    shown = entry["curves"]["bon" if row == "bon-family" else row]
    ndfs = " ".join(f"{point['ndf']:.2f}" for point in shown)
    log(f"    {row}: {seconds:.1f} s ({cpu:.1f} CPU s, load {os.getloadavg()[0]:.1f}); NDF {ndfs}")
    return circuits


def _measured(value) -> bool:
    """Whether a stored figure is a number (JSON keeps an unmeasured one as null or NaN)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def fill_necessity(model, spec: GraphSpec, task, curve: list[dict], circuits: dict) -> None:
    """Necessity for the points of a curve made without it (Best-of-N's pool measures NDF only):
    its circuits' complements in one batched evaluation."""
    missing = [point for point in curve if not _measured(point.get("necessity"))]
    masks = next(iter(circuits.values()), {})
    missing = [point for point in missing if point["budget"] in masks]
    if not missing:
        return
    evaluator = Evaluator(model, spec, prepare_task(model, task))
    stacked = torch.stack([masks[p["budget"]] for p in missing])
    (points,) = curves_of_tasks([evaluator], stacked[None], [p["budget"] for p in missing])
    for point, measured in zip(missing, points):
        point.update(necessity=measured.necessity, metric_without=measured.metric_without)


def fill_completeness(model, spec: GraphSpec, task, entry: dict, circuits: dict) -> None:
    """(e): each row's completeness at its budgets (``measure.completeness``), into the entry."""
    evaluator = Evaluator(model, spec, prepare_task(model, task))
    for row, masks in circuits.items():
        budgets = sorted(masks)
        values = completeness(evaluator, torch.stack([masks[b] for b in budgets]))
        entry.setdefault("completeness", {})[row] = {str(b): v for b, v in zip(budgets, values)}


def paraphrase_transfer(
    model, spec: GraphSpec, task, circuits: dict, budgets: list[int], seen: dict | None = None
) -> dict | None:
    """NDF of every row's circuits on held-out paraphrases (``measure.transfer.held_out_transfer``:
    template paraphrases its method never fitted to or selected on, ``seen`` by row):
    {row: {budget: [ndf per paraphrase]}}, with how many paraphrases passed the template check,
    how many were measured (both checks passed) and, per row, how many were left out as used;
    None when no row ran."""
    rows = list(circuits)
    if not rows:
        return None
    names = {f"{row}@{b}": (row, b) for row in rows for b in budgets}
    found = held_out_transfer(
        model,
        task,
        {name: circuits[row][b] for name, (row, b) in names.items()},
        {name: (seen or {}).get(row, ()) for name, (row, _) in names.items()},
        count=N_PARAPHRASES,
    )
    ndf: dict = {row: {str(b): found.ndf[f"{row}@{b}"] for b in budgets} for row in rows}
    excluded = {row: found.excluded[f"{row}@{budgets[0]}"] for row in rows}
    return {
        "paraphrases": found.paraphrases,
        "valid": found.valid,
        "note": found.note,
        "ndf": ndf,
        "excluded": excluded,
        "held_out": True,
    }


def mean(values) -> float:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.fmean(values) if values else math.nan


def transfer_counts(prompts: list[dict], budget: int) -> str:
    """A sentence giving how many paraphrases each prompt's (c) values average over, per row
    when the rows differ (a row merged from a run whose paraphrases failed has none)."""
    per_row = {
        row: [len(p.get("transfer", {}).get("ndf", {}).get(row, {}).get(str(budget), [])) for p in prompts]
        for row in transfer_rows(prompts)
    }
    kinds = [p["kind"] for p in prompts]
    counts = list(per_row.values())
    if all(c == counts[0] for c in counts):
        shown = ", ".join(f"{kind} {n}" for kind, n in zip(kinds, counts[0]))
        text = f"Paraphrases per prompt (the ones that passed both checks): {shown}."
    else:
        text = (
            "Paraphrases per prompt and row: " + "; ".join(f"{row} {c}" for row, c in per_row.items()) + "."
        )
    if any(n < N_PARAPHRASES for c in counts for n in c):
        text += (
            f" Where fewer than {N_PARAPHRASES}, the other template paraphrases failed the template check "
            "(same token length as their corruption, the same answer from the model) or the meaningful-task "
            "check (their corruption does not lower the metric by the threshold)."
        )
    return text


def transfer_rows(prompts: list[dict]) -> list[str]:
    """The rows measured on paraphrases, in the order they ran."""
    return list(dict.fromkeys(row for p in prompts for row in p.get("transfer", {}).get("ndf", {})))


def validity_line(prompts: list[dict]) -> str:
    """The share of valid tasks: prompts and paraphrases that pass the meaningful-task check."""
    valid = sum(bool(p.get("valid", True)) for p in prompts)
    passed = sum(p.get("transfer", {}).get("paraphrases", 0) for p in prompts)
    meaningful = sum(
        p.get("transfer", {}).get("valid", p.get("transfer", {}).get("paraphrases", 0)) for p in prompts
    )
    return (
        f"Valid tasks (the corruption lowers the metric by at least the threshold, circuitviz.measure.task_validity): "
        f"{valid} of {len(prompts)} prompts; {meaningful} template paraphrases, those measured as some "
        f"row's held-out ones that passed it too. {passed} passed the template check: enough are drawn "
        "for the row that used the most, and those no row still needed were never measured, so the two "
        "counts are not a pass rate."
        if passed
        else f"Valid tasks: {valid} of {len(prompts)} prompts; no template paraphrases."
    )


def necessity_table(prompts: list[dict], rows: list[str], budgets: list[int]) -> list[str]:
    """(d): necessity at every budget, mean over the prompts whose curves carry it."""
    lines = [
        "",
        f"### (d) Necessity: the full model with only the circuit's edges corrupted, mean over {len(prompts)} prompts",
        "",
        # each column an edge budget, said in its header as (a) and (c) say theirs: a bare "52"
        # over a necessity read as a count of anything (an audit)
        "| method | " + " | ".join(f"{b} edges" for b in budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for row in rows:
        curves = [p["curves"][row] for p in prompts if isinstance(p["curves"].get(row), list)]
        cells = [
            mean(next((pt.get("necessity") for pt in c if pt["budget"] == b), None) for c in curves)
            for b in budgets
        ]
        lines.append(f"| {row} | " + " | ".join("-" if math.isnan(v) else f"{v:.3f}" for v in cells) + " |")
    lines += [
        "",
        "1: removing the circuit's edges removes the whole clean-corrupted difference; 0: it changes nothing. "
        "NDF (a) says whether the circuit suffices, necessity whether the model needs it.",
        "",
        "Necessity at the smallest of these budgets whose circuit reaches NDF 0.8 (the prompts where one does):",
        "",
        "| method | necessity there | prompts |",
        "|---|---:|---:|",
    ]
    for row in rows:
        found = []
        for p in prompts:
            curve = p["curves"].get(row)
            if not isinstance(curve, list):
                continue
            first = next((pt for pt in sorted(curve, key=lambda q: q["budget"]) if pt["ndf"] >= 0.8), None)
            if first is not None and _measured(first.get("necessity")):
                found.append(first["necessity"])
        if found:
            lines.append(f"| {row} | {mean(found):.3f} | {len(found)} |")
    return lines


def completeness_table(prompts: list[dict], rows: list[str], budgets: list[int]) -> list[str]:
    """(e): completeness at every budget (mean over the prompts, and its range at 1 %)."""
    measured = [row for row in rows if any(row in p.get("completeness", {}) for p in prompts)]
    if not measured:
        return []
    lines = [
        "",
        f"### (e) Completeness: a random half K of the circuit removed from the circuit and from the model, "
        f"1 - mean |L(C\\K) - L(M\\K)| / |L(M) - L(M')| (8 halves), mean over {len(prompts)} prompts",
        "",
        "| method | "
        + " | ".join(f"{b} edges" for b in budgets)
        + f" | range over prompts at {budgets[1]} edges |",
        "|---|" + "---:|" * (len(budgets) + 1),
    ]
    for row in measured:
        values = {
            b: [p["completeness"][row].get(str(b)) for p in prompts if row in p.get("completeness", {})]
            for b in budgets
        }
        cells = ["-" if math.isnan(mean(values[b])) else f"{mean(values[b]):.3f}" for b in budgets]
        at = [v for v in values[budgets[1]] if _measured(v)]
        spread = f"{min(at):.2f}-{max(at):.2f}" if at else "-"
        count = len([p for p in prompts if row in p.get("completeness", {})])
        lines.append(
            f"| {row} | "
            + " | ".join(cells)
            + f" | {spread} |"
            + ("" if count == len(prompts) else f" ({count} prompts)")
        )
    lines += [
        "",
        "1: removing any half of the circuit does to the circuit what it does to the whole model, so the "
        "model holds no route the circuit lacks; necessity (d) is near 1 for every circuit holding the "
        "few edges everything passes through, completeness is not (docs/faithfulness.md).",
    ]
    return lines


def cost_table(prompts: list[dict], rows: list[str], note: str = "") -> list[str]:
    """Each row's run time per prompt (scoring, selection and the five-budget curve), the mean over
    the prompts it ran on, as the run that measured the row recorded it, with the machine's load
    average when it ran (recorded since 2026-12-01; ``note`` says what is known of the others),
    and the process's CPU seconds and their largest per prompt (recorded since 2026-12-02)."""
    lines = [
        "",
        "### Seconds per prompt (one run of each row: scoring, selection and the curve; mean over the prompts)",
        "",
        "Rows ran in different runs of a shared machine (the 'Made by' line): compare seconds only "
        "between rows run together, or at the same load; CPU seconds (the process's, one torch thread) "
        "leave out the waits for a core but still grow with what runs beside it (docs/benchmarks.md, "
        "ACDC). " + note,
        "",
        "| method | seconds | CPU s (mean / max) | prompts | load average when run |",
        "|---|---:|---:|---:|---|",
    ]
    for row in [*rows, "bon-family"]:  # the Best-of-N variants come from one "bon-family" run
        seconds = [p["seconds"][row] for p in prompts if row in p.get("seconds", {})]
        loads = [p["load"][row] for p in prompts if row in p.get("load", {})]
        cpu = [p["cpu_seconds"][row] for p in prompts if row in p.get("cpu_seconds", {})]
        if seconds:
            load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
            spent = f"{mean(cpu):.1f} / {max(cpu):.1f}" if cpu else "-"
            lines.append(f"| {row} | {mean(seconds):.1f} | {spent} | {len(seconds)} | {load} |")
    lines += counts_table(prompts)
    return lines


def short(prompt: str) -> str:
    """A prompt on one table cell: its first 37 characters and '...' when longer than 40."""
    prompt = prompt.replace("\n", " ").replace("|", "/")
    return prompt if len(prompt) <= 40 else prompt[:37] + "..."


def counts_table(prompts: list[dict]) -> list[str]:
    """Per prompt, the cost and tally of the rows whose method counts its own work (ACDC's patched
    rows, batched passes, edges tested and kept), with the CPU seconds of the run."""
    lines = []
    for row in dict.fromkeys(row for p in prompts for row in p.get("counts", {})):
        ran = [p for p in prompts if row in p.get("counts", {})]
        keys = list(dict.fromkeys(key for p in ran for key in p["counts"][row]))
        lines += [
            "",
            f"### {row} per prompt (the whole run: clean and corrupted runs, the method and its five-budget curve)",
            "",
            "| kind | prompt | tokens | CPU s | seconds | load | "
            + " | ".join(k.replace("_", " ") for k in keys)
            + " |",
            "|---|---|" + "---:|" * (4 + len(keys)),
        ]
        for p in ran:
            cpu = p.get("cpu_seconds", {}).get(row)
            tally = " | ".join(f"{p['counts'][row][k]:,}" if k in p["counts"][row] else "-" for k in keys)
            lines.append(
                f"| {p['kind']} | {short(p['prompt'])} | {p['tokens']} | {'-' if cpu is None else f'{cpu:.1f}'} | "
                f"{p['seconds'][row]:.1f} | {p.get('load', {}).get(row, math.nan):.1f} | {tally} |"
            )
    return lines


def _signed_not_effects(names) -> str:
    """The clause for (b)'s rows whose scores have a sign but do not estimate the metric's change
    (a traced attention share, a regression coefficient): their signed cells say only how that sign
    lines up with the effects."""
    signed = [
        name
        for name in names
        if name not in MAGNITUDES
        and name in available_methods()
        and not method_traits(name).scores_estimate_metric
    ]
    if not signed:
        return ""
    return (
        f"{', '.join(signed[:-1]) + ' and ' if len(signed) > 1 else ''}{signed[-1]} "
        f"{'score' if len(signed) > 1 else 'scores'} with a sign that is not an estimate of the "
        f"metric's change, so {'their' if len(signed) > 1 else 'its'} signed cells say only how "
        "that sign lines up with the effects; "
    )


def tables(report: dict, spec: GraphSpec) -> list[str]:
    prompts = report["prompts"]
    budgets = report["budgets"]
    rows = [r for r in report["rows"] if any(r in p["curves"] for p in prompts)]
    lines = [
        f"### (a) NDF on the prompt, mean over {len(prompts)} prompts, and CPR / CMD "
        f"({spec.n_edges:,} edges; areas over {FRACTIONS[0]:.1%}-{FRACTIONS[-1]:.0%} of the edges)",
        "",
        "| method | "
        + " | ".join(f"{b} ({f:.1%})" for b, f in zip(budgets, FRACTIONS))
        + " | CPR | CMD | CPR (NDF) |",
        "|---|" + "---:|" * (len(budgets) + 3),
    ]
    for row in rows:
        curves = [p["curves"][row] for p in prompts if isinstance(p["curves"].get(row), list)]
        if not curves:
            lines.append(f"| {row} | " + " | ".join("-" for _ in budgets) + " | - | - | - |")
            continue
        cells = [mean(next(pt["ndf"] for pt in c if pt["budget"] == b) for c in curves) for b in budgets]
        areas = [curve_areas([CurvePoint(**pt) for pt in c], spec.n_edges) for c in curves]
        lines.append(
            f"| {row}{' (fitted to the prompt)' if row in FITTED_TO_PROMPT else ''} | "
            + " | ".join(_figure(v) for v in cells)
            + f" | {_figure(mean(a['cpr'] for a in areas))} | {_figure(mean(a['cmd'] for a in areas))} | "
            + f"{_figure(mean(a['cpr_ndf'] for a in areas))} |"
            + ("" if len(curves) == len(prompts) else f" ({len(curves)} prompts)")
        )
    lines += [
        "",
        f"### (b) Node scores against patching each node alone (Spearman, mean over {len(prompts)} prompts)",
        "",
        "| method | heads | MLPs | all | heads, signed | MLPs, signed | all, signed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = list(dict.fromkeys(name for p in prompts for name in p["tracking"]))
    for name in names:
        values = [p["tracking"][name] for p in prompts if name in p["tracking"]]
        keys = ("heads", "mlps", "all") + (
            () if name in MAGNITUDES else ("signed_heads", "signed_mlps", "signed_all")
        )
        cells = [f"{mean(v[k] for v in values):.3f}" for k in keys]
        lines.append(f"| {name} | " + " | ".join(cells + ["-"] * (6 - len(cells))) + " |")
    lines += [
        "",
        "Signed: the scores as they are against the effects, for the methods whose scores estimate the "
        "metric's change; "
        + _signed_not_effects(names)
        + ", ".join(sorted(MAGNITUDES))
        + " score without a sign (mask strengths, mean ranks).",
        "",
        f"### (c) NDF on up to {N_PARAPHRASES} held-out template paraphrases of each prompt (never used by "
        "the method to fit or to select) against NDF on the prompt (means over the prompts with "
        "paraphrases, each prompt's paraphrases averaged first)",
        "",
        "| method | " + " | ".join(f"{b} edges: paraphrases / prompt" for b in budgets[:4]) + " |",
        "|---|" + "---:|" * 4,
    ]
    for row in transfer_rows(prompts):
        cells = []
        for budget in budgets[:4]:
            on_paraphrases = mean(  # each prompt weighs the same, however many paraphrases it has
                mean(p.get("transfer", {}).get("ndf", {}).get(row, {}).get(str(budget), [])) for p in prompts
            )
            on_prompt = mean(
                next(pt["ndf"] for pt in p["curves"][row] if pt["budget"] == budget)
                for p in prompts
                if isinstance(p["curves"].get(row), list)
                and p.get("transfer", {}).get("ndf", {}).get(row, {}).get(str(budget))
            )
            cells.append("-" if math.isnan(on_paraphrases) else f"{on_paraphrases:.3f} / {on_prompt:.3f}")
        held = all(row in p.get("transfer", {}).get("held_out_rows", []) for p in prompts if "transfer" in p)
        mark = "" if held or row not in USES_PARAPHRASES else " (not held out: measured before issue 31)"
        lines.append(f"| {row}{mark} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Held out: each row's paraphrases are the first template paraphrases (seed 0) its method did not "
        "use; Best-of-N and the bootstrap ensemble score theirs, paraphrase pruning fits on its fit share, "
        "so theirs are drawn past those (`circuitviz.measure.transfer.held_out_transfer`).",
        "",
        "Fitted to the prompt: "
        + ", ".join(FITTED_TO_PROMPT)
        + " choose their circuit by its faithfulness on the prompt itself (a mask learned on it, the "
        "candidate of highest NDF on it, or each edge removed only where removing it moves the circuit's "
        "metric on it by less than a threshold), so their NDF on the prompt may flatter them (a circuit can "
        "still score higher on a paraphrase); their NDF on paraphrases is the figure to compare.",
        "",
        transfer_counts(prompts, budgets[0]),
        "",
        validity_line(prompts),
    ]
    lines += necessity_table(prompts, rows, budgets)
    lines += completeness_table(prompts, rows, budgets)
    lines += cost_table(prompts, rows, report.get("cost_note", ""))
    timing = [p["edge_pruning"] for p in prompts if "edge_pruning" in p]
    if timing:
        lines += [
            "",
            "### Edge Pruning per prompt (all five budgets)",
            "",
            "| kind | prompt | tokens | seconds | warm start s | learning s | steps (per budget) | NDF warm -> learned at 0.5 % / 1 % |",
            "|---|---|---:|---:|---:|---:|---|---|",
        ]
        for p in prompts:
            if "edge_pruning" not in p:
                continue
            info = p["edge_pruning"]
            rows_by_budget = {r["budget"]: r for r in info["budgets"]}
            steps = ", ".join(str(r["steps"]) for r in info["budgets"])
            change = " / ".join(
                f"{rows_by_budget[b]['warm_ndf']:.2f} -> {rows_by_budget[b]['ndf']:.2f}" for b in budgets[:2]
            )
            lines.append(
                f"| {p['kind']} | {short(p['prompt'])} | {p['tokens']} | {p['seconds']['edge-pruning']:.1f} | "
                f"{info['timings'].get('scoring_s', 0):.1f} | {info['timings'].get('learning_s', 0):.1f} | "
                f"{steps} | {change} |"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_threads_argument(parser)
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best there is)")
    parser.add_argument("--prompts", type=int, default=0, help="only the first N prompts (0: all 9)")
    parser.add_argument("--methods", default=",".join(METHODS), help="rows to run, comma separated")
    parser.add_argument(
        "--prompt-order",
        default="",
        help="run only these prompts (indices of bench_bon.PROMPTS, or of the --merge run's prompts), "
        "in this order, e.g. 2,5,6 (default: all, in order); a run cut short keeps the first ones",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every number here")
    parser.add_argument("--from-json", type=Path, default=None, help="print the tables of a saved run")
    parser.add_argument(
        "--markdown", type=Path, default=None, help="also write the tables here (the About page's)"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="rerun the rows of --methods into this saved run (same prompts), keeping its other rows",
    )
    parser.add_argument(
        "--no-node-effects",
        action="store_true",
        help="with --merge: keep the saved run's (b) instead of patching every node again (its slowest part)",
    )
    parser.add_argument(
        "--no-transfer", action="store_true", help="leave (c) as the saved run has it (no paraphrases run)"
    )
    args = parser.parse_args()
    apply_threads(args.threads)
    from circuitviz.models import EMBEDDED_MODEL

    model, _ = load_timed(EMBEDDED_MODEL, device=args.device)
    spec = GraphSpec.from_model(model)
    if args.from_json:
        report = json.loads(args.from_json.read_text())
        publish(tables(report, spec), report, args.markdown)
        return 0
    rows = [row.strip() for row in args.methods.split(",") if row.strip()]
    unknown = [row for row in rows if row not in METHODS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(METHODS)}")
    budgets = [round(f * spec.n_edges) for f in FRACTIONS]
    chosen = PROMPTS[: args.prompts] if args.prompts else PROMPTS
    command = "python benchmarks/bench_faithfulness.py " + " ".join(sys.argv[1:])
    report = {
        "model": EMBEDDED_MODEL,
        "budgets": budgets,
        "rows": [r for r in rows if r != "bon-family"] + (list(BON_VARIANTS) if "bon-family" in rows else []),
        "threads": torch.get_num_threads(),
        "command": command,
        "prompts": [],
    }
    if args.merge:
        report = json.loads(args.merge.read_text())
        report["command"] += f"; then {command}"
        for row in rows:
            for name in BON_VARIANTS if row == "bon-family" else [row]:
                if name not in report["rows"]:
                    report["rows"].append(name)
        chosen = [
            next((k, t) for k, t in PROMPTS if t.clean == entry["prompt"]) for entry in report["prompts"]
        ]
    order = [int(i) for i in args.prompt_order.split(",")] if args.prompt_order else range(len(chosen))
    if any(not 0 <= i < len(chosen) for i in order):
        parser.error(f"--prompt-order: indices from 0 to {len(chosen) - 1}")
    effects, slot = {}, {}  # by prompt index: node effects, place in report["prompts"]
    for index in sorted(order):
        kind, task = chosen[index]
        log(f"prompt {index + 1}/{len(chosen)} ({kind}): {task.clean[:50]!r}")
        entry, effects[index] = prepare_prompt(model, spec, task, with_effects=not args.no_node_effects)
        entry.update(kind=kind, prompt=task.clean, tokens=prepare_task(model, task).n_positions)
        if args.merge:
            report["prompts"][index]["tracking"].update(entry["tracking"])
            slot[index] = index
        else:
            slot[index] = len(report["prompts"])
            report["prompts"].append(entry)
    # rows outer, prompts inner: each row is complete for every prompt (its transfer too) before
    # the next starts, so a run cut short keeps whole rows
    for row in rows:
        for number, index in enumerate(order):
            kind, task = chosen[index]
            log(f"{row}: prompt {index + 1}/{len(chosen)} ({kind}), {number + 1} of {len(order)} run")
            entry = report["prompts"][slot[index]]
            circuits = run_row(model, spec, task, row, budgets, entry, effects[index])
            if not args.no_transfer:
                merge_transfer(
                    entry, paraphrase_transfer(model, spec, task, circuits, budgets, entry.get("seen"))
                )
            if args.json:
                args.json.write_text(json.dumps(report, indent=1))
    publish(tables(report, spec), report, args.markdown)
    return 0


def merge_transfer(entry: dict, transfer: dict | None) -> None:
    """Add a row's paraphrase NDFs to the prompt's entry (a rerun row replaces its own). The counts
    (checked, valid, the note) are those of the run that checked more paraphrases: the same seed
    gives the same paraphrases, but a run with rows that fitted to some (Best-of-N) draws more to
    hold out, so a run of other rows alone checks fewer and must not shrink the tally."""
    if transfer is None:
        return
    if "transfer" not in entry:
        entry["transfer"] = transfer
        return
    entry["transfer"]["ndf"].update(transfer["ndf"])
    entry["transfer"].setdefault("excluded", {}).update(transfer.get("excluded", {}))
    entry["transfer"].setdefault("held_out_rows", [])
    entry["transfer"]["held_out_rows"] = sorted({*entry["transfer"]["held_out_rows"], *transfer["ndf"]})
    if transfer.get("paraphrases", 0) >= entry["transfer"].get("paraphrases", 0):
        entry["transfer"].update(
            {k: v for k, v in transfer.items() if k not in ("ndf", "excluded", "held_out")}
        )


def publish(lines: list[str], report: dict, markdown: Path | None) -> None:
    """Print the tables; with ``markdown``, write them there with how they were made."""
    print("\n".join(lines))
    if markdown:
        # the runs that made it, with the files they wrote named without this machine's folders
        command = re.sub(r"[^\s;]*/([^/\s;]+\.(?:json|md))", r"\1", report.get("command", ""))
        footer = ["", f"Made by: `{command}` ({report['threads']} torch thread(s))."] if command else []
        markdown.write_text("\n".join(lines + footer) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
