"""The ``circuitviz batch`` command's parts that are not argument parsing (``entry/cli.py`` calls
them): reading a dataset file as the command's flags ask, and what the command prints at the end
(each method's CPR and CMD on the scale ``discover`` and ``results.parquet`` use, its curve, and
every failed row's reason)."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy

from ..core.curves import area_under_curve
from ..core.text import counted, score_text
from ..details.kinds import reference_words
from .atlas import BatchTable, _matrix, curve_bands, mib_scores
from .dataset import MAX_PROBLEMS_SHOWN, invisible_line, read_dataset
from .table import TABLE
from .units import over_positions

DEFAULT_N = 100  # --generate's tasks (MMLU: per subject) when --n is not given


def read_file_tasks(path: Path, strict: bool, n: int | None, say) -> tuple[list, list[str], str]:
    """(tasks, problems, origin) of a dataset file: each bad row said (``say``) with its line and
    left out, or with ``strict`` the file refused after naming them; ``n``: only the first n tasks
    run (said, never silently)."""
    loaded = read_dataset(path)
    problems = loaded.problems
    for line in problems[:MAX_PROBLEMS_SHOWN]:
        say(line if strict else f"skipped {line}")
    if len(problems) > MAX_PROBLEMS_SHOWN:
        say(
            f"... and {len(problems) - MAX_PROBLEMS_SHOWN:,} more bad rows"
            + ("." if strict else ", left out.")
        )
    if problems and strict:
        raise ValueError(
            f"{counted(len(loaded.problems), 'row')} of {path.name} "
            f"{'is' if len(loaded.problems) == 1 else 'are'} bad (listed above) and --strict refuses "
            f"the file; fix {'it' if len(problems) == 1 else 'them'}, or drop --strict to run the other rows."
        )
    tasks = loaded.tasks
    if n is not None and n < len(tasks):
        say(f"running the first {n:,} of the {len(tasks):,} tasks of {path.name} (--n {n})")
        tasks = tasks[:n]
    hidden = invisible_line(tasks)  # said as discover says it of a prompt: the model reads them
    if hidden:
        say(hidden)
    return tasks, loaded.problems, str(path)


def dataset_scores(batch: BatchTable, label: str) -> dict:
    """A series' CPR and CMD on the scale of ``discover`` and of each row of ``results.parquet``
    (``core.curves.cpr``): the trapezoid areas of the dataset's faithfulness (a ratio of dataset
    means, as ``atlas.mib_scores``) and of |1 - faithfulness|, over the edges the circuits keep
    after pruning as a fraction of the graph's edges (their mean over the prompts at each budget),
    divided by the span that covers. On one prompt they are that prompt's ``cpr_nfs`` and
    ``cmd_nfs``. Also MIB's raw areas (``mib_scores``: over the budgets' fractions, not divided),
    which are MIB's numbers on MIB's grid only. {} when no row passes the check."""
    mib = mib_scores(batch, label)
    if not mib:
        return {}
    rows = batch.rows(label, passing=True)
    fractions = (_matrix(rows, "edges_kept").mean(axis=0) / batch.n_edges).tolist()
    faithfulness = mib["faithfulness"]
    return {
        "cpr": area_under_curve(fractions, faithfulness),
        "cmd": area_under_curve(fractions, [abs(1 - f) for f in faithfulness]),
        "fractions": fractions,
        "mib_cpr": mib["cpr"],
        "mib_cmd": mib["cmd"],
        "mib_grid": mib["mib_grid"],
        "n_prompts": mib["n_prompts"],
    }


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.2f} %"


def summary_lines(batch: BatchTable) -> list[str]:
    """Per series: prompts, CPR and CMD (``dataset_scores``, the span named), and its mean NDF
    (and necessity) at every budget."""
    lines = []
    for label in batch.labels:
        scores = dataset_scores(batch, label)
        stored = batch.rows(label).num_rows  # the figures are over the tasks that pass the check
        if not scores:  # a series that left the summary unsaid
            lines.append(
                f"{label}: no figures: none of its {counted(stored, 'finished task')} passes the validity check"
                if stored
                else f"{label}: no figures: no task finished"
            )
            continue
        shown = counted(scores["n_prompts"], "prompt") + (
            f" (of {stored:,} stored: those that pass the validity check)"
            if stored != scores["n_prompts"]
            else ""
        )
        low, high = min(scores["fractions"]), max(scores["fractions"])
        span = f"{_percent(low)} to {_percent(high)} of the {batch.n_edges:,} edges"
        units = over_positions(batch, label)
        if units:  # a fraction of the model's edges read '8.93 % to 966.93 %' of units
            span = f"{low * batch.n_edges:,.0f} to {high * batch.n_edges:,.0f} (edge, position) units"
        mib = (
            f"; MIB's raw areas over its ten budgets: CPR {score_text(scores['mib_cpr'])}, "
            f"CMD {score_text(scores['mib_cmd'])}"
            if scores["mib_grid"]
            else ""
        )
        lines.append(
            f"{label}: {shown}; CPR {score_text(scores['cpr'])}, CMD {score_text(scores['cmd'])} "
            f"(the dataset's NFS over the {span} its circuits keep, area divided by that span, as "
            f"discover and results.parquet's cpr_nfs give them{mib})"
        )
        bands = curve_bands(batch, label)
        # each row a mean over the prompts, said so: beside the dataset's NFS above, 'NDF' read as
        # the dataset's own (a ratio of means)
        # the budgets in edges, as the Dataset page's CSV names its columns ('NDF at a budget of 103 edges')
        head = "  budget (units)" if units else "  budget (edges)"
        lines.append(head + " ".join(f"{band['budget']:>7}" for band in bands))
        lines.append("  mean NDF      " + " ".join(f"{band['mean']:>7.3f}" for band in bands))
        reference = reference_line(batch, label)
        if reference:
            lines.append(reference)
        needed = curve_bands(batch, label, "necessity")
        if needed:
            lines.append("  mean necess.  " + " ".join(f"{band['mean']:>7.3f}" for band in needed))
        elif not any(batch.rows(label, passing=True).column("corrupted").to_pylist()):  # read 'nan' each
            lines.append(
                "  mean necess.  not measured: no task has a corrupted prompt, and without one this method measures none"
            )
    return lines


def reference_line(batch: BatchTable, label: str) -> str | None:
    """What a series' NDF is measured against where some task has no corrupted prompt (discover's
    words: the neutral prompt, or ACC++'s signals knocked out); None when every task has one. Until
    2026-12-06 the summary's 'mean NDF' named no reference for such tasks."""
    rows = batch.rows(label, passing=True)
    corrupted = rows.column("corrupted").to_pylist()
    without = sum(1 for text in corrupted if not text)
    if not without:
        return None
    words = reference_words(rows.column("method")[0].as_py())
    if without == len(corrupted):
        return f"  NDF's 0: no task has a corrupted prompt, so NDF is measured against {words}"
    return (
        f"  NDF's 0: the corrupted prompt, and for the {counted(without, 'task')} with none, {words} "
        "(the mean mixes the two)"
    )


def failure_lines(batch: BatchTable, limit: int = MAX_PROBLEMS_SHOWN) -> list[str]:
    """Each failed row's reason, once per task and reason (with the methods it failed for): the
    first ``limit``, then how many more and where every reason is."""
    failed = batch.table.filter(numpy.asarray(batch.table.column("status").to_pylist()) == "failed")
    reasons: dict[tuple[str, str], list[str]] = {}
    for task_id, method, error in zip(
        failed.column("task_id").to_pylist(),
        failed.column("method").to_pylist(),
        failed.column("error").to_pylist(),
    ):
        error = error or "no reason was recorded"
        where = "" if error.startswith("line ") else f"{task_id}: "
        reasons.setdefault((where, error), []).append(method)
    lines = [
        f"failed ({', '.join(dict.fromkeys(methods))}): {where}{error}"
        for (where, error), methods in list(reasons.items())[:limit]
    ]
    if len(reasons) > limit:
        lines.append(
            f"... and {len(reasons) - limit:,} more failed tasks; every reason is in the error column of "
            f"{batch.folder / TABLE if batch.folder else TABLE}."
        )
    return lines


def take_ctrl_c() -> None:
    """Ctrl-C (SIGINT) interrupts the batch even where it was started ignoring it: a process started
    in the background by a shell (``cmd &``) ignores SIGINT, and so does every program it starts;
    Python then never raises KeyboardInterrupt. The Dataset page cancels its batch with SIGINT, the
    batch then keeps what finished and writes its manifest; ignored, the batch ran on through the
    grace period (``jobs.GRACE_S``) and was killed (seen when the tests ran from a backgrounded
    ``make test``; Streamlit's own server sets a SIGINT handler, so its children start with the
    default)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted_line(report, out) -> str:
    """The one sentence a batch stopped by Ctrl-C ends with (the command exits with 130)."""
    if report.stage == "load":
        return f"interrupted before any task ran; {out} is as it was: rerun the same command to start."
    return f"interrupted: rerun the same command to resume; {out} keeps what finished."


def method_runs(text: str, settings: dict) -> list:
    """``--methods`` (comma separated names) as ``MethodRun``s with the settings each has; a
    setting no method of the batch has is refused."""
    from ..methods import get_method
    from .runner import MethodRun

    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError("--methods is empty; name methods such as eap-ig,eap.")
    runs, unused = [], set(settings)
    for name in names:
        method = get_method(name)
        fields = set(method.Config.__dataclass_fields__)
        chosen = method.settings_from_cli({k: v for k, v in settings.items() if k in fields})
        runs.append(MethodRun(method.name, chosen))
        unused -= fields
    if unused:
        raise ValueError(f"No method of the batch has the setting {', '.join(sorted(unused))}.")
    return runs


def counts_line(report) -> str:
    """The batch's counts, each row once: finished (found in the store), failed (refused by the
    tokenizer before running), wall time (the model's load, part of it, named) and where it ran."""
    from ..core.text import clock_duration

    counts = report.manifest["counts"]
    failed = counts["failed"] + counts["refused"]
    refused = f" ({counts['refused']:,} refused before running)" if counts["refused"] else ""
    load = report.manifest.get("load_seconds")
    loading = f", the model's load {clock_duration(load)} of it" if load is not None else ""
    return (
        f"batch: {counted(report.items, 'item')}: {counts['done']:,} finished ({report.skipped:,} found in the store), "
        f"{failed:,} failed{refused}, in {clock_duration(report.seconds)}{loading} on {report.executor} "
        f"({counted(report.workers, 'worker')})"
    )
