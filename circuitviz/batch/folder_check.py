"""The parts of a batch folder that the Dataset page and the atlas read, checked when the folder
is opened: a folder is a file the user names, so a hand-edited or damaged ``manifest.json`` is one
sentence naming the field, and a damaged row of ``results.parquet`` is named and left out, never a
traceback on the page. A table or manifest that does not read at all is one sentence naming the
file and the way out (``read_folder``): the page quoted the reader's "Parquet magic bytes not found
in footer" and offered none."""

from __future__ import annotations

import json
import numbers
from pathlib import Path

import numpy
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.graph import GraphError, GraphSpec
from ..core.tasks import METRICS
from ..core.text import given


def read_folder(typed: str, table: Path, manifest: Path) -> tuple[pa.Table, object]:
    """The rows of a batch folder's ``table`` and its ``manifest`` as JSON; ValueError in one
    sentence naming the file that does not read and the way out (``typed``: the folder as typed)."""
    rerun = "rerun the `circuitviz batch` command that wrote this folder"
    try:
        rows = pq.read_table(table)
    except (OSError, ValueError, pa.ArrowException):
        raise ValueError(
            f"{str(Path(typed) / table.name)!r} is damaged (it does not read as a table: cut short, emptied "
            f"or another file's bytes); {rerun}, which sets it aside and reads its rows from the result "
            "store or computes them again, or open another folder."
        ) from None
    try:
        return rows, json.loads(manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{typed!r} has no {manifest.name}; it is not a batch folder.") from None
    except (OSError, ValueError) as error:  # not UTF-8, not JSON, unreadable
        where = f" at line {error.lineno}" if isinstance(error, json.JSONDecodeError) else ""
        raise ValueError(
            f"{str(Path(typed) / manifest.name)!r} does not read as JSON{where}; {rerun} to write it "
            "again, or open another folder."
        ) from None


def _whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def manifest_problem(manifest) -> str | None:
    """What makes ``manifest`` unreadable as a batch's manifest (a sentence fragment naming the
    field and what it holds), or None when every field read from it has its kind."""
    if not isinstance(manifest, dict):
        return f"it holds {given(manifest)}, not a JSON object"
    model = manifest.get("model")
    if not isinstance(model, dict):
        return f"its model is {given(model)}, not an object with model_id and graph"
    if not isinstance(model.get("model_id"), str) or not model["model_id"].strip():
        return f"its model's model_id is {given(model.get('model_id'))}, not a model's name"
    graph = model.get("graph")
    if not isinstance(graph, dict) or not all(
        _whole(graph.get(k)) and graph[k] > 0 for k in ("n_layers", "n_heads")
    ):
        return f"its model's graph is {given(graph)}, not n_layers and n_heads as whole numbers from 1"
    try:
        spec = GraphSpec.from_cfg_dict(graph)
    except GraphError:  # a d_model that is no number
        return f"its model's graph {given(graph)} cannot be read as a model's shape"
    n_edges = manifest.get("n_edges")
    if n_edges is not None and n_edges != spec.n_edges:
        return f"its n_edges is {given(n_edges)}, but its graph has {spec.n_edges:,} edges"
    budgets = manifest.get("budgets")
    if not isinstance(budgets, list) or not budgets or not all(_whole(b) and b >= 0 for b in budgets):
        return f"its budgets are {given(budgets)}, not a list of edge counts"
    consensus = manifest.get("consensus")
    if consensus is not None:
        threshold = consensus.get("threshold") if isinstance(consensus, dict) else None
        if not isinstance(threshold, numbers.Real) or isinstance(threshold, bool) or not 0 < threshold <= 1:
            return f"its consensus is {given(consensus)}, not an object with a threshold from 0 to 1"
    return None


TEXT_COLUMNS = ("key", "task_id", "clean", "corrupted", "answer", "method", "config", "status", "metric")
PER_BUDGET = ("edges_kept", "metric_values", "nfs", "ndf", "necessity")  # one value per budget
OPTIONAL = ("necessity",)  # a table written before it was measured holds none
SHORT = TEXT_COLUMNS + ("task_index", "foils", "budgets", "circuit_budgets")  # read row by row


def _row_problem(row: dict, series: dict) -> str | None:
    """What the atlas cannot read in one row's short columns (a fragment naming the column), or None."""
    for name in TEXT_COLUMNS:
        if not isinstance(row[name], str):
            return f"its {name} is {given(row[name])}, not text"
    if row["metric"] not in METRICS:
        return f"its metric is {given(row['metric'])}, not one of {', '.join(METRICS)}"
    if not _whole(row["task_index"]) or row["task_index"] < 0:
        return f"its task_index is {given(row['task_index'])}, not a task's number"
    if not isinstance(row["foils"], list) or not all(isinstance(foil, str) for foil in row["foils"]):
        return f"its foils are {given(row['foils'])}, not a list of tokens"
    try:
        config = json.loads(row["config"])
    except ValueError:
        config = None
    if not isinstance(config, dict):
        return f"its config is {given(row['config'])}, not a JSON object of settings"
    if row["status"] != "done":
        return None
    budgets, kept = row["budgets"], row["circuit_budgets"]
    for name, values in (("budgets", budgets), ("circuit_budgets", kept)):
        if not isinstance(values, list) or not all(_whole(v) and v >= 0 for v in values):
            return f"its {name} are {given(values)}, not a list of edge counts"
    if not budgets:
        return "its budgets are an empty list"
    first = series.setdefault((row["method"], row["config"]), (budgets, kept))
    if first != (budgets, kept):
        return f"its budgets {given(budgets)} are not the ones the other rows of {row['method']} hold ({given(first[0])})"
    return None


def _lengths(table, name: str) -> numpy.ndarray:
    """Each row's list length in column ``name`` (-1 for a missing list)."""
    lengths = pc.fill_null(pc.list_value_length(table.column(name)), -1)
    return lengths.to_numpy(zero_copy_only=False).astype(numpy.int64)


def _outside(table, name: str, lengths: numpy.ndarray, high) -> numpy.ndarray:
    """Per row: whether its list in column ``name`` holds a value below 0, above ``high`` (a number,
    or one per row), a NaN or a missing value: on the flat values, not row by row (a table of
    10,000 prompts keeps millions of edges)."""
    flat = table.column(name).combine_chunks().flatten()
    values = pc.fill_null(flat, -1).to_numpy(zero_copy_only=False).astype(numpy.float64)
    owner = numpy.repeat(numpy.arange(len(lengths)), numpy.maximum(lengths, 0))
    limit = high[owner] if isinstance(high, numpy.ndarray) else high
    bad = numpy.zeros(len(lengths), dtype=bool)
    bad[owner[~((values >= 0) & (values <= limit))]] = True  # NaN fails both comparisons
    return bad


def row_problems(table, n_edges: int) -> list[tuple[int, str]]:
    """(row index, a sentence fragment naming the row and what is wrong) for each row of a batch
    table the atlas cannot read: text columns that are not text, a config that is not JSON, a
    metric it does not know, and for a finished row lists whose lengths do not match its budgets,
    edges outside the graph, masks of budgets it does not keep, or budgets other than the rest of
    its series'."""
    short = {name: table.column(name).to_pylist() for name in SHORT}
    n_budgets, n_kept = _lengths(table, "budgets"), _lengths(table, "circuit_budgets")
    n_edges_kept, n_top, n_scores = (
        _lengths(table, name) for name in ("circuit_edges", "top_edges", "top_scores")
    )
    per_budget = {name: _lengths(table, name) for name in PER_BUDGET}
    checks = [  # (per row: whether the row fails, what to say), in the order they are said
        *(
            ((lengths != n_budgets) & ((lengths != -1) | (name not in OPTIONAL)),
             f"its {name} does not hold one value per budget")
            for name, lengths in per_budget.items()
        ),
        (_outside(table, "edges_kept", per_budget["edges_kept"], numpy.inf),  # units: may pass n_edges
         "its edges_kept are not counts"),
        ((n_top != n_scores) | (n_top < 0) | _outside(table, "top_edges", n_top, n_edges - 1),
         f"its top_edges and top_scores are not as many edges of the graph's {n_edges:,} as scores"),
        ((n_edges_kept < 0) | _outside(table, "circuit_edges", n_edges_kept, n_edges - 1),
         f"its circuit_edges are not edges of the graph's {n_edges:,}"),
        ((_lengths(table, "circuit_bits") != n_edges_kept)
         | _outside(table, "circuit_bits", _lengths(table, "circuit_bits"), 2.0 ** numpy.maximum(n_kept, 0) - 1),
         "its circuit_bits are not one mask of its kept budgets per kept edge"),
    ]  # fmt: skip
    series: dict = {}
    found = []
    for index in range(table.num_rows):
        row = {name: short[name][index] for name in SHORT}
        problem = _row_problem(row, series)
        if problem is None and row["status"] == "done":
            problem = next((said for failed, said in checks if failed[index]), None)
        if problem:
            found.append((index, f"row {index + 1:,} ({given(row['task_id'])}): {problem}"))
    return found


def damaged_note(damaged: list[tuple[int, str]], total: int, name: str) -> str:
    """The one warning for the rows ``row_problems`` found: how many, the first three named."""
    shown = "; ".join(sentence for _, sentence in damaged[:3])
    more = f"; and {len(damaged) - 3:,} more" if len(damaged) > 3 else ""
    verb = "is" if len(damaged) == 1 else "are"
    return (
        f"{len(damaged):,} of the {total:,} rows of {name} {verb} damaged and left out of every figure "
        f"({shown}{more}); rerun the batch to compute them again."
    )
