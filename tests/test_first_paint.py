"""The first paint's torch-free surface: the model catalog and the graph's size, imported without
torch, and the edge count it shows equal to the graph the engine builds (parallel attention too)."""

import subprocess
import sys
from pathlib import Path

import pytest

from circuitviz.core.graph import GraphSpec
from circuitviz.core.graph_shape import edge_count
from circuitviz.models.catalog import SUPPORTED_MODELS

ROOT = Path(__file__).resolve().parent.parent

# what the sidebar and the page tops import before the prompt box is drawn
FIRST_PAINT = (
    "circuitviz.core.graph_shape",
    "circuitviz.models",
    "circuitviz.models.catalog",
    "circuitviz.ui.sidebar",
    "circuitviz.ui.state",
    "circuitviz.ui.inputs",
    "circuitviz.ui.loaders",
)


def test_what_the_first_paint_imports_imports_no_torch():
    code = (
        "import sys, importlib\n"
        f"for name in {FIRST_PAINT!r}: importlib.import_module(name)\n"
        "from circuitviz.models import SUPPORTED_MODELS\n"
        "print(sorted(m for m in ('torch', 'transformer_lens', 'circuitviz.core.graph') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_models_package_still_gives_its_loader_on_use():
    import circuitviz.models as models
    from circuitviz.models.loading import load_model

    assert models.load_model is load_model
    with pytest.raises(AttributeError):
        models.no_such_name  # noqa: B018


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
@pytest.mark.parametrize("n_layers, n_heads", [(1, 1), (2, 2), (3, 5), (12, 12), (18, 4)])
def test_the_edge_count_is_the_edges_of_the_built_graph(n_layers, n_heads, parallel):
    spec = GraphSpec(n_layers=n_layers, n_heads=n_heads, parallel_attn_mlp=parallel)
    built = int(spec.edge_mask.sum())
    assert edge_count(n_layers, n_heads, parallel) == built == len(spec.edge_names)
    if parallel:  # each layer's H head -> own-MLP edges are gone
        assert built == edge_count(n_layers, n_heads) - n_layers * n_heads


def test_a_parallel_attention_model_has_the_parallel_count():
    from circuitviz.bench.toy_models import tiny_model

    model = tiny_model(n_layers=3, n_heads=2, parallel_attn_mlp=True)
    spec = GraphSpec.from_model(model)
    assert spec.parallel_attn_mlp
    assert spec.n_edges == int(spec.edge_mask.sum()) == edge_count(3, 2, parallel_attn_mlp=True)
    assert "a1.h0->m1" not in spec.edge_names and "a0.h0->m1" in spec.edge_names


def test_the_catalog_counts_the_edges_the_engine_builds():
    for info in SUPPORTED_MODELS.values():
        spec = GraphSpec(info.n_layers, info.n_heads, parallel_attn_mlp=info.parallel_attn_mlp)
        assert info.n_edges == int(spec.edge_mask.sum()), info.id
    assert SUPPORTED_MODELS["pythia-160m"].parallel_attn_mlp
