"""A copy of the stored IOI atlas in which some tasks fail today's validity check, as an atlas built
before the check did (the stored one was built again on 2026-12-05 and has none left): their
corrupted metric is raised to 0.5 below the clean one, under the logit difference's threshold of 1."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

STORED = Path(__file__).resolve().parent.parent / "assets" / "atlas" / "ioi"
WEAKENED = ("ioi-00085", "ioi-00100", "ioi-00106")


def weakened_atlas(folder: Path, ids=WEAKENED, gap: float = 0.5) -> Path:
    """The stored IOI atlas copied into ``folder`` with the tasks ``ids`` given a clean-corrupted
    difference of ``gap``; returns the copy's folder."""
    shutil.copytree(STORED, folder)
    table = pq.read_table(folder / "results.parquet")
    clean = table.column("clean_metric").to_pylist()
    weak = [task in ids for task in table.column("task_id").to_pylist()]
    corrupted = [
        c - gap if w else k for c, k, w in zip(clean, table.column("corrupted_metric").to_pylist(), weak)
    ]
    index = table.schema.get_field_index("corrupted_metric")
    table = table.set_column(
        index, table.schema.field(index), pa.array(corrupted, table.schema.field(index).type)
    )
    pq.write_table(table, folder / "results.parquet")
    return folder
