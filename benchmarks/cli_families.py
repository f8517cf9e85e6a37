"""The command line on tiny random-weight models of many families, built offline.

    python benchmarks/cli_families.py [--families llama3,stablelm,...] [--methods eap-ig]
                                      [--compare] [--keep DIR]

For each family: a 2-layer ``transformers`` model with random weights
(``AutoConfig.for_model`` + ``AutoModelForCausalLM.from_config``) and a byte-level BPE tokenizer
trained here with ``tokenizers`` (a ``PreTrainedTokenizerFast``), both saved with
``save_pretrained`` in one folder; then, as a user would, ``python -m circuitviz discover --model
FOLDER ... --budgets 20 --out out.json`` and ``python -m circuitviz evaluate --circuit out.json
--model FOLDER ...`` as subprocesses, with ``--no-task-check`` (a random model's corruption
decides nothing, so the meaningful-task check would refuse every task). Every norm's weight and bias is
moved off its initial 1 and 0 (``toy_families.perturb_norms``) before saving: at 1 and 0 a norm
whose weight is ignored, or applied at the wrong site, passes every check. One row per family and
method: built, the backend the folder loaded through, how far the logits ``load_model`` gives
are from the ``transformers`` model's own (loaded here, in this process), discover's exit code and
last line, evaluate's exit code, seconds. ``--compare`` also runs ``exact`` and ``eap`` and prints how close
EAP's edge scores are to exact patching's (a linear approximation: close, not equal). Nothing is
downloaded; no assertions (the table goes into docs/models.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from circuitviz.bench.harness import machine_line
from circuitviz.bench.toy_families import CANDIDATE_FAMILIES, FAMILIES, family_config, perturb_norms

SENTENCES = [
    "When {a} and {b} went to the store , {b} gave a drink to {a} .",
    "When {a} and {b} went to the park , {b} gave a book to {a} .",
    "Then {a} and {b} had a long day at the office , and {b} gave a key to {a} .",
    "The cat sat on the mat and the dog ran to the door of the house .",
]
NAMES = ["Mary", "John", "Alice", "Bob", "Carl", "Anna", "Tom", "Sara", "Paul", "Kate"]
CLEAN = "When {a} and {b} went to the store , {b} gave a drink to"
SPECIAL = "<|endoftext|>"


def train_tokenizer(folder: Path):
    """A byte-level BPE tokenizer trained on a few sentences, saved as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [s.format(a=a, b=b) for s in SENTENCES for a in NAMES for b in NAMES if a != b]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=[SPECIAL], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=SPECIAL, eos_token=SPECIAL, unk_token=SPECIAL
    )
    fast.save_pretrained(str(folder))
    return fast


def task_for(tokenizer) -> dict:
    """A clean/corrupted pair of equal token length and single-token answer and foil, from names
    this tokenizer encodes as one token each (with their leading space)."""
    single = [name for name in NAMES if len(tokenizer.encode(" " + name, add_special_tokens=False)) == 1]
    if len(single) < 5:
        raise SystemExit(f"the tokenizer splits too many names: only {single} are one token")
    a, b, c, d, e = single[:5]
    clean, corrupted = CLEAN.format(a=a, b=b), CLEAN.format(a=c, b=d).replace(f", {d}", f", {e}")
    assert len(tokenizer.encode(clean)) == len(tokenizer.encode(corrupted))
    return {"prompt": clean, "corrupted": corrupted, "answer": " " + a, "foil": " " + b}


def build_model(family: str, folder: Path, tokenizer, seed: int = 0) -> str:
    """Save a random-weight model of ``family`` in ``folder``; '' when built, else why not."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        config = family_config(family, vocab_size=len(tokenizer))
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        perturb_norms(model, seed + 1)  # at their initial 1 and 0 a misread norm passes every check
        model.save_pretrained(str(folder))
    except Exception as error:  # a family transformers cannot build here: a row, not a crash
        return f"{type(error).__name__}: {str(error).strip().splitlines()[0][:150]}"
    return ""


def logits_gap(folder: Path, task: dict) -> tuple[str, str]:
    """How far the logits circuitviz reads from the folder (``load_model``, the backend it picks)
    are from the ``transformers`` model's own on the clean prompt, as a share of the largest; the
    HookedTransformer backend checks nothing of the kind at load. (the backend it loaded through,
    the gap), or ('refused', the refusal's sentence)."""
    import torch
    from transformers import AutoModelForCausalLM

    from circuitviz.models import ModelLoadError, load_model
    from circuitviz.models.adapter import adapter_of
    from circuitviz.models.bridge_adapter import is_bridge

    try:
        model = load_model(str(folder))
    except ModelLoadError as error:
        return "refused", str(error)
    adapter = adapter_of(model)
    tokens = adapter.to_tokens(task["prompt"])
    reference = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.no_grad():
        expected = reference(tokens.to("cpu")).logits.float()
        got = adapter.logits(tokens).float().to("cpu")
    gap = float((got - expected).abs().max() / expected.abs().max())
    return ("bridge" if is_bridge(model) else "hooked"), f"{gap:.1e}"


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_cli(arguments: list[str], env: dict, log: Path) -> tuple[int, str, float, str]:
    """(exit code, the last line it printed: stderr's when it failed, stdout's else, seconds, the
    backend: a local folder loads as a HookedTransformer unless the load says it booted the bridge)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "circuitviz", *arguments], capture_output=True, text=True, env=env
    )
    seconds = time.perf_counter() - start
    log.write_text(f"$ {' '.join(arguments)}\n{done.stdout}\n--- stderr\n{done.stderr}", encoding="utf-8")
    shown = last_line(done.stderr) if done.returncode else last_line(done.stdout)
    if done.returncode and "Traceback" in done.stderr:
        shown = "TRACEBACK " + shown
    backend = "bridge" if "booting it through the TransformerBridge" in done.stderr else "hooked"
    return done.returncode, shown, seconds, backend


def task_arguments(task: dict) -> list[str]:
    return [
        "--prompt",
        task["prompt"],
        "--corrupted",
        task["corrupted"],
        "--answer",
        task["answer"],
        "--foil",
        task["foil"],
    ]


def edge_scores(path: Path) -> dict[str, float]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {name: float(edge["score"]) for name, edge in data["edges"].items()}


def compare_scores(exact: Path, eap: Path) -> str:
    """How close EAP's scores are to exact patching's: correlation, and the largest difference
    relative to the largest exact score."""
    import torch

    first, second = edge_scores(exact), edge_scores(eap)
    names = sorted(first)
    x = torch.tensor([first[n] for n in names], dtype=torch.float64, device="cpu")
    y = torch.tensor([second[n] for n in names], dtype=torch.float64, device="cpu")
    correlation = float(torch.corrcoef(torch.stack([x, y]))[0, 1])
    gap = float((x - y).abs().max() / x.abs().max().clamp_min(1e-30))
    return f"corr {correlation:.4f}, max gap {gap:.2e} of the largest"


def run_family(
    family: str,
    root: Path,
    tokenizer_folder: Path,
    task: dict,
    methods: list[str],
    env: dict,
    check_logits: bool = True,
):
    """The rows of one family: (family, method, built, backend, logits against transformers',
    discover rc, its last line, evaluate rc, seconds)."""
    from transformers import AutoTokenizer

    folder = root / family
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_folder))
    tokenizer.save_pretrained(str(folder))
    start = time.perf_counter()
    why_not = build_model(family, folder, tokenizer)
    if why_not:
        yield family, "-", "no: " + why_not, "", "", "", "", "", f"{time.perf_counter() - start:.1f}"
        return
    loaded, gap = logits_gap(folder, task) if check_logits else ("", "-")
    if not methods:  # the load alone: its checks, and the logits against transformers'
        refusal = gap if loaded == "refused" else ""
        shown = "-" if refusal else gap
        yield family, "-", "yes", loaded, shown, "", refusal, "", f"{time.perf_counter() - start:.1f}"
        return
    gap = "refused" if loaded == "refused" else gap
    for method in methods:
        out = folder / f"{method}.json"
        # a random-weight model's corruption decides nothing: the meaningful-task check is off
        common = ["--model", str(folder), *task_arguments(task), "--no-task-check"]
        discover = ["discover", *common, "--method", method, "--budgets", "20", "--out", str(out)]
        rc, line, seconds, backend = run_cli(discover, env, folder / f"{method}-discover.log")
        evaluate_rc, evaluate_line = "-", ""
        if rc == 0:
            evaluate = ["evaluate", "--circuit", str(out), *common]
            code, evaluate_line, more, _ = run_cli(evaluate, env, folder / f"{method}-evaluate.log")
            evaluate_rc, seconds = str(code), seconds + more
            if code:
                line += f" | evaluate: {evaluate_line}"
        yield family, method, "yes", backend, gap, str(rc), line, evaluate_rc, f"{seconds:.1f}"
    if {"exact", "eap"} <= set(methods):
        exact, eap = folder / "exact.json", folder / "eap.json"
        if exact.exists() and eap.exists():
            yield family, "eap vs exact", "", "", "", "", compare_scores(exact, eap), "", ""


def main() -> None:
    every = list(FAMILIES) + list(CANDIDATE_FAMILIES)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", default=",".join(every), help=f"comma separated, of {', '.join(every)}")
    parser.add_argument(
        "--methods",
        default="eap-ig",
        help="comma separated (default eap-ig); '' for the load alone (its checks and the logits)",
    )
    parser.add_argument(
        "--compare", action="store_true", help="also run exact and eap and compare their scores"
    )
    parser.add_argument(
        "--no-logits",
        action="store_true",
        help="skip loading each folder here to compare its logits with transformers'",
    )
    parser.add_argument("--keep", type=Path, default=None, help="build in this folder and keep it (logs too)")
    args = parser.parse_args()
    families = [name.strip() for name in args.families.split(",") if name.strip()]
    unknown = [name for name in families if name not in every]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; choose from {every}")
    methods = [name.strip() for name in args.methods.split(",") if name.strip()]
    if args.compare:
        methods += [name for name in ("exact", "eap") if name not in methods]
    with tempfile.TemporaryDirectory(prefix="circuitviz-families-") as temporary:
        root = args.keep or Path(temporary)
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "CIRCUITVIZ_CACHE": str(root / "cache"),  # a result store of its own: every run computes
        }
        tokenizer_folder = root / "tokenizer"
        tokenizer = train_tokenizer(tokenizer_folder)
        task = task_for(tokenizer)
        print(machine_line())
        print(f"tokenizer: byte-level BPE, {len(tokenizer)} tokens; task {json.dumps(task)}")
        print(
            "| family | method | built | backend | logits vs transformers | discover | its last line | evaluate | seconds |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for family in families:
            for row in run_family(family, root, tokenizer_folder, task, methods, env, not args.no_logits):
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
