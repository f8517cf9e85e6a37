"""Memory held after a model is dropped: load the embedded model, run EAP on one prompt, drop it,
three times, printing the process's resident memory after each load and each drop.

    python benchmarks/bench_model_lifetime.py [--rounds 3] [--device cpu]

The app keeps the last two models asked for (``ui/loaders.py``) and relies on the third being
freed when it leaves that cache. Before 2026-12-04 no model was ever freed (the adapter registry
held each one), so the memory grew by a model with every load.
"""

from __future__ import annotations

import argparse
import gc
import weakref

import torch

from circuitviz.core.tasks import PromptTask
from circuitviz.methods import get_method
from circuitviz.models import EMBEDDED_MODEL, load_model

TASK = PromptTask(
    "The Eiffel Tower is in the city of", "The Colosseum is in the city of", " Paris", (" Rome",)
)


def resident_gib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024**2
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"start: resident {resident_gib():.2f} GiB")
    for index in range(args.rounds):
        model = load_model(EMBEDDED_MODEL, device=args.device)
        get_method("eap").run_on(model, TASK, {}, budgets=[50])
        loaded = resident_gib()
        reference = weakref.ref(model)
        del model
        gc.collect()
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        print(
            f"round {index}: loaded and ran, resident {loaded:.2f} GiB; dropped: "
            f"{'freed' if reference() is None else 'STILL ALIVE'}, resident {resident_gib():.2f} GiB"
        )


if __name__ == "__main__":
    main()
