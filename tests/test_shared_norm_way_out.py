"""A parallel block whose attention and MLP read one norm, refused through the bridge: the sentence
names the HookedTransformer as the way out only for an architecture TransformerLens converts.
StableLM with ``use_parallel_residual`` was told to "load it as a HookedTransformer where
TransformerLens converts it (Phi, GPT-J)" right after the load had found no converter for it."""

from __future__ import annotations

import pytest
import torch
from sentences import assert_one_sentence

from circuitviz.bench.toy_families import random_hf_model
from circuitviz.bench.toy_models import word_tokenizer
from circuitviz.models import ModelLoadError
from circuitviz.models.bridge import bridge_from_hf


def _parallel_stablelm():
    from transformers import AutoModelForCausalLM

    from circuitviz.bench.toy_families import family_config

    config = family_config("stablelm")
    config.use_parallel_residual = True
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="eager")


def test_an_architecture_the_hooked_transformer_cannot_convert_is_not_sent_there():
    with pytest.raises(ModelLoadError, match="read one shared norm") as refused:
        bridge_from_hf(_parallel_stablelm(), word_tokenizer(), name="random-stablelm")
    message = str(refused.value)
    assert_one_sentence(message)
    assert "the HookedTransformer has no converter for it either" in message
    assert "load it as a HookedTransformer" not in message and "Phi, GPT-J" not in message


def test_phi_is_sent_to_the_hooked_transformer_that_converts_it():
    with pytest.raises(ModelLoadError, match="read one shared norm") as refused:
        bridge_from_hf(
            random_hf_model("phi", seed=1, dtype=torch.float32), word_tokenizer(), name="random-phi"
        )
    message = str(refused.value)
    assert_one_sentence(message)
    assert "load it as a HookedTransformer, which TransformerLens converts for it" in message
