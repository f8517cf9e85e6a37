"""The sidebar's free model id: a hub id or local folder typed beside the list, checked before
loading (its memory estimate, or one sentence naming the fix), loaded by a button.

``check_free_model`` is tested on its own (no torch), then the sidebar through streamlit's
AppTest on the tiny model (the loader is the tests' own; it records which id it was asked for).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys

import pytest

from circuitviz.models.estimate import check_free_model, parameters_of_config

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 100,
    "tie_word_embeddings": False,
}


def _folder(tmp_path, config=LLAMA_CONFIG):
    folder = tmp_path / "my-checkpoint"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_local_folder_is_estimated_from_its_config(tmp_path):
    checked = check_free_model(str(_folder(tmp_path)))
    assert checked.loadable and checked.estimate is not None
    count = parameters_of_config(LLAMA_CONFIG)[0]
    assert checked.estimate.n_parameters == count
    # by hand: embeddings 2 x 100 x 64, per layer q/k/v/o ungrouped 4 x 64 x 64, gated MLP
    # 3 x 64 x 128, two norms; the final norm
    assert count == 2 * 100 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
    assert f"about {count / 1e3:,.0f}K parameters" in checked.estimate.sentence()  # not "0M"
    assert " MB of weights in " in checked.estimate.sentence()  # not "0.0 GB"
    large = dataclasses.replace(checked.estimate, n_parameters=1_236_000_000, weight_bytes=4_944_000_000)
    assert "about 1,236M parameters, 4.9 GB of weights" in large.sentence()


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("/no/such/folder", "Nothing exists at"),
        ("just some words", "neither a Hugging Face hub id"),
        ("gpt2", "is in the model list above; pick it there"),  # it read 'neither a hub id nor a folder'
        (
            "GEMMA-3-270M",
            "is in the model list above as 'gemma-3-270m'; pick it there",
        ),  # read "names no owner"
        ("bert-base-uncased", "names no owner; type its hub id as owner/name"),
        ("circuitviz-test/not-cached", "HF_HUB_OFFLINE"),
    ],
)
def test_an_id_that_cannot_load_is_one_sentence_naming_the_fix(typed, expected, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    checked = check_free_model(typed)
    assert not checked.loadable and expected in checked.problem
    assert checked.problem.count(". ") == 0 and checked.problem.endswith(".")


@pytest.mark.parametrize(
    "change",
    [  # each raised in the sidebar before (found by writing random configs into a folder)
        lambda c: c.update(num_attention_heads=1e308),  # drawn as a 300-digit head count, then OverflowError
        lambda c: c.update(hidden_size=-5),
        lambda c: c.update(num_hidden_layers=True),
        lambda c: c.update(text_config=2.5),  # AttributeError: a multimodal config's part that is no object
        lambda c: c.update(architectures=[{"a": 1}]),
    ],
)
def test_a_config_with_values_of_the_wrong_kind_never_raises(change, tmp_path):
    import transformer_lens.factories.architecture_adapter_factory  # noqa: F401  (the check it enables)

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64}
    config.update(num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    change(config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    checked = check_free_model(str(tmp_path))
    said = checked.problem or checked.note or checked.estimate.sentence()
    assert len(said) < 300, said
    (tmp_path / "config.json").write_text(json.dumps(["not", "an", "object"]))
    assert "does not read (it is not a JSON object)" in check_free_model(str(tmp_path)).problem


def test_a_folder_its_config_does_not_describe_is_refused_before_loading(tmp_path):
    """A config giving a million layers beside the weights of two: the sidebar showed an estimate of
    10 billion parameters and the load built layers until the memory ran out (now it refuses too)."""
    import torch
    from safetensors.torch import save_file

    folder = _folder(tmp_path)
    save_file({"weight": torch.zeros(10, 10)}, str(folder / "model.safetensors"))
    assert check_free_model(str(folder)).estimate is not None  # 70K parameters claimed, 100 held: no refusal
    (folder / "config.json").write_text(json.dumps({**LLAMA_CONFIG, "num_hidden_layers": 10**6}))
    checked = check_free_model(str(folder))
    assert checked.estimate is None and "where the weight files hold 100 numbers" in checked.problem
    (folder / "model.safetensors").unlink()  # weights not here (yet): nothing to hold the config to
    (folder / "model.gguf").write_bytes(b"GGUF")
    assert "numbers" not in (check_free_model(str(folder)).problem or "")


def test_a_folder_without_a_config_says_what_it_needs(tmp_path):
    (tmp_path / "empty").mkdir()
    checked = check_free_model(str(tmp_path / "empty"))
    assert not checked.loadable and "config.json" in checked.problem


def test_an_architecture_the_bridge_lacks_is_named_once_transformer_lens_is_loaded(tmp_path):
    pytest.importorskip("transformer_lens")
    import transformer_lens.factories.architecture_adapter_factory  # noqa: F401

    assert "transformer_lens.factories.architecture_adapter_factory" in sys.modules
    folder = _folder(tmp_path, {**LLAMA_CONFIG, "architectures": ["BioGptForCausalLM"]})
    checked = check_free_model(str(folder))
    assert (
        not checked.loadable
        and "no adapter for" in checked.problem
        and "BioGptForCausalLM" in checked.problem
    )
    assert check_free_model(str(_folder(tmp_path / "ok", LLAMA_CONFIG))).loadable  # Llama has one


# ----- the sidebar ------------------------------------------------------------------------------
@pytest.fixture
def asked(tmp_path, monkeypatch):
    """The app on the tiny model, its loader recording the model ids it is asked for."""
    import circuitviz.ui.loaders as loaders
    from circuitviz.bench.toy_models import tiny_app_model

    ids: list[str] = []

    def loader(model_id, device):
        ids.append(model_id)
        return tiny_app_model(model_id, device)

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loaders, "MODEL_LOADER", loader)
    return ids


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file("../app.py", default_timeout=300)


def _typed_box(at):
    return next(box for box in at.sidebar.text_input if box.label in ("hub id or local folder", "hub id"))


def _read(markdown: str) -> str:
    """What a reader sees of markdown whose characters were escaped (the sidebar's sentences quote
    the typed id or folder, so they are shown as plain text)."""
    return re.sub(r"\\(.)", r"\1", str(markdown))


def _sidebar_text(at) -> str:
    parts = [element.value for element in [*at.sidebar.caption, *at.sidebar.warning]]
    return " ".join(_read(part) for part in parts)


@pytest.mark.slow
def test_the_sidebar_estimates_a_typed_folder_then_loads_it(asked, tmp_path):
    folder = _folder(tmp_path)
    at = _app().run()
    assert not at.exception
    _typed_box(at).input(str(folder)).run()
    expected = check_free_model(str(folder)).estimate.sentence()
    assert expected in _sidebar_text(at)  # before loading: nothing asked of the loader for it
    assert str(folder) not in asked
    next(button for button in at.sidebar.button if button.label == "Load this model").click().run()
    assert not at.exception
    assert str(folder) in asked
    model_box = next(box for box in at.sidebar.selectbox if box.label == "model")
    assert model_box.value == str(folder)
    assert str(folder) in model_box.options
    assert expected in _sidebar_text(at)  # the chosen model's caption is its estimate


@pytest.mark.slow
def test_a_loaded_gguf_file_is_sized_from_its_weights(asked, tmp_path):
    """Before loading, a GGUF file's size is not known (it is read when converted); once loaded,
    the sidebar said so still ("its size is known once it is converted") beside the converted
    model drawing circuits. It now counts the loaded weights."""
    import circuitviz.ui.loaders as loaders

    gguf = tmp_path / "my-model.gguf"
    gguf.write_bytes(b"GGUF")
    at = _app().run()
    _typed_box(at).input(str(gguf)).run()
    assert "its size is known once it is converted" in _sidebar_text(at)
    next(button for button in at.sidebar.button if button.label == "Load this model").click().run()
    assert not at.exception and str(gguf) in asked
    loaders.model_future(str(gguf), "auto").result(timeout=120)
    at.run()
    model = loaders.loaded_model(str(gguf), "auto")
    count = sum(weight.numel() for weight in model.parameters())
    captions = [_read(caption.value) for caption in at.sidebar.caption]
    said = next(caption for caption in captions if caption.startswith("Loaded:"))
    assert said.startswith(f"Loaded: {count / 1e3:,.0f}K parameters in memory (")
    assert f"{model.cfg.n_layers} layers x {model.cfg.n_heads} heads" in said


@pytest.mark.slow
def test_the_sidebar_refuses_an_offline_id_in_one_sentence_and_offers_no_button(asked):
    at = _app().run()
    _typed_box(at).input("circuitviz-test/not-cached").run()
    assert not at.exception
    assert any("HF_HUB_OFFLINE" in _read(warning.value) for warning in at.sidebar.warning)
    assert not [button for button in at.sidebar.button if button.label == "Load this model"]
    assert "circuitviz-test/not-cached" not in asked


@pytest.mark.parametrize("typed", ["/etc", "../../etc/passwd", "model.gguf", "/nonexistent"])
def test_a_shared_server_opens_no_typed_path_nor_says_whether_it_exists(typed, asked, monkeypatch):
    """CIRCUITVIZ_BROWSER_PATHS=0: a typed path gets one sentence, the same whether it exists or not
    (it said "'/etc' holds no config.json"), and no Load button; a hub id is still checked."""
    from circuitviz.ui.loaders import BROWSER_PATHS_ENV, no_browser_paths

    monkeypatch.setenv(BROWSER_PATHS_ENV, "0")
    at = _app().run()
    _typed_box(at).input(typed).run()
    assert not at.exception
    said = [_read(w.value) for w in at.sidebar.warning]
    assert said == [no_browser_paths("give a Hugging Face hub id, such as Qwen/Qwen3-0.6B")], said
    assert not [button for button in at.sidebar.button if button.label == "Load this model"]
    assert _typed_box(at).label == "hub id"  # the box no longer offers a folder
    _typed_box(at).input("circuitviz-test/not-cached").run()  # a hub id: checked as before
    said = " ".join(_read(w.value) for w in at.sidebar.warning)
    assert "HF_HUB_OFFLINE" in said and "folder" not in said, said  # no folder offered as the way out


@pytest.mark.parametrize(
    "typed", ["just some words", "bert-base-uncased", "circuitviz-test/not-cached", "/etc"]
)
def test_a_shared_servers_sentences_offer_no_folder(typed, monkeypatch):
    """With paths off, every sentence of the size check and of the loader names a way out the
    visitor can take: a hub id, never a folder of the server's disk (they offered one)."""
    from circuitviz.models import ModelLoadError
    from circuitviz.models.loading import resolve_source

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    problem = check_free_model(typed, local=False).problem
    assert problem and "folder" not in problem and problem.endswith("."), problem
    assert "folder" in check_free_model(typed).problem or typed in ("/etc",)
    try:
        source = resolve_source(typed, local=False)
    except ModelLoadError as error:
        assert "folder" not in str(error), error
        return
    import torch

    from circuitviz.models.bridge_loading import hub_hf_model

    with pytest.raises(ModelLoadError) as raised:  # offline and not cached: refused before any read
        hub_hf_model(source.official_name, torch.float32, {}, source.local)
    assert "HF_HUB_OFFLINE" in str(raised.value) and "folder" not in str(raised.value)


def test_a_shared_server_reads_a_hub_shaped_name_from_the_hub_only(asked, tmp_path, monkeypatch):
    """A relative folder named like a hub id (owner/name) was read before the hub: on a shared
    server its sentence said it existed and what it held (an audit); now it is a hub id there, the
    same sentence whether or not such a folder exists, from the sidebar and from a link's load."""
    from circuitviz.models import ModelLoadError
    from circuitviz.models.loading import HubModel, resolve_source
    from circuitviz.ui.loaders import BROWSER_PATHS_ENV

    monkeypatch.chdir(tmp_path)
    _folder(tmp_path / "owner")  # a folder here named like a hub id: owner/my-checkpoint
    name = "owner/my-checkpoint"
    with pytest.raises(ModelLoadError, match="holds no model weights"):  # read from this machine
        resolve_source(name)
    assert isinstance(resolve_source(name, local=False), HubModel)  # the loader's, on a shared server
    assert check_free_model(name, local=False).problem == check_free_model(
        "owner/absent", local=False
    ).problem.replace("owner/absent", name)
    monkeypatch.setenv(BROWSER_PATHS_ENV, "0")
    at = _app().run()
    _typed_box(at).input(name).run()
    said = " ".join(_read(w.value) for w in at.sidebar.warning)
    _typed_box(at).input("owner/absent").run()
    assert said.replace(name, "X") == " ".join(_read(w.value) for w in at.sidebar.warning).replace(
        "owner/absent", "X"
    )


def test_a_shared_server_offers_no_typed_folder_on_the_dataset_and_steer_pages(asked, monkeypatch):
    from circuitviz.ui.loaders import BROWSER_PATHS_ENV

    monkeypatch.setenv(BROWSER_PATHS_ENV, "0")
    at = _app()
    at.switch_page("pages/dataset.py").run()
    assert not at.exception, at.exception
    options = at.segmented_control(key="dataset.source").options
    assert options and "a batch folder…" not in options
    assert any(BROWSER_PATHS_ENV in _read(c.value) for c in at.caption)
    at.switch_page("pages/steer.py").run()
    assert not at.exception, at.exception
    assert at.radio(key="steer.source").options == ["embedded", "hub"]
    monkeypatch.setenv(BROWSER_PATHS_ENV, "1")
    at.switch_page("pages/steer.py").run()
    assert "local folder" in at.radio(key="steer.source").options


def test_a_shared_servers_loads_never_read_a_path(monkeypatch):
    """A link's model (any hub-shaped id) is loaded by the app's loader with ``local`` off on a
    shared server, so a folder of that name here is never read (an audit: ?model=circuitviz/ui)."""
    import circuitviz.models as models
    from circuitviz.ui import loaders
    from circuitviz.ui.loaders import BROWSER_PATHS_ENV

    seen = []
    monkeypatch.setattr(models, "load_model", lambda model_id, **kwargs: seen.append(kwargs["local"]))
    loaders._default_loader("owner/name", None)
    monkeypatch.setenv(BROWSER_PATHS_ENV, "0")
    loaders._default_loader("owner/name", None)
    assert seen == [True, False]
