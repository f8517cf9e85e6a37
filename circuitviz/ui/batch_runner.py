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

from ..core.text import clock_duration, counted, markdown_sentence, markdown_text
from . import batch_settings, link_choices, loaders, state

SHARED_MAX_PROMPTS = 20  # a shared server's batch: at most this many prompts, on one thread
SHARED_MAX_UPLOAD_MB = 1  # and a file of prompts of at most this size (the server's default: 200 MB)
MAX_PROMPTS = 100_000  # the form's largest; a family's own limit is said by the command's check
UPLOAD_TYPES = ["jsonl", "csv", "json", "ndjson"]
WATCH_S = 2.0  # how often the progress redraws while a batch runs
GENERATE, MMLU, UPLOAD = "generate a family", "MMLU questions", "a file of prompts"
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
    # in the link (``batch``: its folder's name; the link opened the newest) and kept across pages
    link_choices.seed(CHOSEN, state.Session.dataset_batch, names, names[0])
    picked = st.selectbox(
        "your batch",
        names,
        key=CHOSEN,
        format_func=lambda name: _run_label(yours[name]),
    )
    link_choices.keep(state.Session.dataset_batch, picked)
    job = yours[picked]
    if job.running:  # the rows it has written so far, as an atlas of their own
        return _so_far(job)
    if job.state != "finished":  # cancelled or failed: why, in one sentence, above its rows
        st.warning(markdown_sentence(ended_sentence(job)))
        _resumed_caption(job)
    else:  # what it ran and what it cost, with the command that runs it again
        from ..batch import jobs

        st.caption(
            markdown_sentence(f"{ended_sentence(job)[:-1]} on {counted(job.threads, 'torch thread')}.")
        )
        _resumed_caption(job)
        with st.expander("its command"):
            st.code(jobs.command_line(job.argv), language="bash", wrap_lines=True)
    _delete_offer(job)
    return str(job.folder)


def resumed_note(job) -> str | None:
    """What the batch found stored before it computed, as its progress records it (``batch.resumed``:
    how many items it reused, and how many it computed again and why, the engine's code changed
    since among them); None when nothing of it was stored."""
    found = (job.progress or {}).get("resumed")
    return found if isinstance(found, str) and found else None


def _resumed_caption(job) -> None:
    """``resumed_note`` under a batch's progress or ending (a rerun after a code change took the
    full time with nothing said of why)."""
    note = resumed_note(job)
    if note:
        st.caption(markdown_sentence(note))


def _delete_offer(job, label: str = "Delete this batch…") -> None:
    """'Delete this batch…': what goes and what stays, then the button that deletes it (a run that
    has ended only; page batches were never deleted, and piled up in the cache)."""
    with st.popover(label):
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


def _delete_all(folders: list[str]) -> None:
    """'Delete all of them': each run's folder goes (a run that started since is refused by
    ``jobs.delete``, and said), and the page says how many went, once."""
    from ..batch import jobs

    gone, refused = 0, []
    for folder in folders:
        try:
            jobs.delete(folder)
            gone += 1
        except jobs.JobError as error:
            refused.append(str(error))
    if refused:
        state.set_widget_value(
            DELETED, ("error", f"Deleted {counted(gone, 'batch', 'batches')}; {refused[0]}")
        )
    else:
        state.set_widget_value(
            DELETED, ("success", f"Deleted {counted(gone, 'batch', 'batches')} that ended with no row.")
        )


def empty_runs(shown=None) -> None:
    """Every run that ended with no row to open (failed, cancelled before its first prompt), but
    ``shown`` (the newest, said above with its own Delete): each with how it ended and a Delete
    (after the same confirmation), and all of them at once. Before, only the newest could be
    deleted from the page, the others stayed in the cache with no way to them."""
    from ..batch import jobs

    empty = [
        job
        for job in jobs.jobs()
        if not job.running and not job.has_rows and (shown is None or job.folder != shown.folder)
    ]
    if not empty:
        return
    runs = counted(len(empty), "earlier run")
    with st.expander(f"{runs} ended with no row to open"):
        for job in empty:
            # wide enough for 'Delete…' at 1,000 px ('Del…' in a sixth); the run's time, then its
            # sentence, which names the batch (its label named it twice)
            said, button = st.columns([3, 1], vertical_alignment="center")
            said.markdown(
                f"**{markdown_text(_run_label(job).split(', ')[0])}**: {markdown_text(ended_sentence(job))}"
            )
            with button:
                _delete_offer(job, "Delete…")
        if len(empty) > 1:
            with st.popover(f"Delete all {len(empty)}…"):
                st.markdown(
                    f"Delete these {len(empty)} batches for good? Their folders under the app's cache "
                    "(`batches/`: their tasks and logs) go; none has a row to open."
                )
                st.button(
                    "Delete them", type="primary", key=f"{FORM}delete.all", on_click=_delete_all,
                    args=([str(job.folder) for job in empty],),
                )  # fmt: skip


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


# ----- a run, watched ----------------------------------------------------------------------------
def progress_sentence(job) -> tuple[float, str]:
    """(the share done, one line: what the batch is doing, items done of all, its own ETA); once
    Cancel was pressed, that it is stopping (the line said 'loading gemma-3-270m…' for the 5 s a
    batch loading its model took to stop, Cancel still offered, as though the press was lost)."""
    share, line = _progress(job)
    if job.cancel_asked is None:
        return share, line
    from ..batch.jobs import GRACE_S

    since = clock_duration(max(time.time() - job.cancel_asked, 0.0))
    return share, (
        f"cancelling: Cancel was pressed {since} ago, and the batch is stopping; it keeps the prompts it "
        f"finished (at most {GRACE_S:.0f} s after the press it is stopped outright)."
    )


def _progress(job) -> tuple[float, str]:
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
        asked = job.cancel_asked
        if asked is not None and job.started and job.ended and job.ended - asked >= 1:
            # the run goes on until its process has stopped: 'cancelled after 0m16s' was said of
            # a Cancel pressed at 0m10s (a batch still loading its model)
            took = f" after {clock_duration(asked - job.started)}"
            got += f", and stopped {clock_duration(job.ended - asked)} later"
        return f"The batch {name} was cancelled{took}{got}.{rows}"
    why = job.reason or "its log says nothing more"
    if job.state == "stopped":
        return f"The batch {name} stopped{took}{got} without an exit status (the server that ran it ended; its log's last line: {why}).{rows}"
    why = batch_settings.boxes_named(why.removeprefix("error: "))  # the form's box beside its flag
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
    _resumed_caption(job)
    left, right = st.columns([1, 4])
    left.button(  # pressed once: the batch is stopping (the line says so)
        "Cancel", key=f"{FORM}cancel.{job.folder.name}", on_click=_cancel, args=(folder,),
        disabled=job.cancel_asked is not None,
    )  # fmt: skip
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
