"""A GGUF file's ``transformers`` config, read without walking its vocabulary.

Converting an embedded GGUF model (the cold start) had ``transformers`` read the file's metadata
twice with the ``gguf`` package's reader: once for the config, once for the weights. That reader
turns every value of every key into numpy views in Python, and Gemma 3's file holds 262,144 tokens
and 514,906 merges, so the config's pass alone cost about a third of the conversion. The config
needs none of those strings: ``transformers``' newer metadata reader gives a string array as its
length, and the renaming of llama.cpp's keys to the config's is ``transformers``' own table
(``GGUF_TO_TRANSFORMERS_MAPPING``). This module applies that table as the older loader does.

It answers only for the architectures whose config it was checked to rebuild exactly (the two
embedded models'; ``tests/test_gguf_config.py`` compares it with the older loader's key for key);
every other file returns None and ``transformers`` reads it as before.
"""

from __future__ import annotations

from pathlib import Path

# llama.cpp's architecture name -> the config's model_type where the older loader renames it
CHECKED_ARCHITECTURES = {"gemma3": "gemma3_text", "llama": "llama"}


def gguf_config_dict(path: Path) -> dict | None:
    """The config dict ``transformers``' older GGUF loader makes of this file, or None where this
    module has not been checked to make the same (another architecture, a llama file named
    Mistral, which that loader renames)."""
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING
    from transformers.integrations.gguf import read_gguf_metadata
    from transformers.modeling_gguf_pytorch_utils import GGUF_TO_TRANSFORMERS_MAPPING

    metadata, tensor_names = read_gguf_metadata(str(path))
    architecture = metadata["general.architecture"]
    if architecture not in CHECKED_ARCHITECTURES:
        return None
    if "mistral" in str(metadata.get("general.name", "")):
        return None  # the older loader reads such a llama file as Mistral
    renames = GGUF_TO_TRANSFORMERS_MAPPING["config"]
    config: dict = {"tie_word_embeddings": "output.weight" not in tensor_names}
    for key, value in GGUF_CONFIG_DEFAULTS_MAPPING.get(architecture, {}).items():
        config.setdefault(key, value)
    for key, value in metadata.items():
        prefix, _, config_key = key.partition(".")
        name = renames.get(prefix, {}).get(config_key)
        if name is None or name == -1:
            continue
        if isinstance(value, list) and len(value) == 1:
            value = value[0]  # the older loader unwraps one-element arrays
        config[name] = value
    config["model_type"] = CHECKED_ARCHITECTURES[architecture]
    if "vocab_size" not in config and isinstance(metadata.get("tokenizer.ggml.tokens"), int):
        config["vocab_size"] = metadata["tokenizer.ggml.tokens"]  # the vocabulary's length
    return config


def gguf_config(path: Path):
    """The ``PretrainedConfig`` of ``gguf_config_dict``, or None where that is None."""
    config = gguf_config_dict(path)
    return None if config is None else config_of(config)


def config_of(config: dict):
    """The ``PretrainedConfig`` of a config dict (its ``model_type`` picks the class)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[config["model_type"]].from_dict(dict(config))
