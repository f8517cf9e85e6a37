"""The command line's argument parser: every subcommand's flags and their help (``cli`` runs them).

One flag per method setting comes from the method registry (``_add_method_settings``); a help
text here is what ``--help`` prints, so it says what the flag does in every mode it has.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..core.tasks import METRICS
from ..methods import DEFAULT_METHOD, setting_flags
from . import arguments, outputs
from .arguments import BriefParser, add_model_arguments, add_task_check_argument

DESCRIPTION = """Command line: python -m circuitviz discover|evaluate|batch|planted-bench|methods|models
(the console command circuitviz is the same).

Errors a user can cause end in one sentence on stderr and exit status 2, never a traceback.
"""


def _add_task_arguments(
    parser: argparse.ArgumentParser, need_corrupted: bool = True, from_file: bool = False
) -> None:
    said = "; default: the circuit file's own task, for every task flag not given" if from_file else ""
    # evaluate takes what a flag leaves out from the circuit file's task when it is this prompt's
    # (``file_task.fill_from_file``), and proposes only for another prompt; its metric is never
    # switched to logprob (no method there): the help said discover's rules until 2026-12-07
    omitted = (
        "when omitted, the circuit file's for its own prompt, else proposed as the app does"
        if from_file
        else "proposed as the app does when omitted"
    )
    parser.add_argument("--prompt", required=not from_file, help="the clean prompt q" + said)
    parser.add_argument(
        "--corrupted",
        default=None,  # None: not given (proposed); "" or spaces: given empty (refused)
        help=f"q' : the prompt with its key fact replaced (same token length); {omitted}",
    )
    parser.add_argument(
        "--answer",
        default=None,  # None: not given (proposed); "": given empty (refused)
        help=f"the answer token, with its leading space (' Mary'); {omitted}",
    )
    parser.add_argument(
        "--foil", action="append", default=[], help="a wrong-answer token; repeat for several"
    )
    parser.add_argument(
        "--metric",
        default=None,
        choices=list(METRICS),
        help="default: the circuit file's, with its foils, for its own prompt, else logit_diff"
        if from_file
        else "default logit_diff; logprob for a method that needs no corrupted prompt when no --foil is given",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="refuse prompts longer than this many tokens (default 256)",
    )
    add_task_check_argument(parser)


def program_name(argv0: str | None = None) -> str:
    """How the user started the command line, for its usage lines: ``circuitviz`` (the installed
    script) or ``python -m circuitviz`` (the module; argv[0] is then its ``__main__.py``)."""
    name = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    return "circuitviz" if name in ("circuitviz", "circuitviz.exe") else "python -m circuitviz"


def build_parser() -> argparse.ArgumentParser:
    parser = BriefParser(
        prog=program_name(), description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    discover = commands.add_parser("discover", help="find the circuit behind a prompt's answer")
    _add_task_arguments(discover)
    add_model_arguments(discover)
    discover.add_argument(
        "--method",
        default=DEFAULT_METHOD,
        help=f"default: {DEFAULT_METHOD}, the app's default method; see 'python -m circuitviz methods'",
    )
    discover.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="any method setting, by name"
    )
    discover.add_argument(
        "--budgets",
        default=None,
        help="edge budgets, comma separated ((edge, position) units with --positions); default: "
        "Explore's, ten log-spaced up to the whole graph (the model's edges, or the prompt's units)",
    )
    discover.add_argument(
        "--out", type=Path, default=None, help="write the circuit JSON (EAP-IG format) here"
    )
    discover.add_argument(
        "--transfer-paraphrases",
        type=int,
        default=None,
        metavar="N",
        help="measure every circuit on N template paraphrases its method never fitted to or selected "
        "on, printed and kept in the JSON's 'transfer' (default 5 with --out, else 0: not measured)",
    )
    discover.add_argument(
        "--transfer-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="measure transfer on these paraphrase pairs (the formats of --paraphrases), all of them "
        "unless --transfer-paraphrases; those the method used are left out (default: the method's "
        "own --paraphrases file, when it read one)",
    )
    discover.add_argument(
        "--html",
        type=Path,
        default=None,
        help="write the circuit graph as a standalone HTML page (the app's graph download) here",
    )
    discover.add_argument(
        "--html-budget",
        type=int,
        default=None,
        help="the budget drawn by --html and --neuronpedia (default: the smallest reaching NDF 0.8 with at "
        "most 200 edges, else the most faithful of at most 200 edges; with --positions, the same with at "
        "most 40 nodes; the sentence why is printed)",
    )
    discover.add_argument(
        "--neuronpedia",
        type=Path,
        default=None,
        help="write the circuit over token positions as Neuronpedia's graph JSON here (needs --positions)",
    )
    discover.add_argument(
        "--no-cache", action="store_true", help="recompute even when a stored result exists"
    )
    arguments.add_completeness_argument(discover)
    _add_method_settings(discover)

    bench = commands.add_parser(
        "planted-bench", help="score methods against planted circuits: SHD, precision, recall, time"
    )
    bench.add_argument(
        "--methods", default="eap,eap-ig,circuit-lasso,acc++", help="comma separated (default: %(default)s)"
    )
    bench.add_argument("--cases", type=int, default=20, help="how many planted models (default 20)")
    bench.add_argument("--seed", type=int, default=0, help="same seed, same cases; case 0 never changes")
    bench.add_argument("--json", type=Path, default=None, help="write every case's numbers here")
    bench.add_argument("--markdown", type=Path, default=None, help="write the summary table here")

    evaluate = commands.add_parser("evaluate", help="faithfulness of a circuit file on a prompt")
    evaluate.add_argument("--circuit", type=Path, required=True, help="EAP-IG JSON, or a list of edge names")
    _add_task_arguments(evaluate, from_file=True)
    evaluate.add_argument(
        "--other-model",
        action="store_true",
        help="measure a circuit file made on another model of the same shape (such as a fine-tune) on --model",
    )
    add_model_arguments(evaluate)
    arguments.add_completeness_argument(evaluate)
    evaluate.add_argument(
        "--transfer-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="also measure each circuit's NDF on these paraphrase pairs of the prompt (the formats of "
        "discover's --paraphrases), leaving out those the file's method fitted to or selected on",
    )
    evaluate.add_argument("--json", type=Path, default=None, help=outputs.EVALUATION_JSON_HELP)

    _add_batch_parser(commands)

    commands.add_parser("methods", help="list the registered methods")
    commands.add_parser("models", help="list the models circuitviz knows")
    return parser


def _add_method_settings(parser: argparse.ArgumentParser) -> None:
    """One flag per method setting, from the registry (a setting several methods share is one
    flag). A name the parser already uses is left to it (``batch``'s ``--seed`` seeds --generate;
    Best-of-N's seed is ``--set seed=N`` there)."""

    taken = set(parser._option_string_actions)
    group = parser.add_argument_group("method settings (each applies to the methods named in its help)")
    for flag in setting_flags():
        names = [name for name in flag.names if name not in taken]
        if not names:
            continue
        options: dict = {"dest": f"setting_{flag.dest}", "default": None}
        if flag.kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["type"] = flag.kind
            if flag.choices:
                options["choices"] = flag.choices
        options["help"] = f"{flag.help} [{', '.join(flag.methods)}]"
        group.add_argument(*names, **options)


# ----- batch: a dataset of tasks x methods x budgets -------------------------------------------
def _add_batch_parser(commands) -> None:
    batch = commands.add_parser(
        "batch",
        help="discover circuits for a whole dataset (a JSONL/CSV file or generated), locally or on Ray",
        description="Run methods on every task of a dataset into a folder: results.parquet (one row per "
        "task and method), consensus.parquet, manifest.json, and each full result in the result store. "
        "Ctrl-C stops cleanly; the same command again resumes. See docs/datasets.md.",
    )
    source = batch.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--dataset",
        type=Path,
        help="JSONL or CSV: clean, corrupted, answer, foil(s) [, metric, id, family]; or mmlu (with --subjects)",
    )
    source.add_argument("--generate", metavar="FAMILY", help="generate tasks: ioi, arithmetic or factual")
    batch.add_argument(
        "--subjects", default=None, help="MMLU subjects, comma separated ('high school physics'), or all"
    )
    batch.add_argument(
        "--n",
        type=int,
        default=None,
        help="how many tasks --generate makes, or questions --dataset mmlu draws per subject (default "
        "100); with a dataset file, run only its first N tasks",
    )
    batch.add_argument("--seed", type=int, default=0, help="seed of --generate and of --dataset mmlu's draw")
    batch.add_argument("--strict", action="store_true", help="refuse a dataset file with any bad row")
    batch.add_argument(
        "--out", type=Path, required=True, help="the batch folder (created; the same batch again resumes it)"
    )
    batch.add_argument("--methods", default="eap-ig", help="comma separated, e.g. eap-ig,eap")
    batch.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a method setting, by name"
    )
    batch.add_argument(
        "--budgets",
        default=None,
        help="edge budgets, comma separated ((edge, position) units with --positions), or mib: MIB's "
        "ten, 0.1%% to 100%% of the model's edges (the default; refused with --positions: a prompt's units depend on "
        "its length, so give unit counts)",
    )
    batch.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="refuse prompts longer than this many tokens (default 256)",
    )
    add_task_check_argument(batch)
    add_model_arguments(batch)
    batch.add_argument("--executor", default="local", choices=["local", "ray"])
    batch.add_argument("--workers", type=int, default=None, help="Ray workers (default: as many as fit)")
    batch.add_argument(
        "--cpus-per-worker", type=float, default=1.0, help="CPUs each Ray worker takes (default 1)"
    )
    batch.add_argument(
        "--gpus-per-worker",
        type=float,
        default=0.0,
        help="GPUs each Ray worker takes (default 0; 0.5: two per GPU)",
    )
    batch.add_argument("--ray-address", default=None, help="join this Ray cluster (default: a local Ray)")
    batch.add_argument("--ray-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    batch.add_argument(
        "--batch-tasks", type=int, default=16, help="tasks of one length that share a pass (default 16)"
    )
    batch.add_argument(
        "--keep-edges",
        type=int,
        default=None,
        help="keep circuits up to this budget in the table (default 10%% of the model's edges; with "
        "--positions the same count, in units)",
    )
    batch.add_argument(
        "--top-edges",
        type=int,
        default=100,
        help="strongest edges kept per row, with their scores (default 100)",
    )
    batch.add_argument(
        "--consensus",
        type=float,
        default=0.5,
        help="consensus share evaluated on every prompt (default 0.5; 0 for none)",
    )
    batch.add_argument(
        "--store", type=Path, default=None, help="result store folder (default: the shared one)"
    )
    _add_method_settings(batch)
