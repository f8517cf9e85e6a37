"""Every method on a real CUDA device against the CPU: what tests/test_device.py simulates, on the
hardware. Marked ``gpu``: skipped without CUDA (conftest.py); on a GPU machine, ``pytest -m gpu``.

The same comparison as the GPU check's first part (benchmarks/gpu_check.py), as a test: tiny
float64 models, scores and curve equal to 1e-9, every budget's circuit identical.
"""

from __future__ import annotations

import pytest

from circuitviz.bench.toy_models import IOI_TASK, compare_results, tiny_model
from circuitviz.methods import available_methods, get_method

SHAPES = ("gpt2", "gemma", "llama")
BUDGETS = (3, 8, 20, 60)
TOLERANCE = 1e-9


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(available_methods()))
def test_every_method_on_cuda_equals_the_cpu(shape, name):
    method = get_method(name)
    fields = set(method.Config.__dataclass_fields__)
    config = method.make_config({"cache_scores": False} if "cache_scores" in fields else {})
    on_host = method.run_on(tiny_model(shape, seed=0), IOI_TASK, config, budgets=BUDGETS)
    on_device = method.run_on(tiny_model(shape, seed=0).to("cuda"), IOI_TASK, config, budgets=BUDGETS)
    assert on_device.device.startswith("cuda")
    gap = compare_results(on_device, on_host)
    assert gap["circuits_equal"], gap
    assert gap["metrics"] <= TOLERANCE, gap
    if method.scores_are_exact:  # Edge Pruning's scores are where its optimisation ended
        assert gap["scores"] <= TOLERANCE, gap
