"""EAP, EAP-IG and exact patching against a second implementation written from their definitions.

The re-derivation (tests/reference_patching.py) shares no code with ``circuitviz.engine``:
it reads writers from TransformerLens's cache and patches or differentiates readers at
TransformerLens's own hooks.

Definitions (u a writer, v a reader, z_u and z'_u its output on the clean and corrupted prompt,
L the metric: answer logit minus the foils' mean logit at the last position):
- exact(u -> v) = L(clean run with v's input + z'_u - z_u) - L(clean run);
- EAP(u -> v) = sum over positions of (z'_u - z_u) . dL/d(input of v), at the clean run;
- EAP-IG(u -> v) with m steps = the same with dL/d(input of v) averaged over m runs whose
  embedding is e' + a (e - e'), e and e' the clean and corrupted embeddings. We take
  a = k/m for k = 1..m (so m = 1 is EAP); the public EAP-IG library takes k = 0..m-1. Their
  difference is exactly (g(1) - g(0)) . (z'_u - z_u) / m, g(a) the gradient at a.
"""

from __future__ import annotations

import pytest
import torch
from reference_patching import attribution_scores, exact_scores

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.methods import get_method

SHAPES = ["gpt2", "llama", "gemma"]


@pytest.fixture(scope="module", params=SHAPES)
def shaped(request):
    model = tiny_model(request.param, seed=1)
    return model, GraphSpec.from_model(model), prepare_task(model, IOI_TASK)


def ours(model, method: str, **settings) -> torch.Tensor:
    chosen = get_method(method)
    return chosen.run_on(model, IOI_TASK, chosen.make_config(settings), budgets=[1]).scores.double()


def assert_every_edge(spec, mine, theirs, scale=None):
    """Equal on every edge up to float32 rounding: results store scores as float32, so each may
    be off by half a float32 step (6e-8 of its size; 1e-6 allowed); ``scale`` sets the size for
    differences of scores."""
    size = theirs.abs() if scale is None else scale.abs()
    gaps = ((mine - theirs).abs() - 1e-6 * size)[spec.edge_mask]
    worst = int(gaps.argmax())
    assert float(gaps.max()) <= 1e-12, (
        f"{spec.edge_names[worst]}: {float(mine[spec.edge_mask][worst]):.9g} vs {float(theirs[spec.edge_mask][worst]):.9g}"
    )
    assert float(theirs[spec.edge_mask].abs().max()) > 1e-3  # the comparison is not of zeros


def test_exact_scores_equal_separately_patched_forward_passes(shaped):
    """Every edge's exact score is the metric change of its own patched forward pass (the
    circuit evaluator is not used to check itself)."""
    model, spec, prepared = shaped
    assert_every_edge(spec, ours(model, "exact"), exact_scores(model, spec, prepared))


def test_eap_equals_its_definition_on_every_edge(shaped):
    """What the public EAP-IG library computes as EAP, edge by edge (float64, every shape)."""
    model, spec, prepared = shaped
    assert_every_edge(spec, ours(model, "eap"), attribution_scores(model, spec, prepared, [1.0]))


def test_eap_ig_with_one_step_is_eap(shaped):
    """The documented identity: with a = k/m, k = 1..m, one step is the gradient at the clean run."""
    model, spec, _ = shaped
    assert torch.allclose(ours(model, "eap-ig", ig_steps=1), ours(model, "eap"), rtol=0, atol=1e-12)


def test_eap_ig_equals_its_definition_and_the_public_librarys_sum_up_to_one_step():
    """On a Llama-shaped model, edge by edge: our EAP-IG is the k = 1..m sum, and it differs from
    the k = 0..m-1 sum the public library computes by exactly (g(1) - g(0)) . (z' - z) / m."""
    model = tiny_model("llama", seed=1)
    spec, prepared = GraphSpec.from_model(model), prepare_task(model, IOI_TASK)
    steps = 5
    mine = ours(model, "eap-ig", ig_steps=steps)
    assert_every_edge(
        spec, mine, attribution_scores(model, spec, prepared, [k / steps for k in range(1, steps + 1)])
    )
    library = attribution_scores(model, spec, prepared, [k / steps for k in range(steps)])
    at_clean = attribution_scores(model, spec, prepared, [1.0])
    at_corrupted = attribution_scores(model, spec, prepared, [0.0])
    assert_every_edge(spec, mine - library, (at_clean - at_corrupted) / steps, scale=mine)
