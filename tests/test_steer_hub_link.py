"""The Steer page's hub SAE in its link: the release (``sae_release``) and id (``sae_id``) chosen
were the browser's alone until 2026-12-06, so a link with ``sae=hub`` opened the first release's
first SAE, and so did a switch to another page and back. A link's release or id the directory
lacks is said in one sentence (the link's text escaped) and the first one shown."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_labels import _steer_setup  # noqa: E402

from circuitviz.services import sae_store  # noqa: E402

RELEASES = {"rel-b": ["x", "y"], "rel-a": ["z"]}  # sae-lens's directory for the model, as read offline
DIRECTORY = sae_store.hub_releases  # the real one (the fixture below replaces it)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    _steer_setup(tmp_path, monkeypatch)
    monkeypatch.setattr(sae_store, "hub_unavailable_reason", lambda: None)  # online
    monkeypatch.setattr(sae_store, "hub_releases", lambda model_id: RELEASES)


def _steer(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query.items():
        at.query_params[name] = value
    at.switch_page("pages/steer.py")
    return at.run()


def _id_box(at):
    (box,) = [box for box in at.selectbox if box.key.startswith("steer.sae_id.")]
    return box


def _said(at, words: str) -> list[str]:
    return [w.value.replace("\\", "") for w in at.warning if words in w.value.replace("\\", "")]


def test_a_hub_saes_release_and_id_are_in_the_link_and_survive_a_page_switch(hub):
    at = _steer(sae="hub", sae_release="rel-b", sae_id="y")
    assert not at.exception, at.exception
    assert at.selectbox(key="steer.release").value == "rel-b" and _id_box(at).value == "y"
    assert (at.query_params["sae_release"], at.query_params["sae_id"]) == ("rel-b", "y")
    assert not at.warning, [w.value for w in at.warning]
    at.selectbox(key="steer.release").set_value("rel-a").run()  # another release: its own first id
    assert _id_box(at).value == "z" and at.query_params["sae_id"] == "z"
    at.switch_page("pages/explore.py").run()
    assert "sae_release" not in at.query_params  # the Steer page's alone
    at.switch_page("pages/steer.py").run()
    assert at.selectbox(key="steer.release").value == "rel-a" and _id_box(at).value == "z"
    at.radio(key="steer.source").set_value("embedded").run()  # another source: out of its link
    assert "sae_release" not in at.query_params and "sae_id" not in at.query_params


def test_a_links_release_or_id_the_directory_lacks_is_said_once(hub):
    at = _steer(sae="hub", sae_release="[x](https://example.com)")
    assert not at.exception, at.exception
    (said,) = _said(at, "The link's sae_release")
    assert "is not one of this page's choices ('rel-a', 'rel-b'): the page shows 'rel-a'." in said
    assert not [w.value for w in at.warning if "[x](" in w.value]  # escaped: never a live link
    assert at.selectbox(key="steer.release").value == "rel-a"
    wrong = _steer(sae="hub", sae_release="rel-b", sae_id="nonsense")
    (said,) = _said(wrong, "The link's sae_id")
    assert said.endswith("is not one of this page's choices ('x', 'y'): the page shows 'x'.")
    assert _id_box(wrong).value == "x" and wrong.query_params["sae_id"] == "x"


def test_a_hub_sae_loaded_stays_loaded_until_another_is_chosen(hub, tmp_path, monkeypatch):
    """The Load press was a button's one run: the next click anywhere (a feature picked, "Zero
    them") reran the page with the button up, and it stopped under the release boxes, the table
    and the zeroing gone. The SAE loaded stays while its release and id do, loaded once."""
    from sae_lens import SAE

    loads = []

    def from_pretrained(release, sae_id, device="cpu", dtype=None):  # the hub, from a folder here
        loads.append((release, sae_id))
        return SAE.load_from_disk(str(tmp_path / "sae"), device=device, dtype=dtype)

    monkeypatch.setattr(SAE, "from_pretrained", from_pretrained)

    def loaded(at) -> list[str]:  # "Loaded: hub:rel-b/y (layer 0, 48 features)"
        return [t.value.split(" (")[0] for t in at.text if t.value.startswith("Loaded: ")]

    at = _steer(sae="hub", sae_release="rel-b", sae_id="y")
    assert not loaded(at) and not loads  # a link never loads: its Load press does
    at.button(key="steer.hub.load").click().run()
    assert not at.exception, at.exception
    assert loaded(at) == ["Loaded: hub:rel-b/y"]
    at.run()  # any other click: the button is up again
    assert loaded(at) == ["Loaded: hub:rel-b/y"] and at.text_input(key="steer.nodes")
    assert loads == [("rel-b", "y")]  # loaded once
    _id_box(at).set_value("x").run()  # another SAE: its own Load press
    assert not loaded(at)


def test_a_model_the_hub_directory_lists_no_sae_for_is_said_in_one_sentence(hub, monkeypatch):
    """Two empty boxes and a Load button stood there (gpt2 on the hub), and Load fetched 'None/None'."""
    monkeypatch.setattr(sae_store, "hub_releases", lambda model_id: {})
    at = _steer(sae="hub")
    assert not at.exception, at.exception
    said = [info.value.replace("\\", "") for info in at.info if "lists none" in info.value]
    assert len(said) == 1 and said[0].startswith("sae-lens's directory of hub SAEs lists none for ")
    assert said[0].endswith(
        "; choose 'embedded' or 'local folder' above, or train one with scripts/train_saes.py."
    )
    assert not [box for box in at.selectbox if box.key and box.key.startswith("steer.")]
    assert not [button for button in at.button if button.label == "Load"]


def test_the_no_hub_sae_sentence_offers_embedded_only_where_saes_ship(hub, monkeypatch):
    """smollm2-135m was told to "choose 'embedded' or 'local folder'", and none ship for it."""
    from circuitviz.ui.steer import no_hub_saes_sentence

    monkeypatch.setattr(sae_store, "hub_releases", lambda model_id: {})
    monkeypatch.setattr(sae_store, "embedded_sae_folders", lambda model_id: [])
    at = _steer(sae="hub")
    said = [info.value.replace("\\", "") for info in at.info if "lists none" in info.value]
    assert len(said) == 1 and "; choose 'local folder' above, or train one" in said[0]
    assert no_hub_saes_sentence("m", []) == (
        "sae-lens's directory of hub SAEs lists none for m; train one with scripts/train_saes.py."
    )


def test_a_failed_load_is_not_tried_again_on_every_rerun(hub, monkeypatch):
    """A Load that failed (no network: 24 s of retries) was kept as pressed, and every later click
    on the page tried the download again and waited as long (seen in Chromium)."""
    from sae_lens import SAE

    tries = []

    def unreachable(release, sae_id, device="cpu", dtype=None):
        tries.append((release, sae_id))
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(SAE, "from_pretrained", unreachable)
    at = _steer(sae="hub", sae_release="rel-a", sae_id="z")  # rel-b/y: loaded by a test above, kept
    at.button(key="steer.hub.load").click().run()
    assert not at.exception, at.exception
    (said,) = [
        e.value.replace("\\", "") for e in at.error if "Could not load rel-a/z" in e.value.replace("\\", "")
    ]
    assert said.endswith("reach huggingface.co; or choose 'embedded' or 'local folder' above.")  # a way out
    at.run()  # another click: it waits for Load again, said by the button alone
    assert tries == [("rel-a", "z")] and not at.error


def test_the_hub_box_opens_on_a_residual_stream_release_and_leaves_out_the_others(hub, monkeypatch):
    """The box opened on gemma-scope-2-270m-pt-att, the first by name: its SAEs read attention
    outputs, and Load downloaded one, then refused it (a node is labelled by the features it writes
    into the residual stream). The residual-stream releases are offered, the others named and why."""
    gemma = DIRECTORY("gemma-3-270m")  # sae-lens's directory, read offline
    monkeypatch.setattr(sae_store, "hub_releases", lambda model_id: gemma)
    at = _steer(sae="hub")
    assert not at.exception, at.exception
    box = at.selectbox(key="steer.release")
    assert box.value == "gemma-scope-2-270m-pt-res"
    assert box.options == ["gemma-scope-2-270m-pt-res", "gemma-scope-2-270m-pt-res-all"]
    assert _id_box(at).value.startswith("layer_")
    (said,) = [c.value.replace("\\", "") for c in at.caption if c.value.startswith("Not offered")]
    assert said.startswith(
        "Not offered: 6 releases whose SAEs read attention outputs: gemma-scope-2-270m-pt-att, "
    )
    assert "MLP transcoders: gemma-scope-2-270m-pt-transcoders, gemma-scope-2-270m-pt-transcoders-all" in said
    linked = _steer(
        sae="hub", sae_release="gemma-scope-2-270m-pt-att"
    )  # an old link: said, the default shown
    (warned,) = _said(linked, "The link's sae_release")
    assert warned.endswith("the page shows 'gemma-scope-2-270m-pt-res'.")


def test_what_each_hub_release_reads_is_told_by_its_names():
    offered, left_out = sae_store.residual_releases(sae_store.hub_releases("gpt2-small"))
    assert next(iter(offered)) == "gpt2-small-res-jb"  # the residual-stream ones first, by name
    assert left_out["gpt2-small-resid-mid-v5-32k"] == "the residual stream in the middle of a block"
    assert left_out["gpt2-small-hook-z-kk"] == "attention outputs"
    assert left_out["gpt2-small-mlp-tm"] == "MLP outputs"
    assert "gpt2-small-resid-post-v5-32k" in offered
    offered, left_out = sae_store.residual_releases({"rel-b": ["x"], "some-res": ["y"], "x-att": ["z"]})
    assert list(offered) == ["some-res", "rel-b"] and left_out == {"x-att": "attention outputs"}


def test_a_model_whose_hub_saes_read_no_residual_stream_is_said_so(hub, monkeypatch):
    monkeypatch.setattr(sae_store, "hub_releases", lambda model_id: {"m-transcoders": ["a"]})
    at = _steer(sae="hub")
    said = [info.value.replace("\\", "") for info in at.info if "lists none" in info.value]
    assert said == [
        "sae-lens's directory of hub SAEs lists none on the residual stream for gemma-3-270m (its 1 "
        "release reads MLP transcoders, which label no node); choose 'embedded' or 'local folder' "
        "above, or train one with scripts/train_saes.py."
    ]
    assert not [button for button in at.button if button.label == "Load"]


def test_a_hub_load_shows_a_spinner_with_its_time(hub, tmp_path, monkeypatch):
    """Load showed nothing while the SAE downloaded (seconds to minutes): the page sat as it was."""
    import streamlit as st
    from sae_lens import SAE

    shown = []
    spinner = st.spinner

    def recorded(text="", **options):
        shown.append((text, options))
        return spinner(text, **options)

    monkeypatch.setattr(st, "spinner", recorded)
    monkeypatch.setattr(
        SAE,
        "from_pretrained",
        lambda release, sae_id, device="cpu", dtype=None: SAE.load_from_disk(
            str(tmp_path / "sae"), device=device, dtype=dtype
        ),
    )
    at = _steer(sae="hub", sae_release="rel-b", sae_id="x")
    assert not [text for text, _ in shown if "Hugging Face hub" in text]  # no press, no load
    at.button(key="steer.hub.load").click().run()
    assert not at.exception, at.exception
    assert (
        "Loading rel-b/x from the Hugging Face hub (a download the first time)…",
        {"show_time": True},
    ) in shown


def test_the_hub_off_offline_names_the_ways_this_page_offers(tmp_path, monkeypatch):
    """Offline, the page said to load a copy as a local folder, which a shared server does not offer."""
    import huggingface_hub.constants as constants

    from circuitviz.ui.steer import hub_off_sentence

    _steer_setup(tmp_path, monkeypatch)  # HF_HUB_OFFLINE=1
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))  # no hub SAE cached
    at = _steer(sae="hub")
    said = [info.value.replace("\\", "") for info in at.info if "offline" in info.value]
    assert said == [
        "Downloading SAEs from the Hugging Face hub is off because this app works offline (HF_HUB_OFFLINE "
        "is set, as circuitviz sets it unless told otherwise), and the Hugging Face cache holds none of "
        "gemma-3-270m's on the residual stream; choose 'embedded' above for the SAEs that "
        "ship for gemma-3-270m, or copy a hub SAE's folder to this machine and choose 'local folder' "
        "above, or start the app with HF_HUB_OFFLINE=0 where it reaches huggingface.co."
    ]
    from circuitviz.ui.loaders import BROWSER_PATHS_ENV

    monkeypatch.setenv(BROWSER_PATHS_ENV, "0")  # a shared server: no typed folder
    said = [info.value.replace("\\", "") for info in _steer(sae="hub").info if "offline" in info.value]
    assert len(said) == 1 and "folder" not in said[0] and "choose 'embedded' above" in said[0]
    shared = hub_off_sentence("smollm2-135m", [])  # a shared server, no SAE shipped: no folder named
    assert "folder" not in shared and shared.endswith(
        "on the residual stream; start the app with HF_HUB_OFFLINE=0 where it reaches huggingface.co."
    )
