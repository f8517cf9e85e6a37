"""The GGUF config read without walking the vocabulary (models/gguf_config.py) against
transformers' older loader, key for key, on both embedded files; files it was not checked on go
to transformers as before."""

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


@pytest.mark.parametrize(
    "model_id",
    [SMOLLM2_MODEL, pytest.param("gemma-3-270m", marks=pytest.mark.slow)],
)
def test_the_config_equals_the_older_loaders(model_id):
    path = embedded_gguf(model_id).path
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


@pytest.mark.slow
def test_the_conversion_reads_the_metadata_for_the_config_no_more(monkeypatch):
    """read_hf_model of an embedded GGUF asks transformers' older loader for the weights only:
    its config pass (20-30 s over Gemma 3's vocabulary) is the one this module replaces."""
    import transformers.modeling_gguf_pytorch_utils as older

    calls = []
    real = older.load_gguf_checkpoint

    def counted(path, return_tensors=False, **kwargs):
        calls.append(return_tensors)
        return real(path, return_tensors=return_tensors, **kwargs)

    monkeypatch.setattr(older, "load_gguf_checkpoint", counted)
    source = embedded_gguf(SMOLLM2_MODEL)
    checkpoints.read_hf_model(LocalCheckpoint(source.path.parent, "gguf", source.path.name))
    assert calls == [True]
