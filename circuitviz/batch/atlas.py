"""The circuit atlas: what the circuits of a whole dataset have in common.

Pure functions over a batch folder's table (``results.parquet``, never the result store), so an
atlas of 10,000 prompts is read and computed in seconds:

- ``curve_bands``: per method and budget, the mean NDF (or NFS) over the dataset's prompts with
  its 95 % interval (Student's t on the prompts' values).
- ``mib_scores``: CPR and CMD as MIB defines them: at each budget the faithfulness of the
  dataset, (mean L(C) - mean L(corrupted)) / (mean L(clean) - mean L(corrupted)) over the
  prompts (a ratio of dataset means, not a mean of ratios), then the trapezoid area of that
  faithfulness (CPR, higher is better) and of |1 - faithfulness| (CMD, lower is better) over
  the budget as a fraction of the graph's edges (over token positions, the mean share of each
  prompt's own units: ``units.budget_fractions``). They match MIB's numbers when the budgets are
  MIB's ten fractions of the edges (``--budgets mib``); the per-prompt CPR/CMD of each row are
  the same areas normalised by the span they cover.
- ``circuit_matrix``: every prompt's circuit at a budget as one sparse prompts x edges matrix;
  ``edge_frequency`` (the share of prompts whose circuit holds each edge), ``consensus_edges``
  (edges in at least a share x of the prompts' circuits), ``edge_stability`` (how often an edge
  stays in the consensus when the prompts are resampled with replacement).
- ``cluster_prompts``: prompts grouped by the Jaccard similarity of their circuits (k-medoids
  on a sample of at most 1,000 prompts, k chosen there by the silhouette, then every prompt
  joins its most similar medoid: only prompts x k similarities are formed for the whole
  dataset, never a prompts x prompts matrix), each cluster with its own consensus circuit; ``circuit_map`` places every prompt in 2-D by landmark MDS of
  the Jaccard distance.

Every aggregate is over the finished tasks that pass today's meaningful-task check
(``task_refusals``, read off the metrics the batch stored): a stored batch run before the check
keeps tasks it now refuses, and their figures would mean nothing in a dataset's mean.
``validity`` says how many pass and why the others are refused.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from scipy import sparse

from ..core.graph import GraphSpec
from ..measure.task_validity import gap_check_enabled
from .folder_check import damaged_note, manifest_problem, read_folder, row_problems
from .table import SCHEMA, TABLE, with_optional_columns
from .task_check import task_refusals
from .units import budget_fractions

MIB_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
MANIFEST = "manifest.json"
CONSENSUS = "consensus.parquet"
SILHOUETTE_SAMPLE = 1000
MAP_LANDMARKS = 400


class AtlasError(ValueError):
    """A folder or table the atlas cannot read; the message says what to do."""


def mib_budgets(n_edges: int) -> list[int]:
    """MIB's ten circuit sizes (0.1 % to 100 % of the edges) as edge counts of this graph."""
    return sorted({max(1, int(fraction * n_edges)) for fraction in MIB_FRACTIONS})


def method_label(method: str, config: str | dict) -> str:
    """'eap-ig (ig_steps=20)': a method and its settings, as the atlas names a series."""
    values = json.loads(config) if isinstance(config, str) else dict(config)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items()) if not isinstance(v, str) or len(v) < 40)
    return f"{method} ({shown})" if shown else method


@dataclass
class BatchTable:
    """A batch folder read for the atlas: its table, manifest and graph."""

    table: pa.Table
    manifest: dict
    folder: Path | None = None
    notes: list[str] = field(default_factory=list)  # what opening the folder left out, and why
    dropped: int = 0  # damaged rows left out (the consensus the batch stored was measured with them)
    _labels: list[str] | None = field(default=None, repr=False)
    _label_column: list[str] | None = field(default=None, repr=False)
    _rows: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, folder: str | Path) -> BatchTable:
        typed, folder = str(folder), Path(folder)  # a sentence names the folder as typed: a Path
        # drops a doubled slash and a trailing one ('http://x' read 'http:/x')
        path = folder / TABLE
        if not folder.exists():
            raise AtlasError(
                f"Nothing exists at {typed!r}; give the folder a `circuitviz batch --out FOLDER` run wrote."
            )
        if not folder.is_dir():
            raise AtlasError(
                f"{typed!r} is a file; give the folder a `circuitviz batch --out FOLDER` run wrote."
            )
        if not path.exists():
            out = shlex.quote(typed)  # a folder with spaces or brackets broke the pasted command
            raise AtlasError(f"{typed!r} holds no {TABLE}; run `circuitviz batch --out {out}` first.")
        try:  # a file that does not read: named, with the way out (it quoted pyarrow's reason)
            table, manifest = read_folder(typed, path, folder / MANIFEST)
        except ValueError as error:
            raise AtlasError(str(error)) from None
        problem = manifest_problem(manifest)
        if problem:
            raise AtlasError(f"{folder}'s {MANIFEST} is not a batch's manifest: {problem}; rerun the batch.")
        table = with_optional_columns(table)
        missing = [name for name in SCHEMA.names if name not in table.column_names]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise AtlasError(
                f"{path.name} lacks the columns {', '.join(missing[:5])}{more}; rerun the batch."
            )
        n_edges = int(manifest.get("n_edges") or GraphSpec.from_cfg_dict(manifest["model"]["graph"]).n_edges)
        damaged = row_problems(table, n_edges)
        if damaged and len(damaged) == table.num_rows:
            raise AtlasError(f"Every row of {path.name} is damaged ({damaged[0][1]}); rerun the batch.")
        notes = [damaged_note(damaged, table.num_rows, path.name)] if damaged else []
        if damaged:
            keep = numpy.ones(table.num_rows, dtype=bool)
            keep[[index for index, _ in damaged]] = False
            table = table.filter(pa.array(keep))
        return cls(table=table, manifest=manifest, folder=folder, notes=notes, dropped=len(damaged))

    @property
    def spec(self) -> GraphSpec:
        return GraphSpec.from_cfg_dict(self.manifest["model"]["graph"])

    @property
    def n_edges(self) -> int:
        return int(self.manifest.get("n_edges") or self.spec.n_edges)

    @property
    def labels(self) -> list[str]:
        """Every (method, config) series of the table, in the order the batch ran them."""
        if self._labels is None:
            methods = self.table.column("method").to_pylist()
            configs = self.table.column("config").to_pylist()
            self._labels = list(dict.fromkeys(method_label(m, c) for m, c in zip(methods, configs)))
        return self._labels

    def label_column(self) -> list[str]:
        """Each row's series label (computed once: a config is parsed once per distinct text)."""
        if self._label_column is None:
            methods = self.table.column("method").to_pylist()
            configs = self.table.column("config").to_pylist()
            named = {pair: method_label(*pair) for pair in set(zip(methods, configs))}
            self._label_column = [named[pair] for pair in zip(methods, configs)]
        return self._label_column

    def rows(self, label: str | None = None, done: bool = True, passing: bool = False) -> pa.Table:
        """The rows of one series (all when None), only finished ones by default; ``passing``:
        only those today's meaningful-task check does not refuse (``task_refusals``)."""
        # the check can be switched off, here or for the batch (--no-task-check: its tasks count)
        key = (label, done, passing and gap_check_enabled() and self.checked)
        if key not in self._rows:
            if key[2]:
                table = self.rows(label, done)
                keep = [why is None for why in task_refusals(table)]
                table = table.filter(pa.array(keep, type=pa.bool_()))
            else:
                table = self.table
                if label is not None:
                    table = table.filter(pa.array([name == label for name in self.label_column()]))
                if done:
                    table = table.filter(pc.equal(table.column("status"), "done"))
            self._rows[key] = table
        return self._rows[key]

    @property
    def checked(self) -> bool:
        """Whether the batch ran with the validity check (False: with --no-task-check)."""
        return self.manifest.get("task_check", True) is not False

    def budgets(self, label: str) -> list[int]:
        rows = self.rows(label)
        return list(rows.column("budgets")[0].as_py()) if rows.num_rows else []

    def kept_budgets(self, label: str) -> list[int]:
        """The budgets whose circuits the table keeps (the atlas's consensus and clusters)."""
        rows = self.rows(label)
        return list(rows.column("circuit_budgets")[0].as_py()) if rows.num_rows else []


# ----- curves over the dataset -----------------------------------------------------------------
def _interval(values: numpy.ndarray) -> tuple[float, float, float]:
    """(mean, low, high): the 95 % interval of the mean (Student's t); NaN values left out."""
    values = values[~numpy.isnan(values)]
    if values.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.mean())
    if values.size < 2:
        return mean, mean, mean
    from scipy import stats  # here: 0.6 CPU s of import that only the dataset's curves need

    half = float(stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


def _matrix(rows: pa.Table, column: str) -> numpy.ndarray:
    """A list column of equal-length lists as [rows, length] float (None as NaN)."""
    values = rows.column(column).combine_chunks()
    flat = values.flatten().to_numpy(zero_copy_only=False).astype(float)
    return flat.reshape(rows.num_rows, -1) if rows.num_rows else numpy.zeros((0, 0))


def curve_bands(batch: BatchTable, label: str, score: str = "ndf") -> list[dict]:
    """Per budget: the mean ``score`` (ndf, nfs or necessity) over prompts with its 95 % interval,
    the median, and the mean edges kept after pruning (none for a score the table does not hold:
    necessity in a table written before it was measured); over the tasks that pass the check."""
    rows = batch.rows(label, passing=True)
    if rows.num_rows == 0 or rows.column(score).null_count == rows.num_rows:
        return []
    budgets = batch.budgets(label)
    fractions = budget_fractions(batch, label, rows, budgets)
    values, kept = _matrix(rows, score), _matrix(rows, "edges_kept")
    if numpy.isnan(values).all():  # measured on no task (necessity without a corrupted prompt): NaN, not null
        return []
    bands = []
    for column, budget in enumerate(budgets):
        mean, low, high = _interval(values[:, column])
        bands.append(
            {
                "budget": int(budget),
                "fraction": fractions[column],
                "n": int(numpy.sum(~numpy.isnan(values[:, column]))),
                "mean": mean,
                "low": low,
                "high": high,
                "median": float(numpy.nanmedian(values[:, column])),
                "edges_kept": float(kept[:, column].mean()),
            }
        )
    return bands


def _areas(fractions: list[float], faithfulness: list[float]) -> tuple[float, float]:
    """MIB's trapezoid areas over the edge fraction: under f (CPR) and between f and 1 (CMD)."""
    under = from_one = 0.0
    for (x1, f1), (x2, f2) in zip(zip(fractions, faithfulness), zip(fractions[1:], faithfulness[1:])):
        under += (x2 - x1) * (f1 + f2) / 2
        from_one += (x2 - x1) * (abs(1 - f1) + abs(1 - f2)) / 2
    return under, from_one


def mib_scores(batch: BatchTable, label: str) -> dict:
    """CPR and CMD of a series as MIB computes them over a dataset (see the module's docstring),
    with the dataset's faithfulness at each budget, and the mean per-prompt CPR/CMD (NFS) with
    their 95 % intervals; over the tasks that pass the check."""
    rows = batch.rows(label, passing=True)
    if rows.num_rows == 0:
        return {}
    budgets = batch.budgets(label)
    circuit = numpy.nanmean(_matrix(rows, "metric_values"), axis=0)
    clean = float(numpy.nanmean(rows.column("clean_metric").to_numpy(zero_copy_only=False).astype(float)))
    corrupted = float(
        numpy.nanmean(rows.column("corrupted_metric").to_numpy(zero_copy_only=False).astype(float))
    )
    span = clean - corrupted
    faithfulness = [float((value - corrupted) / span) if span else math.nan for value in circuit]
    fractions = budget_fractions(batch, label, rows, budgets)  # over positions: of each prompt's units
    cpr, cmd = _areas(fractions, faithfulness)
    per_prompt = {}
    for name in ("cpr_nfs", "cmd_nfs", "cpr_ndf", "cmd_ndf"):
        values = rows.column(name).to_numpy(zero_copy_only=False).astype(float)
        mean, low, high = _interval(values)
        per_prompt[name] = {"mean": mean, "low": low, "high": high}
    return {
        "budgets": budgets,
        "fractions": fractions,
        "faithfulness": faithfulness,
        "cpr": cpr,
        "cmd": cmd,
        "mib_grid": [int(b) for b in budgets] == mib_budgets(batch.n_edges),
        "clean_metric": clean,
        "corrupted_metric": corrupted,
        "n_prompts": rows.num_rows,
        "per_prompt": per_prompt,
    }


# ----- circuits as a sparse matrix ---------------------------------------------------------------
@dataclass
class CircuitMatrix:
    """Every prompt's circuit at one budget: ``members`` [n_prompts, n_edges] sparse 0/1."""

    members: sparse.csr_matrix
    task_index: numpy.ndarray  # [n_prompts] the rows' task numbers
    task_id: list[str]
    budget: int

    @property
    def n_prompts(self) -> int:
        return int(self.members.shape[0])

    @property
    def sizes(self) -> numpy.ndarray:
        return numpy.asarray(self.members.getnnz(axis=1))


def circuit_matrix(batch: BatchTable, label: str, budget: int, passing: bool = True) -> CircuitMatrix:
    """The circuits of a series at a kept budget, one sparse row per prompt (of the tasks that
    pass the check; every finished one when ``passing`` is False)."""
    rows = batch.rows(label, passing=passing)
    kept = batch.kept_budgets(label)
    if int(budget) not in kept:
        raise AtlasError(
            f"The table keeps circuits at {', '.join(map(str, kept)) or 'no budget'} for {label}; "
            f"budget {budget} is not one (rerun with a larger --keep-edges)."
        )
    bit = numpy.int64(1) << kept.index(int(budget))
    edges_column = rows.column("circuit_edges").combine_chunks()
    bits_column = rows.column("circuit_bits").combine_chunks()
    edges = edges_column.flatten().to_numpy(zero_copy_only=False).astype(numpy.int64)
    bits = bits_column.flatten().to_numpy(zero_copy_only=False).astype(numpy.int64)
    lengths = pc.list_value_length(edges_column).to_numpy(zero_copy_only=False).astype(numpy.int64)
    owner = numpy.repeat(numpy.arange(rows.num_rows), lengths)
    chosen = (bits & bit) != 0
    members = sparse.csr_matrix(
        (numpy.ones(int(chosen.sum()), dtype=numpy.float32), (owner[chosen], edges[chosen])),
        shape=(rows.num_rows, batch.n_edges),
    )
    return CircuitMatrix(
        members=members,
        task_index=rows.column("task_index").to_numpy(zero_copy_only=False),
        task_id=rows.column("task_id").to_pylist(),
        budget=int(budget),
    )


def edge_frequency(matrix: CircuitMatrix) -> numpy.ndarray:
    """The share of prompts whose circuit holds each edge.  # [n_edges]"""
    if matrix.n_prompts == 0:
        return numpy.zeros(matrix.members.shape[1])
    return numpy.asarray(matrix.members.sum(axis=0)).ravel() / matrix.n_prompts


def consensus_edges(matrix: CircuitMatrix, threshold: float) -> numpy.ndarray:
    """Edges in at least a share ``threshold`` of the prompts' circuits (sorted edge indices)."""
    if not 0 < threshold <= 1:
        raise AtlasError(f"The consensus share must be above 0 and at most 1, not {threshold}.")
    return numpy.flatnonzero(edge_frequency(matrix) >= threshold - 1e-12)


def edge_stability(
    matrix: CircuitMatrix, threshold: float, resamples: int = 50, seed: int = 0
) -> numpy.ndarray:
    """How often each edge is in the consensus of prompts resampled with replacement.  # [n_edges]

    1 for an edge every resample keeps, 0 for one none does; the consensus's own edges with
    stability near 0.5 sit at the threshold and may flip with other prompts of the task.
    """
    n = matrix.n_prompts
    if n == 0:
        return numpy.zeros(matrix.members.shape[1])
    rng = numpy.random.default_rng(seed)
    counts = numpy.stack([numpy.bincount(rng.integers(0, n, n), minlength=n) for _ in range(resamples)])
    frequencies = (matrix.members.T @ counts.T.astype(numpy.float32)).T / n  # [resamples, n_edges]
    return (frequencies >= threshold - 1e-9).mean(axis=0)


def jaccard(left: sparse.csr_matrix, right: sparse.csr_matrix, block: int = 2048) -> numpy.ndarray:
    """Jaccard similarity of every row of ``left`` with every row of ``right`` (two empty
    circuits count as equal).  # [n_left, n_right] float32

    Intersections are one product with ``right`` made dense: against a few rows (medoids)
    sparse rows times a dense matrix, against many (a sample, landmarks) ``left`` is made dense
    ``block`` rows at a time so the product is a BLAS matrix multiply.
    """
    other = right.toarray().T.astype(numpy.float32, copy=False)  # [n_edges, n_right]
    if right.shape[0] < 32:
        inter = numpy.asarray(left @ other, dtype=numpy.float32)
    else:
        inter = numpy.empty((left.shape[0], right.shape[0]), dtype=numpy.float32)
        for start in range(0, left.shape[0], block):
            inter[start : start + block] = left[start : start + block].toarray() @ other
    a = numpy.asarray(left.getnnz(axis=1), dtype=numpy.float32)[:, None]
    b = numpy.asarray(right.getnnz(axis=1), dtype=numpy.float32)[None, :]
    union = a + b - inter
    with numpy.errstate(invalid="ignore", divide="ignore"):
        return numpy.where(union > 0, inter / numpy.maximum(union, 1e-9), 1.0).astype(numpy.float32)


def edge_set_rows(edges: numpy.ndarray, n_edges: int) -> sparse.csr_matrix:
    """One edge set as a 1 x n_edges sparse row."""
    edges = numpy.asarray(edges, dtype=numpy.int64)
    return sparse.csr_matrix(
        (numpy.ones(edges.size, dtype=numpy.float32), (numpy.zeros(edges.size, dtype=numpy.int64), edges)),
        shape=(1, n_edges),
    )


# ----- clusters ----------------------------------------------------------------------------------
@dataclass
class Clustering:
    """Prompts grouped by circuit similarity.

    labels: [n_prompts] cluster of each prompt (0 = the largest cluster); medoids: the prompt
    (row) at the centre of each cluster; silhouette: the mean silhouette on the sample used to
    choose k (between -1 and 1; above ~0.25 the clusters are distinct); consensus: each
    cluster's consensus circuit (edge indices); similarity: [k, k] mean Jaccard between clusters
    (diagonal: within, over pairs of two prompts; NaN for a cluster of one), on the sample.
    """

    labels: numpy.ndarray
    medoids: list[int]
    k: int
    silhouette: float
    consensus: list[numpy.ndarray]
    similarity: numpy.ndarray
    tried: dict[int, float] = field(default_factory=dict)

    @property
    def sizes(self) -> list[int]:
        return [int(numpy.sum(self.labels == c)) for c in range(self.k)]


def _kmedoids(similarity: numpy.ndarray, k: int, rng: numpy.random.Generator, iterations: int = 30):
    """k-medoids on a square similarity matrix (distance = 1 - Jaccard): k-medoids++ seeds, then
    assign each prompt to its most similar medoid and move each medoid to the member most
    similar to the rest of its cluster, until nothing moves. Returns (labels, medoid rows)."""
    n = similarity.shape[0]
    medoids = [int(rng.integers(n))]
    distance = 1 - similarity[:, medoids[0]]
    for _ in range(1, k):
        weights = distance.astype(numpy.float64) ** 2
        if weights.sum() <= 0:
            break
        medoids.append(int(rng.choice(n, p=weights / weights.sum())))
        distance = numpy.minimum(distance, 1 - similarity[:, medoids[-1]])
    for _ in range(iterations):
        labels = similarity[:, medoids].argmax(axis=1)
        moved = []
        for cluster, medoid in enumerate(medoids):
            inside = numpy.flatnonzero(labels == cluster)
            if inside.size == 0:
                moved.append(medoid)
                continue
            moved.append(int(inside[similarity[numpy.ix_(inside, inside)].sum(axis=1).argmax()]))
        if moved == medoids:
            break
        medoids = moved
    return similarity[:, medoids].argmax(axis=1), medoids


def _silhouette(similarity: numpy.ndarray, labels: numpy.ndarray) -> float:
    """Mean silhouette from a square similarity matrix (distance = 1 - Jaccard)."""
    distance = 1 - similarity
    clusters = numpy.unique(labels)
    if clusters.size < 2:
        return 0.0
    sums = numpy.stack([distance[:, labels == c].sum(axis=1) for c in clusters], axis=1)  # [n, k]
    counts = numpy.array([numpy.sum(labels == c) for c in clusters], dtype=float)
    own = numpy.searchsorted(clusters, labels)
    rows = numpy.arange(len(labels))
    inside = counts[own] - 1
    within = numpy.where(inside > 0, sums[rows, own] / numpy.maximum(inside, 1), 0.0)
    between_all = sums / counts[None, :]
    between_all[rows, own] = numpy.inf
    between = between_all.min(axis=1)
    scale = numpy.maximum(within, between)
    scores = numpy.where(
        (inside > 0) & (scale > 0), (between - within) / numpy.where(scale > 0, scale, 1), 0.0
    )
    return float(scores.mean())


def cluster_prompts(
    matrix: CircuitMatrix, k: int | None = None, max_k: int = 6, threshold: float = 0.5, seed: int = 0
) -> Clustering:
    """Group prompts by the Jaccard similarity of their circuits (CLARA-style k-medoids).

    The medoids are found on a sample of at most 1,000 prompts (all of them when fewer), whose
    full similarity matrix is formed; ``k`` None tries 2..``max_k`` there and keeps the k with
    the best silhouette. Every prompt then joins its most similar medoid (a prompts x k product,
    never prompts x prompts). Each cluster's consensus uses ``threshold``.
    """
    members, n = matrix.members, matrix.n_prompts
    if n == 0:
        raise AtlasError("No finished prompt has a circuit at this budget; nothing to cluster.")
    rng = numpy.random.default_rng(seed)
    sample = numpy.sort(rng.choice(n, min(n, SILHOUETTE_SAMPLE), replace=False))
    sample_similarity = jaccard(members[sample], members[sample])
    choices = [int(k)] if k else list(range(2, min(max_k, len(sample) - 1) + 1))
    best, tried = None, {}
    for count in [c for c in choices if c >= 2] or [1]:
        if count == 1:
            labels, medoids = numpy.zeros(len(sample), dtype=numpy.int64), [0]
        else:
            labels, medoids = _kmedoids(sample_similarity, count, numpy.random.default_rng(seed + count))
        score = _silhouette(sample_similarity, labels)
        tried[count] = score
        if best is None or score > best[0] + 1e-12:
            best = (score, medoids)
    score, medoids = best
    rows = [int(sample[m]) for m in medoids]
    labels = jaccard(members, members[rows]).argmax(axis=1)
    order = numpy.argsort([-numpy.sum(labels == c) for c in range(len(rows))], kind="stable")
    relabel = numpy.empty(len(rows), dtype=numpy.int64)
    relabel[order] = numpy.arange(len(rows))
    labels, rows = relabel[labels], [rows[c] for c in order]
    k = len(rows)
    consensus = []
    for cluster in range(k):
        inside = numpy.flatnonzero(labels == cluster)
        part = CircuitMatrix(members[inside], matrix.task_index[inside], [], matrix.budget)
        consensus.append(
            consensus_edges(part, threshold) if inside.size else numpy.zeros(0, dtype=numpy.int64)
        )
    sample_labels = labels[sample]
    similarity = numpy.full((k, k), numpy.nan)
    for a in range(k):
        for b in range(k):
            block = sample_similarity[numpy.ix_(sample_labels == a, sample_labels == b)]
            if a == b:  # within a cluster: pairs of two prompts, not a prompt with itself (1.00 each)
                block = block[~numpy.eye(block.shape[0], dtype=bool)]
            if block.size:
                similarity[a, b] = float(block.mean())
    return Clustering(labels, rows, k, score, consensus, similarity, tried)


def circuit_map(matrix: CircuitMatrix, seed: int = 0, landmarks: int = MAP_LANDMARKS) -> numpy.ndarray:
    """Every prompt in 2-D so that prompts with similar circuits lie close (landmark MDS of the
    Jaccard distance: classical MDS on at most ``landmarks`` prompts, the rest placed by their
    distances to those).  # [n_prompts, 2]"""
    n = matrix.n_prompts
    if n < 3:
        return numpy.zeros((n, 2))
    rng = numpy.random.default_rng(seed)
    marks = numpy.sort(rng.choice(n, min(n, landmarks), replace=False))
    squared = (1 - jaccard(matrix.members[marks], matrix.members[marks])).astype(numpy.float64) ** 2
    centre = numpy.eye(len(marks)) - 1 / len(marks)
    values, vectors = numpy.linalg.eigh(-0.5 * centre @ squared @ centre)
    top = numpy.argsort(values)[::-1][:2]
    values, vectors = numpy.maximum(values[top], 0), vectors[:, top]
    inverse = numpy.where(values > 1e-12, 1 / numpy.sqrt(numpy.maximum(values, 1e-12)), 0.0)
    distances = (1 - jaccard(matrix.members, matrix.members[marks])).astype(numpy.float64) ** 2
    return -0.5 * (distances - squared.mean(axis=0)) @ (vectors * inverse)


# ----- the consensus circuits' own faithfulness (computed by the batch) ---------------------------
def consensus_table(batch: BatchTable) -> pa.Table | None:
    """The batch's evaluation of its consensus circuits on every prompt, when it made one."""
    if batch.folder is None or not (batch.folder / CONSENSUS).exists():
        return None
    return pq.read_table(batch.folder / CONSENSUS)


def consensus_bands(batch: BatchTable, label: str) -> list[dict]:
    """Per budget: the consensus circuit's size and its mean NDF over the prompts (95 % interval),
    beside the mean NDF of the prompts' own circuits: does one circuit explain the task?

    Over the tasks that pass the check. A batch that kept tasks the check now refuses measured the
    consensus of all its tasks: a budget whose circuit differs from the passing tasks' consensus
    is left out (its figures are of another circuit)."""
    table = consensus_table(batch)
    if table is None or table.num_rows == 0 or batch.dropped:  # its circuits counted the damaged rows
        return []
    own = {band["budget"]: band for band in curve_bands(batch, label)}
    table = table.filter(pc.equal(table.column("label"), label))
    passing = batch.rows(label, passing=True)
    some_refused = passing.num_rows < batch.rows(label).num_rows
    keep = pa.array(
        sorted(set(passing.column("task_index").to_pylist())), type=table.column("task_index").type
    )
    table = table.filter(pc.is_in(table.column("task_index"), value_set=keep))
    bands = []
    for budget in sorted(set(table.column("budget").to_pylist())):
        rows = table.filter(pc.equal(table.column("budget"), budget))
        threshold = float(rows.column("threshold")[0].as_py())
        if some_refused:
            measured = consensus_edges(circuit_matrix(batch, label, budget, passing=False), threshold)
            if not numpy.array_equal(
                measured, consensus_edges(circuit_matrix(batch, label, budget), threshold)
            ):
                continue
        mean, low, high = _interval(rows.column("ndf").to_numpy(zero_copy_only=False).astype(float))
        bands.append(
            {
                "budget": int(budget),
                "threshold": threshold,
                "n_edges": int(rows.column("n_edges")[0].as_py()),
                "n": rows.num_rows,
                "mean": mean,
                "low": low,
                "high": high,
                "own_mean": own.get(int(budget), {}).get("mean", math.nan),
            }
        )
    return bands
