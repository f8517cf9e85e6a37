"""Whether a batch folder may take a run: a new (or empty) folder, or the same batch resumed.

A batch's table keeps only the rows of the run that wrote it last, so a second batch of another
dataset, methods, budgets or model sent into a folder would replace the first one's results. The
folder's ``request.json`` (written before the first row) records what a batch was asked; a run is
let in when it asks the same, or only more of it: the same tasks followed by new ones, the same
methods and others. Anything else is refused in one sentence, before any model loads
(``reuse_problem``). A folder of an earlier version (no ``request.json``) is compared with its
``manifest.json`` and ``tasks.jsonl``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..core import keys
from ..core.text import shown
from ..methods import config_to_dict, get_method
from .atlas import MANIFEST, mib_budgets
from .dataset import read_tasks
from .table import PARTS, TABLE

REQUEST = "request.json"
TASKS = "tasks.jsonl"


def method_configs(methods) -> list[tuple[str, object, dict]]:
    """(name, config, config as plain values) of each ``MethodRun``; a method asked twice with the
    same settings is refused."""
    found = []
    for run in methods:
        method = get_method(run.name)
        config = method.make_config(run.settings)
        found.append((method.name, config, config_to_dict(config)))
    names = [(name, json.dumps(plain, sort_keys=True)) for name, _, plain in found]
    if len(set(names)) != len(names):
        raise ValueError("A method is asked for twice with the same settings; name each once.")
    return found


def _budgets(budgets) -> list[int] | str:
    if isinstance(budgets, str):
        return budgets.strip().lower()
    return sorted({int(b) for b in budgets})


def asked(request, source) -> dict:
    """What makes a batch this batch: the model as given, the methods with every setting, the
    budgets as given, the token limit, what the table keeps, and where the tasks come from."""
    if request.tasks is not None:
        dataset = {"source": request.source or "tasks given", "n_tasks": len(request.tasks)}
    else:
        dataset = {"generate": list(request.generate or ()), "subjects": list(request.subjects)}
    return {
        "model": {key: getattr(source, key, None) for key in ("model_id", "dtype", "backend")},
        # as request.json reads back: a tuple setting (ensemble's members, Best-of-N's anchor
        # budgets) is a list there, and () != [] refused every resume of such a batch
        "methods": [
            {"name": name, "config": json.loads(json.dumps(plain, default=str))}
            for name, _, plain in method_configs(request.methods)
        ],
        "budgets": _budgets(request.budgets),
        "max_tokens": request.max_tokens,
        "keep_edges": request.keep_edges,
        "top_edges": request.top_edges,
        "dataset": dataset,
        "engine": keys.engine_digest(),  # not compared: a resume after a code change says why it recomputes
    }


def write_request(folder: Path, record: dict) -> None:
    (Path(folder) / REQUEST).write_text(json.dumps(record, indent=1), encoding="utf-8")


def read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _from_manifest(manifest: dict) -> dict:
    """What an earlier version's manifest says the batch was asked (the fields it holds)."""
    model = manifest.get("model") if isinstance(manifest.get("model"), dict) else {}
    source = (
        (manifest.get("dataset") or {}).get("source", "") if isinstance(manifest.get("dataset"), dict) else ""
    )
    record = {
        "model": {"model_id": model.get("model_id")},
        "methods": manifest.get("methods"),
        "budgets": manifest.get("budgets"),
        "max_tokens": manifest.get("max_tokens"),
        "top_edges": manifest.get("top_edges"),
    }
    if isinstance(source, str) and source.startswith("generated "):
        record["dataset"] = {"generated": source}
    return {key: value for key, value in record.items() if value is not None}


def _has_rows(folder: Path) -> bool:
    """Whether the folder holds any row (an empty table, left by a batch stopped before its first
    row, holds nothing to lose; a table that does not read is counted as rows)."""
    if any((folder / PARTS).glob("part-*.parquet")):
        return True
    if not (folder / TABLE).exists():
        return False
    try:
        return pq.ParquetFile(folder / TABLE).metadata.num_rows > 0
    except (OSError, ValueError, pa.ArrowException):
        return True


def _listed(budgets) -> str:
    return budgets if isinstance(budgets, str) else ",".join(str(b) for b in budgets)


def _method_names(methods) -> str:
    return (
        "; ".join(
            f"{m.get('name')}"
            + (
                f" ({', '.join(f'{k}={v}' for k, v in sorted(m['config'].items()))})"
                if m.get("config")
                else ""
            )
            for m in methods
            if isinstance(m, dict)
        )
        or "none"
    )


def _differences(before: dict, now: dict, n_edges) -> list[str]:
    """What the run asks that the earlier batch did not, as 'its X was A, not B' fragments."""
    found = []
    then_model, now_model = before.get("model") or {}, now["model"]
    for key in ("model_id", "dtype", "backend"):
        if key in then_model and then_model[key] != now_model[key]:
            found.append(f"its model {key} was {then_model[key]!r}, not {now_model[key]!r}")
    if "methods" in before:
        missing = [m for m in before["methods"] if m not in now["methods"]]
        if missing:
            found.append(f"it also ran {_method_names(missing)}, which this run leaves out")
    if "budgets" in before:
        then_budgets, now_budgets = before["budgets"], now["budgets"]
        if n_edges and isinstance(then_budgets, str) != isinstance(now_budgets, str):
            then_budgets, now_budgets = (
                mib_budgets(n_edges) if isinstance(b, str) else b for b in (then_budgets, now_budgets)
            )
        if then_budgets != now_budgets:
            found.append(f"its budgets were {_listed(before['budgets'])}, not {_listed(now['budgets'])}")
    for key, flag in (
        ("max_tokens", "--max-tokens"),
        ("keep_edges", "--keep-edges"),
        ("top_edges", "--top-edges"),
    ):
        if key in before and before[key] != now[key]:
            found.append(f"its {flag} was {before[key]}, not {now[key]}")
    then_data, now_data = before.get("dataset") or {}, now["dataset"]
    if "generate" in then_data or "generated" in then_data or "generate" in now_data:
        same = (
            then_data.get("generate") == now_data.get("generate")
            and then_data.get("subjects") == now_data.get("subjects")
            if "generate" in then_data
            else then_data.get("generated") == f"generated {tuple(now_data.get('generate') or ())}"
        )
        if then_data and not same:
            found.append(f"its tasks were {_data_text(then_data)}, not {_data_text(now_data)}")
    return found


def generated_parts(source) -> tuple[str, int | None, int | None] | None:
    """(family, n, seed) of the tasks a manifest's ``dataset.source`` says the batch drew: the
    runner writes the request's ``generate`` as Python wrote it ("generated ('mmlu', 10, 0)"; an
    older one "generated ioi"); None for a file's tasks or a text it cannot read."""
    if not isinstance(source, str) or not source.startswith("generated "):
        return None
    text = source[len("generated ") :].strip()
    try:
        found = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        found = text if text.isidentifier() else None
    if isinstance(found, str):
        return found, None, None
    if isinstance(found, (tuple, list)) and len(found) == 3 and isinstance(found[0], str):
        n, seed = (
            value if isinstance(value, int) and not isinstance(value, bool) else None for value in found[1:]
        )
        return found[0], n, seed
    return None


def generated_text(source) -> str | None:
    """A generated batch's tasks in words ("10 generated mmlu tasks (seed 0)"), or None for a file's:
    the page and the resume check wrote "generated ('mmlu', 10, 0)", a Python repr."""
    parts = generated_parts(source)
    if parts is None:
        return None
    family, n, seed = parts
    many = (
        f"{n:,} generated {family} task{'' if n == 1 else 's'}"
        if n is not None
        else f"generated {family} tasks"
    )
    return many + (f" (seed {seed})" if seed is not None else "")


def _data_text(data: dict) -> str:
    if "generated" in data:
        return generated_text(data["generated"]) or str(data["generated"])
    if "generate" in data and data["generate"]:
        family, n, seed = data["generate"]
        subjects = f" of {len(data['subjects'])} subjects" if data.get("subjects") else ""
        return f"{n} generated {family}{subjects} (seed {seed})"
    return f"{data.get('n_tasks', '?')} tasks of {data.get('source') or 'a file'}"


def _task_fields(item) -> dict[str, str]:
    task = item.task
    return {
        "prompt": shown(task.clean),
        "corruption": shown(task.corrupted),
        "answer": shown(task.answer),
        "foils": ", ".join(shown(foil) for foil in task.foils) or "none",
        "metric": task.metric,
        "id": shown(item.id),
    }


def _task_difference(folder: Path, tasks) -> str | None:
    """Where the dataset of this run departs from the tasks the folder ran (the same tasks followed
    by new ones is no difference: nothing of the earlier batch is lost)."""
    if tasks is None or not (folder / TASKS).exists():
        return None
    try:
        earlier = read_tasks(folder / TASKS)
    except (OSError, ValueError, KeyError, TypeError):
        return f"its {TASKS} does not read as tasks"
    for index, item in enumerate(earlier):
        if index >= len(tasks):
            return f"it ran {len(earlier):,} tasks and this run has {len(tasks):,}"
        now = tasks[index]
        then_fields, now_fields = _task_fields(item), _task_fields(now)
        for name in then_fields:
            if then_fields[name] != now_fields[name]:
                where = f"line {now.line}" if now.line else f"task {index + 1:,}"
                return (
                    f"its task {index + 1:,} had the {name} {then_fields[name]}, "
                    f"not {where}'s {now_fields[name]}"
                )
    return None


def reuse_problem(out, now: dict, tasks=None) -> str | None:
    """One sentence refusing ``out`` when it holds the results of another batch (see the module's
    docstring), or None when the run may write there. ``tasks``: the run's tasks, when known."""
    folder = Path(out)
    if not folder.is_dir() or not _has_rows(folder):
        return None  # nothing of an earlier batch's results is there to lose
    manifest = read_json(folder / MANIFEST)
    manifest = manifest if isinstance(manifest, dict) else {}
    before = read_json(folder / REQUEST)
    if not isinstance(before, dict):
        before = _from_manifest(manifest) if manifest else None
    if before is None:
        found = ["it records no request.json or manifest.json to say what it ran"]
    else:
        found = _differences(before, now, manifest.get("n_edges"))
    task_change = (
        None if any(s.startswith("its tasks were") for s in found) else _task_difference(folder, tasks)
    )
    if task_change:
        found.append(task_change)
    if not found:
        return None
    return (
        f"--out {out} holds the results of another batch ({'; '.join(found)}), which this run would "
        "replace; give another --out, or delete that folder yourself to start again."
    )
