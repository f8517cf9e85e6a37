"""The bridge part of the GPU check (``gpu_check.py`` runs it; or run it alone):

    python benchmarks/gpu_bridge_check.py [--device cuda] [--skip correctness,split,timings]
    python benchmarks/gpu_bridge_check.py --device cpu --skip correctness --split-devices cpu,cpu
        (a dry run of the split's code on a machine without a GPU)

1. correctness: tiny random models of every family booted through TransformerLens's
   TransformerBridge, EAP, EAP-IG and exact patching on the device against the CPU (float64
   weights; the bridge and transformers take attention's softmax in float32, so 1e-6 of the
   largest score).
2. split: a 4-block model of three families split block by block over two devices (cuda:0 and
   cuda:1 when two GPUs are visible; skipped on one, since the bridge refuses a map that mixes the
   CPU and a GPU; ``--split-devices`` chooses) with
   a transformers device map (``toy_families.split_map``), against the CPU: every tensor the
   engine makes must follow the data it meets.
3. timings: random weights in the shapes of Llama-3.2-1B (float32, bfloat16) and Llama-3.1-8B
   (bfloat16) through the bridge: EAP-IG with 20 steps on a 15-token prompt, best of 2, and the
   peak memory.

One PASS/FAIL line per correctness check; the exit status is 1 when one FAILs.
"""

from __future__ import annotations

import argparse

import torch

from circuitviz.bench.harness import peak_memory_gib, reset_peak_memory, timed, verdict
from circuitviz.bench.toy_families import FAMILIES, random_hf_model, split_map
from circuitviz.bench.toy_models import IOI_TASK, word_tokenizer
from circuitviz.methods import get_method
from circuitviz.models.bridge import bridge_from_hf

METHODS = ("eap", "eap-ig", "exact")
# of the largest score. The bridge and transformers take attention's softmax in float32, so a run
# on another device differs by float32's rounding. Exact patching's score is a patched run's
# metric minus the clean run's: its rounding is the metric's, larger than the smallest scores.
# Measured on the CPU (2026-12-04), weights changed by float32's rounding (x (1 + 1e-7 N(0, 1)))
# move EAP and EAP-IG by at most 8.4e-7 and exact patching by 4.6e-7 to 1.7e-5 (granite, whose
# multipliers scale it up); on the H200 (2026-12-04) the GPU differed from the CPU by at most
# 7.6e-7 (EAP, EAP-IG) and 1.9e-5 (exact: over 1e-6 on 17 of 30 families, granite the most).
TOLERANCE = {"eap": 1e-6, "eap-ig": 1e-6, "exact": 5e-5}
SHAPES = {  # transformers config fields of the real models (random weights)
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256),
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=128256),
}  # fmt: skip


def scores_of(model, method: str) -> torch.Tensor:
    chosen = get_method(method)
    settings = {"cache_scores": False} if "cache_scores" in chosen.Config.__dataclass_fields__ else {}
    return chosen.run_on(model, IOI_TASK, chosen.make_config(settings), budgets=[5]).scores.double()


def compare(label: str, model, host_scores: dict) -> bool:
    ok = True
    for method in METHODS:
        try:
            mine, theirs = scores_of(model, method), host_scores[method]
            gap = float((mine - theirs).abs().max() / theirs.abs().max())
            good = gap <= TOLERANCE[method]
            detail = f"largest difference {gap:.1e} of the largest score"
        except Exception as error:  # a crash is the failure this check exists to show
            good, detail = False, f"{type(error).__name__}: {str(error)[:160]}"
        ok &= good
        print(f"  {label:<28} {method:<8} {detail}  {verdict(good)}")
    return ok


N_LAYERS = 4  # two blocks on each device of a split


def bridge_on(family: str, placement) -> object:
    model = random_hf_model(family, seed=0, n_layers=N_LAYERS)
    if isinstance(placement, dict):
        from accelerate import dispatch_model

        model = dispatch_model(model, device_map=placement)
    else:
        model = model.to(placement)
    return bridge_from_hf(model, word_tokenizer(), name=f"random-{family}")


def correctness(device: str) -> bool:
    print(f"\n== bridge correctness: every family on {device} against the CPU (float64) ==")
    ok = True
    for family in sorted(FAMILIES):
        try:
            host = bridge_on(family, "cpu")  # the reference run, on the host by design
            host_scores = {method: scores_of(host, method) for method in METHODS}
        except Exception as error:  # this transformers version cannot run the family at all
            print(f"  {family:<28} the CPU run failed: {type(error).__name__}: {str(error)[:160]}  FAIL")
            ok = False
            continue
        ok &= compare(family, bridge_on(family, device), host_scores)
    return ok


def split(device: str, devices: list[str] | None = None) -> bool:
    """The split check: ``devices`` (default cuda:0 and cuda:1 when two GPUs are visible, else
    cuda:0 and the CPU) each hold a run of blocks, as ``split_map`` spreads them (the map
    tests/test_split.py checks on simulated devices), against the CPU."""
    if devices is None:
        if torch.cuda.device_count() < 2:
            # TransformerBridge refuses a map that mixes the CPU and a GPU (accelerate would offload
            # to the CPU), so one GPU cannot hold a split; --split-devices cpu,cpu dry-runs the code
            print(
                "\n== bridge split: skipped, one GPU (a split needs two; the bridge refuses CPU offload) =="
            )
            return True
        devices = ["cuda:0", "cuda:1"]
    print(f"\n== bridge split: blocks spread over {' + '.join(devices)}, against the CPU ==")
    ok = True
    for family in ("llama3", "gemma3", "gpt2"):
        host_scores = {method: scores_of(bridge_on(family, "cpu"), method) for method in METHODS}
        try:
            model = bridge_on(family, split_map(random_hf_model(family, seed=0, n_layers=N_LAYERS), devices))
        except Exception as error:
            print(
                f"  {family:<28} split refused: {type(error).__name__}: {str(error)[:160]}  {verdict(False)}"
            )
            ok = False
            continue
        ok &= compare(f"{family} split", model, host_scores)
    return ok


def timings(device: str) -> None:
    print(f"\n== bridge timings on {device}: random weights in real shapes, EAP-IG 20 steps, best of 2 ==")
    from transformers import AutoConfig, AutoModelForCausalLM

    for shape, dtype in (
        ("llama-3.2-1b", torch.float32),
        ("llama-3.2-1b", torch.bfloat16),
        ("llama-3.1-8b", torch.bfloat16),
    ):
        config = AutoConfig.for_model("llama", max_position_embeddings=4096, **SHAPES[shape])
        config.architectures = ["LlamaForCausalLM"]
        with torch.device(device):
            hf_model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=dtype)
        # the word tokenizer (its ids fit any vocabulary): a rented machine has no Llama tokenizer,
        # and the prompt's length, not its words, sets the cost (15 tokens, as gpu_check.py's)
        tokenizer = word_tokenizer()
        model = bridge_from_hf(hf_model, tokenizer, name=shape)
        method = get_method("eap-ig")
        config_ig = method.make_config({"ig_steps": 20})
        reset_peak_memory(device)
        best = min(
            timed(method.run_on, model, IOI_TASK, config_ig, budgets=[100], sync=device)[1] for _ in range(2)
        )
        print(
            f"  {shape:<14} {str(dtype):<15} EAP-IG 20 steps, {model.to_tokens(IOI_TASK.clean).shape[1]} tokens "
            f"{best:7.2f}s   peak {peak_memory_gib(device):.1f} GiB"
        )
        del model, hf_model
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip", default="", help="comma separated: correctness, split, timings")
    parser.add_argument(
        "--split-devices",
        default="",
        help="comma separated devices to split over (e.g. cpu,cpu: a dry run of the split on the CPU)",
    )
    args = parser.parse_args(argv)
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    ok = True
    if "correctness" not in skip:
        ok &= correctness(args.device)
    chosen = [part.strip() for part in args.split_devices.split(",") if part.strip()] or None
    if "split" not in skip and (args.device.startswith("cuda") or chosen):
        ok &= split(args.device, chosen)
    if "timings" not in skip and args.device.startswith("cuda"):
        timings(args.device)
    print(f"\nbridge check: {verdict(ok)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
