"""Train the embedded SAEs: small TopK SAEs on Gemma-3-270M's residual stream, with sae-lens.

Where the text comes from
    The Debian package ``fortunes`` (and ``fortunes-min``): about 2.5 MB of English quotations,
    jokes, literature excerpts, definitions and proverbs under /usr/share/games/fortunes (BSD-style
    licence; see /usr/share/doc/fortunes/copyright). It installs offline from the Debian mirror
    with ``apt-get install fortunes fortunes-min``. Files of ASCII art, non-English text and the
    ethnic-jokes file are left out (``SKIPPED_FILES``).

How to rebuild (about 20-30 minutes on one CPU thread)
    apt-get install -y fortunes fortunes-min
    .venv/bin/python scripts/train_saes.py            # writes assets/saes/gemma-3-270m/
    .venv/bin/python scripts/train_saes.py --help     # layers, width, k, token count, threads

What it does
    1. Splits the corpus into fortunes, shuffles them with a fixed seed and packs their tokens
       into rows of ``--context`` tokens, each row starting with <bos>.
    2. Collects the residual stream after blocks ``--layers`` in one pass per batch that stops
       after the last of them (``activations.residual_stream``), and caches it in a temporary
       file keyed by the corpus and settings, so a second run trains without the model.
    3. Trains one TopK SAE per layer with sae-lens's own ``SAETrainer`` fed from those cached
       activations (an iterator of batches; no hub dataset is needed). The <bos> position is left
       out: its residual is an outlier hundreds of times larger than the others.
    4. Saves each SAE with sae-lens (``save_inference_model``) in float16, then measures on the
       held-out rows: explained variance, L0, dead-feature fraction; and, on the project's
       example prompts, the change of the task metric when the reconstruction replaces the
       residual stream.
    5. Encodes the whole corpus and stores each feature's top-activating contexts and the tokens
       its decoder direction promotes, so labels work without recomputation
       (``features.json.gz`` next to the weights).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import tempfile
import time
from pathlib import Path

import torch

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_timed
from circuitviz.services import assets

CORPUS_DIR = Path("/usr/share/games/fortunes")
# bfloat16 keeps float32's range: Gemma's residual reaches values float16 cannot hold (> 65504)
CACHE_DTYPE = torch.bfloat16
SATURATED = 65000.0  # |activation| at which float16 saturates (max 65504)
SKIPPED_FILES = {"ascii-art", "ethnic", "translate-me", "debian"}
CORPUS_SOURCE = (
    "Debian package 'fortunes' + 'fortunes-min' (/usr/share/games/fortunes; apt-get install fortunes "
    "fortunes-min), files: {files}"
)


# ----- corpus ---------------------------------------------------------------------------------
def read_fortunes(directory: Path) -> tuple[list[str], list[str]]:
    """(texts, file names): every fortune of the chosen files, whitespace collapsed, deduplicated."""
    if not directory.is_dir():
        raise SystemExit(
            f"No corpus at {directory}; install it with 'apt-get install fortunes fortunes-min' "
            "or pass --corpus-dir."
        )
    files = sorted(
        path
        for path in directory.iterdir()
        if path.is_file() and not path.suffix and path.name not in SKIPPED_FILES
    )
    texts: dict[str, None] = {}
    for path in files:
        raw = path.read_text(encoding="utf-8", errors="replace")
        for chunk in raw.split("\n%\n"):
            text = re.sub(r"\s+", " ", chunk).strip()
            letters = sum(character.isalpha() for character in text)
            if len(text) >= 40 and letters >= 0.6 * len(text):
                texts[text] = None
    return list(texts), [path.name for path in files]


def pack_rows(model, texts: list[str], context: int, max_tokens: int, seed: int) -> torch.Tensor:
    """Token rows [rows, context], each starting with <bos>, fortunes concatenated in shuffled order."""
    order = list(texts)
    random.Random(seed).shuffle(order)
    bos = model.tokenizer.bos_token_id
    rows: list[list[int]] = []
    current = [bos]
    for text in order:
        ids = (
            model.to_tokens(text, prepend_bos=False)[0].tolist()
            + model.to_tokens("\n\n", prepend_bos=False)[0].tolist()
        )
        while ids:
            room = context - len(current)
            current += ids[:room]
            ids = ids[room:]
            if len(current) == context:
                rows.append(current)
                current = [bos]
                if len(rows) * (context - 1) >= max_tokens:
                    return torch.tensor(rows)
    return torch.tensor(rows)


def collect_activations(model, rows: torch.Tensor, layers: list[int], batch: int, cache: Path) -> dict:
    """{layer: [rows, context, d_model]} read once and cached in ``cache`` (CACHE_DTYPE)."""
    from circuitviz.labels.residual import residual_stream

    if cache.exists():
        print(f"activations: reusing {cache}")
        return torch.load(cache, weights_only=True)
    out = {
        layer: torch.empty(rows.shape[0], rows.shape[1], model.cfg.d_model, dtype=torch.float16)
        for layer in layers
    }
    start_time = time.time()
    for start in range(0, rows.shape[0], batch):
        captured = residual_stream(model, rows[start : start + batch], layers)
        for layer in layers:
            out[layer][start : start + batch] = captured[layer].to(CACHE_DTYPE)
        done = min(start + batch, rows.shape[0])
        rate = done * rows.shape[1] / (time.time() - start_time)
        print(f"activations: {done}/{rows.shape[0]} rows ({rate:.0f} tokens/s)", flush=True)
    torch.save(out, cache)
    return out


# ----- training --------------------------------------------------------------------------------
def batches(activations: torch.Tensor, batch_size: int, seed: int):
    """An endless iterator of shuffled float32 batches [batch_size, d_model] (sae-lens's DataProvider)."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(activations.shape[0], generator=generator)
        for start in range(0, activations.shape[0] - batch_size + 1, batch_size):
            yield activations[order[start : start + batch_size]].float()


def train_one(activations: torch.Tensor, args, layer: int, model_id: str):
    """A TopK SAE trained by sae-lens's SAETrainer on ``activations`` [tokens, d_model]."""
    from sae_lens.config import LoggingConfig, SAETrainerConfig
    from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig
    from sae_lens.training.sae_trainer import SAETrainer

    from circuitviz.engine import sites

    torch.manual_seed(args.seed + layer)
    sae_cfg = TopKTrainingSAEConfig(
        d_in=activations.shape[1],
        d_sae=args.d_sae,
        k=args.k,
        normalize_activations="expected_average_only_in",
        decoder_init_norm=0.1,
    )
    sae_cfg.metadata.model_name = model_id
    sae_cfg.metadata.hook_name = sites.resid_post(layer)
    sae_cfg.metadata.context_size = args.context
    sae_cfg.metadata.prepend_bos = True
    sae_cfg.metadata.dataset_path = "debian:fortunes"
    sae = TopKTrainingSAE(sae_cfg)
    # Gemma's residual stream is ~85% one constant direction (a few huge dimensions): start the
    # decoder bias at the mean, in the units the trainer scales inputs to (sqrt(d_in) / mean norm),
    # or most features die fitting that constant
    sample = activations[
        torch.randperm(activations.shape[0], generator=torch.Generator().manual_seed(args.seed))[:20_000]
    ]
    sample = sample.float()
    scale = activations.shape[1] ** 0.5 / float(sample.norm(dim=-1).mean())
    with torch.no_grad():
        sae.b_dec.copy_(sample.mean(0) * scale)
    total = args.epochs * activations.shape[0]
    trainer_cfg = SAETrainerConfig(
        total_training_samples=total,
        train_batch_size_samples=args.batch_size,
        lr=args.lr,
        lr_end=args.lr / 10,
        lr_scheduler_name="cosineannealing",
        lr_warm_up_steps=20,
        lr_decay_steps=max(1, total // args.batch_size // 5),
        dead_feature_window=200,
        feature_sampling_window=400,
        logger=LoggingConfig(log_to_wandb=False),
        n_batches_for_norm_estimate=20,
    )
    trainer = SAETrainer(trainer_cfg, sae, batches(activations, args.batch_size, args.seed + layer))
    return trainer.fit()


# ----- feature descriptions -------------------------------------------------------------------
def token_table(model, rows: torch.Tensor) -> dict[int, str]:
    return {int(i): model.tokenizer.decode([int(i)]) for i in rows.unique().tolist()}


def random_contexts(
    rows: torch.Tensor, strings: dict[int, str], count: int, before: int, after: int, seed: int
):
    """Contexts at random corpus positions: the controls of the LLM judge's check."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        row = rng.randrange(rows.shape[0])
        position = rng.randrange(1, rows.shape[1])
        lo, hi = max(1, position - before), min(rows.shape[1], position + after + 1)
        out.append({"tokens": [strings[int(t)] for t in rows[row, lo:hi].tolist()], "target": position - lo})
    return out


# ----- main -----------------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--layers", type=int, nargs="+", default=[3, 9, 15])
    parser.add_argument("--d-sae", type=int, default=2048)
    parser.add_argument("--k", type=int, default=32, help="active features per token (TopK)")
    parser.add_argument("--tokens", type=int, default=150_000, help="corpus tokens to collect")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=8e-4)
    parser.add_argument("--held-out", type=float, default=0.1, help="fraction of rows kept for evaluation")
    parser.add_argument("--top-contexts", type=int, default=10)
    add_threads_argument(parser, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus-dir", type=Path, default=CORPUS_DIR)
    parser.add_argument("--out", type=Path, default=assets.saes_dir())
    parser.add_argument("--collect-only", action="store_true", help="only read and cache activations")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()))
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    apply_threads(args.threads)

    texts, files = read_fortunes(args.corpus_dir)
    model, _ = load_timed(args.model, device="cpu")
    rows = pack_rows(model, texts, args.context, args.tokens, args.seed)
    print(
        f"corpus: {len(texts)} fortunes from {len(files)} files; {rows.shape[0]} rows x {rows.shape[1]} tokens"
    )
    key = hashlib.sha256(
        json.dumps([args.model, args.layers, rows.shape, int(rows.sum())]).encode()
    ).hexdigest()[:16]
    # per-head results and split q/k/v inputs change no activation; reading is much faster without them
    flags = (model.cfg.use_attn_result, model.cfg.use_split_qkv_input)
    model.set_use_attn_result(False)
    model.set_use_split_qkv_input(False)
    acts = collect_activations(model, rows, args.layers, 8, args.cache_dir / f"circuitviz-sae-acts-{key}.pt")
    model.set_use_attn_result(flags[0])
    model.set_use_split_qkv_input(flags[1])
    if args.collect_only:
        return
    from circuitviz.labels.sae_features import (
        CONTEXT_AFTER,
        CONTEXT_BEFORE,
        LabelledSae,
        promoted_tokens,
        reconstruction_quality,
        top_contexts_from_activations,
    )
    from circuitviz.labels.signals import write_corpus_sample
    from circuitviz.labels.steer import reconstruction_metric_change
    from circuitviz.services.sae_store import save_sae

    n_held = max(1, int(args.held_out * rows.shape[0]))
    strings = token_table(model, rows)
    out_root = args.out / args.model
    index = {
        "model": args.model,
        "corpus": CORPUS_SOURCE.format(files=", ".join(files)),
        "corpus_fortunes": len(texts),
        "corpus_tokens": int(rows.shape[0] * (rows.shape[1] - 1)),
        "held_out_tokens": int(n_held * (rows.shape[1] - 1)),
        "architecture": "topk",
        "k": args.k,
        "d_sae": args.d_sae,
        "epochs": args.epochs,
        "trainer": "sae_lens.training.sae_trainer.SAETrainer on cached activations",
        "rebuild": "apt-get install fortunes fortunes-min && .venv/bin/python scripts/train_saes.py",
        "saes": [],
    }
    for layer in args.layers:
        layer_acts = acts[layer]  # [rows, context, d_model]
        # a float16 cache saturates Gemma's massive dimension in a few late-layer tokens: leave them out
        valid = (layer_acts.float().abs() < SATURATED).all(-1)  # [rows, context]
        print(f"layer {layer}: {int((~valid[:, 1:]).sum())} saturated tokens left out", flush=True)
        train = layer_acts[n_held:, 1:][valid[n_held:, 1:]]
        started = time.time()
        sae = train_one(train, args, layer, args.model)
        train_seconds = time.time() - started
        folder = out_root / f"layer{layer}-resid_post"
        save_sae(sae, folder)
        loaded = LabelledSae.load(folder, model)  # float16 weights as shipped, computed in float32
        held = layer_acts[:n_held, 1:][valid[:n_held, 1:]].float()
        quality = reconstruction_quality(loaded.sae, held)
        features, fired = top_contexts_from_activations(
            loaded.sae,
            layer_acts,
            rows,
            strings,
            args.top_contexts,
            CONTEXT_BEFORE,
            CONTEXT_AFTER,
            valid=valid,
        )
        quality["dead_fraction"] = round(float((fired == 0).float().mean()), 4)
        quality["metric_change"] = reconstruction_metric_change(model, loaded)
        quality["train_seconds"] = round(train_seconds, 1)
        promoted = promoted_tokens(model, loaded.sae.W_dec.detach(), top_k=8)
        for feature, tokens in zip(features, promoted):
            feature.update(tokens)
        payload = {
            "layer": layer,
            "hook_name": loaded.hook_name,
            "features": features,
            "random_contexts": random_contexts(rows, strings, 200, CONTEXT_BEFORE, CONTEXT_AFTER, args.seed),
        }
        with gzip.open(folder / "features.json.gz", "wt", encoding="utf-8") as handle:
            json.dump(payload, handle, ensure_ascii=False, separators=(",", ":"))
        index["saes"].append({"layer": layer, "path": folder.name, "hook_name": loaded.hook_name, **quality})
        print(f"layer {layer}: {json.dumps(quality)}", flush=True)
    write_corpus_sample(texts, out_root)
    (out_root / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {out_root}")


if __name__ == "__main__":
    main()
