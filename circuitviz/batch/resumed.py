"""What a batch finds stored before it computes: which items it reuses, which it computes again and
why, said in one sentence on the command line and on the Dataset page (``progress.json``).

An item's store key holds the engine (``core.keys``: the version and a digest of the package's
source), so after any code change no item of an earlier run is found and the whole batch is
computed again; until 2026-12-07 nothing said so, and a resume the user expected took the full
time. Two records tell why an item is not found:

- the folder's own rows (``results.parquet``): a row for the item under another key, and the
  engine its ``request.json`` names (a folder written before that field: its manifest's version);
- the store's lineage: each result the batch stores is noted under its ``lineage_key`` (the key
  without the engine) in ``made/<engine>.keys`` under the store's folder, so a batch in another
  folder (each of the Dataset page's runs has its own) finds the results of the same items that
  other code made.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..core import keys
from ..core.text import counted

MADE = "made"  # the lineage's folder under the store's
KEEP_ENGINES = 16  # lineage files kept: the newest engines' (each about 33 bytes an item)


def _made_folder(store) -> Path | None:
    root = getattr(store, "root", None)
    return Path(root) / MADE if root is not None else None


def note_made(store, lineages: list[str], engine: str | None = None) -> None:
    """Note that the engine running now (``engine``) stored the results of ``lineages`` in
    ``store``: one line each, appended (a full disk or a read-only store notes nothing)."""
    folder = _made_folder(store)
    if folder is None or not lineages:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{engine or keys.engine_digest()}.keys", "a", encoding="utf-8") as handle:
            handle.write("".join(f"{lineage}\n" for lineage in lineages))
        files = sorted(folder.glob("*.keys"), key=lambda path: path.stat().st_mtime)
        for path in files[:-KEEP_ENGINES]:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def made_by(store, lineages: set[str], engine: str | None = None) -> dict[str, str]:
    """{lineage: the other engine that stored it} for those of ``lineages`` that code other than
    ``engine`` (the running one) stored in ``store`` (the newest such engine when several did)."""
    folder = _made_folder(store)
    engine = engine or keys.engine_digest()
    found: dict[str, str] = {}
    if folder is None or not lineages or not folder.is_dir():
        return found
    try:
        files = sorted(folder.glob("*.keys"), key=lambda path: path.stat().st_mtime)
    except OSError:
        return found
    for path in files:
        if path.stem == engine:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            if line in lineages:
                found[line] = path.stem
    return found


def engine_words(then: str | None, now: str) -> str:
    """Which code made a result, beside the code running now: 'version 0.1.0 of the engine (now
    0.2.0)', or for the same version 'the engine's earlier code (version 0.1.0, source digest
    1a2b..., now 3c4d...)'; ``then`` None: not recorded."""
    if not then:
        return "the engine's earlier code (its source has changed since)"
    old_version, _, old_digest = then.partition("+")
    version, _, digest = now.partition("+")
    if old_version != version:
        return f"version {old_version} of the engine (now {version})"
    return f"the engine's earlier code (version {version}, source digest {old_digest}, now {digest})"


@dataclass
class Found:
    """What a batch found stored of its items, counted once each (``sentence`` says it)."""

    items: int = 0
    reused_rows: int = 0  # the folder's finished rows, their result in the store
    from_store: int = 0  # no row here, the result in the store (another batch's, Explore's)
    other_engine: Counter = field(default_factory=Counter)  # rows or results other code made, by engine
    unrecorded: int = 0  # a row under another key, the engine it was made by not recorded
    other_settings: int = 0  # a row under another key by this very engine (its model's dtype, backend)
    lost: int = 0  # a finished row whose result the store no longer holds
    retried: int = 0  # a failed row, tried again

    @property
    def reused(self) -> int:
        return self.reused_rows + self.from_store

    @property
    def again(self) -> int:
        return (
            sum(self.other_engine.values()) + self.unrecorded + self.other_settings + self.lost + self.retried
        )

    def sentence(self, now: str | None = None) -> str | None:
        """One sentence: how many items were stored before, how many are reused and how many are
        computed again and why; None when nothing of the batch was stored."""
        stored = self.reused + self.again
        if not stored:
            return None
        now = now or keys.engine_digest()
        parts = []
        if self.reused:
            where = (
                "this folder's rows"
                if not self.from_store
                else "the result store"
                if not self.reused_rows
                else "this folder's rows and the result store"
            )
            parts.append(f"{self.reused:,} {'is' if self.reused == 1 else 'are'} reused from {where}")
        for then, count in sorted(self.other_engine.items(), key=lambda entry: -entry[1]):
            were = "was" if count == 1 else "were"
            parts.append(f"{count:,} {were} made by {engine_words(then, now)} and {_again(count)}")
        if self.unrecorded:
            were = "was" if self.unrecorded == 1 else "were"
            parts.append(
                f"{self.unrecorded:,} {were} stored under another key (made by {engine_words(None, now)}, "
                f"or with another model dtype or backend) and {_again(self.unrecorded)}"
            )
        if self.other_settings:
            were = "was" if self.other_settings == 1 else "were"
            parts.append(
                f"{self.other_settings:,} {were} stored under another key by this code (with another model "
                f"dtype or backend) and {_again(self.other_settings)}"
            )
        if self.lost:
            parts.append(
                f"{self.lost:,} {'is' if self.lost == 1 else 'are'} no longer in the result store and {_again(self.lost)}"
            )
        if self.retried:
            parts.append(
                f"{self.retried:,} failed before and {'is' if self.retried == 1 else 'are'} tried again"
            )
        head = f"{counted(stored, 'item')} of the batch's {self.items:,} {'was' if stored == 1 else 'were'} stored before: "
        if len(parts) > 1:
            parts[-1] = "and " + parts[-1]
        new = self.items - stored
        tail = f"; no earlier result of the other {new:,} was found." if new else "."
        return head + ", ".join(parts) + tail


def _again(count: int) -> str:
    return "is computed again" if count == 1 else "are computed again"


def earlier_engine(record: dict | None, manifest: dict | None) -> str | None:
    """The engine that wrote a batch folder's rows: its ``request.json``'s (``record``) or its
    manifest's, else the version its manifest names (a folder written before the engine was
    recorded), else None."""
    record, manifest = record or {}, manifest or {}
    for found in (record.get("engine"), manifest.get("engine"), manifest.get("circuitviz")):
        if isinstance(found, str) and found:
            return found
    return None


def _row_places(rows) -> dict[tuple, str]:
    """{(task index, method, config) and (task index, method): the row's key} of a folder's rows."""
    places: dict[tuple, str] = {}
    if rows is None or rows.num_rows == 0:
        return places
    columns = [rows.column(name).to_pylist() for name in ("key", "task_index", "method", "config")]
    for key, index, method, config in zip(*columns):
        places[(index, method, config)] = key
        places[(index, method)] = key
    return places


def explain(found: Found, pending, methods, finished, failed, rows, store, lineage, earlier) -> Found:
    """Count why each of ``pending`` (items not found stored under their key) is computed: its
    finished row's result gone from the store, its row failed, another engine's result of it in the
    store's lineage or in the folder's ``rows`` (``earlier``: the engine the folder records), or none of these.
    ``methods``: the batch's (name, config, plain); ``lineage``: {item key: its lineage key}."""
    import json

    others = made_by(store, {lineage[item.key] for item in pending if item.key in lineage})
    places = _row_places(rows)
    once = Counter(name for name, _, _ in methods)
    now = keys.engine_digest()
    for item in pending:
        name, _, plain = methods[item.method_index]
        config = json.dumps(plain, sort_keys=True)
        if item.key in finished:
            found.lost += 1
        elif item.key in failed:
            found.retried += 1
        elif lineage.get(item.key) in others:
            found.other_engine[others[lineage[item.key]]] += 1
        elif places.get((item.task_index, name, config), item.key) != item.key or (
            once[name] == 1 and places.get((item.task_index, name), item.key) != item.key
        ):
            if earlier == now:
                found.other_settings += 1
            elif earlier and ("+" in earlier or earlier.partition("+")[0] != now.partition("+")[0]):
                found.other_engine[earlier] += 1
            else:  # not recorded, or only the version, which did not change
                found.unrecorded += 1
    return found
