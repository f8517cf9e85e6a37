"""What circuitviz knows of particular architectures, each fact stated once, with why.

Architectures are named as ``transformers`` names their causal-LM class (the name in a
checkpoint's ``config.json`` ``architectures``, TransformerLens's ``cfg.original_architecture``
and the bridge's ``cfg.architecture``). Every place that treats an architecture by name reads it
here: a family added to one list and missed in another gave wrong numbers without a word (EXAONE
4 and FlexOlmo, whose norms come after their writers as OLMo 2's do, were known by OLMo's names
alone until 2026-12-07). ``tests/test_architectures.py`` checks each set against what
``transformers`` and TransformerLens build.

Facts read from the model itself are not listed: a norm before *and* after a sublayer (Gemma 2
and 3, GLM-4) is the bridge's ``ln1_post``/``ln2_post`` and TransformerLens's
``use_normalization_before_and_after``; a q/k-norm per head is its width.
"""

from __future__ import annotations

# Attention and the MLP read the residual stream unnormalised, and a norm on each one's own
# output comes before the residual add (OLMo 2's layout): the bridge's adapters for these (all
# subclasses of TransformerLens's OLMo 2 adapter) map ``ln1``/``ln2`` to those norms after the
# sublayers, as TransformerLens's HookedTransformer does for OLMo 2 and 3. Read as pre-norms,
# every edge into a head or MLP would be normalised twice and every head's output not at all.
NORMS_AFTER_WRITERS = frozenset(
    {"Olmo2ForCausalLM", "Olmo3ForCausalLM", "FlexOlmoForCausalLM", "Exaone4ForCausalLM"}
)

# A q- and k-norm over a token's whole query or key vector (all heads together, as OLMo 2 projects
# it), whose grouped keys circuitviz ungroups by repeating the norm's weight per query head; ACC++
# and AtP*'s QK fix, which recompute one head's scores alone, refuse these by name. A whole-vector
# norm elsewhere (MiniMax-M2's) is refused at load (``bridge_checks.require_head_wise_qk_norms``).
WHOLE_VECTOR_QK_NORMS = frozenset(
    {"OlmoeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM", "FlexOlmoForCausalLM"}
)

# what a sentence calls each architecture named above
LABELS = {
    "OlmoeForCausalLM": "OLMoE",
    "Olmo2ForCausalLM": "OLMo 2",
    "Olmo3ForCausalLM": "OLMo 3",
    "FlexOlmoForCausalLM": "FlexOlmo",
    "Exaone4ForCausalLM": "EXAONE 4",
}

# TransformerLens 3.9 has a HookedTransformer config for these only under their official names
# (``loading_from_pretrained`` looks the size up), so a checkpoint is matched to one of them
NAME_ONLY_ARCHITECTURES = frozenset({"GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM"})

# TransformerLens 3.9's HookedTransformer converter for these reads no rope scaling: a Phi-3 with
# ``longrope`` (Phi-3-mini-128k, Phi-3.5, Phi-4-mini; "su" is its old name) divides each rotary
# frequency by a factor and scales the tables, which the converted model leaves out (a random
# Phi-3 gave logits 2.5e-3 of the largest off transformers', where the bridge agreed to 1.4e-7);
# such checkpoints go through the bridge, which rotates with the model's own tables
HOOKED_IGNORES_ROPE_SCALING = frozenset({"Phi3ForCausalLM"})

# parallel blocks whose attention and MLP read one norm, which TransformerLens's HookedTransformer
# converts (its MLP gets an input hook of its own there); for the rest (StableLM with
# use_parallel_residual, Falcon-RW's parallel layout) the bridge's refusal named this way out,
# which the load had just found closed ("it has no converter for StableLmForCausalLM")
HOOKED_CONVERTS_SHARED_NORM = frozenset({"PhiForCausalLM", "GPTJForCausalLM"})

# architectures TransformerLens 3.9's bridge is known to compute otherwise than transformers, where
# the logits check at load may not see it: with norm weights of 1 (transformers' initialisation)
# HunYuan's two orders agree, so a random model passes; a trained one differs by as little as
# its norm weights differ from 1
DIVERGENT = {
    "HunYuanDenseV1ForCausalLM": "it normalises each head's queries and keys before the rotation, "
    "HunYuan after",
}

# architectures whose residual stream is no sum of its writers' outputs, which circuitviz's edges
# are: GPT-1 (the original Transformer's post-norm) normalises the residual itself after each
# sublayer; TransformerLens's bridge failed on it with "no attribute 'ln_final'"
NO_RESIDUAL_SUM = {
    "OpenAIGPTLMHeadModel": "GPT-1 normalises the residual stream itself after each attention and MLP",
}


def labels(architectures) -> str:
    """'OLMo 2, OLMo 3 and OLMoE': the architectures' names for a sentence, in a fixed order."""
    names = sorted(LABELS.get(name, name) for name in architectures)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def norms_after_writers(architecture) -> bool:
    """Whether ``architecture``'s attention and MLP read the residual unnormalised, each with a
    norm on its own output (OLMo 2's layout)."""
    return str(architecture or "") in NORMS_AFTER_WRITERS


def whole_vector_qk_norm(architecture) -> bool:
    """Whether ``architecture`` normalises each token's whole query and key vectors across its
    heads (OLMo's q/k-norms), which circuitviz follows."""
    return str(architecture or "") in WHOLE_VECTOR_QK_NORMS
