"""``evaluate``'s task from the circuit file it reads, where the command line leaves it out.

A file written by ``discover --out`` keeps its task (prompt, corrupted prompt, answer, foils,
metric). ``evaluate --circuit FILE`` without ``--prompt``, or with the file's own prompt, measures
the circuit on that task for every part the command line does not give, so it reproduces the
file's NDF; before, ``--prompt`` was required and a missing ``--corrupted`` or ``--foil`` was
proposed anew (another corruption, other figures), and a file made with no corrupted prompt (a
method that needs none, measured against the neutral prompt) could not be measured as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.tasks import METRICS
from ..core.text import json_given, shown, shown_token


def _file_json(text: str) -> dict:
    """A circuit file's JSON object, or {} (parse_circuit says what is wrong with it, once the model is there)."""
    try:
        data = json.loads(text) if text.lstrip()[:1] == "{" else None
    except (json.JSONDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def made_on_problem(text: str, model: str, other_model: bool) -> str | None:
    """The sentence refusing a circuit file made on another model than ``--model`` names (before
    the load), unless ``--other-model`` accepts it; None when the file names no model or this one.
    A circuit's heads and MLPs are its model's: one of a random-weight Llama measured on a Qwen of
    the same shape ran with only a note, exit 0."""
    made_on = _file_json(text).get("model_id")
    if other_model or not isinstance(made_on, str) or not made_on.strip() or _same_model(made_on, model):
        return None
    return (
        f"The circuit file was made on {shown(made_on, 40)} and --model names {shown(model, 40)}; evaluate it "
        f"with --model {shown(made_on, 40)}, or add --other-model to measure it on a model of the same shape."
    )


def _same_model(made_on: str, model: str) -> bool:
    """Whether the file's model and ``--model`` name one model: the same text, or the same file or
    folder however written ("./ckpt", "ckpt/", its absolute path; the file keeps ``--model`` as
    discover was given it)."""
    if made_on == model:
        return True
    try:
        there, here = Path(made_on).expanduser(), Path(model).expanduser()
        return there.exists() and here.exists() and there.resolve() == here.resolve()
    except (OSError, ValueError):  # a name no path can hold
        return False


def file_task_of(text: str) -> dict | None:
    """The task a circuit file's text keeps (``discover --out``'s ``task``), or None."""
    task = _file_json(text).get("task")
    fields = ("clean", "corrupted", "answer")
    if not isinstance(task, dict) or not all(isinstance(task.get(name, ""), str) for name in fields):
        return None
    if not task.get("clean", "").strip() or not isinstance(task.get("foils", []), list):
        return None
    return task


def fill_from_file(args, text: str, origin: str) -> tuple[bool, str | None]:
    """Fill ``args``' task flags the command line left out from the file's task, when it has
    none of its own prompt or gives the file's. Returns (the task is the file's with no corrupted
    prompt, so it is measured against the neutral prompt; the sentence saying what was taken)."""
    problem = _task_problem(args, _file_json(text).get("task"), origin)
    if problem:
        raise ValueError(problem)
    task = file_task_of(text)
    if args.prompt is None and task is None:
        raise ValueError(
            f"{origin} keeps no task (a prompt and its answer); give --prompt (and --answer, "
            "--corrupted, --foil) to measure it on."
        )
    if task is None or args.prompt not in (None, task["clean"]):
        return False, None  # another prompt: its own flags, proposed as before
    taken = []
    if args.prompt is None:
        args.prompt = task["clean"]
        taken.append(f"prompt {shown(task['clean'])}")
    if not args.corrupted and task.get("corrupted"):
        args.corrupted = task["corrupted"]
        taken.append(f"corrupted prompt {shown(task['corrupted'])}")
    if args.answer is None and task.get("answer"):
        args.answer = task["answer"]
        taken.append(f"answer {shown_token(task['answer'])}")
    if not args.foil and args.metric is None:  # the file's foils and metric go together
        args.foil = [foil for foil in task.get("foils", []) if isinstance(foil, str)]
        args.metric = task.get("metric") if task.get("metric") in METRICS else None
        taken += [f"foil {shown_token(foil)}" for foil in args.foil] + (
            [f"metric {args.metric}"] if args.metric else []
        )
    neutral = not args.corrupted and not task.get("corrupted")
    if neutral:  # discover measured an ACC++ file by knocking its signals out (file_kind_notes says so)
        as_discover = "" if _knockout_file(_file_json(text)) else ", as discover measured it,"
        taken.append(
            f"no corrupted prompt (its method needs none): measured{as_discover} against the "
            "neutral prompt, every token after the first replaced by the padding token"
        )
    if not taken:
        return neutral, None
    return neutral, (
        f"Using the task {origin} was made on: {'; '.join(taken)}. (--prompt, --corrupted, --answer and "
        "--foil set your own.)"
    )


_TASK_TEXTS = (
    ("clean", "prompt", "prompt"),
    ("corrupted", "corrupted prompt", "corrupted"),
    ("answer", "answer", "answer"),
)


def _task_problem(args, task, origin: str) -> str | None:
    """The sentence naming a part of the file's task, of the wrong kind, that ``evaluate`` would
    take (the flags leave it out), or None. Such a task was read as none ("keeps no task" of a file
    whose prompt was a number), its foils of another kind were dropped and a metric it does not
    know replaced by logit_diff, unsaid (2026-12-07)."""
    if task is None or (
        args.prompt is not None and not (isinstance(task, dict) and task.get("clean") == args.prompt)
    ):
        return None  # no task, or another prompt: the file's task is not used
    flags = "give --prompt (and --answer, --corrupted, --foil) to measure it on"
    if not isinstance(task, dict):
        return (
            f"{origin}'s 'task' is {json_given(task)}, not an object with the prompt and its answer; {flags}."
        )
    for key, words, flag in _TASK_TEXTS:
        value = task.get(key)
        if (
            value is not None
            and not isinstance(value, str)
            and getattr(args, key if key != "clean" else "prompt") in (None, "")
        ):
            return f"{origin}'s task has the {words} {json_given(value)}, not text; give --{flag} to measure it on."
    if args.foil or args.metric is not None:
        return None  # the file's foils and metric go together: the flags' are used
    foils = task.get("foils")
    if foils is not None and not (isinstance(foils, list) and all(isinstance(foil, str) for foil in foils)):
        return f"{origin}'s task has the foils {json_given(foils)}, not a list of texts; give --foil (or --metric) to measure it on."
    metric = task.get("metric")
    if metric is not None and metric not in METRICS:
        return (
            f"{origin}'s task has the metric {json_given(metric)}, not one evaluate knows ({', '.join(METRICS)}); "
            "give --metric to measure it on."
        )
    return None


def _knockout_file(source: dict) -> bool:
    """Whether discover measured the file's curve by knocking signals out (ACC++ with no corrupted
    prompt), not by patching."""
    details = source.get("details")
    faithfulness = details.get("faithfulness") if isinstance(details, dict) else None
    return isinstance(faithfulness, dict) and faithfulness.get("kind") == "signal-knockout"


def file_kind_notes(source: dict) -> list[str]:
    """What ``evaluate`` does not measure of a file ``discover`` wrote, one sentence each: a
    circuit over token positions is measured as the edges it uses at every position, and a run's
    neuron circuits not at all (both were measured unsaid, the table reading 'edges kept' under a
    position circuit's budgets and NDFs that were not discover's)."""
    notes = []
    if source.get("positions") is True:
        notes.append(
            "The file's circuits are over token positions, (edge, position) units; evaluate measures each "
            "as the edges it uses, at every position, so these figures are not the NDF discover wrote "
            "(rerun discover --positions on this prompt for those)."
        )
    if _knockout_file(source):
        notes.append(
            "discover measured this file's curve by knocking the found signals outside each circuit out of "
            "the heads' queries and keys (no corrupted prompt); evaluate patches every edge outside a circuit, "
            "so these figures are not the NDF discover wrote."
        )
    details = source.get("details")
    if isinstance(details, dict) and details.get("kind") == "neurons":
        notes.append(
            "The file's neuron circuits (its details' curve) are not measured here: evaluate measures its "
            "edge circuits (rerun discover --neurons on this prompt for the neuron circuits' NDF)."
        )
    return notes
