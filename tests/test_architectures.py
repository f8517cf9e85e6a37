"""Every architecture circuitviz names is classified once (circuitviz/models/architectures.py) and
consistently with what ``transformers`` builds and TransformerLens maps: a family known to one
list and missed by another gave figures of another function without a word (EXAONE 4 and
FlexOlmo, OLMo 2's layout, were read with their post-norms as pre-norms)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import torch
import transformers

from circuitviz.bench.toy_families import CANDIDATE_FAMILIES, FAMILIES, family_config
from circuitviz.models import architectures
from circuitviz.models.architectures import LABELS, NORMS_AFTER_WRITERS, WHOLE_VECTOR_QK_NORMS

FACT_SETS = {
    "NORMS_AFTER_WRITERS": NORMS_AFTER_WRITERS,
    "WHOLE_VECTOR_QK_NORMS": WHOLE_VECTOR_QK_NORMS,
    "NAME_ONLY_ARCHITECTURES": architectures.NAME_ONLY_ARCHITECTURES,
    "HOOKED_CONVERTS_SHARED_NORM": architectures.HOOKED_CONVERTS_SHARED_NORM,
    "HOOKED_IGNORES_ROPE_SCALING": architectures.HOOKED_IGNORES_ROPE_SCALING,
    "DIVERGENT": frozenset(architectures.DIVERGENT),
    "NO_RESIDUAL_SUM": frozenset(architectures.NO_RESIDUAL_SUM),
}
# a whole-vector q/k-norm circuitviz does not follow, refused at load (bridge_checks)
REFUSED_WHOLE_VECTOR = {"MiniMaxM2ForCausalLM"}


@pytest.mark.parametrize("fact", sorted(FACT_SETS))
def test_every_name_is_a_transformers_class(fact):
    missing = sorted(name for name in FACT_SETS[fact] if not hasattr(transformers, name))
    assert not missing, f"{fact} names {missing}, which transformers does not have"


def test_every_name_a_sentence_uses_has_a_label():
    assert NORMS_AFTER_WRITERS | WHOLE_VECTOR_QK_NORMS <= set(LABELS)
    assert architectures.labels(["Olmo2ForCausalLM", "OlmoeForCausalLM"]) == "OLMo 2 and OLMoE"


def test_the_bridge_adapters_with_norms_after_their_writers_are_the_ones_named():
    """TransformerLens's OLMo 2 bridge adapter maps ``ln1``/``ln2`` to the norms after attention and
    the MLP; every adapter built on it (EXAONE 4's, FlexOlmo's) is read that way or not at all."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES
    from transformer_lens.model_bridge.supported_architectures.olmo2 import Olmo2ArchitectureAdapter

    built_on_olmo2 = {
        name
        for name, adapter in SUPPORTED_ARCHITECTURES.items()
        if issubclass(adapter, Olmo2ArchitectureAdapter)
    }
    assert built_on_olmo2 == set(NORMS_AFTER_WRITERS)


def test_hooked_transformers_post_norms_are_among_the_ones_named():
    from transformer_lens.components.transformer_block import POST_NORM_ARCHITECTURES

    assert set(POST_NORM_ARCHITECTURES) <= NORMS_AFTER_WRITERS


def test_the_reference_keeps_the_same_post_norm_list():
    """tests/reference_patching.py shares no code with the engine, so it keeps its own list."""
    from reference_patching import POST_NORM_ARCHITECTURES

    assert set(POST_NORM_ARCHITECTURES) == NORMS_AFTER_WRITERS


@functools.cache
def _layout(family: str) -> tuple[str, bool, bool]:
    """(architecture, whether its first block's only norms come after attention and the MLP,
    whether it normalises whole query or key vectors), from the model transformers builds (on the
    meta device: shapes only)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(family_config(family))
    blocks = next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList))
    block = blocks[0]
    parts = {name for name, _ in block.named_children()}
    after_only = {"post_attention_layernorm", "post_feedforward_layernorm"} <= parts and not (
        parts & {"input_layernorm", "pre_feedforward_layernorm", "ln_1", "attention_norm"}
    )
    whole = False
    for module in model.modules():
        head_dim = getattr(module, "head_dim", None)
        for part in ("q_norm", "k_norm"):
            weight = getattr(getattr(module, part, None), "weight", None)
            if head_dim and weight is not None and weight.dim() == 1 and weight.shape[0] > head_dim:
                whole = True
    return type(model).__name__, after_only, whole


@pytest.mark.parametrize("family", sorted({**FAMILIES, **CANDIDATE_FAMILIES}))
def test_each_toy_family_is_classified_as_transformers_builds_it(family):
    try:
        architecture, after_only, whole = _layout(family)
    except Exception as error:  # noqa: BLE001  (a family this transformers cannot build)
        pytest.skip(f"transformers cannot build {family}: {type(error).__name__}")
    assert after_only == (architecture in NORMS_AFTER_WRITERS), architecture
    if architecture in WHOLE_VECTOR_QK_NORMS:
        assert whole, architecture
    if whole:
        assert architecture in WHOLE_VECTOR_QK_NORMS | REFUSED_WHOLE_VECTOR, architecture


def test_no_other_module_names_these_architectures():
    """The facts of a norm's or a q/k-norm's place and of a function the bridge cannot give are
    stated once: no module of the package but architectures.py spells a name they hold (the toy
    families' builders excepted: they name what they build). Phi and Gemma 3 are named elsewhere
    for other facts (a config field TransformerLens reads, Gemma 3's control tokens)."""
    names = (
        NORMS_AFTER_WRITERS | WHOLE_VECTOR_QK_NORMS | FACT_SETS["DIVERGENT"] | FACT_SETS["NO_RESIDUAL_SUM"]
    )
    package = Path(architectures.__file__).parents[1]
    found = []
    for path in package.rglob("*.py"):
        if path.name == "architectures.py" or "bench" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(package)}: {name}" for name in names if re.search(rf'"{name}"', text)]
    assert not found, found
