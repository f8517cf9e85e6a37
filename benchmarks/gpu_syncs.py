"""Where a method's GPU run waits: every read back to the host (a sync), counted by the line of
circuitviz that asked for it, on the Gemma-3-270M shape with random weights (the GPU check's
15-token prompt and 10 budgets).

    python benchmarks/gpu_syncs.py [--methods edge-pruning,circuit-lasso] [--svd]

The Gemma shape is too small to fill a GPU: its runs are bound by kernel launches and by reads
back to the host, each of which waits for every kernel queued before it. A profile of a run with
hundreds of thousands of launches takes minutes to write; torch's sync debug mode warns at each
synchronising call instead, and this script counts the warnings by the innermost circuitviz line
on the stack. ``--svd`` times the randomized reduction's small SVDs (CircuitLasso) on the GPU by
each cuSOLVER driver, on the CPU, and by the eigendecomposition of their Gram matrices.

On a machine without CUDA it runs the same code on the CPU (no sync is reported there).
"""

from __future__ import annotations

import argparse
import collections
import time
import traceback
import warnings

import torch

from circuitviz.bench.toy_models import random_model
from circuitviz.methods import get_method

ROOT_MARK = "circuitviz/"


def count_syncs(model, name: str, task, budgets, device: str) -> tuple[float, collections.Counter]:
    """(wall seconds of a run without the debug mode, syncs by circuitviz line during a second run)."""
    from gpu_check import quiet_config

    method = get_method(name)
    config = quiet_config(method)
    method.run_on(model, task, config, budgets=budgets)  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    method.run_on(model, task, config, budgets=budgets)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    sites: collections.Counter = collections.Counter()
    original = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message):
            return original(message, category, filename, lineno, file, line)
        frames = [f for f in traceback.extract_stack()[:-1] if ROOT_MARK in f.filename.replace("\\", "/")]
        where = frames[-1] if frames else None
        label = f"{where.filename.split(ROOT_MARK)[-1]}:{where.lineno} {where.name}" if where else filename
        sites[label] += 1

    with warnings.catch_warnings():  # restores showwarning and the filters on leaving
        warnings.simplefilter("always")
        warnings.showwarning = record
        if device.startswith("cuda"):
            torch.cuda.set_sync_debug_mode("warn")
        try:
            method.run_on(model, task, config, budgets=budgets)
        finally:
            if device.startswith("cuda"):
                torch.cuda.set_sync_debug_mode("default")
    return seconds, sites


def svd_timings(device: str) -> None:
    """The randomized reduction's last step, ``svd(basis^T x)`` of [n, 12, d], by each way."""
    print(f"\n== the reduction's small SVDs on {device}: [n, 12, d] float64 ==")
    generator = torch.Generator(device="cpu").manual_seed(0)
    for n, d in ((72, 256), (36, 256), (18, 4096)):
        small = torch.randn(n, 12, d, generator=generator, dtype=torch.float64, device="cpu")
        small = small * torch.logspace(0, -3, 12, dtype=torch.float64, device="cpu")[None, :, None]
        reference = torch.linalg.svd(small, full_matrices=False)[1]
        ways = {"cpu": lambda x=small: torch.linalg.svd(x, full_matrices=False)}
        if device.startswith("cuda"):
            moved = small.to(device)
            ways["cuda default"] = lambda x=moved: torch.linalg.svd(x, full_matrices=False)
            for driver in ("gesvd", "gesvdj", "gesvda"):
                ways[f"cuda {driver}"] = lambda x=moved, dr=driver: torch.linalg.svd(
                    x, full_matrices=False, driver=dr
                )
            ways["cuda svd on the cpu"] = lambda x=moved: [
                part.to(device) for part in torch.linalg.svd(x.cpu(), full_matrices=False)
            ]
            ways["cuda eigh of the gram"] = lambda x=moved: torch.linalg.eigh(x @ x.transpose(1, 2))
        for label, way in ways.items():
            way()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(5):
                out = way()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds = (time.perf_counter() - start) / 5
            if "eigh" in label:
                singular = out[0].flip(-1).clamp_min(0).sqrt().cpu()
            else:
                singular = out[1].cpu()
            gap = float((singular - reference).abs().max() / reference.abs().max())
            print(
                f"  n {n:>3} d {d:>5}  {label:<22} {seconds * 1e3:8.2f} ms  singular values within {gap:.1e}"
            )


def main() -> int:
    from gpu_check import CURVE_BUDGETS, prompt_of

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--methods", default="edge-pruning,circuit-lasso,eap-ig")
    parser.add_argument("--top", type=int, default=15, help="how many lines to list per method")
    parser.add_argument("--svd", action="store_true", help="also time the reduction's small SVDs")
    args = parser.parse_args()
    model = random_model("gemma-3-270m", dtype=torch.float32, device=args.device)
    task = prompt_of(15)
    for name in filter(None, (part.strip() for part in args.methods.split(","))):
        seconds, sites = count_syncs(model, name, task, CURVE_BUDGETS, args.device)
        print(
            f"\n== {name} on {args.device}: {seconds:.2f} s, {sum(sites.values())} reads back to the host =="
        )
        for label, count in sites.most_common(args.top):
            print(f"  {count:>7}  {label}")
    if args.svd:
        svd_timings(args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
