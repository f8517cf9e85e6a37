"""The Dataset page's run form: where the prompts come from (a family generated, MMLU questions,
an uploaded file), the methods, the budgets, the threads and the further settings
(``batch_settings``), each checked to one sentence before the batch starts; Run starts the very
``circuitviz batch`` command in the background (``batch_runner`` watches it). Also what a batch
costs, from the batches run before on the same model."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from ..core.text import counted, markdown_sentence, rough_duration
from . import batch_settings
from .batch_runner import (
    FORM,
    GENERATE,
    MAX_PROMPTS,
    MMLU,
    SHARED_MAX_PROMPTS,
    SHARED_MAX_UPLOAD_MB,
    UPLOAD,
    UPLOAD_TYPES,
    running,
    shared,
)


# ----- what a batch costs ---------------------------------------------------------------------
def measured_cost(model_id: str, methods: list[str], n: int | None = None, family: str | None = None) -> str:
    """What earlier runs here measured, in one sentence: seconds a prompt of each chosen method
    (the table's own ``seconds``, the newest run that ran it on prompts of ``family`` where one
    did: 'ioi', 'mmlu', ...; else the newest of any) and how long those prompts were (an MMLU
    question's 46 tokens cost several IOI prompts' 16), what ``n`` prompts of them all come to,
    and how long the model took to load: in the newest batch's own process where a batch recorded
    it (its manifest's ``load_seconds``), else in this server's (a batch pays Python's start and
    imports too, so that figure was no price for it)."""
    import pyarrow.parquet as pq

    from ..batch import jobs
    from ..entry.calibration import last_load

    found: list[list[dict]] = []  # each earlier run's finished rows on this model, newest first
    batch_loads: list[float] = []  # each earlier run's own load of this model, newest first
    for job in jobs.jobs():
        if job.running or not (job.folder / "results.parquet").exists():
            continue
        try:
            table = pq.read_table(
                job.folder / "results.parquet", columns=["method", "status", "seconds", "n_tokens", "family"]
            )
            manifest = jobs._read(job.folder / "manifest.json")
            ran_on = manifest.get("model", {}).get("model_id")
        except (OSError, ValueError, AttributeError):
            continue
        if ran_on == model_id:
            found.append([r for r in table.to_pylist() if r["status"] == "done" and r["seconds"]])
            loaded = manifest.get("load_seconds")
            if isinstance(loaded, (int, float)) and not isinstance(loaded, bool) and loaded > 0:
                batch_loads.append(float(loaded))

    def alike(row: dict) -> bool:  # a prompt of the family asked ('mmlu/astronomy' for mmlu)
        return family is not None and str(row["family"] or "").split("/")[0] == family

    per_prompt: dict[str, float] = {}
    tokens: dict[str, float] = {}  # the mean length of the prompts each figure was measured on

    def newest(name: str, same: bool) -> list[dict]:  # the newest run's rows of the method
        for rows in found:
            picked = [r for r in rows if r["method"] == name and (alike(r) or not same)]
            if picked:
                return picked
        return []

    for name in methods:  # prompts of the family asked first: an IOI batch was priced at MMLU's
        rows = newest(name, True) or newest(name, False)
        if rows:
            per_prompt[name] = sum(r["seconds"] for r in rows) / len(rows)
            tokens[name] = sum(r["n_tokens"] for r in rows) / len(rows)
    load = last_load(model_id)
    parts = [
        f"about {per_prompt[name]:.1f} s a {tokens[name]:.0f}-token prompt for {name}"
        for name in methods
        if name in per_prompt
    ]
    unmeasured = [name for name in methods if name not in per_prompt]
    said = "Measured on earlier batches here: " + ", ".join(parts) if parts else ""
    if parts and n and not [name for name in methods if name not in per_prompt]:
        each = sum(per_prompt[name] for name in methods)
        whose = "1 prompt's" if n == 1 else f"{n:,} prompts'"  # '1 prompts' circuits' read on the form
        # at the measured length: 114 MMLU questions were priced at IOI's 15 tokens a prompt, unsaid
        said += (
            f"; so {whose} circuits take about {rough_duration(n * each)} if "
            f"{'it is' if n == 1 else 'they are'} as long, "
            "and the consensus step more"
        )
    said += "." if said else ""
    if unmeasured:
        said += (
            f" No batch here has measured {', '.join(unmeasured)} on {model_id} yet: the batch shows its "
            "own estimate of the time left once its first group of prompts ends."
        )
    if batch_loads:  # the batch's own load, in its own process: what the next one pays
        said += (
            f" The last batch here loaded {model_id} in {rough_duration(batch_loads[0])} in its own process, "
            "after Python's start and imports, before its first prompt."
        )
    elif load:  # the app's own load, after its imports: SmolLM2-135M's 1 s read as what a batch pays
        said += (
            f" This server's last load of {model_id} took {load:.0f} s; the batch loads it again in a "
            "process of its own, Python's start and imports first, before its first prompt."
        )
    return said.strip()


# ----- the form --------------------------------------------------------------------------------
def no_upload_sentence(capped: bool) -> str:
    """Run pressed with no file of prompts read. The box refuses a file of another type or over its
    size in its own words, and the page never sees it: "Upload a JSONL or CSV file of prompts first"
    stood under the box's "text/plain files are not allowed" beside the file the user had uploaded."""
    size = f", at most {SHARED_MAX_UPLOAD_MB} MB" if capped else ""
    kinds = ", ".join(f".{kind}" for kind in UPLOAD_TYPES)
    return (
        f"No file of prompts was read: the box above holds none it accepts ({kinds}{size}); "
        "upload one, or generate a family's."
    )


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


def _strict_problem(loaded, name: str) -> str | None:
    """The strict box's refusal of a file with any line that is no task (the command's --strict)."""
    problems = loaded.problems
    if not problems:
        return None
    lines = counted(len(problems), "line")
    return (
        f"{lines} of {name} {'is' if len(problems) == 1 else 'are'} no task (the first: "
        f"{problems[0].rstrip('.')}) and the strict box refuses the file; fix "
        f"{'it' if len(problems) == 1 else 'them'}, or untick the box to run the other "
        f"{counted(len(loaded.tasks), 'task')}."
    )


def _mmlu_fields(most: int) -> tuple[list[str] | None, int, int, str | None]:
    """MMLU's fields: (the subjects chosen, questions per subject, seed, why MMLU cannot run here)."""
    from ..batch.mmlu import ALL_SUBJECTS, MMLUError, mmlu_subjects

    try:
        known = mmlu_subjects()
    except MMLUError as error:  # the wheel that holds the questions is not installed
        st.info(markdown_sentence(str(error)))
        return None, 1, 0, str(error)
    left, middle, right = st.columns([4, 3, 2], vertical_alignment="bottom")
    subjects = left.multiselect(
        "MMLU subjects", [ALL_SUBJECTS, *known], key=FORM + "subjects", placeholder="choose subjects",
        format_func=lambda s: f"all {len(known)} subjects" if s == ALL_SUBJECTS else s,
        help="the command's --dataset mmlu --subjects: real MMLU test questions (docs/mmlu.md)",
    )  # fmt: skip
    n = middle.number_input(
        "questions per subject", 1, most, min(2, most), key=FORM + "mmlu.n",
        help="the command's --n: this many questions of each subject that pass the validity check",
    )  # fmt: skip
    seed = right.number_input(
        "seed", 0, 2**31 - 1, 0, key=FORM + "mmlu.seed", help="the order questions are drawn in"
    )
    st.caption(
        "Each question becomes a task on the model: its prompt in one fixed format, the letter the model "
        "prefers as the answer, the other three as foils, the options' letters renamed E-H as the "
        "corruption; a question whose corruption lowers the answer's logit difference by less than 1 is "
        "left out and another drawn (docs/mmlu.md)."
    )
    chosen = list(known) if ALL_SUBJECTS in subjects else list(subjects)
    return chosen, int(n), int(seed), None


def form(model_id: str, device: str = "auto") -> None:
    """The run form: a family to generate (how many prompts, seed), MMLU questions (subjects, how
    many of each, seed) or an uploaded file, methods, budgets, threads, further settings; Run starts
    the batch on the sidebar's model and device (one sentence when it cannot)."""
    from ..batch import jobs
    from ..batch.generate import GENERATED_FAMILIES
    from ..methods import available_methods, default_method

    capped = shared()
    most = SHARED_MAX_PROMPTS if capped else MAX_PROMPTS
    st.caption(
        markdown_sentence(
            "The batch runs `python -m circuitviz batch` on "
            + (
                f"{model_id} (the sidebar's model)"
                if device == "auto"
                else f"{model_id} on {device} (the sidebar's model and device)"
            )
            + " in the background, into a folder of its own under the app's cache: the figures are the command's."
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
        st.segmented_control("prompts from", [GENERATE, MMLU, UPLOAD], default=GENERATE, key=FORM + "source")
        or GENERATE
    )
    upload, family, n, seed, strict, subjects, mmlu_problem = None, None, None, 0, False, None, None
    if source == GENERATE:
        left, middle, right = st.columns(3)
        family = left.selectbox("family", list(GENERATED_FAMILIES), key=FORM + "family")
        n = middle.number_input("how many prompts", 1, most, min(4, most), key=FORM + "n")
        seed = right.number_input("seed", 0, 2**31 - 1, 0, key=FORM + "seed")
    elif source == MMLU:
        subjects, n, seed, mmlu_problem = _mmlu_fields(most)
    else:
        upload = st.file_uploader(
            "JSONL or CSV: clean, corrupted, answer, foil (or foils) [, metric, id, family] per line",
            type=UPLOAD_TYPES,
            key=FORM + "file",
            max_upload_size=SHARED_MAX_UPLOAD_MB if capped else None,  # 20 prompts fit in a few KB
        )
        first, box = st.columns([1, 2], vertical_alignment="bottom")
        n = first.number_input(
            "run only the first", 1, most, most if capped else None, key=FORM + "first",
            placeholder="all prompts", help="the command's --n: the file's first N tasks",
        )  # fmt: skip
        strict = box.checkbox(
            "refuse the file if any line is not a task", key=FORM + "strict",
            help="the command's --strict; unticked, such lines are left out and named above the atlas",
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
        "budgets (comma separated, or mib)", "mib", key=FORM + "budgets",
        help="each counts the graph's edges, or (edge, position) units for a method with positions ticked "
        "(give it unit counts); mib: MIB's ten fractions of the graph's edges, 0.1 % to 100 %, as the "
        "command's default",
    )  # fmt: skip
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = 1
    if not capped:
        threads = right.number_input(
            "torch threads", 1, cores, 1, key=FORM + "threads",
            help="1 leaves the other cores to the app's own runs; more runs the batch faster",
        )  # fmt: skip
    more = batch_settings.widgets(model_id, methods, budgets)  # --keep-edges ... and each method's
    if (
        capped and source == UPLOAD
    ):  # the widget's limit, held here too: an emptied box would run every prompt
        n = min(int(n or most), most)
    prompts = int(n) * len(subjects or []) if source == MMLU else int(n) if n else None
    if methods:
        kind = family if source == GENERATE else "mmlu" if source == MMLU else None
        st.caption(markdown_sentence(measured_cost(model_id, methods, prompts or None, kind)))
    busy = running() is not None
    if not st.button(
        "Run", type="primary", key=FORM + "go", disabled=busy,
        help="One batch runs at a time on this server: Run opens again when it ends." if busy else None,
    ):  # fmt: skip
        return
    problem, loaded = None, None
    if not methods:
        problem = "Choose at least one method to run (the box above)."
    elif source == UPLOAD and upload is None:  # none, or one the box refused (it never reaches here)
        problem = no_upload_sentence(capped)
    elif source == UPLOAD:
        loaded, problem = _upload_tasks(upload)
        if not problem and strict:
            problem = _strict_problem(loaded, upload.name)
    elif source == MMLU:
        problem = mmlu_problem or _mmlu_problem(subjects, int(n), most)
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
    ran = methods[0] if len(methods) == 1 else f"{len(methods)} methods"
    if source == GENERATE:
        count, what, of = int(n), family, counted(int(n), f"{family} prompt")
    elif source == MMLU:
        count, what = prompts, "mmlu"
        of = counted(int(n), "MMLU question") + (
            f" of {subjects[0]}" if len(subjects) == 1 else f" of each of {len(subjects)} subjects"
        )
    else:
        count = min(int(n or len(loaded.tasks)), len(loaded.tasks))
        what, of = Path(upload.name).stem, f"{counted(count, 'prompt')} of {upload.name}"
    folder = jobs.runs_dir() / jobs.folder_name(f"{what} {count} {ran}")
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
            subjects=subjects if source == MMLU else None,
            model=model_id,
            # the sidebar's device, as Explore's runs take it (auto: the command's own choice)
            more=[
                *(["--device", device] if device != "auto" else []),
                *(["--strict"] if strict else []),
                *extra,
            ],
        )
        jobs.start(folder, argv, title=title, threads=int(threads))
    except (jobs.JobError, OSError) as error:
        st.error(markdown_sentence(str(error)))
        return
    st.rerun()


def _mmlu_problem(subjects: list[str], n: int, most: int) -> str | None:
    """No subject chosen, or more questions than a batch run here takes (a shared server's cap)."""
    if not subjects:
        return "Choose at least one MMLU subject (the subjects box), or all of them."
    total = n * len(subjects)
    if total > most:
        return (
            f"{counted(n, 'question')} of each of {len(subjects)} subjects is {total:,} prompts, more than "
            f"the {most:,} a batch run here takes; choose fewer subjects or questions, or run "
            "`python -m circuitviz batch --dataset mmlu --subjects ...` on your own machine."
        )
    return None
