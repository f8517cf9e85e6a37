"""The control tokens of a model's vocabulary: tokens that mark a turn, an image or the end of a
text rather than being text ('<eos>', '<pad>', '<mask>', Gemma's '<start_of_turn>' and
'<start_of_image>', SmolLM2's '<|im_start|>'), which the app neither offers nor takes as a run's
answer or foil.

A look at the name cannot tell them: Gemma's '<strong>' and '<start_of_image>' are both one token
matched whole, and both decode and re-encode to themselves. What the model's files know is used:

- the tokenizer's special tokens (its added tokens marked special, and the tokens it names, such
  as its end-of-text and padding tokens): every control token of SmolLM2-135M, and Gemma-3-270M's
  '<pad>', '<eos>', '<bos>', '<unk>', '<mask>', '<start_of_turn>', '<end_of_turn>' and '<unusedN>';
- the image and audio markers the configuration of the model's family names by id (Gemma 3's
  ``boi_token_index`` and ``eoi_token_index``: '<start_of_image>' and '<end_of_image>'). Gemma's
  tokenizer, in its GGUF file as in its tokenizer.json, marks these two exactly as it marks the
  HTML tags ('<strong>': user-defined, not special), so only the family's configuration tells
  them apart. An id is taken only where the tokenizer holds it as an added token matched whole;
- the family's reserved markers no file marks (``MARKER_NAMES``): Gemma 3's '[multimodal]' (id 5,
  between '<mask>' and '<unused0>'), which the gemma library's tokenizer lists with its special ids
  and the converted files hold as they hold '<strong>'. The model gives it next to no chance
  (1e-15 after "Here is the photo:", rank 255,187 of 262,144; 2e-8 right after it is typed), so it
  was never offered, but typed into the answer or foil box it was taken as text. Gemma 3's image
  placeholder ('<image_soft_token>', ``image_token_index`` 262144) lies outside the text model's
  vocabulary, and Gemma 3 names no audio token; SmolLM2's 17 added tokens are all marked special.
"""

from __future__ import annotations

import functools

# an architecture's multimodal family: its configuration names the ids of its image and audio markers
MARKER_FAMILIES = {"Gemma3ForCausalLM": "gemma3", "Gemma3ForConditionalGeneration": "gemma3"}
MARKER_FIELDS = ("boi_token_index", "eoi_token_index", "image_token_index", "audio_token_index")
# a family's reserved markers that neither its tokenizer's files nor its configuration mark
MARKER_NAMES = {"gemma3": ("[multimodal]",)}


def control_token_ids(model) -> frozenset[int]:
    """The ids of ``model``'s control tokens (empty where it has no tokenizer)."""
    from .adapter import adapter_of

    tokenizer = adapter_of(model).tokenizer
    if tokenizer is None:
        return frozenset()
    architecture = getattr(getattr(model, "cfg", None), "original_architecture", None)
    return _control_ids(tokenizer, architecture)


def control_token_texts(model) -> frozenset[str]:
    """The control tokens' texts, as the app names a token (``ModelAdapter.decode``)."""
    from .adapter import adapter_of

    tokenizer = adapter_of(model).tokenizer
    if tokenizer is None:
        return frozenset()
    return _control_texts(tokenizer, getattr(getattr(model, "cfg", None), "original_architecture", None))


@functools.lru_cache(maxsize=8)
def _control_texts(tokenizer, architecture: str | None) -> frozenset[str]:
    from .tokens import token_text

    return frozenset(token_text(tokenizer, [token_id]) for token_id in _control_ids(tokenizer, architecture))


@functools.lru_cache(maxsize=8)
def _control_ids(tokenizer, architecture: str | None) -> frozenset[int]:
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids = {int(token_id) for token_id, token in added.items() if getattr(token, "special", False)}
    ids |= {int(token_id) for token_id in getattr(tokenizer, "all_special_ids", ()) or ()}
    ids |= {token_id for token_id in _family_marker_ids(architecture) if token_id in added}
    named = MARKER_NAMES.get(MARKER_FAMILIES.get(architecture or "", ""), ())
    ids |= {int(token_id) for token_id, token in added.items() if getattr(token, "content", None) in named}
    return frozenset(ids)


def _family_marker_ids(architecture: str | None) -> list[int]:
    """The marker ids the configuration of ``architecture``'s multimodal family names (its defaults:
    a text-only checkpoint's own configuration names none)."""
    family = MARKER_FAMILIES.get(architecture or "")
    if family is None:
        return []
    from transformers import AutoConfig

    config = AutoConfig.for_model(family)
    return [value for field in MARKER_FIELDS if isinstance(value := getattr(config, field, None), int)]
