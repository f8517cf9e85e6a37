"""CircuitLasso benchmarks: the solvers, CircuitLasso against EAP-IG on the embedded model, and the
planted-circuit benchmark. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_lasso.py                  # everything
    .venv/bin/python benchmarks/bench_lasso.py --skip-model     # solvers and planted circuits only
    .venv/bin/python benchmarks/bench_lasso.py --planted-cases 20 --write-assets

1. Solvers, on the components problem of the embedded model (or a synthetic one of the same shape
   with --skip-model): our batched active-set Lasso, our batched FISTA, and scikit-learn's
   coordinate descent (one target at a time, precomputed Gram), all at the same lambda; time,
   largest coefficient difference and largest KKT violation.
2. The embedded model, one prompt with its paraphrases: EAP-IG (20 steps) and CircuitLasso
   (components, defaults) in one run, their scoring times, the ratio, and both NDF curves; then
   CircuitLasso on the embedded SAEs (layers 3 and 9) when they are installed.
3. The planted-circuit benchmark (``circuitviz.bench.planted_benchmark``); --write-assets stores its table in
   assets/planted_bench.md and assets/planted_bench.json for the app's About page.

Timings on a shared CPU are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from circuitviz.bench.harness import ioi_task, load_average, load_timed, machine_line
from circuitviz.lasso.sem import fit_sem
from circuitviz.lasso.solver import (
    kkt_violation,
    lasso_active_set,
    lasso_fista,
    solver_threads,
    sufficient_statistics,
)
from circuitviz.services import assets

ROOT = Path(__file__).resolve().parents[1]  # the checkout: assets/ is read and written here
# the yardstick's budgets (bench_faithfulness.FRACTIONS of the edges) and its CPR, so the figures agree
FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.10)


def synthetic_problem(m: int = 252, p: int = 364, t: int = 937, seed: int = 0):
    """Correlated predictors and sparse targets of the embedded model's problem shape."""
    from circuitviz.lasso.solver import standardize

    generator = torch.Generator().manual_seed(seed)
    latent = torch.randn(m, 40, generator=generator, dtype=torch.float64)
    x = latent @ torch.randn(40, p, generator=generator, dtype=torch.float64)
    x = x + 0.5 * torch.randn(m, p, generator=generator, dtype=torch.float64)
    truth = torch.randn(p, t, generator=generator, dtype=torch.float64) * (
        torch.rand(p, t, generator=generator) < 0.05
    )
    y = x @ truth + torch.randn(m, t, generator=generator, dtype=torch.float64)
    allowed = torch.ones(p, t, dtype=torch.bool)
    return standardize(x)[0], standardize(y)[0], allowed


def bench_solvers(predictors, targets, allowed, penalty: float = 0.2) -> None:
    print(
        f"\n== solvers: {predictors.shape[0]} observations, {predictors.shape[1]} predictors, "
        f"{targets.shape[1]} targets, lambda {penalty} ({load_average()})"
    )
    gram, cross, power = sufficient_statistics(predictors, targets)
    with solver_threads(predictors.device):
        start = time.perf_counter()
        exact = lasso_active_set(gram, cross, power, penalty, allowed)
        active_seconds = time.perf_counter() - start
        start = time.perf_counter()
        first_order = lasso_fista(gram, cross, power, penalty, allowed, tol=1e-9, max_iter=20000)
        fista_seconds = time.perf_counter() - start
    rows = [
        ("active set (ours)", active_seconds, exact.coefficients, f"{exact.iterations} rounds"),
        (
            "FISTA (ours)",
            fista_seconds,
            first_order.coefficients,
            f"{first_order.iterations} iterations{'' if first_order.converged else ', not converged'}",
        ),
    ]
    try:
        from sklearn.linear_model import Lasso

        coefficients = torch.zeros_like(exact.coefficients)
        x = predictors.numpy()
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for j in range(targets.shape[1]):
                columns = allowed[:, j].numpy()
                if not columns.any():
                    continue
                gram_j = np.ascontiguousarray(
                    gram.numpy()[columns][:, columns] * x.shape[0]
                )  # X^T X, unscaled
                model = Lasso(
                    alpha=penalty, fit_intercept=False, precompute=gram_j, tol=1e-9, max_iter=100_000
                )
                coefficients[columns, j] = torch.from_numpy(
                    model.fit(np.ascontiguousarray(x[:, columns]), targets[:, j].numpy()).coef_
                )
        rows.append(("scikit-learn CD", time.perf_counter() - start, coefficients, "one target at a time"))
    except ImportError:
        print("  (scikit-learn is not installed: pip install -e '.[dev]')")
    for name, seconds, coefficients, note in rows:
        difference = float((coefficients - exact.coefficients).abs().max())
        violation = float(
            kkt_violation(gram, cross, torch.full_like(power, penalty), coefficients, allowed).max()
        )
        print(
            f"  {name:<18} {seconds:8.2f}s  max |diff| {difference:.1e}  max KKT violation {violation:.1e}  ({note})"
        )


def bench_model(args) -> None:
    from circuitviz.core.curves import cpr
    from circuitviz.methods import get_method
    from circuitviz.models import EMBEDDED_MODEL

    print(f"\n== embedded model {EMBEDDED_MODEL} on cpu ({load_average()})")
    model, _ = load_timed(EMBEDDED_MODEL, device="cpu")
    task = ioi_task()
    from circuitviz.core.graph import GraphSpec

    n_edges = GraphSpec.from_model(model).n_edges
    budgets = [round(fraction * n_edges) for fraction in FRACTIONS]
    runs = {}
    for name in ("eap-ig", "circuit-lasso"):
        method = get_method(name)
        start = time.perf_counter()
        result = method.run_on(model, task, method.default_config(), budgets=budgets, model_id=EMBEDDED_MODEL)
        wall = time.perf_counter() - start
        discovery = result.timings["clean_corrupted_s"] + result.timings["scoring_s"]
        runs[name] = (result, discovery)
        curve = "  ".join(f"{p.budget}:{p.ndf:.2f}" for p in result.curve)
        print(f"  {name:<14} discovery {discovery:6.1f}s (wall with evaluation {wall:.1f}s)  NDF {curve}")
        areas = {score: cpr(result.curve, result.graph.n_edges, score) for score in ("nfs", "ndf")}
        print(
            f"  {'':<14} CPR(NFS) {areas['nfs']:.3f} (the yardstick's)  CPR(NDF) {areas['ndf']:.3f}  {load_average()}"
        )
    lasso, lasso_seconds = runs["circuit-lasso"]
    _, ig_seconds = runs["eap-ig"]
    t = lasso.timings
    print(
        f"  circuit-lasso breakdown: clean/corrupted {t['clean_corrupted_s']:.1f}s, observe {t['observe_s']:.1f}s, "
        f"reduce {t['reduce_s']:.1f}s, solve {t['solve_s']:.1f}s"
    )
    for line in lasso.details.report:
        print("  " + line)
    print(f"  => CircuitLasso is {ig_seconds / lasso_seconds:.1f}x faster than EAP-IG here (paper: 3.0x)")

    if args.lambdas:
        from circuitviz.lasso.observations import collect_observations, observation_texts
        from circuitviz.lasso.units import build_component_problem, component_hook_names

        print("  lambda sweep on the same observations (solve time, selected edges):")
        from circuitviz.core.graph import GraphSpec
        from circuitviz.core.tasks import prepare_task

        spec = GraphSpec.from_model(model)
        prepared = prepare_task(model, task)
        texts = observation_texts(task, 8)
        observations = collect_observations(model, spec, prepared, texts, component_hook_names(model, spec))
        problem = build_component_problem(
            model, spec, observations.writers, observations.activations, observations.metric, 4
        )
        for value in ("0.05", "0.1", "0.2", "0.3", "auto"):
            fit = fit_sem(problem, value)
            print(
                f"    lambda {value:<5} {fit.info['solve_s']:6.1f}s  "
                f"{int(((fit.selected.cpu() > 0) & spec.edge_mask).sum())} edges (median lambda "
                f"{fit.info['lambda_chosen_median']:.3f})"
            )
        if not args.skip_solvers:
            bench_solvers(problem.predictors, problem.targets, problem.column_allowed())

    saes = assets.saes_dir(EMBEDDED_MODEL)
    if saes.is_dir():
        method = get_method("circuit-lasso")
        config = method.make_config({"units": "sae", "layers": "3,9"})
        start = time.perf_counter()
        try:
            result = method.run_on(model, task, config, budgets=(500,), model_id=EMBEDDED_MODEL)
        except ValueError as error:
            print(f"  SAE units: {error}")
            return
        circuit = result.details.feature_circuit
        print(
            f"  SAE units (layers {circuit['layers']}): {time.perf_counter() - start:.1f}s, features used "
            f"{circuit['features_used']} of active {circuit['features_active']}, {len(circuit['nodes'])} "
            f"features and {len(circuit['edges'])} edges on paths into the metric"
        )
        for edge in circuit["edges"][:5]:
            print(f"    {edge['source']} -> {edge['target']}  {edge['coefficient']:+.3f}")


def bench_planted(args) -> None:
    from circuitviz.bench.planted_benchmark import format_table, run_bench, write_report

    methods = [name for name in args.methods.split(",") if name]
    print(
        f"\n== planted circuits: {args.planted_cases} cases, methods {', '.join(methods)} ({load_average()})"
    )
    command = f"python -m circuitviz planted-bench --methods {','.join(methods)} --cases {args.planted_cases}"
    report = run_bench(methods, args.planted_cases, command=command)
    print(format_table(report))
    print(f"  ({report.seconds:.0f}s in all)")
    if args.write_assets:
        write_report(report, *assets.planted_bench_files())
        print("  wrote assets/planted_bench.json and assets/planted_bench.md")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-model", action="store_true", help="no embedded-model section")
    parser.add_argument("--skip-solvers", action="store_true", help="no solver comparison")
    parser.add_argument("--lambdas", action="store_true", help="also sweep lambda on the embedded model")
    parser.add_argument("--planted-cases", type=int, default=20, help="0 skips the planted benchmark")
    parser.add_argument("--methods", default="eap,eap-ig,circuit-lasso,acc++")
    parser.add_argument("--write-assets", action="store_true", help="store the planted table in assets/")
    args = parser.parse_args()
    print(machine_line())
    if not args.skip_model:
        bench_model(args)
    if not args.skip_solvers and (args.skip_model or not args.lambdas):
        bench_solvers(*synthetic_problem())
    if args.planted_cases > 0:
        bench_planted(args)


if __name__ == "__main__":
    main()
