"""Batches started in the background (the Dataset page's Run): the very ``circuitviz batch``
command, as a subprocess of its own, tracked by its folder.

Each run gets a folder under ``$CIRCUITVIZ_CACHE/batches`` (``runs_dir``), named by when it began
and what it runs (``2026-12-06-0712-ioi-4-eap``). The folder holds the batch's own files (the
command writes them, ``progress.json`` among them) and the job's: ``job.json`` (the process, its
command, when it began), ``log.txt`` (everything the command printed), ``exit.json`` (its exit
status, once it ends) and ``cancel.json`` (when it was cancelled). Everything a page needs to
show a run is read from there, so a run outlives a page switch, a browser reload and a new
session; one process's memory (``_WAITERS``) only reaps the children it started.

The command runs in a process group of its own, ``nice``d, with ``threads`` torch threads (one
unless asked), so the app's own runs go on beside it. ``cancel`` sends the group Ctrl-C (the
batch then keeps what finished and writes its manifest, so the rows it has open as an atlas),
and kills the whole group when it has not ended after ``grace`` seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..services import assets
from .progress import read_progress

JOB, LOG, EXIT, CANCEL = "job.json", "log.txt", "exit.json", "cancel.json"
NICE = 10  # the batch yields the CPU to the app's own runs
GRACE_S = 20.0  # after Ctrl-C, how long the batch may take to write what finished before it is killed
INTERRUPTED = 130  # the command's exit status after Ctrl-C
LAUNCHER: list[str] | None = None  # the program before "batch ..." (tests: one with a tiny model)
_WAITERS: dict[int, subprocess.Popen] = {}  # the children this process started, until reaped


class JobError(ValueError):
    """A batch cannot start; the message says why in one sentence."""


@dataclass
class JobStatus:
    """Where one background batch stands, read from its folder.

    ``state``: "running", "finished" (exit 0), "cancelled" (cancel asked, or Ctrl-C), "failed" (any
    other exit) or "stopped" (the process is gone and left no exit status: the server that started
    it ended). ``reason``: for a failed, cancelled or stopped run, the last lines of its log that
    say why. ``progress``: the batch's ``progress.json`` (None before its first)."""

    folder: Path
    state: str
    title: str = ""
    pid: int | None = None
    started: float | None = None
    ended: float | None = None
    returncode: int | None = None
    progress: dict | None = None
    log_tail: list[str] = field(default_factory=list)
    reason: str = ""
    argv: list[str] = field(default_factory=list)
    threads: int = 1
    cancel_asked: float | None = None  # when Cancel was pressed (``cancel.json``), if it was

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def has_rows(self) -> bool:
        """Whether the folder holds an atlas to open (a table and its manifest)."""
        return (self.folder / "results.parquet").exists() and (self.folder / "manifest.json").exists()


def runs_dir() -> Path:
    """Where background batches write: ``$CIRCUITVIZ_CACHE/batches`` (else ~/.cache/circuitviz)."""
    return assets.cache_dir("batches")


def folder_name(what: str, now: float | None = None) -> str:
    """A run's folder name: when it began, then ``what`` (letters, digits and '-' only)."""
    stamp = time.strftime("%Y-%m-%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    slug = re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")[:60]
    return f"{stamp}-{slug}" if slug else stamp


def _read(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write(path: Path, record: dict) -> None:
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(json.dumps(record, indent=1), encoding="utf-8")
    os.replace(aside, path)


def _alive(pid: int | None, folder: Path) -> bool:
    """Whether ``pid`` is this folder's batch still running (not a zombie, not a new process that
    took the number: its command line names the folder)."""
    if not pid:
        return False
    proc = Path(f"/proc/{pid}")
    if proc.exists():
        try:
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                return False
            return str(folder) in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace"
            )
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def log_lines(folder: Path, last: int = 200) -> list[str]:
    """The log's last lines as a terminal would show them: a progress bar's redrawn line (``\\r``)
    counts as its last drawing only, and empty lines are left out."""
    try:
        with open(folder / LOG, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64_000))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = [line.rsplit("\r", 1)[-1].rstrip() for line in text.split("\n")]
    return [line for line in lines if line.strip()][-last:]


def _reason(lines: list[str]) -> str:
    """Why a run ended badly, from its log: the command's own 'error:' or 'interrupted' line, else a
    traceback's last line, else the log's last line."""
    for line in reversed(lines):
        if line.startswith(("error:", "interrupted")):
            return line
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]+(Error|Exception|Interrupt)\b", line):
            return line
    return lines[-1] if lines else "it printed nothing"


def status(folder: str | Path) -> JobStatus:
    """Where the background batch of ``folder`` stands (see ``JobStatus``)."""
    folder = Path(folder)
    job, ended, cancelled = _read(folder / JOB), _read(folder / EXIT), _read(folder / CANCEL)
    pid = job.get("pid") if isinstance(job.get("pid"), int) else None
    found = JobStatus(
        folder=folder,
        state="running",
        title=str(job.get("title") or folder.name),
        pid=pid,
        started=job.get("started"),
        argv=list(job.get("argv") or []),
        threads=int(job.get("threads") or 1),
        progress=read_progress(folder),
        cancel_asked=cancelled.get("asked") if isinstance(cancelled.get("asked"), (int, float)) else None,
    )
    if "returncode" not in ended and (pid in _WAITERS or _alive(pid, folder)):
        return found  # this process's child not reaped yet, or a batch an earlier server started
    found.log_tail = log_lines(folder, 12)
    found.returncode = ended.get("returncode")
    found.ended = ended.get("ended")
    if found.returncode == 0:
        found.state = "finished"
    elif cancelled or found.returncode == INTERRUPTED:
        found.state = "cancelled"
    elif found.returncode is None:  # the server that started it ended: its manifest says how it went
        manifest = _read(folder / "manifest.json")
        found.state = "finished" if manifest and not manifest.get("interrupted") else "stopped"
    else:
        found.state = "failed"
    if found.state != "finished":
        found.reason = _reason(found.log_tail)
    return found


def jobs(root: Path | None = None) -> list[JobStatus]:
    """Every background batch under ``root`` (``runs_dir``), newest first."""
    root = root or runs_dir()
    if not root.is_dir():
        return []
    folders = [path for path in root.iterdir() if (path / JOB).exists()]
    return [status(path) for path in sorted(folders, key=lambda p: p.name, reverse=True)]


def running_job(root: Path | None = None) -> JobStatus | None:
    """The batch running now, if any (one at a time per server: ``start`` refuses a second)."""
    return next((job for job in jobs(root) if job.running), None)


@contextlib.contextmanager
def _lock(root: Path):
    """One start at a time across the server's sessions (a file lock beside the runs)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _reap(process: subprocess.Popen, folder: Path) -> None:
    """Wait for the child and write its exit status into its folder (a daemon thread)."""
    returncode = process.wait()
    shutil.rmtree(folder / PARTIAL, ignore_errors=True)  # its rows so far: the folder holds them all now
    with contextlib.suppress(OSError):
        _write(folder / EXIT, {"returncode": returncode, "ended": time.time()})
    _WAITERS.pop(process.pid, None)  # after the exit status is written: never 'stopped' between


def batch_arguments(
    *,
    methods: list[str],
    budgets: str,
    generate: str | None = None,
    n: int | None = None,
    seed: int = 0,
    dataset: str | Path | None = None,
    subjects: list[str] | None = None,
    model: str | None = None,
    more: list[str] | tuple = (),
) -> list[str]:
    """``circuitviz batch``'s arguments (without ``--out``) for a generated family (``generate``,
    ``n``, ``seed``), MMLU questions (``subjects``, ``n`` of each, ``seed``) or a dataset file, the
    methods (registry names), the budgets as the command takes them ("mib" or edge counts) and the
    model (None: the command's default)."""
    if not methods:
        raise JobError("Choose at least one method to run.")
    if [generate is not None, dataset is not None, subjects is not None].count(True) != 1:
        raise JobError("Give one of a family to generate, MMLU subjects or a dataset file.")
    argv = ["batch"]
    if generate:
        argv += ["--generate", generate, "--seed", str(int(seed))]
    elif subjects is not None:
        argv += ["--dataset", "mmlu", "--subjects", ",".join(subjects), "--seed", str(int(seed))]
    else:
        argv += ["--dataset", str(dataset)]
    if n is not None:
        argv += ["--n", str(int(n))]
    argv += ["--methods", ",".join(methods), "--budgets", budgets]
    if model:
        argv += ["--model", model]
    return [*argv, *more]


def command_line(argv: list[str]) -> str:
    """The command a user would type for the same batch (``python -m circuitviz batch ...``)."""
    import shlex

    return "python -m circuitviz " + " ".join(shlex.quote(part) for part in argv)


def start(
    folder: str | Path,
    argv: list[str],
    *,
    title: str = "",
    threads: int = 1,
    launcher: list[str] | None = None,
    root: Path | None = None,
    env: dict | None = None,
) -> JobStatus:
    """Start ``circuitviz <argv> --out folder`` in the background (``argv`` begins with "batch");
    JobError in one sentence when another batch is running. ``launcher``: the program before the
    arguments (default ``python -m circuitviz``; tests give one that loads a tiny model)."""
    folder, root = Path(folder), root or Path(folder).parent
    with _lock(root):
        running = running_job(root)
        if running is not None:
            raise JobError(
                f"The batch {running.title} is running; this server runs one batch at a time, so "
                "cancel it or wait for it to end."
            )
        folder.mkdir(parents=True, exist_ok=True)
        full = [*argv, "--out", str(folder)]
        environment = {**os.environ, **(env or {})}
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            environment[name] = str(max(1, int(threads)))
        environment["PYTHONUNBUFFERED"] = "1"  # the log shows each line as it is printed
        environment.setdefault(
            "CIRCUITVIZ_BATCH_FLUSH_S", "5"
        )  # its rows on disk within 5 s: the page opens them
        with open(folder / LOG, "ab") as log:
            process = subprocess.Popen(
                [*(launcher or LAUNCHER or [sys.executable, "-m", "circuitviz"]), *full],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: cancel ends all of it
                env=environment,
            )
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, process.pid, NICE)
        _WAITERS[process.pid] = process
        _write(
            folder / JOB,
            {
                "pid": process.pid,
                "title": title or folder.name,
                "argv": full,
                "command": command_line(full),
                "threads": int(threads),
                "started": time.time(),
            },
        )
    threading.Thread(target=_reap, args=(process, folder), daemon=True).start()
    return status(folder)


def cancel(folder: str | Path, grace: float = GRACE_S) -> JobStatus:
    """Cancel the batch of ``folder``: Ctrl-C to its whole process group (the batch keeps what
    finished and writes its manifest), then the group killed if it is still there after ``grace``
    seconds (a thread waits for that; the page need not)."""
    folder = Path(folder)
    found = status(folder)
    if not found.running:
        return found
    _write(folder / CANCEL, {"asked": time.time()})
    try:
        group = os.getpgid(found.pid)
    except ProcessLookupError:
        return status(folder)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGINT)

    def kill_later() -> None:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _alive(found.pid, folder):
                return
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)

    threading.Thread(target=kill_later, daemon=True).start()
    return status(folder)


def delete(folder: str | Path, root: Path | None = None) -> JobStatus:
    """Delete the folder of a batch that has ended (finished, cancelled, failed or stopped): its
    table, tasks, log and job files; its results stay in the result store, so the same command
    again finds them. JobError in one sentence for a running batch, or a folder that is not a
    background batch's under ``root`` (``runs_dir``)."""
    folder, root = Path(folder), (root or runs_dir())
    with _lock(root):  # never beside a start
        if folder.resolve().parent != root.resolve() or not (folder / JOB).exists():
            raise JobError(f"{folder.name} is not a batch run from the page, so it is not deleted here.")
        found = status(folder)
        if found.running:
            raise JobError(
                f"The batch {found.title} is running; cancel it first, then delete it once it has stopped."
            )
        shutil.rmtree(folder)
    return found


def wait(folder: str | Path, timeout: float = 600.0, every: float = 0.2) -> JobStatus:
    """The batch's status once it is no longer running (or after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        found = status(folder)
        if not found.running or time.monotonic() > deadline:
            return found
        time.sleep(every)


PARTIAL = "partial"  # a running batch's rows so far, as a folder the atlas opens


def rows_written(folder: str | Path) -> int:
    """How many rows (one per prompt and method) a batch has written to its folder so far: its
    table's and its parts' distinct keys, as ``partial_atlas`` takes them (its ``partial`` copy
    counts those it had when it was made: the difference is what a Refresh adds)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .table import PARTS, TABLE

    folder, keys = Path(folder), set()
    for path in ([folder / TABLE] if (folder / TABLE).exists() else []) + sorted(
        (folder / PARTS).glob("part-*.parquet")
    ):
        try:
            keys.update(pq.read_table(path, columns=["key"]).column("key").to_pylist())
        except (OSError, ValueError, pa.ArrowException):  # renamed or merged meanwhile: the next read
            continue
    return len(keys)


def partial_atlas(folder: str | Path, store=None) -> Path | None:
    """The rows a running batch has finished, as a batch folder of their own (``folder/partial``:
    ``results.parquet`` and a manifest marked ``partial``), or None before its first finished row.
    The batch's parts are read as they are (each is written whole, then renamed) and never
    touched; the graph is read from the first finished row's result in the store the batch
    writes to (``store``: the default one, as the command's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .. import __version__
    from ..services.store import ResultStore
    from .table import PARTS, TABLE, latest_by_key

    folder = Path(folder)
    pieces = []
    for path in ([folder / TABLE] if (folder / TABLE).exists() else []) + sorted(
        (folder / PARTS).glob("part-*.parquet")
    ):
        try:
            pieces.append(pq.read_table(path))
        except (OSError, ValueError, pa.ArrowException):  # renamed or merged meanwhile: the next read
            continue
    if not pieces:
        return None
    try:
        table = latest_by_key(pa.concat_tables(pieces, promote_options="default"))
    except (pa.ArrowException, ValueError):
        return None
    done = [row for row in table.select(["key", "status"]).to_pylist() if row["status"] == "done"]
    result = next(
        (found for found in ((store or ResultStore()).get(row["key"]) for row in done[:5]) if found), None
    )
    if result is None:
        return None
    asked_for = _read(folder / "request.json")
    statuses = table.column("status").to_pylist()
    kept = sorted({b for budgets in table.column("circuit_budgets").to_pylist() for b in budgets or []})
    manifest = {
        "circuitviz": __version__,
        "format": 1,
        "partial": True,  # the rows so far of a batch still running
        "command": _read(folder / JOB).get("command", ""),
        "model": {
            "model_id": result.model_id,
            "dtype": (asked_for.get("model") or {}).get("dtype") or "",
            "device": "",
            "graph": result.graph.to_cfg_dict(),
            "backend": (asked_for.get("model") or {}).get("backend") or "hooked",
        },
        "n_edges": result.graph.n_edges,
        "methods": asked_for.get("methods") or [],
        "budgets": [int(b) for b in table.column("budgets")[0].as_py()],
        "kept_budgets": kept,
        "top_edges": asked_for.get("top_edges"),
        "max_tokens": asked_for.get("max_tokens"),
        "task_check": "--no-task-check" not in (_read(folder / JOB).get("argv") or []),
        "dataset": {"source": "", "problems": [], "selection": {}},
        "counts": {"items": None, "done": statuses.count("done"), "failed": statuses.count("failed")},
        "interrupted": True,
        "consensus": None,
    }
    out = folder / PARTIAL
    out.mkdir(exist_ok=True)
    aside = out / f".{TABLE}.{os.getpid()}"
    pq.write_table(table, aside)
    os.replace(aside, out / TABLE)
    _write(out / "manifest.json", manifest)
    return out
