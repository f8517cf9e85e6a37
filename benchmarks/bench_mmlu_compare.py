"""Two runs of ``bench_mmlu.py`` on the same questions, side by side: NDF at 1.3 % of the edges of
every Best-of-N variant (and BoN with its first 3 paraphrases) over the questions both runs hold,
with 95 % bands. For a setting's effect (IG steps, paraphrase count) on identical questions.

    .venv/bin/python benchmarks/bench_mmlu.py --threads 1 --workers 2 --n 2 --ig-steps 5 \\
        --models gemma-3-270m --skip-others --out runs/mmlu-m5
    .venv/bin/python benchmarks/bench_mmlu_compare.py runs/mmlu runs/mmlu-m5 --model gemma-3-270m
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_mmlu import BON_FAMILY, bands_of, first_k_values, summary_of, variant_values  # this folder


def run_results(out: Path, model_id: str) -> tuple[dict, list[int], str]:
    """{task id: stored result} of a run's Best-of-N folder, its budgets, and a label of its settings."""
    from circuitviz.batch.atlas import BatchTable
    from circuitviz.services.store import ResultStore

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
    return (
        results,
        list(batch.manifest["budgets"]),
        f"p = {config['n_paraphrases']}, m = {config['ig_steps']}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--model", default="gemma-3-270m")
    args = parser.parse_args()
    first, budgets, first_label = run_results(args.first, args.model)
    second, _, second_label = run_results(args.second, args.model)
    both = [task for task in first if task in second]
    if not both:
        raise SystemExit("The two runs share no question; run them on the same tasks (the same --seed).")
    n_edges = next(iter(first.values())).graph.n_edges
    print(f"NDF at 1.3 % of the edges, {len(both)} questions in both runs, mean (95 % band):")
    print(f"| variant | {first_label} | {second_label} |")
    print("|---|---:|---:|")
    for name in (*BON_FAMILY, "bon, first 3"):
        cells = []
        for results in (first, second):
            chosen = [results[task] for task in both]
            matrix = (
                first_k_values(chosen, budgets, 3)
                if name == "bon, first 3"
                else variant_values(chosen, budgets, name)
            )
            summary = summary_of(bands_of(matrix, budgets, n_edges))
            low, high = summary["ndf_at_1.3%_band"]
            cells.append(f"{summary['ndf_at_1.3%']:.3f} ({low:.3f}-{high:.3f})")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
