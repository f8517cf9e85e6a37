"""Two runs of ``bench_mmlu.py`` on the same questions, side by side: NDF at 1.3 % of the edges of
every Best-of-N variant (and BoN with its first 3 paraphrases) over the questions both runs hold,
with 95 % bands. For a setting's effect (IG steps, paraphrase count) on identical questions.

    .venv/bin/python benchmarks/bench_mmlu.py --threads 1 --workers 2 --n 2 --ig-steps 5 \\
        --models gemma-3-270m --skip-others --out runs/mmlu-m5
    .venv/bin/python benchmarks/bench_mmlu_compare.py runs/mmlu runs/mmlu-m5 --model gemma-3-270m
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

VARIANTS = ("single", "average", "bon", "ibon", "bon-csm")
FRACTION = 0.013


def run_results(out: Path, model_id: str) -> tuple[dict, str]:
    """{task id: stored result} of a run's Best-of-N folder, and a label of its settings."""
    from circuitviz.batch.atlas import BatchTable
    from circuitviz.store import ResultStore

    folder = out / model_id / "bon-family"
    if not (folder / "results.parquet").exists():
        raise SystemExit(f"{folder} holds no results.parquet; run bench_mmlu.py --out {out} first.")
    batch = BatchTable.load(folder)
    store = ResultStore(out / f"store-{model_id}")
    config = batch.manifest["methods"][0]["config"]
    results = {}
    for row in batch.rows(batch.labels[0]).to_pylist():
        result = store.get(row["key"])
        if result is not None:
            results[row["task_id"]] = result
    return results, f"p = {config['n_paraphrases']}, m = {config['ig_steps']}"


def at_fraction(result, n_edges: int) -> int:
    return min(result.details.budgets, key=lambda b: abs(b / n_edges - FRACTION))


def values(results: list, name: str, n_edges: int) -> list[float]:
    out = []
    for result in results:
        budget = at_fraction(result, n_edges)
        if name == "bon, first 3":
            out.append(result.details.bon_with_first(3).get(budget, math.nan))
        else:
            out.append(
                next((p["ndf"] for p in result.details.curves[name] if p["budget"] == budget), math.nan)
            )
    return [math.nan if v is None else float(v) for v in out]


def main() -> int:
    import numpy

    from circuitviz.batch.atlas import _interval

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--model", default="gemma-3-270m")
    args = parser.parse_args()
    first, first_label = run_results(args.first, args.model)
    second, second_label = run_results(args.second, args.model)
    both = [task for task in first if task in second]
    if not both:
        raise SystemExit("The two runs share no question; run them on the same tasks (the same --seed).")
    n_edges = next(iter(first.values())).graph.n_edges
    print(f"NDF at {100 * FRACTION:g} % of the edges, {len(both)} questions in both runs, mean (95 % band):")
    print(f"| variant | {first_label} | {second_label} |")
    print("|---|---:|---:|")
    for name in (*VARIANTS, "bon, first 3"):
        cells = []
        for results in (first, second):
            mean, low, high = _interval(numpy.asarray(values([results[t] for t in both], name, n_edges)))
            cells.append(f"{mean:.3f} ({low:.3f}-{high:.3f})")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
