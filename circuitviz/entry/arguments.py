"""The command line's shared arguments: the model to load, the meaningful-task check, and the
paths a command reads and writes, checked before anything loads."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from ..core.text import counted, invisible_kinds, joined
from ..measure.task_validity import CHECK_ENV
from ..query.pairs import ParaphraseError, paraphrase_records, read_pairs_text
from .budgets import checked_edge_count


class BriefParser(argparse.ArgumentParser):
    """An argument parser whose error is its sentence and where to read more, not the whole usage
    (``discover``'s usage runs to about a hundred lines of options, burying the one that matters)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists every option.)\n")


def add_task_check_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-task-check",
        action="store_true",
        help="run even when the corruption does not lower the metric by the threshold (a random-weight "
        f"model's never does; the same as {CHECK_ENV}=off)",
    )


def add_completeness_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--completeness",
        action="store_true",
        help="also measure each circuit's completeness (a random half of it removed from the circuit "
        "and from the whole model, 8 halves: 16 patched runs a budget), printed and kept in the JSON's curve",
    )


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default=None, help="model id or local folder (default: the embedded Gemma-3-270M)"
    )
    parser.add_argument(
        "--device",
        default=None,
        help="cuda, mps, cpu or auto (default, auto: cuda when available, else mps, else cpu)",
    )
    parser.add_argument(
        "--dtype",
        default=None,
        choices=["float32", "float16", "bfloat16"],
        help="the model's precision (default float32 on every device: half precision turns the small "
        "differences circuit scores are made of into rounding noise)",
    )
    parser.add_argument(
        "--backend",
        choices=["hooked", "bridge"],
        help="TransformerLens's HookedTransformer or its TransformerBridge (default: hooked where "
        "TransformerLens converts the model, else the bridge)",
    )


def checked_paths(args) -> str | None:
    """Every file the run reads and every folder it writes into (and the numbers that say what it
    writes), checked before the model loads (a minute's run must not end on a mistyped path), in
    one sentence each; returns the text of the ``--transfer-file`` (None without one)."""
    html_budget = getattr(args, "html_budget", None)
    checked_edge_count("--html-budget", html_budget)  # 1 to what a budget holds, as --budgets
    transfer = getattr(args, "transfer_paraphrases", None)
    if transfer is not None and transfer < 0:
        raise ValueError(f"--transfer-paraphrases must be 0 (none) or more, not {transfer}.")
    written = [(flag, getattr(args, flag, None)) for flag in ("out", "html", "neuronpedia")]
    written = [(flag, path) for flag, path in written if path is not None]
    for flag, path in written:
        check_written_file(flag, path)
    for index, (flag, path) in enumerate(written):  # one file written twice: the second replaced the first
        for other, then in written[index + 1 :]:
            if path.resolve() == then.resolve():
                raise ValueError(f"--{flag} and --{other} name the same file; give each its own.")
    if html_budget is not None and not any(flag in ("html", "neuronpedia") for flag, _ in written):
        raise ValueError("--html-budget sets the budget of --html or --neuronpedia; add one of them.")
    if getattr(args, "setting_paraphrases", None):
        pairs_text("--paraphrases", args.setting_paraphrases)  # read again by the method, after the load
    return pairs_text("--transfer-file", args.transfer_file) if args.transfer_file else None


def pairs_text(flag: str, path) -> str:
    """A paraphrase file's text, its format checked, any refusal naming the flag and the file: with
    --paraphrases and --transfer-file both given, "Line 1 is not 'paraphrase<TAB>corrupted'" said
    neither, and an empty --paraphrases file read "The file source needs paraphrases: give them in
    'paraphrases' ... (--paraphrases FILE on the command line)" to a user who had given one."""
    text = read_pairs_text(path)
    try:
        records = paraphrase_records(text)
    except ParaphraseError as error:
        said = str(error)
        said = said[:1].lower() + said[1:] if said[1:2].islower() else said
        raise ParaphraseError(f"{flag} {path}: {said}") from None
    if not records:
        raise ParaphraseError(
            f"{flag} {path} holds no paraphrase pair; give one paraphrase and its corrupted prompt a "
            "line, as 'paraphrase<TAB>corrupted'."
        )
    hidden = [n for n, record in enumerate(records, 1) if invisible_kinds(record.clean + record.corrupted)]
    if hidden:  # said as discover says it of a prompt (the Paraphrases page names them in its table)
        kinds = invisible_kinds("".join(records[n - 1].clean + records[n - 1].corrupted for n in hidden))
        print(
            f"{flag} {path}: {counted(len(hidden), 'pair')} of {len(records):,} "
            f"({joined([f'p{n}' for n in hidden[:3]])}{' and more' if len(hidden) > 3 else ''}) "
            f"hold invisible characters ({kinds}): the model reads them; they run as written.",
            file=sys.stderr,
        )
    return text


def check_written_file(flag: str, path: Path) -> None:
    """A file the run will write, checked before the run (not after its minutes), in one sentence:
    not a folder, in a folder that exists and that a file can be made in (a probe file, made and
    removed: permissions alone say nothing on /proc or a read-only mount), and writable if it exists."""
    if path.is_dir():
        raise ValueError(f"--{flag} {path} is a folder; give the name of the file to write.")
    if not path.parent.is_dir():
        raise ValueError(
            f"The folder {path.parent} of --{flag} does not exist; create it or give another path."
        )
    if path.exists():
        if not os.access(path, os.W_OK):
            raise ValueError(f"--{flag} {path} cannot be written to; give another path.")
        return
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".circuitviz-probe-"):
            pass
    except OSError:
        raise ValueError(
            f"No file can be written in {path.parent} (--{flag}); give another folder."
        ) from None


def batch_checks(args) -> None:
    """``batch``'s arguments that can fail, checked before anything loads, one sentence each: the
    ``--generate`` family, and the ``--out`` folder (it can be made, or is one already: not a
    file, not under a file or a folder this user cannot write to), and ``--keep-edges`` (1 to what a
    budget holds: 0 or a negative count kept no circuit in the table, unsaid)."""
    checked_edge_count("--keep-edges", getattr(args, "keep_edges", None))
    checked_edge_count("--top-edges", getattr(args, "top_edges", None), least=0)  # -5 kept none, unsaid
    if getattr(args, "generate", None):
        from ..batch.command import DEFAULT_N
        from ..batch.generate import check_family  # the batch's modules load only for the batch command

        check_family(args.generate, getattr(args, "n", None) or DEFAULT_N)
    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; the batch writes a folder, so give a folder's path.")
    parent = folder
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        where = "is a file" if not parent.is_dir() else "cannot be written to"
        raise ValueError(f"The batch folder {folder} cannot be made: {parent} {where}.")
