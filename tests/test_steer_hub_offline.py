"""A hub SAE an earlier download left in the Hugging Face cache loads offline: until 2026-12-07
HF_HUB_OFFLINE (which circuitviz sets) switched the Steer page's and the labels' hub off for
every SAE, cached or not, and sae-lens's Gemma Scope 2 loader read the tensor shapes over the
network even with the weights cached. An SAE not cached is still one sentence."""

from __future__ import annotations

import os

import pytest
import torch

from circuitviz.bench.toy_models import tiny_model
from circuitviz.labels import sae_features as sae_labels
from circuitviz.services import sae_store

RELEASE = "gemma-scope-2-270m-pt-res-all"  # sae-lens's directory: google/gemma-scope-2-270m-pt
CACHED = "layer_0_width_16k_l0_small"  # its folder there: resid_post_all/layer_0_width_16k_l0_small
NOT_CACHED = "layer_1_width_16k_l0_small"


def _cache_sae(hub_cache, d_model: int, d_sae: int = 24) -> None:
    """CACHED in the Hugging Face cache as huggingface_hub lays it out: a blob, a snapshot's
    symlink to it, refs/main naming the snapshot."""
    from safetensors.torch import save_file

    repo = hub_cache / "models--google--gemma-scope-2-270m-pt"
    generator = torch.Generator(device="cpu").manual_seed(3)
    weights = {
        "w_enc": torch.randn(d_model, d_sae, generator=generator, device="cpu"),
        "w_dec": torch.randn(d_sae, d_model, generator=generator, device="cpu"),
        "b_enc": torch.zeros(d_sae, device="cpu"),
        "b_dec": torch.zeros(d_model, device="cpu"),
        "threshold": torch.full((d_sae,), 0.1, device="cpu"),
    }
    (repo / "blobs").mkdir(parents=True)
    save_file(weights, str(repo / "blobs" / "0123abcd"))
    folder = repo / "snapshots" / "feedbeef" / "resid_post_all" / CACHED
    folder.mkdir(parents=True)
    os.symlink(repo / "blobs" / "0123abcd", folder / "params.safetensors")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("feedbeef")


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """An offline machine whose Hugging Face cache is tmp_path/hub; no network at all."""
    import huggingface_hub.constants as constants
    from sae_lens.loading import pretrained_sae_loaders

    def no_network(url, headers, max_attempts=5):
        raise ConnectionError(f"no network here: {url}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(pretrained_sae_loaders, "_get_with_rate_limit_retry", no_network)
    return tmp_path / "hub"


def test_a_cached_hub_sae_loads_offline_and_one_not_cached_is_one_sentence(offline_cache):
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    _cache_sae(offline_cache, model.cfg.d_model)
    assert sae_store.hub_sae_cached(RELEASE, CACHED) and not sae_store.hub_sae_cached(RELEASE, NOT_CACHED)
    assert sae_store.cached_hub_saes({RELEASE: [NOT_CACHED, CACHED], "gemma-scope-2-270m-pt-res": ["x"]}) == {
        RELEASE: [CACHED]
    }
    loaded = sae_labels.load_hub_sae(RELEASE, CACHED, model)  # the labels' hub, offline
    assert loaded.layer == 0 and loaded.name == f"hub:{RELEASE}/{CACHED} (layer 0, 24 features)"
    assert tuple(loaded.sae.W_enc.shape) == (model.cfg.d_model, 24)
    with pytest.raises(sae_store.SaeUnavailable) as error:
        sae_labels.load_hub_sae(RELEASE, NOT_CACHED, model)
    message = str(error.value)
    assert message.startswith(f"{RELEASE}/{NOT_CACHED} is not in the Hugging Face cache and this machine ")
    assert "offline" in message and message.count(". ") == 0 and message.endswith(".")


def test_the_steer_page_offers_the_cached_hub_saes_offline(tmp_path, offline_cache, monkeypatch):
    pytest.importorskip("streamlit")
    import streamlit as st
    from sae_lens import SAE
    from streamlit.testing.v1 import AppTest
    from test_labels import _steer_setup

    _steer_setup(tmp_path, monkeypatch)  # offline; the app's model is a tiny one, its id gemma-3-270m
    _cache_sae(offline_cache, 640)
    shown = []
    spinner = st.spinner
    monkeypatch.setattr(
        st, "spinner", lambda text="", **options: shown.append(text) or spinner(text, **options)
    )
    monkeypatch.setattr(  # the tiny model's own SAE, as the cached one reads Gemma's 640 wide
        SAE,
        "from_pretrained",
        lambda release, sae_id, device="cpu", dtype=None: SAE.load_from_disk(
            str(tmp_path / "sae"), device=device, dtype=dtype
        ),
    )
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["sae"] = "hub"
    at.switch_page("pages/steer.py").run()
    assert not at.exception, at.exception
    assert not [info.value for info in at.info if "offline" in info.value]
    assert at.selectbox(key="steer.release").options == [RELEASE]
    assert at.selectbox(key=f"steer.sae_id.{RELEASE}").options == [CACHED]
    total = sum(map(len, sae_store.residual_releases(sae_store.hub_releases("gemma-3-270m"))[0].values()))
    said = [text for text in (c.value.replace("\\", "") for c in at.caption) if "HF_HUB_OFFLINE" in text]
    assert said == [
        "This app works offline (HF_HUB_OFFLINE is set), so the boxes offer the hub SAEs already in the "
        f"Hugging Face cache: 1 of the {total:,} on gemma-3-270m's residual stream; start the app with "
        "HF_HUB_OFFLINE=0 where it reaches huggingface.co to download the others."
    ]
    at.button(key="steer.hub.load").click().run()
    assert not at.exception, at.exception  # (the tiny model's vocabulary refuses the example's answer)
    assert not [e.value for e in at.error if "Hugging" in e.value or "SAE" in e.value]
    assert f"Loading {RELEASE}/{CACHED} from the Hugging Face cache…" in shown
    assert [t.value for t in at.text if t.value.startswith(f"Loaded: hub:{RELEASE}/{CACHED}")]
