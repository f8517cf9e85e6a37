"""The Dataset page's Run: a batch started from the page, watched, cancelled and opened.

The batch is the ``circuitviz batch`` command itself, run in the background by ``batch.jobs``
(one at a time per server, one torch thread unless asked, ``nice``d), into a folder of its own
under the cache; everything shown here is read from that folder, so a run outlives a page switch,
a reload and a new session. Finished (and cancelled) runs are the picker's "your batches".
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import streamlit as st

from ..core.text import clock_duration, counted, markdown_sentence, markdown_text, rough_duration
from . import batch_settings, loaders, state

SHARED_MAX_PROMPTS = 20  # a shared server's batch: at most this many prompts, on one thread
SHARED_MAX_UPLOAD_MB = 1  # and a file of prompts of at most this size (the server's default: 200 MB)
MAX_PROMPTS = 100_000  # the form's largest; a family's own limit is said by the command's check
UPLOAD_TYPES = ["jsonl", "csv", "json", "ndjson"]
WATCH_S = 2.0  # how often the progress redraws while a batch runs
GENERATE, UPLOAD = "generate a family", "a file of prompts"
YOURS = "your batches"
RUN = "run a batch…"
CHOSEN = "dataset.yours"  # the picked run of "your batches" (a folder name)
FORM = "dataset.run."  # the form's widget keys
PENDING = "dataset.run.open"  # a run to open at the top of the next script run
REFRESH = "dataset.run.remake"  # a running batch's rows so far to be made anew on the next run
DELETED = "dataset.run.deleted"  # what a Delete did, said once at the top of the next script run


def shared() -> bool:
    """A shared server (typed paths off): runs are capped (``SHARED_MAX_PROMPTS``, one thread)."""
    return not loaders.browser_paths_allowed()


def your_batches() -> dict:
    """{folder name: ``jobs.JobStatus``} of the runs started here that ended with rows to open
    (cancelled ones too: their finished rows), and the running one once it has finished a prompt
    (its rows so far open), newest first."""
    from ..batch import jobs

    return {
        job.folder.name: job
        for job in jobs.jobs()
        if (job.has_rows and not job.running) or (job.running and _finished_any(job))
    }


def pick_yours(yours: dict) -> str:
    """The picker of "your batches" (newest first, a run that did not finish says how it ended);
    the chosen run's folder."""
    names = list(yours)
    if state.widget_value(CHOSEN) not in names:
        state.set_widget_value(CHOSEN, names[0])
    picked = st.selectbox(
        "your batch",
        names,
        key=CHOSEN,
        format_func=lambda name: _run_label(yours[name]),
    )
    job = yours[picked]
    if job.running:  # the rows it has written so far, as an atlas of their own
        return _so_far(job)
    if job.state != "finished":  # cancelled or failed: why, in one sentence, above its rows
        st.warning(markdown_sentence(ended_sentence(job)))
    else:  # what it ran and what it cost, with the command that runs it again
        from ..batch import jobs

        st.caption(
            markdown_sentence(f"{ended_sentence(job)[:-1]} on {counted(job.threads, 'torch thread')}.")
        )
        with st.expander("its command"):
            st.code(jobs.command_line(job.argv), language="bash", wrap_lines=True)
    _delete_offer(job)
    return str(job.folder)


def _delete_offer(job) -> None:
    """'Delete this batch…': what goes and what stays, then the button that deletes it (a run that
    has ended only; page batches were never deleted, and piled up in the cache)."""
    with st.popover("Delete this batch…"):
        st.markdown(
            markdown_sentence(
                f"Delete the batch {job.title} for good? Its folder `{job.folder.name}` under the app's cache "
                "(`batches/`: its table, tasks and log) goes; its circuits stay in the result store, so "
                "its prompts still open in Explore at once."
            )
        )
        st.button(
            "Delete it", type="primary", key=f"{FORM}delete.{job.folder.name}", on_click=_delete,
            args=(str(job.folder),),
        )  # fmt: skip


def _delete(folder: str) -> None:
    """The Delete button's callback: the run's folder goes, and the page says so once."""
    from ..batch import jobs

    try:
        found = jobs.delete(folder)
    except jobs.JobError as error:
        state.set_widget_value(DELETED, ("error", str(error)))
        return
    state.set_widget_value(DELETED, ("success", f"Deleted the batch {found.title} ({Path(folder).name})."))


def _finished_any(job) -> bool:
    """Whether a running batch has written a finished prompt's row to its folder (its progress
    counts rows it still holds: the button offered them before any was on disk)."""
    return (job.folder / "results.parquet").exists() or any((job.folder / "parts").glob("part-*.parquet"))


def _so_far(job) -> str:
    """The folder of a running batch's rows so far (``jobs.partial_atlas``), said as such: made
    when it is opened and at each Refresh, not at every rerun (a slider's move redrew it with other
    rows under the reader); the page stops with one sentence before its first row is on disk."""
    import pyarrow.parquet as pq

    from ..batch import jobs
    from ..batch.table import FLUSH_ENV, TABLE

    kept = job.folder / jobs.PARTIAL / TABLE
    if state.widget_value(REFRESH) or not kept.exists():
        state.forget_widget_value(REFRESH)
        partial = jobs.partial_atlas(job.folder)
    else:
        partial = kept.parent
    every = os.environ.get(FLUSH_ENV) or "5"
    if partial is None:
        st.info(f"It has written no finished prompt to its folder yet (it writes them every {every} s).")
        st.button("Refresh", key=f"{FORM}refresh", on_click=_refresh)
        st.stop()
    shown = pq.read_metadata(partial / TABLE).num_rows
    drawn = time.strftime("%H:%M:%S", time.localtime((partial / TABLE).stat().st_mtime))
    st.caption(
        f"Still running: the atlas below holds the {counted(shown, 'row')} (prompt × method) it had "
        f"finished at {drawn}, when it was drawn, and does not redraw by itself while the progress "
        "above counts on (its consensus circuit is measured at the end); Refresh adds the newer rows, "
        "and the whole batch opens here when it ends."
    )
    st.button("Refresh", key=f"{FORM}refresh", on_click=_refresh)
    return str(partial)


def _refresh() -> None:
    """A Refresh (or an open) of a running batch's rows so far: the next run makes them anew."""
    state.set_widget_value(REFRESH, True)


def _run_label(job) -> str:
    """'2026-12-06 07:12, 4 ioi prompts × eap (cancelled)': when it began, what it ran, how it ended."""
    began = re.match(r"(\d{4}-\d\d-\d\d)-(\d\d)(\d\d)\d\d-", job.folder.name)
    when = f"{began[1]} {began[2]}:{began[3]}" if began else job.folder.name
    # a running run's label is its finished one's: the box kept 'running' on screen after the run
    # ended (its options' labels changed, its value did not); the caption under it says which
    return f"{when}, {job.title}" + ("" if job.state in ("finished", "running") else f" ({job.state})")


def running():
    """The batch running on this server now (``jobs.JobStatus``), or None."""
    from ..batch import jobs

    return jobs.running_job()


def latest():
    """The newest run started here (running or not), or None."""
    from ..batch import jobs

    return next(iter(jobs.jobs()), None)


def apply_pending() -> None:
    """Open the run a click (or its end) asked for, before the picker is drawn: a widget's value
    cannot change once it is drawn in a run, and the progress is drawn after the picker. What a
    Delete did is said here, once."""
    said = state.widget_value(DELETED)
    if said:  # a run deleted by the last click: said once, above the picker
        state.forget_widget_value(DELETED)
        (st.success if said[0] == "success" else st.error)(markdown_sentence(said[1]))
    name = state.widget_value(PENDING)
    if name:
        state.forget_widget_value(PENDING)
        state.set_widget_value("dataset.source", YOURS)
        state.set_widget_value(CHOSEN, name)


def open_run(folder: Path) -> None:
    """Show ``folder`` as the atlas (a button's callback: before the picker is drawn)."""
    state.set_widget_value("dataset.source", YOURS)
    state.set_widget_value(CHOSEN, folder.name)


# ----- what a batch costs ---------------------------------------------------------------------
def measured_cost(model_id: str, methods: list[str], n: int | None = None) -> str:
    """What earlier runs here measured, in one sentence: seconds a prompt of each chosen method
    (the table's own ``seconds``, the newest run that ran it), what ``n`` prompts of them all come
    to, and how long the model took to load."""
    import pyarrow.parquet as pq

    from ..batch import jobs
    from ..entry.calibration import last_load

    per_prompt: dict[str, float] = {}
    for job in jobs.jobs():
        if job.running or not (job.folder / "results.parquet").exists():
            continue
        try:
            table = pq.read_table(job.folder / "results.parquet", columns=["method", "status", "seconds"])
            ran_on = jobs._read(job.folder / "manifest.json").get("model", {}).get("model_id")
        except (OSError, ValueError):
            continue
        if ran_on != model_id:
            continue
        rows = table.to_pylist()
        for name in methods:
            seconds = [
                r["seconds"] for r in rows if r["method"] == name and r["status"] == "done" and r["seconds"]
            ]
            if seconds and name not in per_prompt:
                per_prompt[name] = sum(seconds) / len(seconds)
    load = last_load(model_id)
    parts = [f"about {per_prompt[name]:.1f} s a prompt for {name}" for name in methods if name in per_prompt]
    unmeasured = [name for name in methods if name not in per_prompt]
    said = "Measured on earlier batches here: " + ", ".join(parts) if parts else ""
    if parts and n and not [name for name in methods if name not in per_prompt]:
        each = sum(per_prompt[name] for name in methods)
        said += (
            f"; so {n:,} prompts' circuits take about {rough_duration(n * each)}, and the consensus step more"
        )
    said += "." if said else ""
    if unmeasured:
        said += (
            f" No batch here has measured {', '.join(unmeasured)} yet: the batch shows its own "
            "estimate of the time left once its first group of prompts ends."
        )
    if load:
        said += f" Loading {model_id} took {load:.0f} s last time, before the first prompt."
    return said.strip()


# ----- the form --------------------------------------------------------------------------------
def _upload_tasks(upload) -> tuple[object | None, str | None]:
    """(the parsed dataset, None) of an uploaded file, or (None, one sentence why it cannot run)."""
    from ..batch.dataset import DatasetError, parse_dataset

    name = upload.name
    suffix = Path(name).suffix.lower()
    fmt = "csv" if suffix == ".csv" else "jsonl"
    try:
        text = upload.getvalue().decode("utf-8")
    except UnicodeDecodeError:
        return None, f"{name} is not UTF-8 text; save it as UTF-8 and upload it again."
    try:
        loaded = parse_dataset(text, fmt, origin=name)
    except DatasetError as error:
        return None, str(error)
    if not loaded.tasks:
        first = f" (the first: {loaded.problems[0]})" if loaded.problems else ""
        return None, (
            f"{name} holds no task the batch can run{first}; each line needs clean, corrupted, answer "
            "and foil (JSONL keys or CSV columns), as `circuitviz batch --dataset` reads them."
        )
    return loaded, None


def _family_problem(family: str, n: int) -> str | None:
    from ..batch.generate import check_family

    try:
        check_family(family, n)
    except ValueError as error:
        return str(error).replace(f"--n {n:,}", f"{n:,} prompts").replace(f"--n {n}", f"{n:,} prompts")
    return None


def form(model_id: str) -> None:
    """The run form: a family to generate (how many prompts, seed) or an uploaded file, methods,
    budgets, threads; Run starts the batch (one sentence when it cannot)."""
    from ..batch import jobs
    from ..batch.generate import GENERATED_FAMILIES
    from ..methods import available_methods, default_method

    capped = shared()
    most = SHARED_MAX_PROMPTS if capped else MAX_PROMPTS
    st.caption(
        markdown_sentence(
            f"The batch runs `python -m circuitviz batch` on {model_id} (the sidebar's model) in the "
            "background, into a folder of its own under the app's cache: the figures are the command's."
        )
    )
    if capped:
        st.caption(
            markdown_sentence(
                f"On this shared server a batch run here takes at most {most} prompts on one thread, one "
                "batch at a time for everyone (and everyone sees it under 'your batches'); run larger ones with "
                "`python -m circuitviz batch --out FOLDER ...` on your own machine and open the folder there."
            )
        )
    source = (
        st.segmented_control("prompts from", [GENERATE, UPLOAD], default=GENERATE, key=FORM + "source")
        or GENERATE
    )
    upload, family, n, seed = None, None, None, 0
    if source == GENERATE:
        left, middle, right = st.columns(3)
        family = left.selectbox("family", list(GENERATED_FAMILIES), key=FORM + "family")
        n = middle.number_input("how many prompts", 1, most, min(4, most), key=FORM + "n")
        seed = right.number_input("seed", 0, 2**31 - 1, 0, key=FORM + "seed")
    else:
        upload = st.file_uploader(
            "JSONL or CSV: clean, corrupted, answer, foil (or foils) [, metric, id, family] per line",
            type=UPLOAD_TYPES,
            key=FORM + "file",
            max_upload_size=SHARED_MAX_UPLOAD_MB if capped else None,  # 20 prompts fit in a few KB
        )
        n = st.columns(3)[0].number_input(
            "run only the first", 1, most, most if capped else None, key=FORM + "first",
            placeholder="all prompts", help="the command's --n: the file's first N tasks",
        )  # fmt: skip
    registered = available_methods()
    names = sorted(registered)
    methods = st.multiselect(
        "methods",
        names,
        default=[default_method(names)],
        format_func=lambda name: f"{registered[name].label} ({name})",
        key=FORM + "methods",
    )
    left, right = st.columns([3, 1])
    budgets = left.text_input(
        "budgets (edges, comma separated, or mib)", "mib", key=FORM + "budgets",
        help="mib: MIB's ten fractions of the graph's edges, 0.1 % to 100 %, as the command's default",
    )  # fmt: skip
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = 1
    if not capped:
        threads = right.number_input(
            "torch threads", 1, cores, 1, key=FORM + "threads",
            help="1 leaves the other cores to the app's own runs; more runs the batch faster",
        )  # fmt: skip
    more = batch_settings.widgets(model_id, methods, budgets)  # --keep-edges ... and each method's
    if capped:  # the widget's limit, held here too: an emptied 'first N' box would run every prompt
        n = min(int(n or most), most)
    if methods:
        st.caption(markdown_sentence(measured_cost(model_id, methods, int(n) if n else None)))
    busy = running() is not None
    if not st.button(
        "Run", type="primary", key=FORM + "go", disabled=busy,
        help="One batch runs at a time on this server: Run opens again when it ends." if busy else None,
    ):  # fmt: skip
        return
    problem, loaded = None, None
    if not methods:
        problem = "Choose at least one method to run (the box above)."
    elif source == UPLOAD and upload is None:
        problem = "Upload a JSONL or CSV file of prompts first, or generate a family's."
    elif source == UPLOAD:
        loaded, problem = _upload_tasks(upload)
    else:
        problem = _family_problem(family, int(n))
    if not problem:  # the command's own rule, said before anything starts
        from ..entry.budgets import read_budgets

        try:
            read_budgets(budgets, "The budgets box", mib=True)
        except ValueError as error:
            problem = str(error)
    extra: list[str] = []
    if not problem:  # what the table keeps, the consensus share, each method's settings
        try:
            extra = batch_settings.arguments(more, methods, budgets.strip(), model_id)
        except ValueError as error:
            problem = str(error)
    if problem:
        st.error(markdown_sentence(problem))  # may quote the uploaded file's name and lines
        return
    count = int(n) if source == GENERATE else min(int(n or len(loaded.tasks)), len(loaded.tasks))
    ran = methods[0] if len(methods) == 1 else f"{len(methods)} methods"
    what = family if source == GENERATE else Path(upload.name).stem
    folder = jobs.runs_dir() / jobs.folder_name(f"{what} {count} {ran}")
    of = (
        counted(count, f"{family} prompt")
        if source == GENERATE
        else f"{counted(count, 'prompt')} of {upload.name}"
    )
    title = f"{of} × {', '.join(methods)}"
    dataset = None
    if loaded is not None:
        folder.mkdir(parents=True, exist_ok=True)
        # under the file's own name (the left-out lines name it): no folder of it, never '..'
        named = Path(upload.name).name
        dataset = folder / (named if named.strip(". ") else "prompts.jsonl")
        dataset.write_bytes(upload.getvalue())
    try:
        argv = jobs.batch_arguments(
            methods=methods,
            budgets=budgets.strip(),
            generate=family if source == GENERATE else None,
            n=int(n) if n else None,
            seed=int(seed),
            dataset=dataset,
            model=model_id,
            more=extra,
        )
        jobs.start(folder, argv, title=title, threads=int(threads))
    except (jobs.JobError, OSError) as error:
        st.error(markdown_sentence(str(error)))
        return
    st.rerun()


# ----- a run, watched ----------------------------------------------------------------------------
def progress_sentence(job) -> tuple[float, str]:
    """(the share done, one line: what the batch is doing, items done of all, its own ETA)."""
    found = job.progress
    elapsed = time.time() - (job.started or time.time())
    if not found:  # before its first progress: loading the model, drawing the tasks
        from ..batch import jobs

        last = (jobs.log_lines(job.folder, 1) or ["starting ..."])[-1]
        return 0.0, f"{last.rstrip(' .')}… ({clock_duration(elapsed)} since it began)"
    total, finished = int(found.get("total") or 0), float(found.get("finished") or 0)
    unit = found.get("unit") or "items"
    phase = found.get("phase") or "discover"
    what = {
        "tokenize": "checking that the prompts fit the model",
        "discover": "finding circuits",
        "consensus": "measuring the consensus circuit on each prompt",
    }.get(phase, phase)
    eta = found.get("eta")
    left = f", about {clock_duration(eta)} left in this step (the batch's estimate)" if eta else ""
    failed = int(found.get("failed") or 0) + int(found.get("refused") or 0)
    failed_text = f", {failed:,} failed" if failed else ""
    methods = _methods_of(job.argv)
    if unit == "items" and methods > 1:  # each prompt runs once per method
        noun = f"runs ({total // methods:,} prompts × {methods} methods)"
    else:
        noun = "prompt" if total == 1 else "prompts"
    done = "checked" if phase == "tokenize" else "finished"
    # whole ones only: the bar's count adds the running group's share ('6 of 8 done' read while
    # none was, the group of 8 three quarters through); the share the bar draws keeps it
    whole = sum(int(found.get(name) or 0) for name in ("done", "skipped", "refused"))
    share = finished / total if total else 0.0
    way = f" ({share:.0%} of the way)" if finished > whole + 0.01 else ""
    return (
        share,
        f"{what}: {whole:,} of {total:,} {noun} {done}{way}{failed_text}{left}; "
        f"{clock_duration(elapsed)} since it began.",
    )


def _methods_of(argv: list[str]) -> int:
    """How many methods the command runs (its --methods)."""
    if "--methods" in argv[:-1]:
        return len([name for name in argv[argv.index("--methods") + 1].split(",") if name.strip()])
    return 1


def _cancel(folder: str) -> None:
    from ..batch import jobs

    jobs.cancel(folder)


def ended_sentence(job) -> str:
    """One plain sentence (no markup: the caller escapes it once) on how a run ended: finished in
    how long, or cancelled, stopped or failed, with how far it got and why (its log's last word)."""
    took = f" after {clock_duration(job.ended - job.started)}" if job.started and job.ended else ""
    name = job.title or job.folder.name
    if job.state == "finished":
        return f"The batch {name} finished{took.replace('after', 'in')}."
    found = job.progress or {}
    got = ""
    if found.get("phase") == "discover" and found.get(
        "total"
    ):  # the prompts' own circuits, not the consensus
        total, methods = int(found["total"]), _methods_of(job.argv)
        noun = "runs" if methods > 1 else "prompts"
        whole = sum(int(found.get(name) or 0) for name in ("done", "skipped", "refused"))
        got = f", with {whole:,} of {total:,} {noun} finished"
    rows = " Its finished rows open as an atlas." if job.has_rows else " It finished no row to open."
    if job.state == "cancelled":
        return f"The batch {name} was cancelled{took}{got}.{rows}"
    why = job.reason or "its log says nothing more"
    if job.state == "stopped":
        return f"The batch {name} stopped{took}{got} without an exit status (the server that ran it ended; its log's last line: {why}).{rows}"
    why = why.removeprefix("error: ")
    return f"The batch {name} failed{took}{got}: {why}{'' if why.endswith('.') else '.'}{rows}"


@st.fragment(run_every=WATCH_S)
def _watch(folder: str, opens: bool) -> None:
    from ..batch import jobs

    job = jobs.status(folder)
    if not job.running:
        if opens and job.has_rows:  # watched from the run form: its atlas opens on the same page
            state.set_widget_value(PENDING, job.folder.name)
        st.rerun()  # the whole page: the run is among "your batches" now
    share, line = progress_sentence(job)
    st.progress(min(max(share, 0.0), 1.0), text=markdown_text(line))
    left, right = st.columns([1, 4])
    left.button("Cancel", key=f"{FORM}cancel.{job.folder.name}", on_click=_cancel, args=(folder,))
    from ..batch.table import TABLE

    viewed = state.widget_value("dataset.source") == YOURS and state.widget_value(CHOSEN) == job.folder.name
    if viewed and (job.folder / jobs.PARTIAL / TABLE).exists():  # its rows so far are the atlas below
        import pyarrow.parquet as pq

        newer = jobs.rows_written(job.folder) - pq.read_metadata(job.folder / jobs.PARTIAL / TABLE).num_rows
        if newer > 0:  # the atlas does not redraw by itself (the user's place in it is kept)
            button, said = right.columns([1, 2])
            said.caption(f"{counted(newer, 'more row')} finished since the atlas below was drawn.")
            if button.button("Refresh the atlas", key=f"{FORM}newer.{job.folder.name}", on_click=_refresh):
                st.rerun()  # the whole page, on the rows written by now
    elif _finished_any(job) and right.button(
        "Open the prompts finished so far", key=f"{FORM}sofar.{job.folder.name}"
    ):
        state.set_widget_value(PENDING, job.folder.name)
        _refresh()  # the rows written by now, not those of an earlier opening
        st.rerun()  # the whole page, on the run's rows so far


def watch(job, opens: bool = False) -> None:
    """The running batch: what it runs, its progress (redrawn every ``WATCH_S`` s), Cancel.
    ``opens``: open its atlas when it ends (the page shows the run form)."""
    threads = counted(job.threads, "torch thread")
    st.info(
        f"**Running** {markdown_text(job.title)} in the background on {threads}, into "
        f"`{job.folder.name}` under the app's cache; it goes on if you leave this page or close it."
    )
    with st.expander("its command and folder"):
        from ..batch import jobs

        st.code(jobs.command_line(job.argv), language="bash", wrap_lines=True)
    _watch(str(job.folder), opens)


def last_run_note(job, opened: bool) -> None:
    """How the newest run ended, once, above the picker's atlas; an Open button when it has rows
    and is not the atlas shown."""
    sentence = ended_sentence(job)
    (st.success if job.state == "finished" else st.warning)(markdown_sentence(sentence))
    if job.state != "finished" and job.log_tail:
        with st.expander("the end of its log"):
            st.code("\n".join(job.log_tail), language=None, wrap_lines=True)
    if job.has_rows and not opened:
        st.button("Open it", key=f"{FORM}open.{job.folder.name}", on_click=open_run, args=(job.folder,))
    if not job.has_rows:  # not among "your batches", where the others are deleted
        _delete_offer(job)
