"""How long loading an embedded model takes, first (GGUF conversion) and second (disk cache).

Each load runs in its own process, so peak resident memory (ru_maxrss) belongs to that load
alone. Wall time depends on what else the machine runs; CPU time (user + system) less so.

    python benchmarks/bench_load.py                   # both embedded models, fresh cache
    python benchmarks/bench_load.py --keep-cache      # use $CIRCUITVIZ_CACHE / ~/.cache as is
    python benchmarks/bench_load.py --models gemma-3-270m
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

# light on purpose (no torch): the child times its own import of circuitviz.models
from circuitviz.bench.harness import peak_rss_gib


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_one_load(model_id: str) -> dict:
    """Load model_id once in this process and return the figures (run as a child process)."""
    start_wall = time.perf_counter()
    from circuitviz.models import load_model

    import_wall = time.perf_counter() - start_wall
    start_wall, start_cpu = time.perf_counter(), _cpu_seconds()
    model = load_model(model_id)
    load_wall, load_cpu = time.perf_counter() - start_wall, _cpu_seconds() - start_cpu

    del model
    return {
        "model": model_id,
        "import_s": import_wall,
        "load_wall_s": load_wall,
        "load_cpu_s": load_cpu,
        "peak_rss_mib": peak_rss_gib() * 1024,
    }


def _run_child(model_id: str, environment: dict[str, str]) -> dict:
    """One load in a fresh interpreter; its figures come back as one JSON line."""
    completed = subprocess.run(
        [sys.executable, __file__, "--child", model_id],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["gemma-3-270m", "smollm2-135m"])
    parser.add_argument(
        "--keep-cache", action="store_true", help="do not start from an empty conversion cache"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        print(json.dumps(measure_one_load(arguments.child)))
        return

    environment = dict(os.environ)  # with circuitviz.bench.harness's offline defaults
    with tempfile.TemporaryDirectory(prefix="circuitviz-bench-") as scratch:
        if not arguments.keep_cache:
            environment["CIRCUITVIZ_CACHE"] = scratch
        print(f"cache: {environment.get('CIRCUITVIZ_CACHE', '~/.cache/circuitviz')}")
        print(f"{'model':<14} {'load':<7} {'wall s':>7} {'cpu s':>7} {'peak RSS MiB':>13} {'import s':>9}")
        for model_id in arguments.models:
            for label in ("first", "second"):
                figures = _run_child(model_id, environment)
                print(
                    f"{model_id:<14} {label:<7} {figures['load_wall_s']:>7.1f} "
                    f"{figures['load_cpu_s']:>7.1f} {figures['peak_rss_mib']:>13.0f} "
                    f"{figures['import_s']:>9.1f}"
                )


if __name__ == "__main__":
    main()
