"""A batch table whose circuits are planted: clusters of prompts that share known edges.

For the atlas's tests (does clustering find the planted groups, does the consensus hold the
shared edges) and its benchmark at 10,000 prompts, without running a model: every prompt's
circuit ranks the edges every prompt shares first, then its cluster's own edges, then random
ones (other clusters' own edges last), and a budget keeps the first edges of that ranking (so circuits are nested, as top-N ones
are). Curves are drawn so that faithfulness grows with the budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy

from ..core.graph import GraphSpec
from .atlas import BatchTable
from .table import rows_table


@dataclass
class PlantedAtlas:
    batch: BatchTable
    labels: numpy.ndarray  # [n_prompts] planted cluster of each prompt
    shared: numpy.ndarray  # edges every prompt's circuit starts with
    cores: list[numpy.ndarray]  # each cluster's own edges, next in its prompts' rankings


def planted_batch(
    sizes: tuple[int, ...] = (30, 20),
    spec: GraphSpec | None = None,
    budgets: tuple[int, ...] = (10, 20, 51, 103, 206, 517, 1034, 2068, 5171, 10342),
    keep_edges: int = 1034,
    n_shared: int = 8,
    n_core: int = 40,
    seed: int = 0,
    method: str = "eap-ig",
    config: dict | None = None,
) -> PlantedAtlas:
    """A table of ``sum(sizes)`` prompts in clusters of ``sizes`` (see the module's docstring)."""
    spec = spec or GraphSpec(n_layers=18, n_heads=4, d_model=640)
    n_edges = spec.n_edges
    rng = numpy.random.default_rng(seed)
    chosen = rng.permutation(n_edges)
    shared = numpy.sort(chosen[:n_shared])
    cores = [
        numpy.sort(chosen[n_shared + i * n_core : n_shared + (i + 1) * n_core]) for i in range(len(sizes))
    ]
    labels = numpy.repeat(numpy.arange(len(sizes)), sizes)
    budgets = sorted(int(b) for b in budgets)
    kept = [b for b in budgets if b <= keep_edges]
    config_text = json.dumps(config if config is not None else {"ig_steps": 20}, sort_keys=True)
    rows = []
    for index, cluster in enumerate(labels):
        first = numpy.concatenate([shared, rng.permutation(cores[cluster])])
        others = numpy.concatenate([core for c, core in enumerate(cores) if c != cluster] or [shared[:0]])
        rest = numpy.setdiff1d(numpy.arange(n_edges), numpy.concatenate([first, others]), assume_unique=True)
        ranking = numpy.concatenate([first, rng.permutation(rest), others])  # other clusters' edges last
        position = numpy.empty(n_edges, dtype=numpy.int64)
        position[ranking] = numpy.arange(n_edges)
        largest = ranking[: kept[-1]] if kept else ranking[:0]
        bits = numpy.zeros(largest.size, dtype=numpy.int64)
        for bit, budget in enumerate(kept):
            bits |= (position[largest] < budget).astype(numpy.int64) << bit
        order = numpy.argsort(largest)
        clean, corrupted = rng.normal(3.0, 0.5), rng.normal(-1.0, 0.5)
        nfs = numpy.clip(
            numpy.log10(numpy.array(budgets)) / numpy.log10(n_edges) + rng.normal(0, 0.1, len(budgets)),
            -0.2,
            1.2,
        )
        nfs[-1] = 1.0
        metric = corrupted + nfs * (clean - corrupted)
        ndf = 1 - numpy.minimum(numpy.abs(1 - nfs), 1)
        rows.append(
            {
                "key": f"planted-{seed}-{index}",
                "task_index": index,
                "task_id": f"p{index:05d}",
                "family": f"cluster-{cluster}",
                "line": 0,
                "clean": f"planted prompt {index}",
                "corrupted": f"planted corruption {index}",
                "answer": " a",
                "foils": [" b"],
                "metric": "logit_diff",
                "n_tokens": 12,
                "method": method,
                "config": config_text,
                "status": "done",
                "error": None,
                "clean_metric": float(clean),
                "corrupted_metric": float(corrupted),
                "budgets": budgets,
                "edges_kept": budgets,
                "metric_values": metric.tolist(),
                "nfs": nfs.tolist(),
                "ndf": ndf.tolist(),
                "cpr_nfs": float(nfs.mean()),
                "cmd_nfs": float(numpy.abs(1 - nfs).mean()),
                "cpr_ndf": float(ndf.mean()),
                "cmd_ndf": float((1 - ndf).mean()),
                "top_edges": ranking[:100].tolist(),
                "top_scores": numpy.linspace(1, 0.01, 100).tolist(),
                "circuit_budgets": kept,
                "circuit_edges": largest[order].tolist(),
                "circuit_bits": bits[order].tolist(),
                "seconds": 1.0,
                "timings": "{}",
                "batch_tasks": 16,
                "device": "cpu",
                "worker": "planted",
                "executor": "planted",
            }
        )
    manifest = {
        "model": {
            "model_id": "planted",
            "dtype": "torch.float32",
            "device": "cpu",
            "graph": spec.to_cfg_dict(),
        },
        "n_edges": n_edges,
        "budgets": budgets,
        "kept_budgets": kept,
    }
    batch = BatchTable(table=rows_table(rows), manifest=manifest)
    return PlantedAtlas(batch=batch, labels=labels, shared=shared, cores=cores)
