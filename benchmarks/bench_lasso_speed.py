"""CircuitLasso's scoring time against EAP-IG's (20 steps), prompt by prompt, on the embedded model.

For each of the yardstick's 9 prompts (``bench_bon.PROMPTS``) it runs EAP-IG, CircuitLasso with
component units and CircuitLasso with SAE units (layers 3 and 9, when the SAEs are installed),
alternating their order from prompt to prompt, with no budgets (the clean/corrupted runs and the
scoring only), and prints each run's wall and CPU seconds, CircuitLasso's phases and the load
average. CPU seconds of one single-threaded process say more than wall time on a shared machine.
Each run first makes one untimed run of every setting on a short prompt, so that no timed run
pays a process's one-time costs (importing sae-lens, about 4.5 CPU-s; loading the SAEs; the
first passes' allocations), and each prompt ends with CircuitLasso's CPU time over EAP-IG's.
``--save DIR`` keeps every run's scores; ``--compare DIR`` reads those another version saved and
prints the largest change of each run's scores against them (to compare two versions: equal
scores, equal circuits). At the end, one row per prompt: EAP-IG's CPU seconds, then for each
CircuitLasso mode its CPU seconds, its ratio to EAP-IG's (met: at most 1) and its score change.
``--repeats N`` times every setting N times per prompt (the order alternating each round) and
reports each setting's median CPU seconds: on a loaded machine one run's seconds vary by a
third, more than the changes measured.

    .venv/bin/python benchmarks/bench_lasso_speed.py --save /tmp/before    # on the old code
    .venv/bin/python benchmarks/bench_lasso_speed.py --compare /tmp/before  # on the new

``--reduction N`` times only the reduction to principal directions, N times per prompt on that
prompt's observations, alternating the units a chunk at a time (the default on the CPU) and all
in one batch (the old way), and checks that both give the same problem bit for bit.

``--settings`` runs CircuitLasso with other settings (``n_paraphrases=4``, ``directions=2``; JSON
values) in both modes. ``--yardstick FILE`` runs only CircuitLasso (components), at the
yardstick's budgets (0.5, 1, 2, 5 and 10 % of the edges, as ``bench_faithfulness.py``), and
writes each prompt's NDF at every budget, CPR, CPU seconds and top-N edge sets to FILE (JSON);
with ``--compare-yardstick OLD`` it prints, per prompt, the NDFs and CPR against OLD's and how
many of each budget's edges are the same (two versions, or two settings, on the same prompts):

    PYTHONPATH=. python benchmarks/bench_lasso_speed.py --yardstick /tmp/old.json        # old code
    PYTHONPATH=. python benchmarks/bench_lasso_speed.py --yardstick /tmp/new.json --compare-yardstick /tmp/old.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from bench_bon import PROMPTS  # the yardstick's 9 prompts (a script beside this one)
from bench_faithfulness import FRACTIONS, curve_areas

from circuitviz.bench.harness import load_average, load_timed
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.lasso import units
from circuitviz.lasso.observations import collect_observations, observation_texts
from circuitviz.lasso.units import build_component_problem, component_hook_names
from circuitviz.measure.evaluate import forget_prompt_runs
from circuitviz.methods import get_method
from circuitviz.models.adapter import adapter_of

RUNS = (("eap-ig", {}), ("circuit-lasso", {}), ("circuit-lasso", {"units": "sae", "layers": "3,9"}))
PHASES = ("observe_s", "reduce_s", "solve_s", "sae_s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", default="", help="comma-separated prompt indices (default: all 9)")
    parser.add_argument("--save", type=Path, default=None, help="a folder to keep every run's scores in")
    parser.add_argument(
        "--compare", type=Path, default=None, help="a folder of scores another version saved with --save"
    )
    parser.add_argument("--reduction", type=int, default=0, help="time the reduction alone, N times")
    parser.add_argument(
        "--settings", default="", help="CircuitLasso settings, e.g. n_paraphrases=4,directions=2"
    )
    parser.add_argument(
        "--yardstick", type=Path, default=None, help="NDFs at the yardstick's budgets, to FILE"
    )
    parser.add_argument("--compare-yardstick", type=Path, default=None, help="another --yardstick FILE")
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs of every setting per prompt (medians reported)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, _ = load_timed(None, device="cpu")
    chosen = [int(i) for i in args.prompts.split(",") if i.strip()] or list(range(len(PROMPTS)))
    extra = parse_settings(args.settings)
    if args.reduction:
        return reduction_only(model, chosen, args.reduction)
    if args.yardstick:
        return yardstick(model, chosen, extra, args.yardstick, args.compare_yardstick)
    runs = [(name, {**settings, **extra} if name == "circuit-lasso" else settings) for name, settings in RUNS]
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    warm = PromptTask("The nurse said that", "The person said that", " she", (" he",))
    for name, settings in runs:  # untimed: one-time costs of the process (see the docstring)
        method = get_method(name)
        try:
            method.run_on(model, warm, method.make_config(settings), budgets=[], model_id="bench")
        except ValueError:
            pass  # no SAEs installed: the timed runs say so
    table = []
    for index in chosen:
        kind, task = PROMPTS[index]
        changes: dict[str, str] = {}
        measured: dict[str, list[float]] = {}
        for round_ in range(max(1, args.repeats)):
            order = runs if (index + round_) % 2 == 0 else runs[::-1]
            for name, settings in order:
                label = name + (" sae" if settings.get("units") == "sae" else "")
                result, cpu = timed_run(model, index, kind, task, name, settings)
                if result is None:
                    continue
                measured.setdefault(label, []).append(cpu)
                if round_:
                    continue
                name_of_file = f"{index}_{label.replace(' ', '_')}.pt"
                if args.save:
                    torch.save(result.scores, args.save / name_of_file)
                if args.compare and (args.compare / name_of_file).is_file():
                    changes[label] = score_change(result.scores, torch.load(args.compare / name_of_file))
        seconds = {label: statistics.median(values) for label, values in measured.items()}
        if "eap-ig" in seconds:
            ratios = "  ".join(
                f"{label} {cpu / seconds['eap-ig']:.2f}x"
                for label, cpu in seconds.items()
                if label != "eap-ig"
            )
            print(f"{index} {kind:<15} CPU over EAP-IG's: {ratios}", flush=True)
        table.append(row(index, kind, seconds, changes))
    print(f"\nCPU seconds, one process, one torch thread; {load_average()}")
    print("| prompt | EAP-IG | components | ratio | change | SAE units | ratio | change |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(table))


def timed_run(model, index: int, kind: str, task, name: str, settings: dict):
    """One timed run (its own clean and corrupted runs): (result, CPU seconds), (None, 0) without SAEs."""
    forget_prompt_runs(model)  # every run makes its own clean and corrupted passes
    method = get_method(name)
    label = name + (" sae" if settings.get("units") == "sae" else "")
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        result = method.run_on(model, task, method.make_config(settings), budgets=[], model_id="bench")
    except ValueError as error:  # no SAEs installed: said, the rest goes on
        print(f"{index} {kind:<15} {label:<18} {error}", flush=True)
        return None, 0.0
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    phases = {k: round(v, 1) for k, v in result.timings.items() if k in PHASES}
    print(
        f"{index} {kind:<15} {label:<18} cpu {cpu:6.1f}s wall {wall:6.1f}s {phases}  {load_average()}",
        flush=True,
    )
    return result, cpu


def parse_settings(text: str) -> dict:
    """'n_paraphrases=4,directions=2' -> {'n_paraphrases': 4, 'directions': 2} (JSON values)."""
    settings = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        try:
            settings[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            settings[key.strip()] = value.strip()
    return settings


def yardstick(model, chosen: list[int], settings: dict, out: Path, against: Path | None) -> None:
    """CircuitLasso's NDF at the yardstick's budgets on each prompt, to ``out``; against another."""
    spec = adapter_of(model).spec
    budgets = [round(f * spec.n_edges) for f in FRACTIONS]
    method = get_method("circuit-lasso")
    old = json.loads(against.read_text()) if against else {}
    found = {}
    for index in chosen:
        kind, task = PROMPTS[index]
        forget_prompt_runs(model)
        cpu = time.process_time()
        result = method.run_on(model, task, method.make_config(settings), budgets=budgets, model_id="bench")
        cpu = time.process_time() - cpu
        ndfs = [point.ndf for point in result.curve]
        edges = {
            str(budget): sorted(spec.edge_names_of(circuit)) for budget, circuit in result.circuits.items()
        }
        found[str(index)] = {
            "ndf": ndfs,
            "cpr": curve_areas(result.curve, spec.n_edges)["cpr"],
            "cpu_s": cpu,
            "edges": edges,
        }
        line = f"{index} {kind:<15} cpu {cpu:5.1f}s NDF " + " ".join(f"{v:.3f}" for v in ndfs)
        line += f" CPR {found[str(index)]['cpr']:.3f}"
        before = old.get(str(index))
        if before:
            same = [same_share(edges[str(b)], before["edges"][str(b)]) for b in budgets]
            line += "  | old NDF " + " ".join(f"{v:.3f}" for v in before["ndf"])
            line += f" CPR {before['cpr']:.3f}; same edges " + " ".join(f"{v:.2f}" for v in same)
        print(f"{line}  {load_average()}", flush=True)
    out.write_text(json.dumps(found, indent=1))


def same_share(new: list[str], old: list[str]) -> float:
    """The share of edges two circuits have in common (of the larger; 1 when both are empty)."""
    if not new and not old:
        return 1.0
    return len(set(new) & set(old)) / max(len(new), len(old))


def reduction_only(model, chosen: list[int], repeats: int) -> None:
    """CPU seconds of the reduction, chunked against one batch, back to back on each prompt."""
    spec, chunked = adapter_of(model).spec, units._CPU_CHUNK_BYTES
    config = get_method("circuit-lasso").make_config({})
    for index in chosen:
        kind, task = PROMPTS[index]
        prepared = prepare_task(model, task)
        texts = observation_texts(task, config.n_paraphrases, config.corpus, config.seed)
        observed = collect_observations(model, spec, prepared, texts, component_hook_names(model, spec))
        seconds: dict[str, list[float]] = {"chunked": [], "one batch": []}
        problems = {}
        for _ in range(repeats):
            for label, chunk in (("chunked", chunked), ("one batch", 2**62)):
                units._CPU_CHUNK_BYTES = chunk
                cpu = time.process_time()
                problems[label] = build_component_problem(
                    model,
                    spec,
                    observed.writers,
                    observed.activations,
                    observed.metric,
                    config.directions,
                    config.seed,
                )
                seconds[label].append(time.process_time() - cpu)
        units._CPU_CHUNK_BYTES = chunked
        same = all(
            torch.equal(getattr(problems["chunked"], name), getattr(problems["one batch"], name))
            for name in ("predictors", "targets", "target_weight")
        )
        medians = {label: sorted(values)[len(values) // 2] for label, values in seconds.items()}
        print(
            f"{index} {kind:<15} {observed.n_observations} rows: reduction chunked {medians['chunked']:.2f} "
            f"CPU-s, one batch {medians['one batch']:.2f} (median of {repeats}); same problem: {same}  "
            f"{load_average()}",
            flush=True,
        )


def score_change(new: torch.Tensor, old: torch.Tensor) -> str:
    """The largest |new - old| over the edges, and relative to the largest |old| score."""
    if new.shape != old.shape:
        return "shape differs"
    largest = float((new.double() - old.double()).abs().max())
    return f"{largest:.1e} ({largest / max(float(old.abs().max()), 1e-30):.1e} rel.)"


def row(index: int, kind: str, seconds: dict, changes: dict) -> str:
    """One markdown row: EAP-IG's CPU seconds, then each CircuitLasso mode's, ratio and change."""
    base = seconds.get("eap-ig")
    cells = [f"{index} {kind}", f"{base:.1f}" if base else "-"]
    for label in ("circuit-lasso", "circuit-lasso sae"):
        cpu = seconds.get(label)
        ratio = f"{cpu / base:.2f}x {'met' if cpu <= base else 'missed'}" if cpu and base else "-"
        cells += [f"{cpu:.1f}" if cpu else "-", ratio, changes.get(label, "-")]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    sys.exit(main())
