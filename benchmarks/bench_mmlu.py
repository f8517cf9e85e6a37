"""Query Circuits' headline experiment on real MMLU, in one command, resumable.

For each model: n valid questions of each subject (``circuitviz.batch.mmlu_tasks``: the answer
is the letter the model prefers, the foils the three other letters, the corruption renames all
four option markers E-H, refused unless it lowers the logit difference by 1 logit), then two
batch folders under ``--out/<model>/``:

- ``bon-family``: one ``bon`` run per question with ``compare`` on, which computes single,
  average, bon, ibon and bon-csm from one set of paraphrases (p template paraphrases of the MMLU
  family, 9 as in the paper) and one set of EAP-IG score matrices (m steps); each variant's curve
  is read back from the stored result. Timed against the 45-minute target.
- ``others``: edge-pruning (warm-started from EAP-IG) and ensemble (EAP-IG + EAP, rank-averaged)
  on the first ``--others-n`` questions of each subject.

The tasks are drawn once per model and kept in ``--out/<model>/mmlu-tasks.jsonl`` with their
selection (kept and refused per subject) beside them, so a rerun starts computing at once.

Then, per method: NDF against the edge budget with 95 % bands, the edges its mean curve needs to
reach NDF 0.6, NDF and necessity at 1.3 % of the edges, and a figure; and Best-of-N with only
the first k of the p paraphrases, k = 0..p, from the same runs (the paper: more paraphrases
help, with diminishing returns). Every folder resumes: the same command again skips what is
finished (Ctrl-C loses the groups in flight only).

    .venv/bin/python benchmarks/bench_mmlu.py --threads 1 --workers 2         # both models
    .venv/bin/python benchmarks/bench_mmlu.py --threads 1 --models gemma-3-270m --skip-others
    .venv/bin/python benchmarks/bench_mmlu.py --report-only                   # tables from the folders
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from pathlib import Path

from circuitviz.bench.harness import add_threads_argument, apply_threads

ROOT = Path(__file__).resolve().parents[1]
SUBJECTS = (
    "marketing",
    "astronomy",
    "nutrition",
    "sociology",
    "high school geography",
    "us foreign policy",
    "world religions",
    "management",
    "miscellaneous",
)
BON_FAMILY = ("single", "average", "bon", "ibon", "bon-csm")
OTHERS = ("edge-pruning", "ensemble")
FRACTIONS = (0.002, 0.005, 0.013, 0.03, 0.1, 0.517, 1.0)
TARGET_NDF = 0.6
PAPER = {  # Llama-3.2-1B-Instruct, 386,713 edges, 9 MMLU subjects, p = 9 (GPT-4o), m = 20
    "bon": {"edges_to_0.6": "~5,000 (1.3 %)", "ndf_at_1.3%": "~0.6"},
    "single": {"edges_to_0.6": "~200,000 (51.7 %)", "ndf_at_1.3%": "below BoN"},
    "average": {"edges_to_0.6": "more than single", "ndf_at_1.3%": "below single"},
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def budgets_of(n_edges: int) -> list[int]:
    return sorted({max(1, round(f * n_edges)) for f in FRACTIONS})


WORKERS = {"workers": 1}  # --workers: more than one runs the groups on a local Ray


def run_folder(
    folder: Path, model, model_id, methods, settings, budgets, store, consensus=None, **source
) -> dict:
    """One batch folder (resumed when it exists): wall and CPU seconds (this process's and its
    finished children's: Ray's workers), load before and after."""
    from circuitviz.batch import ProgressBar, run

    workers = WORKERS["workers"]
    on_ray = (
        {"executor": "ray", "ray_options": {"workers": workers, "local_cpus": workers}} if workers > 1 else {}
    )
    begin, cpu, load, clock = time.perf_counter(), process_seconds(), load_average(), DescendantClock()
    report = run(
        folder,
        methods=list(methods),
        settings=settings,
        budgets=budgets,
        model=None if on_ray else model,
        model_id=model_id,
        store=store,
        progress=ProgressBar(),
        log=log,
        consensus=consensus,
        batch_tasks=4,
        **on_ray,
        **source,
    )
    timing = {
        "wall_s": time.perf_counter() - begin,
        "cpu_s": process_seconds() - cpu + clock.seconds(),
        "workers": workers,
        "load_before": load,
        "load_after": load_average(),
        "computed": report.computed,
        "from_store": report.skipped,
        "failed": report.failed,
        "interrupted": report.interrupted,
    }
    log(f"{folder}: {json.dumps(timing)}")
    return timing


class DescendantClock:
    """CPU seconds of every process below this one (Ray's workers), sampled every few seconds
    while a batch runs, since a worker's time is gone once Ray stops it."""

    def __init__(self, every: float = 5.0):
        import threading

        self.seen: dict[int, float] = {}
        self.every, self.stop = every, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        import psutil

        while not self.stop.wait(self.every):
            for child in psutil.Process().children(recursive=True):
                try:
                    times = child.cpu_times()
                    self.seen[child.pid] = times.user + times.system
                except psutil.Error:
                    continue

    def seconds(self) -> float:
        self.stop.set()
        self.thread.join()
        return sum(self.seen.values())


def process_seconds() -> float:
    """CPU seconds of this process."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def edges_to_reach(bands: list[dict], target: float = TARGET_NDF) -> float | None:
    """The budget where the mean curve first reaches ``target``, interpolated linearly in log
    budget between the two budgets around it; None when it never does."""
    previous = None
    for band in bands:
        if band["mean"] == band["mean"] and band["mean"] >= target:
            if previous is None or previous["mean"] >= target:
                return float(band["budget"])
            share = (target - previous["mean"]) / (band["mean"] - previous["mean"])
            low, high = math.log(previous["budget"]), math.log(band["budget"])
            return float(math.exp(low + share * (high - low)))
        previous = band
    return None


def method_summary(batch, label: str, n_edges: int) -> dict:
    """What the table reports for one series of the batch table (edge-pruning, ensemble)."""
    from circuitviz.batch.atlas import curve_bands

    bands = curve_bands(batch, label)
    if not bands:
        return {"bands": [], "n": 0, "edges_to_0.6": None, "ndf_at_1.3%": math.nan,
                "ndf_at_1.3%_band": (math.nan, math.nan)}  # fmt: skip
    necessity = curve_bands(batch, label, "necessity") if "necessity" in batch.table.column_names else None
    return summary_of(bands, necessity)


def read_series(folder: Path, n_edges: int, store=None) -> dict[str, dict]:
    """Every method of a batch folder: {method name: summary}; a ``bon`` series with compare on
    gives its five variants, read from each row's stored result."""
    from circuitviz.batch.atlas import BatchTable

    if not (folder / "results.parquet").exists():
        return {}
    batch = BatchTable.load(folder)
    series = {}
    for label in batch.labels:
        name = label.split(" (")[0]
        if name == "bon" and store is not None:
            series.update(variant_series(batch, label, store, n_edges))
        else:
            series[name] = method_summary(batch, label, n_edges)
    return series


def bands_of(matrix, budgets: list[int], n_edges: int) -> list[dict]:
    """Per budget of a [questions, budgets] matrix (NaN where not measured): the mean with its
    95 % band and the number of questions measured."""
    import numpy

    from circuitviz.batch.atlas import _interval

    matrix = numpy.asarray(matrix, dtype=float).reshape(-1, len(budgets))
    bands = []
    for column, budget in enumerate(budgets):
        mean, low, high = _interval(matrix[:, column])
        bands.append(
            {"budget": int(budget), "fraction": budget / n_edges, "n": int(numpy.sum(~numpy.isnan(matrix[:, column]))),
             "mean": mean, "low": low, "high": high}
        )  # fmt: skip
    return bands


def summary_of(bands: list[dict], necessity: list[dict] | None = None) -> dict:
    at = min(bands, key=lambda band: abs(band["fraction"] - 0.013))
    summary = {
        "bands": bands,
        "n": at["n"],
        "edges_to_0.6": edges_to_reach(bands),
        "ndf_at_1.3%": at["mean"],
        "ndf_at_1.3%_band": (at["low"], at["high"]),
    }
    if necessity and any(band["n"] for band in necessity):
        summary["necessity"] = necessity
    return summary


def stored_results(batch, label: str, store) -> tuple[list[int], list]:
    """The budgets of a compare run's rows and each row's stored result (rows whose result is
    gone from the store are left out)."""
    rows = batch.rows(label).to_pylist()
    budgets = list(rows[0]["budgets"]) if rows else []
    results = [store.get(row["key"]) for row in rows]
    return budgets, [result for result in results if result is not None]


def variant_values(results: list, budgets: list[int], variant: str, score: str = "ndf") -> list[list[float]]:
    """[questions, budgets]: ``score`` (ndf or necessity) of one variant's stored curve point per
    result and budget, NaN where it has none."""
    matrix = []
    for result in results:
        points = {point["budget"]: point for point in result.details.curves.get(variant, [])}
        matrix.append([_number(points.get(b, {}).get(score)) for b in budgets])
    return matrix


def first_k_values(results: list, budgets: list[int], k: int) -> list[list[float]]:
    """[questions, budgets]: Best-of-N's NDF from candidates 0..k only (``bon_with_first``)."""
    matrix = []
    for result in results:
        seen = result.details.bon_with_first(k)
        matrix.append([seen.get(b, math.nan) for b in budgets])
    return matrix


def variant_series(batch, label: str, store, n_edges: int) -> dict[str, dict]:
    """The five variants' NDF (and necessity) curves of a compare run, from the stored results."""
    budgets, results = stored_results(batch, label, store)
    if not results:
        return {}
    return {
        variant: summary_of(
            bands_of(variant_values(results, budgets, variant), budgets, n_edges),
            bands_of(variant_values(results, budgets, variant, "necessity"), budgets, n_edges),
        )
        for variant in BON_FAMILY
    }


def _number(value) -> float:
    return math.nan if value is None else float(value)


def paraphrase_count_series(batch, label: str, store, n_edges: int) -> dict[int, dict]:
    """Best-of-N with only the first k paraphrases, k = 0 (the prompt alone, = single) .. p:
    at each budget the most faithful of candidates 0..k (``QueryCircuitDetails.bon_with_first``),
    read from every candidate's stored curve point. Tests the paper's "more paraphrases help,
    with diminishing returns" on the same runs."""
    budgets, results = stored_results(batch, label, store)
    most = max((len(result.details.candidates) for result in results), default=0)
    return {
        k: summary_of(bands_of(first_k_values(results, budgets, k), budgets, n_edges)) for k in range(most)
    }


def read_paraphrase_counts(folder: Path, n_edges: int, store) -> dict[int, dict]:
    """``paraphrase_count_series`` of a folder's ``bon`` series; empty when it has none."""
    from circuitviz.batch.atlas import BatchTable

    if not (folder / "results.parquet").exists():
        return {}
    batch = BatchTable.load(folder)
    label = next((label for label in batch.labels if label.split(" (")[0] == "bon"), None)
    return {} if label is None else paraphrase_count_series(batch, label, store, n_edges)


def paraphrase_count_lines(series: dict[int, dict], n_edges: int) -> list[str]:
    """The table of BoN by number of paraphrases (the first k of each question's candidates)."""
    if len(series) < 2:
        return []
    lines = [
        "Best-of-N with only the first k paraphrases (k = 0 is the prompt alone, the single query):",
        "",
        "| k | questions | NDF at 1.3 % (95 % band) | edges to NDF 0.6 |",
        "|---:|---:|---:|---:|",
    ]
    for k, s in series.items():
        low, high = s["ndf_at_1.3%_band"]
        lines.append(
            f"| {k} | {s['n']} | {s['ndf_at_1.3%']:.3f} ({low:.3f}-{high:.3f}) | {_edges(s['edges_to_0.6'], n_edges)} |"
        )
    return lines


def selection_lines(path: Path) -> list[str]:
    """Kept and refused questions per subject, from the selection the tasks were drawn with."""
    per_subject = json.loads(path.read_text(encoding="utf-8")).get("per_subject", {})
    lines = [
        "| subject | tried | kept | refused | kept share | letter mass | accuracy of kept |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for subject, row in per_subject.items():
        mass = row["letter_mass_mean"]
        accuracy = row["accuracy_of_kept"]
        lines.append(
            f"| {subject} | {row['tried']} | {row['kept']} | {row['refused']} | {row['kept_share']:.0%} | "
            f"{mass:.2f} | {'' if accuracy is None else f'{accuracy:.0%}'} |"
        )
    tried = sum(r["tried"] for r in per_subject.values())
    kept = sum(r["kept"] for r in per_subject.values())
    lines.append(f"| all | {tried} | {kept} | {tried - kept} | {kept / max(tried, 1):.0%} | | |")
    return lines


def _edges(value: float | None, n_edges: int) -> str:
    return "not reached" if value is None else f"{value:,.0f} ({100 * value / n_edges:.1f} %)"


def result_lines(model_id: str, series: dict[str, dict], n_edges: int) -> list[str]:
    lines = [
        "| method | questions | edges to NDF 0.6 | NDF at 1.3 % (95 % band) | necessity at 1.3 % (95 % band) "
        "| paper: edges to 0.6 | paper: NDF at 1.3 % |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in BON_FAMILY + OTHERS:
        if name not in series:
            continue
        s = series[name]
        low, high = s["ndf_at_1.3%_band"]
        paper = PAPER.get(name, {})
        lines.append(
            f"| {name} | {s['n']} | {_edges(s['edges_to_0.6'], n_edges)} | {s['ndf_at_1.3%']:.3f} "
            f"({low:.3f}-{high:.3f}) | {_necessity_at(s)} | {paper.get('edges_to_0.6', '')} "
            f"| {paper.get('ndf_at_1.3%', '')} |"
        )
    budgets = [band["budget"] for band in next(iter(series.values()))["bands"]] if series else []
    lines += ["", f"Mean NDF per budget ({model_id}, {n_edges:,} edges):", ""]
    lines.append("| method | " + " | ".join(f"{b:,} ({100 * b / n_edges:.1f} %)" for b in budgets) + " |")
    lines.append("|---|" + "---:|" * len(budgets))
    for name in BON_FAMILY + OTHERS:
        if name in series:
            cells = [
                f"{band['mean']:.2f} ± {(band['high'] - band['low']) / 2:.2f}"
                for band in series[name]["bands"]
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _necessity_at(summary: dict) -> str:
    """Necessity at 1.3 % with its band; "-" for runs stored before necessity was measured."""
    if not summary.get("necessity"):
        return "-"
    at = min(summary["necessity"], key=lambda band: abs(band["fraction"] - 0.013))
    return f"{at['mean']:.3f} ({at['low']:.3f}-{at['high']:.3f})" if at["n"] else "-"


def targets_lines(series: dict[str, dict]) -> list[str]:
    """The issue's targets, each said to hold or not."""
    lines = []
    if "bon" in series:
        value = series["bon"]["ndf_at_1.3%"]
        lines.append(
            f"- BoN at 1.3 %: NDF {value:.3f} (target >= 0.6): {'holds' if value >= 0.6 else 'does not hold'}"
        )
    if "bon" in series and "single" in series:
        bon, single = series["bon"]["edges_to_0.6"], series["single"]["edges_to_0.6"]
        if bon is None:
            lines.append("- single needs >= 5x BoN's edges: BoN never reaches 0.6, so not measurable")
        elif single is None:
            lines.append(
                f"- single needs >= 5x BoN's edges: single never reaches 0.6 (BoN at {bon:,.0f}): holds"
            )
        else:
            ratio = single / bon
            lines.append(
                f"- single needs {ratio:.1f}x BoN's edges (target >= 5x): {'holds' if ratio >= 5 else 'does not hold'}"
            )
    if "average" in series and "single" in series:
        a, s = series["average"]["ndf_at_1.3%"], series["single"]["ndf_at_1.3%"]
        lines.append(
            f"- average below single at 1.3 %: {a:.3f} vs {s:.3f}: {'holds' if a < s else 'does not hold'}"
        )
    return lines


def figure(
    all_series: dict[str, dict], n_edges: dict[str, int], path: Path, counts: dict | None = None
) -> None:
    """NDF against the edge fraction with 95 % bands, one panel per model, and a last panel of
    Best-of-N's NDF at 1.3 % against the number of paraphrases it chose from (plotly + kaleido)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    models = list(all_series)
    counted = {model: c for model, c in (counts or {}).items() if len(c) > 1}
    titles = [*models, "BoN at 1.3 %: first k paraphrases"] if counted else models
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles)
    colours = dict(
        zip(
            BON_FAMILY + OTHERS, ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
        )
    )
    for column, model_id in enumerate(models, start=1):
        for name, s in all_series[model_id].items():
            x = [100 * band["fraction"] for band in s["bands"]]
            colour = colours.get(name, "#333333")
            fig.add_trace(
                go.Scatter(x=x + x[::-1], y=[b["high"] for b in s["bands"]] + [b["low"] for b in s["bands"]][::-1],
                           fill="toself", fillcolor=colour, opacity=0.15, line={"width": 0}, showlegend=False,
                           hoverinfo="skip"),
                row=1, col=column,
            )  # fmt: skip
            fig.add_trace(
                go.Scatter(x=x, y=[b["mean"] for b in s["bands"]], name=name, line={"color": colour},
                           showlegend=column == 1, mode="lines+markers"),
                row=1, col=column,
            )  # fmt: skip
        fig.add_hline(y=TARGET_NDF, line_dash="dot", row=1, col=column)
        fig.add_vline(x=1.3, line_dash="dot", row=1, col=column)
        ticks = [100 * f for f in FRACTIONS]
        fig.update_xaxes(type="log", title_text="edges kept (% of the graph)", tickvals=ticks,
                         ticktext=[f"{t:g}" for t in ticks], row=1, col=column)  # fmt: skip
    for (model_id, series), colour in zip(counted.items(), ("#111111", "#888888")):
        k = list(series)
        fig.add_trace(
            go.Scatter(x=k, y=[series[i]["ndf_at_1.3%"] for i in k], name=f"{model_id}: BoN, first k", mode="lines+markers",
                       line={"color": colour},
                       error_y={"type": "data", "symmetric": False,
                                "array": [series[i]["ndf_at_1.3%_band"][1] - series[i]["ndf_at_1.3%"] for i in k],
                                "arrayminus": [series[i]["ndf_at_1.3%"] - series[i]["ndf_at_1.3%_band"][0] for i in k]}),
            row=1, col=len(titles),
        )  # fmt: skip
    if counted:
        fig.add_hline(y=TARGET_NDF, line_dash="dot", row=1, col=len(titles))
        fig.update_xaxes(
            title_text="paraphrases chosen from (k; 0 = the single query)", dtick=1, row=1, col=len(titles)
        )
    fig.update_yaxes(title_text="NDF (mean over questions, 95 % band)", range=[0, 1.02])
    fig.update_layout(width=520 * len(titles), height=460, margin={"l": 60, "r": 20, "t": 40, "b": 50},
                      legend={"orientation": "h", "y": -0.2})  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_image(str(path))
    log(f"wrote {path}")


def store_of(args, model_id: str):
    from circuitviz.services.store import ResultStore

    return ResultStore(args.store or args.out / f"store-{model_id}")


def drawn_tasks(model, args, base: Path, timings: dict) -> list:
    """The MMLU tasks of this model: drawn once (timed), then read back from the folder."""
    from circuitviz.batch.dataset import read_tasks, write_tasks
    from circuitviz.batch.mmlu_tasks import mmlu_tasks

    path, selection = base / "mmlu-tasks.jsonl", base / "mmlu-selection.json"
    if path.exists() and selection.exists():  # drawn before, perhaps with a larger n
        return first_per_subject(read_tasks(path), args.n)
    begin, cpu, load = time.perf_counter(), time.process_time(), load_average()
    found = mmlu_tasks(model, args.subjects, args.n, args.seed, args.max_tokens)
    base.mkdir(parents=True, exist_ok=True)
    write_tasks(path, found.tasks)
    selection.write_text(json.dumps(found.summary, indent=1), encoding="utf-8")
    timings.setdefault(f"{base.name}/drawing tasks", []).append(
        {"wall_s": time.perf_counter() - begin, "cpu_s": time.process_time() - cpu, "load_before": load,
         "load_after": load_average(), "computed": len(found.tasks), "failed": 0}
    )  # fmt: skip
    log(f"drew {len(found.tasks)} tasks; " + "; ".join(found.problems))
    return found.tasks


def build_atlas(folder: Path, atlas: Path, model, model_id, settings, budgets, store, tasks, args) -> None:
    """The Dataset page's stored atlas: the folder rerun (every item from the store) with its
    consensus at 50 % evaluated on every question, then its tables copied to ``atlas``."""
    import shutil

    run_folder(folder, model, model_id, ["bon"], settings, budgets, store, consensus=0.5, tasks=tasks,
               max_tokens=args.max_tokens)  # fmt: skip
    atlas.mkdir(parents=True, exist_ok=True)
    for name in ("results.parquet", "consensus.parquet", "manifest.json", "tasks.jsonl"):
        if (folder / name).exists():
            shutil.copy2(folder / name, atlas / name)
    selection = folder.parent / "mmlu-selection.json"
    if selection.exists():
        shutil.copy2(selection, atlas / "selection.json")
    log(f"wrote the atlas {atlas}")


def first_per_subject(tasks: list, n: int) -> list:
    """The first ``n`` tasks of each subject (family)."""
    chosen, counts = [], {}
    for task in tasks:
        counts[task.family] = counts.get(task.family, 0) + 1
        if counts[task.family] <= n:
            chosen.append(task)
    return chosen


def run_model(model_id: str, args, timings: dict, timings_path: Path) -> int:
    """Both folders of one model (each run's timing appended to ``timings_path``); returns its
    graph's edge count."""
    from circuitviz.core.graph import GraphSpec
    from circuitviz.models import load_model

    model = load_model(model_id)
    n_edges = GraphSpec.from_model(model).n_edges
    budgets = budgets_of(n_edges)
    store = store_of(args, model_id)
    base = args.out / model_id
    bon_settings = {"n_paraphrases": args.p, "ig_steps": args.ig_steps, "compare": True}
    log(f"{model_id}: {n_edges} edges, budgets {budgets}; load {load_average()}")
    tasks = drawn_tasks(model, args, base, timings)
    timings_path.write_text(json.dumps(timings, indent=1), encoding="utf-8")
    if not args.skip_bon:
        timings.setdefault(f"{model_id}/bon-family", []).append(run_folder(
            base / "bon-family", model, model_id, ["bon"], bon_settings, budgets, store,
            tasks=tasks, max_tokens=args.max_tokens,
        ))  # fmt: skip
        timings_path.write_text(json.dumps(timings, indent=1), encoding="utf-8")
    if args.atlas:
        build_atlas(
            base / "bon-family", args.atlas, model, model_id, bon_settings, budgets, store, tasks, args
        )
    if not args.skip_others:
        tasks = first_per_subject(tasks, args.others_n)
        other_settings = {"ig_steps": args.ig_steps, "steps": args.pruning_steps}
        timings.setdefault(f"{model_id}/others", []).append(run_folder(
            base / "others", model, model_id, OTHERS, other_settings, budgets, store,
            tasks=tasks, max_tokens=args.max_tokens,
        ))  # fmt: skip
        timings_path.write_text(json.dumps(timings, indent=1), encoding="utf-8")
    return n_edges


def report(args, models: list[str], timings: dict) -> None:
    from circuitviz.core.graph import GraphSpec  # noqa: F401  (the summaries read the manifests' graphs)

    all_series, edges, all_counts = {}, {}, {}
    lines = [
        f"## MMLU: {len(args.subjects)} subjects x {args.n} questions, p = {args.p}, m = {args.ig_steps}",
        "",
    ]
    for model_id in models:
        base = args.out / model_id
        manifest_path = base / "bon-family" / "manifest.json"
        if not manifest_path.exists():
            continue
        n_edges = json.loads(manifest_path.read_text(encoding="utf-8"))["n_edges"]
        store = store_of(args, model_id)
        series = read_series(base / "bon-family", n_edges, store) | read_series(base / "others", n_edges)
        all_series[model_id], edges[model_id] = series, n_edges
        lines += [f"### {model_id}", "", *selection_lines(base / "mmlu-selection.json"), ""]
        lines += result_lines(model_id, series, n_edges) + [""] + targets_lines(series) + [""]
        counts = read_paraphrase_counts(base / "bon-family", n_edges, store)
        lines += paraphrase_count_lines(counts, n_edges) + [""]
        all_counts[model_id] = counts
    for name, runs in timings.items():
        wall, cpu = sum(t["wall_s"] for t in runs), sum(t["cpu_s"] for t in runs)
        loads = ", ".join(f"{t['load_before']} -> {t['load_after']}" for t in runs)
        computed = sum(t["computed"] for t in runs)
        lines.append(
            f"- {name}: wall {wall:.0f} s, CPU {cpu:.0f} s over {len(runs)} run(s) (load averages {loads}); "
            f"{computed} items computed, {runs[-1]['failed']} failed"
        )
    print("\n".join(lines), flush=True)
    (args.out / "summary.json").write_text(
        json.dumps(
            {"series": all_series, "paraphrase_counts": all_counts, "edges": edges, "timings": timings},
            indent=1,
            default=str,
        ),
        encoding="utf-8",
    )
    if all_series and args.figure:
        figure(all_series, edges, args.figure, all_counts)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_threads_argument(parser)
    parser.add_argument("--models", default="gemma-3-270m,smollm2-135m")
    parser.add_argument("--subjects", default=",".join(SUBJECTS), help="comma separated, or all")
    parser.add_argument("--n", type=int, default=10, help="valid questions per subject")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--p", type=int, default=9, help="template paraphrases per question (the paper: 9)")
    parser.add_argument("--ig-steps", type=int, default=2, help="EAP-IG steps (paper: 20)")
    parser.add_argument(
        "--others-n", type=int, default=2, help="questions per subject for edge-pruning and ensemble"
    )
    parser.add_argument("--pruning-steps", type=int, default=10, help="edge-pruning optimisation steps")
    parser.add_argument("--max-tokens", type=int, default=128, help="questions longer than this are refused")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "mmlu")
    parser.add_argument("--store", type=Path, default=None, help="result store (default: OUT/store)")
    parser.add_argument(
        "--figure",
        type=lambda text: Path(text) if text else None,
        default=ROOT / "docs" / "images" / "mmlu.png",
        help='the figure\'s path ("" for none)',
    )
    parser.add_argument("--skip-others", action="store_true", help="only the Best-of-N family")
    parser.add_argument("--skip-bon", action="store_true", help="only edge-pruning and ensemble")
    parser.add_argument(
        "--atlas", type=Path, default=None, help="also store the atlas there (e.g. assets/atlas/mmlu)"
    )
    parser.add_argument("--report-only", action="store_true", help="print the tables from the folders")
    parser.add_argument(
        "--workers", type=int, default=1, help="more than 1: a local Ray with that many workers"
    )
    args = parser.parse_args()
    apply_threads(args.threads)
    WORKERS["workers"] = args.workers
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from circuitviz.batch.mmlu import resolve_subjects

    args.subjects = resolve_subjects(args.subjects)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    timings = {}
    for model_id in models:  # one file per model: two models may run in two processes at once
        path = args.out / model_id / "timings.json"
        found = json.loads(path.read_text()) if path.exists() else {}
        if not args.report_only:
            path.parent.mkdir(parents=True, exist_ok=True)
            run_model(model_id, args, found, path)
        timings.update(found)
    log(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; load {load_average()}")
    report(args, models, timings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
