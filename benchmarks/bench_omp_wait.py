"""EAP-IG on the IOI prompt (20 steps, six budgets, torch's default two threads here), wall seconds
of three runs after a warm-up: the figure OpenMP's wait policy moves.

Run it under each setting, on a quiet machine and beside one busy process
(``python3 -c "while True: pass" &``), with the variables set for the process:

    OMP_WAIT_POLICY=ACTIVE .venv/bin/python benchmarks/bench_omp_wait.py
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_omp_wait.py
    GOMP_SPINCOUNT=10000 .venv/bin/python benchmarks/bench_omp_wait.py
    .venv/bin/python benchmarks/bench_omp_wait.py      # circuitviz's default (GOMP_SPINCOUNT=10000)

torch is imported before circuitviz here, so circuitviz's default applies only through the
variables given on the command line.
"""

import time

import torch

from circuitviz.methods import get_method
from circuitviz.models import EMBEDDED_MODEL, load_model
from circuitviz.query.families import EXAMPLE_TASKS

model = load_model(EMBEDDED_MODEL, device="cpu")
method = get_method("eap-ig")
config = method.make_config({"ig_steps": 20})
method.run_on(model, EXAMPLE_TASKS["ioi"], config, budgets=[100])  # warm-up
seconds = []
for _ in range(3):
    start = time.perf_counter()
    method.run_on(model, EXAMPLE_TASKS["ioi"], config, budgets=[20, 50, 100, 200, 500, 1000])
    seconds.append(time.perf_counter() - start)
print(torch.get_num_threads(), "threads; wall s", [round(s, 2) for s in seconds])
