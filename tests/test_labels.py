"""SAE labels and steering: round trips, exact interventions, brute-force checks, safe markup.

Logic runs on the tiny Gemma-shaped model with small random sae-lens SAEs; a few end-to-end
checks use the embedded model and the SAEs shipped in assets/saes.
"""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.engine.metric import metric_from_residual
from circuitviz.engine.prefix import final_residual
from circuitviz.labels import sae_features as sae_labels
from circuitviz.labels.residual import final_residual_with_edits, residual_stream
from circuitviz.labels.sae_features import (
    LabelledSae,
    circuit_node_features,
    context_text,
    describe_features_on_texts,
    feature_activations,
    feature_label,
    node_shares,
    top_contexts_from_activations,
)
from circuitviz.labels.steer import (
    circuit_nodes,
    gender_bias_experiment,
    reconstruction_edit,
    run_with_edits,
    sign_test,
    steer,
    zeroing_edit,
)
from circuitviz.render import context_html
from circuitviz.services import sae_store
from circuitviz.services.sae_store import SaeUnavailable, save_sae

PROMPT = IOI_TASK.clean
TASK = PromptTask(PROMPT, "", " Mary", (" John",))


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gemma", seed=3)


def make_sae(d_in: int, layer: int, d_sae: int = 48, kind: str = "standard", seed: int = 0, dead: int = 6):
    """A random sae-lens SAE on blocks.{layer}.hook_resid_post; the first ``dead`` features never fire."""
    from sae_lens import StandardSAE, StandardSAEConfig, TopKSAE, TopKSAEConfig

    if kind == "topk":
        cfg = TopKSAEConfig(d_in=d_in, d_sae=d_sae, k=8, dtype="float64")
        sae = TopKSAE(cfg)
    else:
        cfg = StandardSAEConfig(d_in=d_in, d_sae=d_sae, dtype="float64")
        sae = StandardSAE(cfg)
    cfg.metadata.hook_name = f"blocks.{layer}.hook_resid_post"
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn(d_in, d_sae, generator=generator, dtype=torch.float64) / d_in**0.5)
        sae.W_dec.copy_(torch.randn(d_sae, d_in, generator=generator, dtype=torch.float64) / d_sae**0.5)
        sae.b_enc.copy_(0.1 * torch.randn(d_sae, generator=generator, dtype=torch.float64))
        sae.b_enc[:dead] = -1e6  # never active
        sae.b_dec.copy_(0.05 * torch.randn(d_in, generator=generator, dtype=torch.float64))
    return sae


def labelled(sae, layer: int) -> LabelledSae:
    return LabelledSae(sae, layer, f"blocks.{layer}.hook_resid_post", "test")


def metric_with_features_zeroed(model, task, saes, features) -> float:
    """The metric with ``features`` [(layer, feature)] zeroed, computed here from the definition
    (residual after block ``layer`` minus each chosen feature's activation times its decoder row,
    <bos> untouched; later SAEs encode what reaches them) on TransformerLens hooks and the full
    logits, sharing no code with ``labels.steer``."""
    prepared = prepare_task(model, task, need_corrupted=False)
    by_layer = {s.layer: s for s in saes}
    chosen: dict[int, list[int]] = {}
    for layer, feature in features:
        chosen.setdefault(layer, []).append(feature)

    def remove(x, hook, layer):
        sae = by_layer[layer].sae
        ids = torch.tensor(sorted(chosen[layer]), device=x.device)
        acts = sae.encode(x.to(sae.W_enc.dtype))[..., ids]  # [batch, pos, n_chosen]
        removed = (acts @ sae.W_dec[ids]).to(x.dtype)  # [batch, pos, d_model]
        removed[:, 0] = 0
        return x - removed

    hooks = [
        (f"blocks.{layer}.hook_resid_post", lambda x, hook, layer=layer: remove(x, hook, layer))
        for layer in chosen
    ]
    with torch.no_grad():
        logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks)[0, -1]
    return float(logits[prepared.answer_id] - logits[list(prepared.foil_ids)].mean())


# ----- loading -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["standard", "topk"])
def test_saved_sae_round_trips_exactly(tmp_path, tiny, kind):
    sae = make_sae(tiny.cfg.d_model, 1, kind=kind)
    save_sae(sae, tmp_path / "f64", dtype=torch.float64)
    loaded = LabelledSae.load(tmp_path / "f64", tiny)
    assert loaded.layer == 1 and loaded.hook_name == "blocks.1.hook_resid_post"
    for name, parameter in sae.state_dict().items():
        assert torch.equal(loaded.sae.state_dict()[name], parameter), name
    # float16 on disk, as the embedded SAEs ship: exactly the rounded weights come back
    save_sae(sae, tmp_path / "f16")
    assert json.loads((tmp_path / "f16" / "cfg.json").read_text())["dtype"] == "float16"
    half = LabelledSae.load(tmp_path / "f16", tiny)
    for name, parameter in sae.state_dict().items():
        assert torch.equal(half.sae.state_dict()[name], parameter.half().double()), name


def test_feature_activations_equal_sae_lens_encode(tmp_path, tiny):
    from sae_lens import SAE

    save_sae(make_sae(tiny.cfg.d_model, 0, kind="topk"), tmp_path / "sae", dtype=torch.float64)
    ours = LabelledSae.load(tmp_path / "sae", tiny)
    reference = SAE.load_from_disk(str(tmp_path / "sae"), dtype="float64")
    residual = residual_stream(tiny, tiny.to_tokens(PROMPT), [0])[0]
    assert torch.equal(feature_activations(ours.sae, residual), reference.encode(residual))


def test_loading_errors_are_one_sentence(tmp_path, tiny):
    with pytest.raises(SaeUnavailable, match="Nothing exists"):
        sae_labels.load_local_sae(str(tmp_path / "missing"), tiny)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SaeUnavailable, match="no cfg.json"):
        sae_labels.load_local_sae(str(tmp_path / "empty"), tiny)
    save_sae(make_sae(tiny.cfg.d_model + 1, 0), tmp_path / "wide", dtype=torch.float64)
    with pytest.raises(SaeUnavailable, match="size 17"):
        sae_labels.load_local_sae(str(tmp_path / "wide"), tiny)
    odd = make_sae(tiny.cfg.d_model, 0)
    odd.cfg.metadata.hook_name = "blocks.0.hook_mlp_out"
    save_sae(odd, tmp_path / "mlp", dtype=torch.float64)
    with pytest.raises(SaeUnavailable, match="residual-stream SAEs"):
        sae_labels.load_local_sae(str(tmp_path / "mlp"), tiny)


def _damage_cfg(**fields):
    def change(folder):
        config = json.loads((folder / "cfg.json").read_text())
        (folder / "cfg.json").write_text(json.dumps({**config, **fields}))

    return change


def _damage_weights(change_tensors):
    def change(folder):
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(folder / "sae_weights.safetensors"))
        change_tensors(tensors)
        save_file(tensors, str(folder / "sae_weights.safetensors"))

    return change


def _descriptions_file(payload):
    def change(folder):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        (folder / "features.json.gz").write_bytes(data if isinstance(payload, bytes) else gzip.compress(data))

    return change


GOOD_FEATURE = {"contexts": [{"tokens": ["When", " Mary"], "target": 1}], "promotes": [" Mary"]}
SAE_DAMAGE = {  # found by loading 450 randomly damaged copies of an embedded SAE and steering with each
    "no decoder bias in cfg": (
        _damage_cfg(apply_b_dec_to_input=None),
        "gives apply_b_dec_to_input null where true or false belongs",
    ),  # a TypeError at the first prompt
    "a NaN switch": (_damage_cfg(apply_b_dec_to_input=float("nan")), "apply_b_dec_to_input NaN"),  # silent
    "a width that is text": (_damage_cfg(d_sae="48"), 'gives d_sae "48" where a whole number from 1 belongs'),
    "an infinite decoder weight": (
        _damage_weights(lambda t: t["W_dec"].view(-1).__setitem__(0, float("inf"))),
        "encodes a plain vector into values that are not finite",
    ),
    "an unknown normalisation": (
        _damage_cfg(normalize_activations="x"),
        "normalize_activations must be none",
    ),  # 2 sentences
    "a weight missing": (
        _damage_weights(lambda t: t.pop("b_dec")),
        'Missing key(s) in state_dict: "b_dec"',
    ),  # 2 lines
    "NaN weights": (
        _damage_weights(lambda t: t["W_enc"].view(-1).__setitem__(0, float("nan"))),
        "holds NaN values in W_enc",
    ),  # every feature silent
    "integer weights": (
        _damage_weights(lambda t: t.update(W_dec=t["W_dec"].to(torch.int32))),
        "stores W_dec as I32",
    ),
    "descriptions not gzip": (_descriptions_file(b"not gzip"), "does not read as feature descriptions"),
    "descriptions of another SAE": (
        _descriptions_file({"features": [GOOD_FEATURE] * 3, "layer": 0}),
        "describes 3 features, but the SAE has 48",
    ),  # KeyError at a feature past the third
    "a description of the wrong kind": (
        _descriptions_file(
            {"features": [GOOD_FEATURE] * 7 + [{"contexts": 5}] + [GOOD_FEATURE] * 40, "layer": 0}
        ),
        "feature 7's contexts are not token lists",
    ),
    "a layer of the wrong kind": (
        _descriptions_file({"features": [GOOD_FEATURE] * 48, "layer": {}}),
        "its layer is {}",
    ),
}


@pytest.mark.parametrize("damage", sorted(SAE_DAMAGE))
def test_a_damaged_sae_folder_is_one_sentence_at_load(damage, tmp_path, tiny):
    from sentences import assert_one_sentence

    save_sae(make_sae(tiny.cfg.d_model, 0), tmp_path / "sae", dtype=torch.float64)
    _descriptions_file({"features": [GOOD_FEATURE] * 48, "layer": 0})(tmp_path / "sae")
    assert sae_labels.load_local_sae(str(tmp_path / "sae"), tiny).features is not None  # sound before
    change, says = SAE_DAMAGE[damage]
    change(tmp_path / "sae")
    with pytest.raises(SaeUnavailable) as refused:
        sae_labels.load_local_sae(str(tmp_path / "sae"), tiny)
    assert says in str(refused.value)
    assert_one_sentence(str(refused.value))


def test_a_search_for_saes_passes_over_cfg_files_that_are_no_saes(tmp_path, tiny):
    """CircuitLasso's SAE units search a folder tree for cfg.json files: one that is a list, gives
    d_in as a dict or its metadata as a number raised (AttributeError, TypeError) before."""
    from circuitviz.services.sae_store import find_saes

    save_sae(make_sae(tiny.cfg.d_model, 1), tmp_path / "good", dtype=torch.float64)
    for name, text in [("list", "[]"), ("d_in", '{"d_in": {}}'), ("meta", '{"d_in": 16, "metadata": 5}'),
                       ("hook", '{"d_in": 16, "hook_name": 7}'), ("bytes", "\udcff")]:  # fmt: skip
        (tmp_path / name).mkdir()
        (tmp_path / name / "cfg.json").write_text(text, errors="surrogateescape")
    found = find_saes(str(tmp_path), tiny.cfg.d_model)
    assert [(layer, [entry[1].name for entry in entries]) for layer, entries in found.items()] == [
        (1, ["good"])
    ]


def test_resid_pre_sae_reads_the_previous_layer(tmp_path, tiny):
    sae = make_sae(tiny.cfg.d_model, 0)
    sae.cfg.metadata.hook_name = "blocks.1.hook_resid_pre"
    save_sae(sae, tmp_path / "pre", dtype=torch.float64)
    assert LabelledSae.load(tmp_path / "pre", tiny).layer == 0


def test_hub_is_unavailable_offline_in_one_sentence(monkeypatch, tiny):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SaeUnavailable) as error:
        sae_labels.load_hub_sae("gemma-scope-2-270m-pt-res", "layer_12_width_16k_l0_small", tiny)
    message = str(error.value)
    assert "offline" in message and message.count(". ") == 0 and message.endswith(".")


def test_hub_releases_for_gemma_3_270m_are_listed_offline():
    releases = sae_store.hub_releases("gemma-3-270m")
    assert "gemma-scope-2-270m-pt-res" in releases
    assert any(sae_id.startswith("layer_12") for sae_id in releases["gemma-scope-2-270m-pt-res"])


# ----- the intervention ----------------------------------------------------------------------
def _clean_final(model, tokens):
    return final_residual(model, tokens, [])


def test_zeroing_nothing_reproduces_the_clean_run(tiny):
    tokens = tiny.to_tokens(PROMPT)
    layer = labelled(make_sae(tiny.cfg.d_model, 0), 0)
    edited = final_residual_with_edits(tiny, tokens, {0: zeroing_edit(layer, [])})
    assert torch.equal(edited, _clean_final(tiny, tokens))


def test_zeroing_features_that_are_already_zero_changes_nothing(tiny):
    tokens = tiny.to_tokens(PROMPT)
    sae = make_sae(tiny.cfg.d_model, 0, dead=6)
    acts = feature_activations(sae, residual_stream(tiny, tokens, [0])[0])
    assert not bool(acts[..., :6].any())
    edited = final_residual_with_edits(tiny, tokens, {0: zeroing_edit(labelled(sae, 0), range(6))})
    assert torch.equal(edited, _clean_final(tiny, tokens))


def test_zeroing_removes_exactly_the_features_decoder_contribution(tiny):
    """At the last layer the edit is visible directly: x - sum_f a_f W_dec[f] at every position but <bos>."""
    tokens = tiny.to_tokens(PROMPT)
    last = tiny.cfg.n_layers - 1
    sae = make_sae(tiny.cfg.d_model, last, dead=0)
    x = residual_stream(tiny, tokens, [last])[last]  # [1, pos, d_model]
    acts = feature_activations(sae, x)
    chosen = acts[0, -1].nonzero().flatten()[:3].tolist()
    assert chosen, "the random SAE should have active features at the last position"
    expected = x[0, -1] - acts[0, -1, chosen] @ sae.W_dec[chosen]
    edited = final_residual_with_edits(tiny, tokens, {last: zeroing_edit(labelled(sae, last), chosen)})
    torch.testing.assert_close(edited[0], expected, rtol=1e-10, atol=1e-10)


def test_reconstruction_edit_replaces_with_the_reconstruction(tiny):
    tokens = tiny.to_tokens(PROMPT)
    last = tiny.cfg.n_layers - 1
    sae = make_sae(tiny.cfg.d_model, last)
    x = residual_stream(tiny, tokens, [last])[last]
    edited = final_residual_with_edits(tiny, tokens, {last: reconstruction_edit(labelled(sae, last))})
    torch.testing.assert_close(edited[0], sae.decode(sae.encode(x))[0, -1])


def test_steer_reports_before_after_and_random_baseline(tiny):
    sae = labelled(make_sae(tiny.cfg.d_model, 0), 0)
    prepared = prepare_task(tiny, TASK, need_corrupted=False)
    clean_metric = float(metric_from_residual(tiny, prepared, _clean_final(tiny, prepared.clean_tokens))[0])
    nothing = steer(tiny, TASK, [], [sae])
    assert nothing["before"]["metric"] == nothing["after"]["metric"] == clean_metric
    assert nothing["random"]["runs"] == []
    result = steer(tiny, TASK, [(0, 7), (0, 9)], [sae], n_random=3, top_k=4)
    assert result["before"]["metric"] == clean_metric
    # zeroing two active features moves the metric, by what the definition gives
    assert abs(result["after"]["metric"] - clean_metric) > 1e-6
    expected = metric_with_features_zeroed(tiny, TASK, [sae], [(0, 7), (0, 9)])
    assert result["after"]["metric"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert result["before"]["top_tokens"] == nothing["before"]["top_tokens"][:4]
    assert result["change"] == pytest.approx(result["after"]["metric"] - clean_metric)
    assert len(result["random"]["runs"]) == 3
    for run in result["random"]["runs"]:
        assert len(run["features"]) == 2 and not {(0, 7), (0, 9)} & {tuple(f) for f in run["features"]}
    assert [f["feature"] for f in result["features"]] == [7, 9]
    with pytest.raises(SaeUnavailable, match="No loaded SAE reads layer 1"):
        steer(tiny, TASK, [(1, 0)], [sae])
    with pytest.raises(SaeUnavailable, match="does not exist"):
        steer(tiny, TASK, [(0, 10_000)], [sae])


# ----- node labels ---------------------------------------------------------------------------
def test_node_shares_match_a_hand_computation(tiny):
    sae = make_sae(tiny.cfg.d_model, 0)
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(4, tiny.cfg.d_model, generator=generator, dtype=torch.float64)
    out = torch.randn(4, tiny.cfg.d_model, generator=generator, dtype=torch.float64)
    acts = sae.encode(x)
    expected = torch.minimum((out @ sae.W_enc).clamp(min=0), acts)
    torch.testing.assert_close(node_shares(sae, x, out), expected)
    assert not bool(node_shares(sae, x, torch.zeros_like(out)).any())


def test_circuit_node_features_rank_by_the_nodes_share(tiny):
    saes = [labelled(make_sae(tiny.cfg.d_model, 0, seed=1), 0)]
    labels = circuit_node_features(tiny, PROMPT, ["input", "a0.h1", "m0", "a1.h0", "logits"], saes, top_k=4)
    assert "logits" not in labels
    assert labels["a1.h0"]["sae"] is None and "layer 1" in labels["a1.h0"]["reason"]
    str_tokens = [tiny.tokenizer.decode([t]) for t in tiny.to_tokens(PROMPT)[0].tolist()]
    for node in ("input", "a0.h1", "m0"):
        features = labels[node]["features"]
        assert 0 < len(features) <= 4
        shares = [f["share"] for f in features]
        assert shares == sorted(shares, reverse=True)
        for feature in features:
            assert 0 < feature["share"] <= feature["activation"] + 1e-9
            assert 1 <= feature["position"] < len(str_tokens)
            assert feature["token"] == str_tokens[feature["position"]]
    with pytest.raises(SaeUnavailable, match="not a node"):
        circuit_node_features(tiny, PROMPT, ["a9.h9"], saes)
    # every unknown node named at once, with the model's own ranges (a user fixes them in one go)
    with pytest.raises(SaeUnavailable) as raised:
        circuit_node_features(tiny, PROMPT, ["a0.h1", "foo", "m9"], saes)
    message = str(raised.value)
    assert message.startswith("'foo' and 'm9' are not nodes that write to")
    n_layers, n_heads = tiny.cfg.n_layers, tiny.cfg.n_heads
    assert f"a0.h0 to a{n_layers - 1}.h{n_heads - 1}" in message and f"m0 to m{n_layers - 1}" in message
    hovers = sae_labels.hover_labels(tiny, PROMPT, ["m0", "a1.h0"], saes, top_k=2)
    assert len(hovers["m0"]) == 2 and hovers["m0"][0].startswith("L0/") and hovers["a1.h0"] == []


def test_top_contexts_match_brute_force():
    generator = torch.Generator().manual_seed(0)
    sae = make_sae(8, 0, d_sae=16, dead=2)
    activations = torch.randn(5, 9, 8, generator=generator, dtype=torch.float64)
    rows = torch.randint(0, 20, (5, 9), generator=generator)
    strings = {i: f"t{i}" for i in range(20)}
    features, fired = top_contexts_from_activations(
        sae, activations, rows, strings, n_top=3, before=2, after=1
    )
    acts = sae.encode(activations[:, 1:])  # [rows, pos - 1, d_sae]
    for feature in range(16):
        per_row = acts[:, :, feature].max(1).values
        expected = sorted([v for v in per_row.tolist() if v > 0], reverse=True)[:3]
        got = [c["activation"] for c in features[feature]["contexts"]]
        assert got == pytest.approx([round(v, 3) for v in expected], abs=1e-3)
        assert fired[feature] == float((acts[:, :, feature] > 0).sum())
        for context in features[feature]["contexts"]:
            assert context["tokens"][context["target"]].startswith("t")
    assert features[0]["contexts"] == [] and features[0]["frequency"] == 0


def test_descriptions_computed_on_texts_point_at_the_firing_token(tiny):
    sae = labelled(make_sae(tiny.cfg.d_model, 1, seed=2), 1)
    texts = [
        "When Mary and John went to the store",
        "The cat sat on the mat",
        "Paris is the capital of France",
    ]
    describe_features_on_texts(tiny, sae, texts, n_top=2)
    assert len(sae.features) == sae.d_sae
    feature = next(i for i, f in enumerate(sae.features) if f["contexts"])
    context = sae.features[feature]["contexts"][0]
    best = 0.0
    for text in texts:  # the context's activation is the feature's maximum over the texts
        residual = residual_stream(tiny, tiny.to_tokens(text), [1])[1][0]
        acts = feature_activations(sae.sae, residual)[1:, feature]
        words = [tiny.tokenizer.decode([t]) for t in tiny.to_tokens(text)[0, 1:].tolist()]
        if max(acts.tolist()) > best:
            best = max(acts.tolist())
            firing_word = words[int(acts.argmax())]
    assert context["activation"] == pytest.approx(best, abs=1e-3)
    assert context["tokens"][context["target"]] == firing_word
    description = sae_labels.feature_description(tiny, sae, feature)
    assert description["promotes"] and description["contexts"]


def test_labels_contain_no_executable_markup():
    context = {
        "tokens": ["<script>", "alert(1)", "</script>", "<img src=x onerror=alert(2)>", "\"'&"],
        "target": 3,
    }
    rendered = context_html(context)
    assert "<script" not in rendered and "<img" not in rendered
    assert "&lt;img src=x onerror=alert(2)&gt;" in rendered and "<mark>" in rendered
    assert "&quot;&#x27;&amp;" in rendered
    label = feature_label({"layer": 3, "feature": 1, "contexts": [context], "promotes": ["<b>"]})
    assert label.startswith("L3/1:")  # plain text: renderers escape it like any prompt text
    assert context_text(context) == "<script>alert(1)</script><<<img src=x onerror=alert(2)>>>\"'&"


# ----- the gender-bias procedure ---------------------------------------------------------------
def test_circuit_nodes_of_a_hand_made_mask(tiny):
    spec = GraphSpec.from_model(tiny)
    mask = spec.mask_from_edge_names(["input->a0.h1<q>", "a0.h1->m1", "m1->logits"])
    assert circuit_nodes(spec, mask) == ["input", "a0.h1", "m1"]


def test_sign_test():
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(3, 3) == 1.0


def test_gender_bias_experiment_runs_end_to_end_on_a_tiny_model(tiny):
    saes = [labelled(make_sae(tiny.cfg.d_model, 0, seed=4, dead=0), 0)]
    item = {
        "clean": "When Mary and John went to the store , John gave a drink to",
        "corrupted": "When Alice and Bob went to the store , Carl gave a drink to",
        "answer": " Mary",
        "foil": " John",
        "paraphrases": [
            {
                "clean": "When Mary and John went to the park , John gave a ball to",
                "corrupted": "When Alice and Bob went to the park , Carl gave a ball to",
            },
            {
                "clean": "When Mary and Tom went to the store , Tom gave a drink to",
                "corrupted": "When Anna and Bob went to the store , Carl gave a drink to",
            },
        ],
    }
    pairs = [
        ("John went to the store", "Mary went to the store"),
        ("Bob sat on the mat", "Alice sat on the mat"),
    ]
    from circuitviz.labels import steer as steer_module

    result = steer_module.gender_bias_experiment(
        tiny, saes, [item], budget=40, method="eap", threshold=0.0, probe_pairs=pairs
    )
    row = result["prompts"][0]
    assert row["candidates"] == 3
    assert row["best"]["ndf"] >= row["worst"]["ndf"]
    prepared = prepare_task(tiny, PromptTask(item["clean"], "", " Mary", (" John",)), need_corrupted=False)
    before = run_with_edits(tiny, prepared, {})["metric"]
    assert row["bias_before"] == pytest.approx(abs(before))
    for side in ("best", "worst"):
        features = [tuple(f) for f in row[side]["gender_features"]]
        after = (
            run_with_edits(tiny, prepared, steer_module._edits(saes, features))["metric"]
            if features
            else before
        )
        assert row[side]["reduction"] == pytest.approx(abs(before) - abs(after))
    assert result["best_wins"] + result["worst_wins"] <= 1
    assert gender_bias_experiment is steer_module.gender_bias_experiment


# ----- the embedded SAEs -------------------------------------------------------------------------
def test_embedded_saes_ship_round_trip_and_describe(embedded_model):
    from safetensors.torch import load_file

    saes = sae_labels.load_embedded_saes(embedded_model, "gemma-3-270m")
    index = sae_store.embedded_index("gemma-3-270m")
    assert [s.layer for s in saes] == sorted(entry["layer"] for entry in index["saes"])
    for labelled_sae, folder in zip(saes, sae_store.embedded_sae_folders("gemma-3-270m")):
        stored = load_file(str(folder / "sae_weights.safetensors"))
        for name, tensor in stored.items():
            assert tensor.dtype == torch.float16
            assert torch.equal(labelled_sae.sae.state_dict()[name], tensor.float()), name
        assert len(labelled_sae.features) == labelled_sae.d_sae
        assert {"explained_variance", "l0", "dead_fraction", "metric_change"} <= set(labelled_sae.quality)
        live = next(f for f in labelled_sae.features if f["contexts"])
        assert live["promotes"] and 0 <= live["contexts"][0]["target"] < len(live["contexts"][0]["tokens"])


def test_embedded_node_labels_and_steering(embedded_model):
    saes = sae_labels.load_embedded_saes(embedded_model, "gemma-3-270m")
    task = PromptTask("The nurse said that", "", " she", (" he",))
    labels = circuit_node_features(embedded_model, task.clean, ["a2.h1", "m9", "m15"], saes, top_k=3)
    for node in ("a2.h1", "m9", "m15"):
        assert labels[node]["features"], node
        assert labels[node]["sae_layer"] >= int(node[1:].split(".")[0])
    nothing = steer(embedded_model, task, [], saes)
    assert nothing["after"] == nothing["before"]
    layer = labels["m9"]["sae_layer"]
    chosen = [(layer, f["feature"]) for f in labels["m9"]["features"]]
    result = steer(embedded_model, task, chosen, saes, n_random=2)
    assert result["before"] == nothing["before"] and len(result["random"]["runs"]) == 2
    # zeroing m9's features moves the metric, by what the definition gives
    assert result["after"]["metric"] != pytest.approx(result["before"]["metric"], abs=1e-3)
    expected = metric_with_features_zeroed(embedded_model, task, saes, chosen)
    assert result["after"]["metric"] == pytest.approx(expected, rel=1e-4, abs=1e-4)
    assert result["change"] == pytest.approx(expected - result["before"]["metric"], rel=1e-4, abs=1e-4)


# ----- the Steer page ------------------------------------------------------------------------------
def _steer_setup(tmp_path, monkeypatch) -> None:
    """The Steer page's tests: a tiny model as the app's, an SAE of its width in tmp_path/sae,
    the cache under tmp_path, offline, no LLM."""
    import circuitviz.ui.loaders as loaders

    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    save_sae(make_sae(model.cfg.d_model, 0, seed=6, dead=0).float(), tmp_path / "sae", dtype=torch.float32)
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(loaders, "MODEL_LOADER", lambda model_id, device: model)


def _steer_folder_inputs(at, tmp_path, nodes: str | None = None) -> None:
    """Fill the Steer page with the SAE folder ``_steer_setup`` wrote and the IOI prompt, answer
    and foil (and ``nodes`` when given), then run it."""
    at.radio(key="steer.source").set_value("local folder").run()
    at.text_input(key="steer.folder").set_value(str(tmp_path / "sae")).run()
    at.text_input(key="steer.prompt").set_value(PROMPT)
    at.text_input(key="steer.answer").set_value(" Mary")
    at.text_input(key="steer.foil").set_value(" John")
    if nodes is not None:
        at.text_input(key="steer.nodes").set_value(nodes)
    at.run()


def test_steer_page_labels_nodes_and_zeroes_features(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    _steer_setup(tmp_path, monkeypatch)
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.switch_page("pages/steer.py").run()
    assert not at.exception, at.exception
    # the shipped SAEs read Gemma-3-270M's residual stream, not this model's
    if sae_store.embedded_index("gemma-3-270m"):
        assert at.error and "size 640" in at.error[0].value
    else:  # none ship: a state of the model, said as an info (tests/test_steer_no_saes.py)
        assert not at.error and "No SAEs ship" in at.info[0].value
    at.radio(key="steer.source").set_value("hub").run()
    assert any("offline" in info.value for info in at.info)
    _steer_folder_inputs(at, tmp_path, "a0.h0, m0, a1.h1")
    assert not at.exception, at.exception
    options = at.multiselect(key="steer.features").options
    assert options and all(option.startswith(("a0.h0:", "m0:")) for option in options)
    at.multiselect(key="steer.features").select(options[0]).run()
    at.button(key="steer.zero").click().run()
    assert not at.exception, at.exception
    # the features' table (what each feature does) comes first, then the zeroing's figures
    tables = [table.value for table in at.table]
    assert list(tables[0].columns) == ["node", "feature", "node's part of it", "at", "what it does"]
    figures = tables[1]  # the metric named in its column, what was zeroed in each row
    assert list(figures.columns) == ["zeroed", "logit difference", "change"]
    assert list(figures["zeroed"])[:2] == ["nothing (the model as it is)", "the 1 chosen feature"]
    # an answer of several tokens is said under the boxes before any press, and Zero is off
    at.text_input(key="steer.answer").set_value(" Mary Mary").run()
    assert not at.exception, at.exception
    assert at.error and "not one" in at.error[0].value and at.button(key="steer.zero").disabled
    at.text_input(key="steer.answer").set_value(" Mary").run()
    at.text_input(key="steer.prompt").set_value("").run()  # an empty prompt: one sentence, nothing else
    assert not at.exception, at.exception
    errors = [error.value for error in at.error]
    assert len(errors) == 1 and errors[0].startswith("The prompt is empty"), errors
    at.text_input(key="steer.prompt").set_value(PROMPT).run()
    at.text_input(key="steer.nodes").set_value(" , ").run()  # no node: said, not an empty page
    assert not at.exception, at.exception
    assert any("Type at least one node" in info.value for info in at.info)
    at.text_input(key="steer.nodes").set_value("a0.h0, m0, a1.h1").run()
    assert any("LLM labels are off" in caption.value for caption in at.caption)
    # no circuit for this prompt yet: one press opens Explore with this prompt, answer and foil
    assert any("No circuit of this prompt is open" in caption.value for caption in at.caption)
    at.button(key="steer.explore").click().run()
    assert not at.exception, at.exception
    assert any(title.value == "Explore a prompt's circuit" for title in at.title)
    assert [box.value for box in at.text_area if box.value == PROMPT] == [PROMPT]


def _steer_from_link(query: dict, sae_folder):
    """The Steer page opened from a link with ``query``, its SAE read from ``sae_folder``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query.items():
        at.query_params[name] = value
    at.switch_page("pages/steer.py").run()
    at.radio(key="steer.source").set_value("local folder").run()
    at.text_input(key="steer.folder").set_value(str(sae_folder)).run()
    assert not at.exception, at.exception
    return at


def _tiny_app_with_an_sae(tmp_path, monkeypatch) -> None:
    """The app on the tiny model, its cache under ``tmp_path``, offline, no LLM labels, and an
    SAE of the tiny model's width saved in ``tmp_path / "sae"``."""
    import circuitviz.ui.loaders as loaders
    from circuitviz.bench.toy_models import tiny_app_model

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(loaders, "MODEL_LOADER", tiny_app_model)
    width = tiny_app_model("tiny", None).cfg.d_model
    save_sae(make_sae(width, 0, seed=6, dead=0).float(), tmp_path / "sae", dtype=torch.float32)


def test_steer_opened_from_a_link_reads_the_stored_circuit(tmp_path, monkeypatch):
    """A Steer link opened in a new browser said "No circuit has been computed for this prompt
    yet" while the result store held the circuit its link names (an audit): it reads it now."""
    pytest.importorskip("streamlit")
    from explore_session import QUERY, explore_session, run_it

    import circuitviz.ui.loaders as loaders

    _tiny_app_with_an_sae(tmp_path, monkeypatch)

    def steer_from_the_link():
        return [caption.value for caption in _steer_from_link(QUERY, tmp_path / "sae").caption]

    assert any("No circuit of this prompt is open" in c for c in steer_from_the_link())  # none stored
    explored = run_it(explore_session())  # Explore computes it, and the store keeps it
    assert not explored.exception, explored.exception
    loaders._REMEMBERED.clear()
    said = steer_from_the_link()
    assert any(c.startswith("The ") and "nodes of the circuit at budget" in c for c in said), said


def test_steer_after_a_code_change_says_why_and_its_button_computes_the_circuit(tmp_path, monkeypatch):
    """A Steer link opened after the server restarted on changed code found no circuit (the store's
    keys hold the engine's digest), said "a circuit computed before is read from the result store,
    not computed again", and its button opened Explore unrun: it says why and the button runs it."""
    pytest.importorskip("streamlit")
    from explore_session import QUERY, explore_session, run_it

    import circuitviz.core.keys as keys
    import circuitviz.ui.loaders as loaders
    from circuitviz.ui import steer

    _tiny_app_with_an_sae(tmp_path, monkeypatch)
    explored = run_it(explore_session())  # stored under this code's digest
    assert not explored.exception, explored.exception
    loaders._REMEMBERED.clear()
    monkeypatch.setattr(keys, "engine_digest", lambda: "0.0.0+changed")  # the code changed since
    at = _steer_from_link(QUERY, tmp_path / "sae")
    assert steer.NO_CIRCUIT in [c.value for c in at.caption]
    at.button(key="steer.explore").click().run()  # Explore opens and runs it
    assert not at.exception, at.exception
    assert any(title.value == "Explore a prompt's circuit" for title in at.title)
    assert any(metric.label == "NDF" for metric in at.metric), "Explore did not run the circuit"
    at.switch_page("pages/steer.py").run()  # back on Steer: the circuit is open
    at.radio(key="steer.source").set_value("local folder").run()
    at.text_input(key="steer.folder").set_value(str(tmp_path / "sae")).run()
    assert not at.exception, at.exception
    said = [c.value for c in at.caption]
    assert any(c.startswith("The ") and "nodes of the circuit at budget" in c for c in said), said


def test_steer_page_keeps_its_example_foil_to_its_own_example(tmp_path, monkeypatch):
    """A prompt chosen elsewhere (a link) with no foil is not paired with the example's ' he'."""
    pytest.importorskip("streamlit")

    _steer_setup(tmp_path, monkeypatch)

    def boxes(query: dict) -> dict:
        at = _steer_from_link(query, tmp_path / "sae")
        return {key: at.text_input(key=f"steer.{key}").value for key in ("prompt", "answer", "foil")}

    assert boxes({"prompt": PROMPT, "answer": " Mary"}) == {"prompt": PROMPT, "answer": " Mary", "foil": ""}
    assert boxes({}) == {"prompt": "The nurse said that", "answer": " she", "foil": " he"}  # the example


def test_signal_top_contexts_match_brute_force(tiny):
    from circuitviz.labels.signals import signal_top_contexts

    generator = torch.Generator().manual_seed(8)
    p = torch.randn(tiny.cfg.d_model, generator=generator, dtype=torch.float64)
    q = torch.randn(tiny.cfg.d_model, generator=generator, dtype=torch.float64)
    texts = [
        "When Mary and John went to the store",
        "The cat sat on the mat",
        "Paris is the capital of France",
    ]
    contexts = signal_top_contexts(tiny, 1, p, q, texts, n_top=3)
    assert len(contexts) == 3
    best = []
    for text in texts:
        tokens = tiny.to_tokens(text)
        x = residual_stream(tiny, tokens, [0])[0][0]  # the residual entering block 1
        x = x / (x.pow(2).mean(-1, keepdim=True) + tiny.cfg.eps).sqrt()
        words = [tiny.tokenizer.decode([t]) for t in tokens[0].tolist()]
        pairs = [
            (float((x[d] @ p) * (q @ x[s])), words[d], words[s])
            for d in range(1, len(words))
            for s in range(1, d + 1)
        ]
        best.append(max(pairs))
    best.sort(reverse=True)
    for context, (score, destination, source) in zip(contexts, best):
        assert context["score"] == pytest.approx(score, abs=1e-3)
        assert context["tokens"][context["target"]] == destination
        assert context["tokens"][context["source"]] == source
        assert context["source"] <= context["target"]
    marked = context_text(contexts[0])
    assert "<<" in marked and "[[" in marked
    assert context_text({"tokens": ["a", " b"], "target": 1, "source": 1}) == "a<<[[ b]]>>"


def test_gender_feature_scores_match_a_hand_computation(tiny):
    from circuitviz.labels.steer import gender_feature_scores

    saes = [labelled(make_sae(tiny.cfg.d_model, layer, seed=layer, dead=0), layer) for layer in (0, 1)]
    pairs = [("John went to the store", "Mary went to the store"), ("When John and", "When Bob and Tom")]
    scores = gender_feature_scores(tiny, saes, pairs)  # the second pair differs in length: skipped
    tokens = torch.cat([tiny.to_tokens(pairs[0][0]), tiny.to_tokens(pairs[0][1])])
    for sae in saes:
        acts = feature_activations(sae.sae, residual_stream(tiny, tokens, [sae.layer])[sae.layer][:, 1:])
        expected = (acts[0] - acts[1]).abs().sum(0) / (acts.sum((0, 1)) / 2 + 1)
        torch.testing.assert_close(scores[sae.layer], expected.float())
    with pytest.raises(SaeUnavailable, match="equal token lengths"):
        gender_feature_scores(tiny, saes, [pairs[1]])
