"""A Phi-3 checkpoint that rotates part of each head (``partial_rotary_factor``, 0.75 in
Phi-4-mini) loads as a HookedTransformer whose logits are transformers' own: TransformerLens 3.9's
converter rotated the whole head, and the logits of a random Phi-3 with 0.5 were 4.2e-3 (of the
largest) away, silently."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_families import family_config
from circuitviz.bench.toy_models import IOI_TASK, word_tokenizer
from circuitviz.models import load_model
from circuitviz.models.adapter import adapter_of
from circuitviz.models.bridge_adapter import is_bridge


def _saved_phi3(folder, factor: float):
    from transformers import AutoModelForCausalLM

    config = family_config("phi3")
    config.rope_parameters = {**(config.rope_parameters or {}), "partial_rotary_factor": factor}
    config.partial_rotary_factor = factor
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(str(folder))
    word_tokenizer().save_pretrained(str(folder))
    return model


@pytest.mark.parametrize("factor", [0.5, 1.0])
def test_a_phi3_rotating_part_of_each_head_gives_transformers_logits(tmp_path, factor):
    hf_model = _saved_phi3(tmp_path, factor)
    model = load_model(str(tmp_path))
    assert not is_bridge(model)
    assert model.cfg.rotary_dim == int(model.cfg.d_head * factor)
    tokens = adapter_of(model).to_tokens(IOI_TASK.clean)
    with torch.no_grad():
        expected, got = hf_model(tokens).logits, adapter_of(model).logits(tokens)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
