"""The blob-keyed facts cache (``facts.duckdb``, one per repository, opened only by the
build-lock holder): per (blob, language) the file facts and the snapshot rows as first
built at ``origin_path``. A blob seen again is copied by SQL (same path) or re-homed
(another path: handles depend on the path), never parsed again. It is only a cache: a
corrupt one is discarded, one of another extractor or schema version is emptied."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from pathlib import Path

import duckdb
import pyarrow as pa

from citegraph.graph.fact_rows import Columns, empty_columns, rehome
from citegraph.graph.schema import (
    DAMAGE_COLUMNS,
    EDGE_COLUMNS,
    FACTS_DDL,
    FACTS_SCHEMA_VERSION,
    SYMBOL_COLUMNS,
)
from citegraph.graph.snapshot_writer import SnapshotWriter, sql_str
from citegraph.graph.store import RepoStore
from citegraph.indexer.extract import EXTRACTOR_VERSION


class RecentRows:
    """The rows this process extracted lately, per (repository, extractor version, blob,
    language, path): a bounded in-memory front of the cache's rows at their origin path,
    used only where the cache itself has the key.

    A delta holds every path changed since its base, so each build copies again the rows
    of the paths earlier builds changed; from the facts tables that is a semi-join over
    every cached row. A long-lived builder (the resident service) extracted those rows
    itself and finds them here. Rows are a pure function of the key, as in the cache."""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._rows: OrderedDict[tuple[str, str, str, str, str], tuple[Columns, Columns, Columns]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: tuple[str, str, str, str, str], rows: tuple[Columns, Columns, Columns]) -> None:
        with self._lock:
            self._rows[key] = rows
            self._rows.move_to_end(key)
            while len(self._rows) > self.max_entries:
                self._rows.popitem(last=False)

    def get(self, key: tuple[str, str, str, str, str]) -> tuple[Columns, Columns, Columns] | None:
        with self._lock:
            rows = self._rows.get(key)
            if rows is not None:
                self._rows.move_to_end(key)
            return rows


RECENT = RecentRows()

# (blob, language) -> (status, reason, content hash, size, origin path)
CachedFacts = tuple[str, str | None, str | None, int | None, str | None]


def attach(out: duckdb.DuckDBPyConnection, rs: RepoStore) -> None:
    """Attach the facts cache read-write as ``facts`` (builders hold the repo lock)."""
    def attach_once() -> None:
        out.execute(f"ATTACH {sql_str(rs.facts_path)} AS facts")
        out.execute(FACTS_DDL.replace("IF NOT EXISTS ", "IF NOT EXISTS facts."))

    try:
        attach_once()
    except duckdb.Error:
        with contextlib.suppress(duckdb.Error):
            out.execute("DETACH facts")
        rs.facts_path.unlink(missing_ok=True)
        Path(str(rs.facts_path) + ".wal").unlink(missing_ok=True)
        attach_once()
    version = f"{EXTRACTOR_VERSION}/{FACTS_SCHEMA_VERSION}"
    rows = out.execute("SELECT value FROM facts.meta WHERE key='extractor_version'").fetchall()
    if not rows or rows[0][0] != version:
        out.execute("DELETE FROM facts.blob_files; DELETE FROM facts.blob_symbols; DELETE FROM facts.blob_edges; "
                    "DELETE FROM facts.blob_damage;")
        out.execute("INSERT OR REPLACE INTO facts.meta VALUES ('extractor_version', ?)", [version])


def detach(out: duckdb.DuckDBPyConnection) -> None:
    out.execute("DETACH facts")


def lookup(out: duckdb.DuckDBPyConnection, keys: list[tuple[str, str]]) -> dict[tuple[str, str], CachedFacts]:
    """The cached file facts of the (blob, language) keys the cache holds."""
    want = pa.table({"blob_id": [k[0] for k in keys], "language": [k[1] for k in keys]})
    out.register("_want", want)
    try:
        rows = out.execute(
            "SELECT f.blob_id, f.language, f.status, f.reason, f.content_hash, f.size, f.origin_path "
            "FROM facts.blob_files f JOIN _want w USING (blob_id, language)").fetchall()
    finally:
        out.unregister("_want")
    return {(r[0], r[1]): (r[2], r[3], r[4], r[5], r[6]) for r in rows}


def copy_same_path(writer: SnapshotWriter, same_path: list[tuple[str, str]]) -> None:
    """Rows of cached blobs at the path they were first built at: copied inside DuckDB."""
    if not same_path:
        return
    out = writer.con
    out.register("_same", pa.table({"blob_id": [b for b, _ in same_path], "path": [p for _, p in same_path]}))
    try:
        for table in ("symbols", "edges", "damage"):
            writer.copy(table, f"SELECT s.* FROM facts.blob_{table} s SEMI JOIN _same x "
                               "ON s.blob_id = x.blob_id AND s.path = x.path")
    finally:
        out.unregister("_same")


def copy_rehomed(writer: SnapshotWriter, blob: str, origin: str | None, path: str) -> None:
    """Rows of a cached blob first seen at ``origin``, placed at ``path`` (new handles)."""
    out = writer.con
    rows = out.execute("SELECT * FROM facts.blob_symbols WHERE blob_id = ? AND path = ?", [blob, origin]).fetchall()
    moved, mapping = rehome(rows, path)
    syms = empty_columns(SYMBOL_COLUMNS)
    for row in moved:
        for c, v in zip(SYMBOL_COLUMNS, row, strict=True):
            syms[c].append(v)
    edges = empty_columns(EDGE_COLUMNS)
    for row in out.execute("SELECT * FROM facts.blob_edges WHERE blob_id = ? AND path = ?", [blob, origin]).fetchall():
        vals = dict(zip(EDGE_COLUMNS, row, strict=True))
        vals["path"] = path
        vals["source_handle"] = mapping.get(vals["source_handle"]) if vals["source_handle"] else None
        for c in EDGE_COLUMNS:
            edges[c].append(vals[c])
    damage = empty_columns(DAMAGE_COLUMNS)
    for row in out.execute("SELECT * FROM facts.blob_damage WHERE blob_id = ? AND path = ? ORDER BY start_byte",
                           [blob, origin]).fetchall():
        for c, v in zip(DAMAGE_COLUMNS, row, strict=True):
            damage[c].append(path if c == "path" else v)
    writer.add(syms, edges, damage)


def remember(out: duckdb.DuckDBPyConnection, new_keys: list[tuple[str, str, str]]) -> None:
    """Copy the facts extracted by this build (keys: blob, language, origin path — none of
    them in the cache: ``lookup`` missed them) from the snapshot under construction into
    the cache, inside DuckDB (no Python rows)."""
    if not new_keys:
        return
    out.register("_new", pa.table({"blob_id": [k[0] for k in new_keys], "language": [k[1] for k in new_keys],
                                   "path": [k[2] for k in new_keys]}))
    try:
        # No DELETE first: a key extracted now is one ``lookup`` did not find.
        out.execute("INSERT INTO facts.blob_files SELECT f.blob_id, n.language, f.status, f.reason, "
                    "f.content_hash, f.size, f.path FROM files f JOIN _new n ON f.path = n.path AND "
                    "f.blob_id = n.blob_id")
        for table in ("symbols", "edges", "damage"):
            out.execute(f"INSERT INTO facts.blob_{table} SELECT s.* FROM {table} s SEMI JOIN _new n "
                        "ON s.path = n.path AND s.blob_id = n.blob_id")
    finally:
        out.unregister("_new")
