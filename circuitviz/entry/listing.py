"""The command line's listing and benchmark commands: ``methods``, ``models``, ``planted-bench``.

Errors a user can cause end in one sentence (ValueError, said by ``cli.main``), never a traceback.
"""

from __future__ import annotations

import sys

from ..bench.planted_benchmark import format_table as bench_table
from ..bench.planted_benchmark import run_bench, write_report
from ..methods import DEFAULT_METHOD, available_methods, get_method
from ..models import SUPPORTED_MODELS
from .arguments import check_written_file

# planted models a run may build: each is trained and scored by every method (the default 20 take
# minutes); an unbounded count built its case list first and reached 20 GB before the first case
MAX_CASES = 1000


def cmd_methods(args) -> int:
    import dataclasses

    def typed(value) -> str:  # a list setting as the command line takes it: comma separated
        return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)

    for name, method in sorted(available_methods().items()):
        fields = dataclasses.fields(method.Config)
        settings = ", ".join(f"{f.name}={typed(f.default)}" for f in fields) or "no settings"
        print(f"{name:<20} {method.label}: {method.summary} [{settings}]")
        if method.without_corrupted:  # what its figures use where --corrupted is left out
            print(f"{'':<20} {method.without_corrupted} --corrupted gives your own.")
    # a reviewer asked to run "the default method" found it neither here nor in discover --help
    print(f"The default method (discover without --method, and the app's): {DEFAULT_METHOD}.")
    return 0


def cmd_models(args) -> int:
    for model_id, info in SUPPORTED_MODELS.items():
        print(f"{model_id:<28} {getattr(info, 'description', '')}")
    return 0


# whether the progress line waits for its end (a later line would join it), and what it shows
_LINE = {"open": False, "shown": ""}


def progress_line(phase: str, fraction: float) -> None:
    """A run's progress on one line of stderr, redrawn in place when what it says changes: runs
    report at every layer's cancel check, and on a CPU one chunk is a whole phase, so EAP-IG's
    scoring said "score 0.0%" about 50 times, which a log (stderr not a terminal) kept as one
    line of them. A finished phase's last line is not drawn again either: paraphrase pruning's
    passes after its last step report the learning's 100 % once more at each block, and printed
    "learning masks 100.0%" on 19 more lines."""
    phase = getattr(phase, "value", phase)  # a Report by its plain name, not 'Report.SCORE'
    text = f"  {phase:<10} {100 * fraction:5.1f}%"
    if text == _LINE["shown"] and (_LINE["open"] or fraction >= 1):
        return
    print("\r" + text, end="\n" if fraction >= 1 else "", file=sys.stderr, flush=True)
    _LINE["open"], _LINE["shown"] = fraction < 1, text


def end_progress_line() -> None:
    """End a progress line a run left open, so what follows starts a line of its own: an error
    read "  score        0.0%error: CD-T's decomposition diverged ..."."""
    if _LINE["open"]:
        print(file=sys.stderr, flush=True)
        _LINE["open"] = False


def cmd_planted_bench(args) -> int:
    methods = [name.strip() for name in args.methods.split(",") if name.strip()]
    if not methods:
        raise ValueError("--methods is empty; name methods such as eap,eap-ig,circuit-lasso.")
    if not 1 <= args.cases <= MAX_CASES:
        raise ValueError(
            f"--cases must be from 1 to {MAX_CASES:,} (each is a model trained and scored by every "
            f"method), not {args.cases:,}."
        )
    for name in methods:  # a mistyped name is refused at once, not reported as 'unavailable' per case
        get_method(name)
    written = [(flag, path) for flag, path in (("json", args.json), ("markdown", args.markdown)) if path]
    if len(written) == 2 and written[0][1].resolve() == written[1][1].resolve():
        raise ValueError("--json and --markdown name the same file; give each its own.")
    for flag, path in written:  # before the benchmark's minutes, not after them
        check_written_file(flag, path)
    command = f"python -m circuitviz planted-bench --methods {','.join(methods)} --cases {args.cases}"
    command += f" --seed {args.seed}" if args.seed else ""
    report = run_bench(methods, args.cases, args.seed, progress=progress_line, command=command)
    print(f"planted-circuit benchmark: {args.cases} cases, {report.seconds:.1f}s")
    print(bench_table(report))
    write_report(report, args.json, args.markdown)
    for _, path in written:
        print(f"wrote {path}")
    return 0
