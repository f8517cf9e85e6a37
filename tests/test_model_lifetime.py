"""A model nobody holds any more is freed, whatever ran on it.

circuitviz keeps what it learns about a model (its adapter, its last prompt runs, chunk sizes,
ACC++'s SVDs) in weak dictionaries keyed by the model. A value that holds its key strongly keeps
the entry, and so the model, alive for good: the adapter did, and on a GPU server every model a
user switched away from stayed on the card (27 GiB of a 30 GiB peak still allocated after an 8B
model's run in the GPU check of 2026-12-04).
"""

from __future__ import annotations

import gc
import weakref

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.methods import get_method
from circuitviz.models.adapter import adapter_of


def freed_after(make_model, methods) -> bool:
    model = make_model()
    for name in methods:
        method = get_method(name)
        fields = set(method.Config.__dataclass_fields__)
        settings = {
            key: value
            for key, value in {"cache_scores": False, "ig_steps": 2, "n_paraphrases": 2}.items()
            if key in fields
        }
        method.run_on(model, IOI_TASK, method.make_config(settings), budgets=[5, 20])
    assert adapter_of(model).model is model
    reference = weakref.ref(model)
    del model
    gc.collect()
    return reference() is None


@pytest.mark.parametrize("methods", [("eap-ig", "exact"), ("acc++",), ("ibon",)])
def test_a_hooked_transformer_is_freed_once_dropped(methods):
    assert freed_after(lambda: tiny_model("gemma", seed=0), methods)


def test_a_bridge_is_freed_once_dropped():
    from circuitviz.bench.toy_families import random_hf_model
    from circuitviz.bench.toy_models import word_tokenizer
    from circuitviz.models.bridge import bridge_from_hf

    def bridge():
        return bridge_from_hf(random_hf_model("llama3", seed=0), word_tokenizer(), name="random-llama3")

    assert freed_after(bridge, ("eap", "eap-ig"))


def test_an_adapter_whose_model_was_freed_says_so():
    model = tiny_model("gpt2", seed=0)
    adapter = adapter_of(model)
    del model
    gc.collect()
    with pytest.raises(ReferenceError, match="was freed"):
        assert adapter.model is not None
