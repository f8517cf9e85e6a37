"""The GPU check: every method on the accelerator against the CPU, then the engine's GPU timings.

    make gpu-check            (or: python benchmarks/gpu_check.py [--device cuda] [--skip ...])

Run it whenever a GPU machine is available and put its date and figures in docs/benchmarks.md.

1. correctness: every registered method on GPT-2-, Gemma- and Llama-shaped tiny float64 models,
   run on the device and on the CPU; scores, circuits and curve must agree to 1e-9 (an optimisation,
   whose hard decisions turn on the last bit, to within how far the CPU's own result moves when
   the weights change in their last bits, ``toy_models.rounding_band``). Then logit-lens
   labels, SAE hover labels and steering (when sae-lens is installed), an ACC++ knockout and the
   estimates. One PASS/FAIL line each.
2. timings: random weights in the real models' shapes (their weights do not travel to a rented
   GPU), a 15-token IOI-like prompt, EAP-IG with 20 steps and a 10-budget curve, best of 2:
   Gemma-3-270M, Llama-3.2-1B in float32 and bfloat16, Llama-3.1-8B in bfloat16, and Best-of-N
   with 8 paraphrases, Edge Pruning (20 steps, warm start EAP-IG) and the score ensemble on the
   Gemma shape, then EAP, RelP, AtP*, EAP-GP, CD-T, flow routes and CircuitLasso (components) on
   that shape. Peak memory is printed beside each.
3. long prompts: 512 tokens on the Llama-1B shape, 128 on the 8B shape; the peak memory used
   against the estimate of ``limits.py``, an upper bound (PASS when the run stays under it).

Nothing is asserted (benchmarks never are); the exit status is 1 when a correctness line FAILs.
"""

from __future__ import annotations

import argparse
import datetime

import torch

from circuitviz.bench.harness import fresh_cache, peak_memory_gib, reset_peak_memory, timed, verdict
from circuitviz.bench.toy_models import (
    IOI_TASK,
    NUDGES,
    compare_results,
    random_model,
    rounding_band,
    tiny_model,
)
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask
from circuitviz.entry.limits import estimate_request
from circuitviz.methods import available_methods, get_method

BUDGETS = (3, 8, 20, 60)
CURVE_BUDGETS = [20, 50, 100, 200, 500, 1000, 2000, 3000, 5000, 8000]
TOLERANCE = 1e-9
# timed on the Gemma shape after the rows above (ACDC, which patches edge by edge, is left out)
OTHER_METHODS = ("eap", "relp", "atp-star", "eap-gp", "cd-t", "flow-routes", "circuit-lasso")


def quiet_config(method, **settings):
    fields = set(method.Config.__dataclass_fields__)
    if "cache_scores" in fields:
        settings.setdefault("cache_scores", False)
    return method.make_config({k: v for k, v in settings.items() if k in fields})


# ----- 1. correctness --------------------------------------------------------------------------
def correctness(device: str) -> bool:
    print(f"\n== correctness: every method on {device} against the CPU (tiny float64 models) ==")
    all_ok = True
    for shape in ("gpt2", "gemma", "llama"):
        host_model = tiny_model(shape, seed=0)
        device_model = tiny_model(shape, seed=0).to(device)
        for name in sorted(available_methods()):
            method = get_method(name)
            config = quiet_config(method)
            try:
                host = method.run_on(host_model, IOI_TASK, config, budgets=BUDGETS)
                on_device = method.run_on(device_model, IOI_TASK, config, budgets=BUDGETS)
                gap = compare_results(on_device, host)
                scores_ok = gap["scores"] <= TOLERANCE or not method.scores_are_exact
                ok = scores_ok and gap["metrics"] <= TOLERANCE and gap["circuits_equal"]
                detail = f"scores {gap['scores']:.1e}, curve {gap['metrics']:.1e}, circuits equal {gap['circuits_equal']}"
                if not method.scores_are_exact and not ok:
                    ok, band = within_rounding_band(gap, method, shape, config)
                    detail += (
                        f"; an optimisation: CPU runs with the weights nudged by {NUDGES[0]:g}-{NUDGES[-1]:g} "
                        f"move it up to scores {band['scores']:.1e}, curve {band['metrics']:.1e}"
                    )
            except Exception as error:  # a crash is the failure this check exists to show
                ok, detail = False, f"{type(error).__name__}: {str(error)[:160]}"
            all_ok &= ok
            print(f"  {shape:>5} {name:<20} {detail}  {verdict(ok)}")
    all_ok &= lasso_reduction(device)
    all_ok &= labels_and_signals(device)
    return all_ok


def lasso_reduction(device: str) -> bool:
    """CircuitLasso's randomized reduction (the tiny models take the exact one) on the device
    against the CPU, on groups of the Gemma-3-270M shape's readers (cuSOLVER's approximate SVD
    there, LAPACK here); a direction's sign is either, as the Lasso's fit does not see it."""
    from circuitviz.lasso.units import principal_scores

    generator = torch.Generator(device="cpu").manual_seed(0)
    ok_all = True
    for n, m, d in ((4, 202, 256), (1, 202, 4096)):
        # a spectrum with distinct leading values (halving), as a unit's is, plus noise
        strength = 2.0 ** -torch.arange(12, dtype=torch.float32, device="cpu")
        groups = [
            torch.randn(n, m, 12, generator=generator, device="cpu")
            * strength
            @ torch.randn(n, 12, d, generator=generator, device="cpu")
            + 1e-3 * torch.randn(n, m, d, generator=generator, device="cpu")
            for _ in range(3)
        ]
        host = principal_scores(groups, 4, seed=0, dtype=torch.float64)
        there = principal_scores([g.to(device) for g in groups], 4, seed=0, dtype=torch.float64).cpu()
        there = there * torch.sign((there * host).sum(1, keepdim=True))
        gap = float((there - host).abs().max() / host.abs().max())
        ok = gap <= TOLERANCE
        ok_all &= ok
        print(f"  lasso reduction [{n}x{m}x{d}] x 3 groups: within {gap:.1e}  {verdict(ok)}")
    return ok_all


def within_rounding_band(gap: dict, method, shape: str, config) -> tuple[bool, dict]:
    """Whether a device run of an optimisation whose circuits differ from the CPU's is as close to
    the CPU's as the CPU's own runs on weights changed in their last bits are (their circuits move
    too, and the curve no further; ``toy_models.rounding_band``), and that band."""
    band = rounding_band(method, shape, config, BUDGETS)
    # scores of an optimisation are where it ended and are not held; its circuits' curve is
    return band["circuits_move"] and gap["metrics"] <= band["metrics"] + TOLERANCE, band


def labels_and_signals(device: str) -> bool:
    from circuitviz.acc import svd as acc_svd
    from circuitviz.acc.ablation import run_knockouts
    from circuitviz.acc.forward import run_forward
    from circuitviz.acc.trace import Tracer, TraceSettings
    from circuitviz.core.tasks import prepare_task
    from circuitviz.labels.logit_lens import logit_lens_labels, next_token_probabilities

    task = PromptTask(IOI_TASK.clean, "", " Mary", (" John",))
    results, estimates = {}, {}
    for where in ("cpu", device):
        model = tiny_model("gemma", seed=3).to(where)
        # before any run: a CUDA run teaches the model its measured memory per position, which
        # then replaces the formula's (the CPU measures none)
        estimates[where] = estimate_request(model, IOI_TASK, "eap-ig")
        spec = GraphSpec.from_model(model)
        prepared = prepare_task(model, task, need_corrupted=False)
        forward = run_forward(model, prepared.clean_tokens)
        svd = acc_svd.load_svd(model, use_disk=False)
        trace = Tracer(model, forward, svd, TraceSettings(k=1.5, n_random=0)).run(prepared)
        found = [(d, s) for d in trace.decisions for side in "qk" for s in d.signals[side]]
        results[where] = {
            "logit lens labels": logit_lens_labels(model, spec, prepared),
            "next-token probabilities": [t for t, _ in next_token_probabilities(model, task.clean)],
            "ACC++ knockout": [
                round(v, 9) for v in run_knockouts(model, svd, trace, prepared, [found])["metric"]
            ],
        }
        sae_part = sae_labels(model, task)
        if sae_part is not None:
            results[where].update(sae_part)
    ok_all = True
    for key, value in results["cpu"].items():
        ok = value == results[device].get(key)
        ok_all &= ok
        print(f"  labels/signals: {key:<28} {verdict(ok)}")
    # the estimates differ by design: an accelerator's first guess of a gradient pass's memory
    # per position is the cautious one (engine/memory.py); each must read its own device
    host, there = estimates["cpu"], estimates[device]
    ok = host.device == "cpu" and there.device == device.split(":")[0]
    ok &= there.memory_bytes >= host.memory_bytes
    ok_all &= ok
    print(
        f"  labels/signals: estimate reads the device    {host.device} {host.memory_bytes / 1e6:.1f} MB, "
        f"{there.device} {there.memory_bytes / 1e6:.1f} MB  {verdict(ok)}"
    )
    if "SAE hover labels" not in results["cpu"]:
        print("  labels/signals: SAE hover labels and steering skipped (sae-lens is not installed here)")
    return ok_all


def sae_labels(model, task) -> dict | None:
    try:
        from sae_lens import StandardSAE, StandardSAEConfig
    except ImportError as error:
        print(f"  sae-lens does not import here ({type(error).__name__}: {str(error)[:120]})")
        return None
    from circuitviz.labels.sae_features import LabelledSae, hover_labels
    from circuitviz.labels.steer import steer

    d_in = model.cfg.d_model
    cfg = StandardSAEConfig(d_in=d_in, d_sae=48, dtype="float64")
    cfg.metadata.hook_name = "blocks.0.hook_resid_post"
    sae = StandardSAE(cfg)
    generator = torch.Generator(device="cpu").manual_seed(1)
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn(d_in, 48, generator=generator, dtype=torch.float64) / d_in**0.5)
        sae.W_dec.copy_(torch.randn(48, d_in, generator=generator, dtype=torch.float64) / 48**0.5)
    sae = sae.to(next(model.parameters()).device)
    saes = [LabelledSae(sae, 0, "blocks.0.hook_resid_post", "check")]
    steered = steer(model, task, [(0, 7), (0, 9)], saes, n_random=2, top_k=3)
    return {
        "SAE hover labels": hover_labels(model, task.clean, ["input", "a0.h1", "m0"], saes, top_k=2),
        "steering": round(steered["after"]["metric"], 9),
    }


# ----- 2. timings --------------------------------------------------------------------------------
def prompt_of(n_tokens: int) -> PromptTask:
    """An IOI-like prompt of exactly ``n_tokens`` tokens (with <bos>) in the word tokenizer."""
    filler = "the cat sat on the mat and".split()
    body = "When Mary and John went to the store , John gave a drink to".split()
    words = [filler[i % len(filler)] for i in range(max(0, n_tokens - 1 - len(body)))] + body
    words = words[-(n_tokens - 1) :]
    corrupted = ["Alice" if w == "Mary" else "Bob" if w == "John" else w for w in words]
    return PromptTask(" ".join(words), " ".join(corrupted), " Mary", (" John",))


def timed_run(
    model,
    method_name: str,
    task: PromptTask,
    budgets,
    device: str,
    repeats: int = 2,
    max_tokens=None,
    **settings,
):
    """Best of ``repeats`` runs: (wall seconds, the result's own timings, peak memory GiB);
    ``max_tokens`` raises the prompt-length limit for the long prompts."""
    method = get_method(method_name)
    config = quiet_config(method, **settings)
    best = None
    for _ in range(repeats):
        reset_peak_memory(device)
        limit = {"max_tokens": max_tokens} if max_tokens else {}
        result, seconds = timed(method.run_on, model, task, config, budgets=budgets, sync=device, **limit)
        if best is None or seconds < best[0]:
            best = (seconds, dict(result.timings), peak_memory_gib(device), result)
    return best


def timings(device: str, shapes: list[str]) -> None:
    print(
        f"\n== timings on {device}: random weights in real shapes, EAP-IG 20 steps, 10 budgets, best of 2 =="
    )
    task = prompt_of(15)
    rows = [
        ("gemma-3-270m", torch.float32, "eap-ig", {}),
        ("llama-3.2-1b", torch.float32, "eap-ig", {}),
        ("llama-3.2-1b", torch.bfloat16, "eap-ig", {}),
        ("llama-3.1-8b", torch.bfloat16, "eap-ig", {}),
        ("gemma-3-270m", torch.float32, "bon", {"n_paraphrases": 8, "include_mismatched": True}),
        ("gemma-3-270m", torch.float32, "edge-pruning", {}),
        ("gemma-3-270m", torch.float32, "ensemble", {}),
        # the field's other methods and CircuitLasso (components) beside EAP-IG on the same shape
        *(("gemma-3-270m", torch.float32, name, {}) for name in OTHER_METHODS),
    ]
    model, built = None, None
    for shape, dtype, method, settings in rows:
        if shape not in shapes:
            continue
        if built != (shape, dtype):  # one model per shape and dtype, built when the rows reach it
            model = None
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            model, built = random_model(shape, dtype=dtype, device=device), (shape, dtype)
        n_edges = GraphSpec.from_model(model).n_edges
        seconds, parts, peak, _ = timed_run(model, method, task, CURVE_BUDGETS, device, **settings)
        phases = ", ".join(f"{k.removesuffix('_s')} {v:.2f}" for k, v in parts.items())
        label = f"{shape} {str(dtype).removeprefix('torch.')} {method}"
        print(
            f"  {label:<34} {n_edges:>9} edges  whole run {seconds:6.2f} s  ({phases})  peak {peak:.1f} GiB"
        )


def profile_gemma(device: str, methods: list[str]) -> None:
    """Where each method's Gemma-shape run spends its time: wall time against the GPU's busy time,
    the number of kernel launches and of reads back to the host (each waits for the queue), and
    the operators taking the most device time."""
    from torch.profiler import ProfilerActivity, profile

    model = random_model("gemma-3-270m", dtype=torch.float32, device=device)
    task = prompt_of(15)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    for name in methods:
        print(f"\n== profile on {device}: Gemma-3-270M shape, {name}, 10 budgets ==")
        timed_run(model, name, task, CURVE_BUDGETS, device, repeats=1)  # warm-up
        with profile(activities=activities) as profiler:
            seconds, parts, _, _ = timed_run(model, name, task, CURVE_BUDGETS, device, repeats=1)
        events = profiler.key_averages()
        device_us = sum(getattr(e, "self_device_time_total", 0) for e in events)
        launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cudaLaunchKernelExC"))
        reads = sum(
            e.count for e in events if e.key in ("aten::_local_scalar_dense", "cudaStreamSynchronize")
        )
        phases = ", ".join(f"{k} {v:.2f}" for k, v in parts.items() if isinstance(v, float))
        print(
            f"  wall {seconds:.3f} s, device busy {device_us / 1e6:.3f} s, kernel launches {launches}, "
            f"scalar reads (item) {reads} ({phases})"
        )
        sort_by = "self_device_time_total" if device_us else "self_cpu_time_total"
        print(events.table(sort_by=sort_by, row_limit=10))
        print(events.table(sort_by="count", row_limit=8))


def long_prompts(device: str, shapes: list[str]) -> None:
    print(f"\n== long prompts on {device}: peak memory against limits.py's estimate ==")
    for shape, dtype, n_tokens in (
        ("llama-3.2-1b", torch.float32, 512),
        ("llama-3.1-8b", torch.bfloat16, 128),
    ):
        if shape not in shapes:
            continue
        model = random_model(shape, dtype=dtype, device=device)
        task = prompt_of(n_tokens)
        estimate = estimate_request(model, task, "eap-ig", n_budgets=len(CURVE_BUDGETS))
        try:
            seconds, parts, peak, _ = timed_run(
                model, "eap-ig", task, CURVE_BUDGETS, device, repeats=1, max_tokens=n_tokens
            )
            ratio = peak * 2**30 / estimate.memory_bytes
            print(
                f"  {shape} {n_tokens} tokens: {seconds:.1f} s, peak {peak:.1f} GiB, estimate "
                f"{estimate.memory_bytes / 2**30:.1f} GiB (used/estimated {ratio:.2f}) {verdict(ratio <= 1.0)}"
            )
        except torch.cuda.OutOfMemoryError as error:
            print(f"  {shape} {n_tokens} tokens: out of memory ({str(error)[:120]}) FAIL")
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip", default="", help="comma separated: correctness, timings, long, bridge")
    parser.add_argument(
        "--profile",
        nargs="?",
        const="eap-ig",
        default="",
        help="also profile these methods' Gemma-shape runs (comma separated; alone: eap-ig)",
    )
    parser.add_argument(
        "--shapes",
        default="gemma-3-270m,llama-3.2-1b,llama-3.1-8b",
        help="real-model shapes to time (random weights)",
    )
    args = parser.parse_args()
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    shapes = [part.strip() for part in args.shapes.split(",") if part.strip()]
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    print(f"circuitviz GPU check, {datetime.date.today()}, torch {torch.__version__}, {name}")
    print(f"cache: {fresh_cache('circuitviz-gpu-check-')}")
    ok = True
    if "correctness" not in skip:
        ok = correctness(args.device)
    if "timings" not in skip:
        timings(args.device, shapes)
    if "long" not in skip:
        long_prompts(args.device, shapes)
    if args.profile:
        profile_gemma(args.device, [part.strip() for part in args.profile.split(",") if part.strip()])
    if "bridge" not in skip:  # TransformerBridge: families, a split over two devices, 1B/8B timings
        from gpu_bridge_check import main as bridge_check

        ok &= bridge_check(["--device", args.device]) == 0
    print(f"\ncorrectness: {verdict(ok)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
