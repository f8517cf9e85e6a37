"""Build the stored atlases of the embedded model that the Dataset page opens without a model.

    python scripts/build_atlas.py [--n 200] [--families ioi,arithmetic] [--store DIR]

For each family: ``--n`` prompts generated with seed 0, EAP-IG (20 steps) at MIB's ten budgets
(0.1 % to 100 % of Gemma-3-270M's 10,342 edges), circuits kept up to 10 % of the edges, the
consensus at 50 % evaluated on every prompt, into ``assets/atlas/<family>/``: the table
(results.parquet), consensus.parquet, tasks.jsonl and manifest.json, a few MB in all. Full
results go to the result store given (default: the shared one), so a second run only rewrites
the folders. Run from the checkout with circuitviz installed (``pip install -e .``).

    python scripts/build_atlas.py --check [--families ioi,arithmetic,mmlu] [--rows 10]

evaluates the stored circuits again with today's evaluator (every prompt's, or the first
``--rows``) and prints every figure that moved (``circuitviz.bench.stored_figures``); it builds
nothing. The test suite does the same on two prompts of each atlas.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import circuitviz.bench.harness  # noqa: F401  (the scripts' preamble: offline defaults)
from circuitviz.batch import ProgressBar, run
from circuitviz.services.store import ResultStore

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "atlas"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--families", default="ioi,arithmetic")
    parser.add_argument(
        "--store", type=Path, default=None, help="result store folder (default: the shared one)"
    )
    parser.add_argument("--executor", default="local", choices=["local", "ray"])
    parser.add_argument("--out", type=Path, default=ASSETS)
    parser.add_argument("--check", action="store_true", help="re-evaluate the stored atlases; build nothing")
    parser.add_argument("--rows", type=int, default=None, help="with --check: the first N prompts of each")
    args = parser.parse_args()
    if args.check:
        check([f.strip() for f in args.families.split(",") if f.strip()], args.out, args.rows)
        return
    store = ResultStore(args.store) if args.store else ResultStore()
    for family in [f.strip() for f in args.families.split(",") if f.strip()]:
        folder = args.out / family
        start = time.perf_counter()
        report = run(
            folder,
            generate=(family, args.n, 0),
            methods=["eap-ig"],
            settings={"ig_steps": 20},
            budgets="mib",
            store=store,
            executor=args.executor,
            progress=ProgressBar(),
            log=print,
            command=f"python scripts/build_atlas.py --n {args.n} --families {family}",
        )
        shutil.rmtree(folder / "parts", ignore_errors=True)
        size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
        print(
            f"{family}: {report.items} prompts ({report.failed} failed, {report.skipped} from the store) in "
            f"{time.perf_counter() - start:.0f}s; {folder} holds {size / 1e6:.2f} MB"
        )


def check(families: list[str], folder: Path, rows: int | None) -> None:
    """Every stored figure of each atlas that moved under today's evaluator, and how many held."""
    from circuitviz.bench.stored_figures import TOLERANCE, atlas_figures, moved
    from circuitviz.models import EMBEDDED_MODEL, load_model

    model = load_model(EMBEDDED_MODEL, device="cpu")
    for family in families:
        figures = atlas_figures(model, family, rows=rows, folder=folder)
        shown = sorted(moved(figures), key=lambda f: -f.moved)
        prompts = len({f.where for f in figures})
        print(
            f"{family}: {len(figures) - len(shown)} of {len(figures)} figures of {prompts} prompts hold "
            f"(within {TOLERANCE}); {len(shown)} moved",
            flush=True,
        )
        for figure in shown:
            print(f"  {figure.line()}", flush=True)


if __name__ == "__main__":
    main()
