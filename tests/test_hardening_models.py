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


# ----- a folder damaged in one place: refused at load in one sentence, never loaded half-random ----


@pytest.fixture(scope="module")
def sound_folder(tmp_path_factory) -> Path:
    import torch

    from circuitviz.bench.toy_families import random_hf_model
    from circuitviz.bench.toy_models import word_tokenizer

    folder = tmp_path_factory.mktemp("sound") / "llama"
    random_hf_model("llama3", seed=1, dtype=torch.float32).save_pretrained(str(folder))
    word_tokenizer().save_pretrained(str(folder))
    return folder


def _config_field(field, value):
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, field: value}))

    return change


def _weights(change_tensors):
    def change(folder: Path) -> None:
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(folder / "model.safetensors"))
        change_tensors(tensors)
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})

    return change


def _file(name, text):
    def change(folder: Path) -> None:
        (folder / name).write_text(text)

    return change


def _truncated(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])


def _cut_after_header(folder: Path) -> None:  # the header whole, the last tensor's bytes short
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])


def _bin_cut_short(folder: Path) -> None:
    import torch
    from safetensors.torch import load_file

    weights = folder / "model.safetensors"
    torch.save(load_file(str(weights)), str(folder / "pytorch_model.bin"))
    weights.unlink()
    data = (folder / "pytorch_model.bin").read_bytes()
    (folder / "pytorch_model.bin").write_bytes(data[: len(data) // 2])


def _no_tokenizer(folder: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink(missing_ok=True)


DOWN = "model.layers.1.mlp.down_proj.weight"
DAMAGE = {  # found by loading about 800 randomly damaged folders (eight families)
    "config a list": (_file("config.json", "[]"), "holds list where a JSON object belongs"),
    "config without model type": (_file("config.json", '{"hidden_size": 8}'), "names no model type"),
    "unknown model type": (_config_field("model_type", "-1"), 'model type "-1" is not one transformers'),
    "a field of the wrong kind": (_config_field("num_hidden_layers", None), "a value of the wrong kind"),
    "no heads": (
        _config_field("num_attention_heads", 0),
        "could not read the checkpoint",
    ),  # ZeroDivisionError
    # these said "check that it is a causal language model the installed transformers supports"
    "weights cut short": (_truncated, "is damaged or incomplete"),  # SafetensorError
    "weights cut after the header": (_cut_after_header, "model.safetensors is damaged or incomplete"),
    "a .bin cut short": (_bin_cut_short, "is damaged or incomplete"),  # PytorchStreamReader
    "a weight missing": (_weights(lambda t: t.pop(DOWN)), f"lack 1 of the model's tensors ({DOWN})"),
    "a weight of another shape": (
        _weights(lambda t: t.update({DOWN: t[DOWN][:, :3].contiguous()})),
        "do not fit its config.json",
    ),
    "a NaN weight": (
        _weights(lambda t: t[DOWN].view(-1).__setitem__(0, float("nan"))),
        f"not finite (NaN or infinity) in {DOWN}",
    ),
    # transformers built layers until the memory ran out
    "10**12 layers": (_config_field("num_hidden_layers", 10**12), "num_hidden_layers 1000000000000, beyond"),
    "a million layers": (
        _config_field("num_hidden_layers", 10**6),
        "where the weight files hold 21,344 numbers",
    ),
    "a norm epsilon of NaN": (
        _config_field("rms_norm_eps", float("nan")),
        "gives logits that are not finite",
    ),
    "no positions": (_config_field("max_position_embeddings", 0), "loaded but cannot run a sentence"),
    "a length of the wrong kind": (
        _file("tokenizer_config.json", '{"model_max_length": "x"}'),
        'gives model_max_length "x"',
    ),
    # read "No usable tokenizer was found ... (Couldn't instantiate the backend tokenizer from one of:)"
    "no tokenizer files": (_no_tokenizer, "holds no tokenizer (no tokenizer.json, tokenizer.model or vocab"),
    "a tokenizer class transformers lacks": (
        _file("tokenizer_config.json", '{"tokenizer_class": "Nope"}'),
        "names no padding or end-of-text token its vocabulary holds",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_folder_is_refused_in_one_sentence_naming_the_damage(damage, sound_folder, tmp_path):
    """Before: a traceback (StrictDataclassFieldValidationError, ZeroDivisionError, SafetensorError,
    a TypeError from the tokenizer at the first run), a message of two sentences, or a model loaded
    with a weight left random (transformers said so only in its log) or NaN in every figure."""
    import shutil

    from sentences import assert_one_sentence

    folder = tmp_path / "model"
    shutil.copytree(sound_folder, folder)
    change, says = DAMAGE[damage]
    change(folder)
    with pytest.raises(ModelLoadError) as refused:
        load_model(str(folder), device="cpu")
    assert says in str(refused.value)
    assert_one_sentence(str(refused.value))


def test_the_undamaged_folder_loads(sound_folder):
    from circuitviz.models.adapter import adapter_of

    model = load_model(str(sound_folder), device="cpu")
    assert adapter_of(model).to_tokens("When Mary and John went").shape[1] > 1


@pytest.mark.slow  # two fresh processes (HF_HUB_CACHE is read when huggingface_hub is imported)
def test_a_hub_model_cached_without_a_weight_is_refused_and_the_whole_one_loads(sound_folder, tmp_path):
    """A hub id read from the Hugging Face cache offline (an interrupted download, a pruned
    snapshot): a weight the cache lacks was left random and the model loaded."""
    import shutil
    import subprocess
    import sys

    from safetensors.torch import load_file, save_file

    def cached(drop: bool) -> str:
        cache = tmp_path / f"cache-{drop}"
        snapshot = cache / "models--circuitviz-test--tiny" / "snapshots" / "0123456789abcdef"
        shutil.copytree(sound_folder, snapshot)
        (cache / "models--circuitviz-test--tiny" / "refs").mkdir()
        (cache / "models--circuitviz-test--tiny" / "refs" / "main").write_text("0123456789abcdef")
        if drop:
            tensors = load_file(str(snapshot / "model.safetensors"))
            tensors.pop(DOWN)
            save_file(tensors, str(snapshot / "model.safetensors"), metadata={"format": "pt"})
        script = (
            "from circuitviz.models import ModelLoadError, load_model\n"
            "try:\n    load_model('circuitviz-test/tiny', device='cpu')\n    print('loaded')\n"
            "except ModelLoadError as error:\n    print(error)\n"
        )
        environment = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
        done = subprocess.run(
            [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=300
        )
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]

    assert cached(drop=False) == "loaded"
    refused = cached(drop=True)
    assert f"lack 1 of the model's tensors ({DOWN})" in refused
    from sentences import assert_one_sentence

    assert_one_sentence(refused)
