"""The embedded GGUF files read without transformers' older loader (models/gguf_config.py,
models/gguf_weights.py) against that loader: the config key for key, every weight bit for bit;
files they were not checked on go to transformers as before."""

from __future__ import annotations

import pytest

from circuitviz.models import checkpoints
from circuitviz.models.catalog import SMOLLM2_MODEL
from circuitviz.models.checkpoints import LocalCheckpoint
from circuitviz.models.embedded import embedded_gguf
from circuitviz.models.gguf_config import gguf_config, gguf_config_dict


def _older_loaders_config(path) -> dict:
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    return load_gguf_checkpoint(str(path), return_tensors=False)["config"]


def test_the_config_equals_the_older_loaders():
    """SmolLM2's file (Gemma's config is compared whole in the bit-for-bit test below, where the
    older loader's two passes over its metadata take a minute or more)."""
    path = embedded_gguf(SMOLLM2_MODEL).path
    ours = gguf_config_dict(path)
    assert ours == _older_loaders_config(path)
    from transformers import AutoConfig

    theirs = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name).to_dict()
    mine = gguf_config(path).to_dict()
    theirs.pop("_name_or_path"), mine.pop("_name_or_path")  # from_pretrained names the folder
    assert mine == theirs


def _tiny_gguf(folder, architecture: str, name: str):
    """A GGUF file with metadata only (no tensors): enough for the config reader to decide."""
    import gguf

    path = folder / f"{architecture}.gguf"
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name(name)
    writer.add_block_count(2)
    writer.add_context_length(64)
    writer.add_embedding_length(16)
    writer.add_head_count(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    ("architecture", "name"),
    [("qwen2", "tiny"), ("llama", "mistral-7b-instruct"), ("gemma2", "tiny")],
)
def test_a_file_it_was_not_checked_on_is_left_to_transformers(tmp_path, architecture, name):
    # another architecture, or a llama file the older loader reads as Mistral
    assert gguf_config_dict(_tiny_gguf(tmp_path, architecture, name)) is None


def test_a_checked_file_is_read_with_its_names_renamed(tmp_path):
    config = gguf_config_dict(_tiny_gguf(tmp_path, "llama", "tiny"))
    assert config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 2 and config["hidden_size"] == 16
    assert config["max_position_embeddings"] == 64 and config["num_attention_heads"] == 2
    assert config["tie_word_embeddings"] is True  # no output.weight among its tensors


def _older_loaders_model(source):
    """The model as transformers' older GGUF loader reads it (config and weights from the file)."""
    import torch
    from transformers import AutoModelForCausalLM, GgufConfig

    return AutoModelForCausalLM.from_pretrained(
        str(source.path.parent),
        gguf_file=source.path.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
        local_files_only=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize("model_id", [SMOLLM2_MODEL, "gemma-3-270m"])
def test_the_direct_reading_gives_the_older_loaders_model_bit_for_bit(model_id, monkeypatch):
    """Every weight, the config and the tied embedding equal to transformers' own reading, and
    read_hf_model never calls the older loader for the embedded files (its two passes over the
    metadata and its name map rebuilt per submodule were most of the cold start)."""
    import torch
    import transformers.modeling_gguf_pytorch_utils as older

    source = embedded_gguf(model_id)
    theirs = _older_loaders_model(source)
    calls = []
    monkeypatch.setattr(older, "load_gguf_checkpoint", lambda *a, **k: calls.append(a) or {})
    ours = checkpoints.read_hf_model(LocalCheckpoint(source.path.parent, "gguf", source.path.name))
    assert calls == []
    assert ours.config.to_dict() == theirs.config.to_dict()
    mine, reference = ours.state_dict(), theirs.state_dict()
    assert mine.keys() == reference.keys()
    different = [name for name in mine if not torch.equal(mine[name], reference[name])]
    assert different == []
    tied = ours.config.tie_word_embeddings
    assert (ours.lm_head.weight.data_ptr() == ours.model.embed_tokens.weight.data_ptr()) == tied


def test_the_name_map_of_the_top_level_is_the_whole_map():
    """transformers builds the GGUF-to-model name map once per submodule (a few hundred times);
    the top level's names already hold every one."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, get_gguf_hf_weights_map

    from circuitviz.models.gguf_config import config_of
    from circuitviz.models.gguf_weights import _TopLevel

    config_dict = gguf_config_dict(embedded_gguf(SMOLLM2_MODEL).path)
    config_dict["num_hidden_layers"] = 2  # the map's cost grows with the layers; its shape does not
    config = config_of(config_dict)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    processor = TENSOR_PROCESSORS["llama"](config=config_dict)
    assert get_gguf_hf_weights_map(_TopLevel(model), processor) == get_gguf_hf_weights_map(model, processor)


def test_a_file_the_direct_reading_cannot_answer_for_goes_to_transformers(tmp_path):
    from circuitviz.models.gguf_weights import read_gguf_model

    assert read_gguf_model(_tiny_gguf(tmp_path, "qwen2", "tiny")) is None
