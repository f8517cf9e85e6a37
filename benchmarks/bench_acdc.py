"""ACDC's cost on the embedded Gemma-3-270M, per prompt, in CPU seconds of the process.

For each of the yardstick's prompts (``bench_bon.PROMPTS``) the walk runs once at threshold τ,
its rows started at the tested reader's block (the default); it prints the CPU and wall seconds
of the walk, the patched rows and batched passes, the edges tested and kept, and where the time
went by the tested readers' block. ``--check N`` first compares the walk's first N batched passes
with and without the layer start on the first prompt (the largest change of a metric), and
``--whole`` runs the walk on whole passes instead (the cost before the layer start).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_acdc.py --threads 1 --prompts 0
    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_acdc.py --threads 1 --prompts 0-8 --json acdc.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
from bench_bon import PROMPTS  # the yardstick's 9 prompts (a script beside this one)

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_timed
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.engine.layer_start import reader_layers
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods.acdc import ACDC, ACDCConfig, acdc_walk
from circuitviz.methods.base import PREPARE_PASSES


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def chosen(text: str) -> list[int]:
    """``0-8`` or ``0,4`` -> prompt indices."""
    picked = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        picked += list(range(int(low), int(high or low) + 1))
    return picked


class Recorder:
    """Wraps an evaluator's ``metrics`` to add up CPU seconds by the block the batch starts at."""

    def __init__(self, evaluator: Evaluator, spec: GraphSpec, limit: int | None = None):
        self.evaluator, self.layers = evaluator, reader_layers(spec)
        self.spec, self.limit = spec, limit
        self.by_layer: dict[int, list[float]] = {}  # block -> [CPU s, rows]
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []  # (circuits, values) kept for --check
        self.inner = evaluator.metrics

    def metrics(self, circuits, progress=None, from_layer=False):
        if self.limit is not None and len(self.calls) >= self.limit:
            raise StopIteration
        removed = self.spec.tensors(circuits.device).edge_mask & ~circuits
        readers = removed.any(0).any(0).nonzero()[:, 0]
        block = self.layers[int(readers[0])] if readers.numel() else 0
        start = time.process_time()
        values = self.inner(circuits, progress, from_layer)
        entry = self.by_layer.setdefault(block, [0.0, 0])
        entry[0] += time.process_time() - start
        entry[1] += int(circuits.shape[0])
        if self.limit is not None:
            self.calls.append((circuits.clone(), values.clone()))
        return values


def reporter(kind: str, started: float):
    """A progress callback that logs each whole percent of the readers with the CPU seconds so far."""
    mark = [1]

    def progress(phase: str, fraction: float) -> None:
        if 100 * fraction >= mark[0]:
            log(
                f"    {kind}: {100 * fraction:.0f}% of the readers, {time.process_time() - started:.0f} CPU s"
            )
            mark[0] = int(100 * fraction) + 1

    return progress


def check(model, spec, task, tau: float, passes: int) -> str:
    """The first ``passes`` batched passes with rows started at their block against whole passes."""
    evaluator = Evaluator(model, spec, prepare_task(model, task))
    recorder = Recorder(evaluator, spec, passes)
    evaluator.metrics = recorder.metrics
    try:
        acdc_walk(evaluator, spec, tau, 32, from_layer=True)
    except StopIteration:
        pass
    worst, rows = 0.0, 0
    for circuits, values in recorder.calls:
        whole = recorder.inner(circuits)
        worst = max(worst, float((whole - values).abs().max()))
        rows += int(circuits.shape[0])
    span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
    return (
        f"check: {len(recorder.calls)} passes, {rows} rows, blocks {sorted(recorder.by_layer)}: "
        f"largest |started - whole| {worst:.2e} (span {span:.3f}, tau {tau:.4f})"
    )


def pass_cost(model, spec, task, blocks: list[int], sizes: list[int], repeats: int = 4) -> dict:
    """CPU seconds of one batched pass started at each block, for each number of rows: circuits
    like the walk's (95 % of the edges into the readers above the tested one removed, the tested
    reader's edges removed one more per row). A pass of b rows at block l costs about
    (overhead + b) x (L - l) / L; the overhead in rows is ``acdc.PASS_OVERHEAD_ROWS``."""
    evaluator = Evaluator(model, spec, prepare_task(model, task))
    layers, mask = reader_layers(spec), spec.tensors("cpu").edge_mask  # host-side circuits
    found = {}
    for block in blocks:
        generator = torch.Generator().manual_seed(block)
        readers = [r for r in range(spec.n_backward) if layers[r] == block]
        reader = readers[len(readers) // 2]
        later = [layers[r] > block or (layers[r] == block and r > reader) for r in range(spec.n_backward)]
        above = torch.tensor(later, device="cpu")
        drop = torch.rand(mask.shape, generator=generator, device="cpu") < 0.95
        state = mask & ~(drop & above[None, :])
        parents = mask[:, reader].nonzero()[:, 0].flip(0).tolist()
        for size in sizes:
            passes = []
            for i in range(repeats + 1):
                rows = state.expand(size, -1, -1).clone()
                for k in range(size):
                    rows[k:, parents[(i * size + k) % len(parents)], reader] = False
                passes.append(rows)
            evaluator.metrics(passes[0], from_layer=True)  # the clean state, made once
            start = time.process_time()
            for rows in passes[1:]:
                evaluator.metrics(rows, from_layer=True)
            found[f"block {block}, {size} rows"] = round((time.process_time() - start) / repeats, 4)
    return found


def plain_pass_seconds(model, task, repeats: int = 5) -> float:
    """CPU seconds of one plain forward pass of the clean prompt (the median of ``repeats``)."""
    from circuitviz.models.adapter import adapter_of

    adapter = adapter_of(model)
    tokens = prepare_task(model, task).clean_tokens.to(adapter.device)
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            start = time.process_time()
            adapter.blocks(tokens)
            times.append(time.process_time() - start)
    return sorted(times[1:])[repeats // 2]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", default="0", help="prompt indices of bench_bon.PROMPTS, e.g. 0-8")
    parser.add_argument("--threshold", type=float, default=0.01, help="ACDC's tau (relative)")
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--check", type=int, default=0, help="compare the first N passes first")
    parser.add_argument("--whole", action="store_true", help="whole passes (no layer start)")
    parser.add_argument(
        "--pass-cost", action="store_true", help="time batched passes by block and size, then stop"
    )
    parser.add_argument(
        "--guess",
        choices=["eap", "none"],
        default="eap",
        help="what each pass first guesses: the EAP guess (the default) or every edge removed (the walk "
        "before the guess)",
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--save",
        help="save each prompt's kept edges and scores here (torch.save), to compare two runs' decisions",
    )
    add_threads_argument(parser, 1)
    args = parser.parse_args()
    apply_threads(args.threads)
    model, seconds = load_timed()
    spec = GraphSpec.from_model(model)
    log(f"model loaded in {seconds:.1f} s; {torch.get_num_threads()} torch thread(s)")
    if args.pass_cost:
        task = PROMPTS[chosen(args.prompts)[0]][1]
        costs = pass_cost(model, spec, task, [16, 10, 4], [1, 16])
        print(json.dumps({"cpu_s_per_pass": costs, "load": [round(v, 1) for v in os.getloadavg()]}))
        return
    if args.check:
        _, task = PROMPTS[chosen(args.prompts)[0]]
        evaluator = Evaluator(model, spec, prepare_task(model, task))
        span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
        print(check(model, spec, task, args.threshold * span, args.check), flush=True)
    rows, saved = [], {}
    for index in chosen(args.prompts):
        kind, task = PROMPTS[index]
        prepared = prepare_task(model, task)
        evaluator = Evaluator(model, spec, prepared)
        span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
        recorder = Recorder(evaluator, spec)
        evaluator.metrics = recorder.metrics
        load_before = os.getloadavg()
        cpu, wall = time.process_time(), time.perf_counter()
        progress = reporter(kind, cpu)
        guess = None
        if args.guess == "none":
            guess = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu")
        kept, scores, counts = acdc_walk(
            evaluator,
            spec,
            args.threshold * span,
            args.max_batch,
            progress,
            from_layer=not args.whole,
            guess=guess,
        )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        estimate = ACDC().estimate(ACDCConfig(threshold=args.threshold), spec, prepared.n_positions, 0)
        plain = plain_pass_seconds(model, task)
        row = {
            "prompt": index,
            "kind": kind,
            "tokens": prepared.n_positions,
            "threshold": args.threshold,
            "cpu_s": round(cpu, 1),
            "wall_s": round(wall, 1),
            "load_before": [round(v, 1) for v in load_before],
            "load_after": [round(v, 1) for v in os.getloadavg()],
            "patched_rows": counts.rows,
            "batched_passes": counts.passes,
            "edges_tested": counts.tested,
            "edges_kept": counts.kept,
            "mispredicted": counts.mispredicted,
            "guess_passes": counts.guesses,
            "guess": args.guess,
            "kept_after_pruning_dead_ends": None,
            "cpu_s_by_block": {str(k): round(v[0], 1) for k, v in sorted(recorder.by_layer.items())},
            "rows_by_block": {str(k): v[1] for k, v in sorted(recorder.by_layer.items())},
            "layer_start": not args.whole,
            # the estimate's forward-pass equivalents for the walk (less the clean and corrupted
            # runs and the curve) at this process's CPU seconds of one plain pass
            "plain_pass_cpu_s": round(plain, 4),
            "estimated_walk_cpu_s": round((estimate.passes - PREPARE_PASSES) * plain, 1),
        }
        from circuitviz.core.graph import prune

        row["kept_after_pruning_dead_ends"] = int(prune(spec, kept.cpu()).sum())
        rows.append(row)
        saved[index] = {"kept": kept.cpu(), "scores": scores.cpu(), "tau": args.threshold * span}
        print(json.dumps(row), flush=True)
        if args.save:
            torch.save(saved, args.save)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
