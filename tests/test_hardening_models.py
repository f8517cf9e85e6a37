"""Model files that would run code when read: a pytorch_model.bin whose pickle calls a function
on load, beside a valid config. The loader refuses it in one sentence and the code never runs."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from circuitviz.models import ModelLoadError, load_model


class Payload:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_malicious_torch_bin_is_refused_and_never_runs(tmp_path: Path):
    folder = tmp_path / "model"
    folder.mkdir()
    marker = tmp_path / "code-ran"
    config = {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "n_layer": 1,
        "n_head": 2,
        "n_embd": 8,
        "vocab_size": 16,
        "n_positions": 16,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"weights": Payload(str(marker))}))
    with pytest.raises(ModelLoadError) as refused:
        load_model(str(folder), device="cpu")
    assert not marker.exists(), "the pickle ran code while loading"
    message = str(refused.value)
    assert message and "\n" not in message.strip()
    for name in ("model.pkl", "weights.pt", "model.ckpt"):
        other = tmp_path / name.replace(".", "_")
        other.mkdir()
        (other / "config.json").write_text(json.dumps(config))
        (other / name).write_bytes(pickle.dumps(Payload(str(marker))))
        with pytest.raises(ModelLoadError, match="arbitrary code"):
            load_model(str(other), device="cpu")
        assert not marker.exists()
