"""The blob-keyed facts cache (``facts.duckdb``, one per repository, opened only by the
build-lock holder): per (blob, language) the file facts and the snapshot rows as first
built at ``origin_path``. A blob seen again is copied by SQL (same path) or re-homed
(another path: handles depend on the path), never parsed again. It is only a cache: a
corrupt one is discarded, one of another extractor or schema version is emptied.

Rows are written once. A full build (no base) leaves the rows it extracted in its own
snapshot file and records only the file facts here, with that snapshot as their
``source``; a later build attaches the ready sources read-only and copies from them. A
delta copies its few new rows into the cache (its file holds only the delta). When a
source is retired or missing, its entries are dropped: the blobs are parsed again.
The data home's garbage collection and every build hold the repository's build lock, so
a source never disappears during a build."""

from __future__ import annotations

import contextlib
import os
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
    FACTS_INDEXES,
    FACTS_ROW_TABLES,
    FACTS_SCHEMA_VERSION,
    SNAPSHOT_SCHEMA_VERSION,
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
        out.execute(FACTS_INDEXES.replace(" ON ", " ON facts."))

    try:
        attach_once()
    except duckdb.Error:
        with contextlib.suppress(duckdb.Error):
            out.execute("DETACH facts")
        rs.facts_path.unlink(missing_ok=True)
        Path(str(rs.facts_path) + ".wal").unlink(missing_ok=True)
        attach_once()
    version = f"{EXTRACTOR_VERSION}/{FACTS_SCHEMA_VERSION}/{SNAPSHOT_SCHEMA_VERSION}"
    rows = out.execute("SELECT value FROM facts.meta WHERE key='extractor_version'").fetchall()
    if not rows or rows[0][0] != version:
        # Another version's tables may have other columns: recreate them empty.
        for table in ("blob_files", *FACTS_ROW_TABLES):
            out.execute(f"DROP TABLE IF EXISTS facts.{table}")
        out.execute(FACTS_DDL.replace("IF NOT EXISTS ", "IF NOT EXISTS facts."))
        out.execute(FACTS_INDEXES.replace(" ON ", " ON facts."))
        out.execute("INSERT OR REPLACE INTO facts.meta VALUES ('extractor_version', ?)", [version])
    _attach_sources(out, rs)


def _attach_sources(out: duckdb.DuckDBPyConnection, rs: RepoStore) -> None:
    """Attach every ready source snapshot read-only (reusing an alias when the build has
    it attached already, as its base); drop the entries of sources that are gone. The
    temporary table ``_fact_src`` maps each usable source to its alias."""
    attached = {os.path.realpath(r[1]): r[0] for r in
                out.execute("SELECT database_name, path FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()}
    usable: list[tuple[str, str]] = []
    sources = [r[0] for r in out.execute("SELECT DISTINCT source FROM facts.blob_files "
                                         "WHERE source IS NOT NULL ORDER BY 1").fetchall()]
    for i, sid in enumerate(sources):
        entry = rs.entry(sid)
        path = rs.published_path(entry) if entry else rs.snapshot_path(sid)
        alias = attached.get(os.path.realpath(path)) if path.exists() else None
        if alias is None and entry and entry.get("state") == "ready" and path.exists():
            alias = f"facts_src{i}"
            try:
                out.execute(f"ATTACH {sql_str(path)} AS {alias} (READ_ONLY)")
                _SOURCE_ALIASES.add(alias)
            except duckdb.Error:
                alias = None
        if alias is None or not (entry and entry.get("state") == "ready"):
            # Gone, not ready, or unreadable: a cache may forget; its blobs are parsed again.
            out.execute("DELETE FROM facts.blob_files WHERE source = ?", [sid])
            continue
        usable.append((sid, alias))
    out.register("_src_rows", pa.table({"source": pa.array([u[0] for u in usable], pa.string()),
                                        "alias": pa.array([u[1] for u in usable], pa.string())}))
    try:
        out.execute("CREATE OR REPLACE TEMP TABLE _fact_src AS SELECT * FROM _src_rows")
    finally:
        out.unregister("_src_rows")


_SOURCE_ALIASES: set[str] = set()  # aliases this module attached (names, not connections)


def _aliases(out: duckdb.DuckDBPyConnection) -> list[tuple[str | None, str]]:
    """(source or None for the cache's own tables, the schema prefix of its row tables)."""
    return [(None, "facts.blob_"), *((r[0], f"{r[1]}.") for r in
                                     out.execute("SELECT source, alias FROM _fact_src ORDER BY 1").fetchall())]


def detach(out: duckdb.DuckDBPyConnection) -> None:
    names = {r[0] for r in out.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    for alias in sorted(_SOURCE_ALIASES & names):
        out.execute(f"DETACH {alias}")
    out.execute("DETACH facts")


# Up to this many keys are looked up through the cache's blob index, one statement; more
# are joined (beyond ≈ 50 keys in a list DuckDB scans the table anyway).
INDEX_LOOKUP_KEYS = 48


def lookup(out: duckdb.DuckDBPyConnection, keys: list[tuple[str, str]]) -> dict[tuple[str, str], CachedFacts]:
    """The cached file facts of the (blob, language) keys the cache holds."""
    if len(keys) <= INDEX_LOOKUP_KEYS:
        # One predicate on the indexed column (another would make DuckDB scan); the rest
        # is applied here: the key's language, and rows in the cache or an attached source.
        want = set(keys)
        usable = {r[0] for r in out.execute("SELECT source FROM _fact_src").fetchall()}
        rows = out.execute(
            "SELECT blob_id, language, status, reason, content_hash, size, origin_path, source "
            "FROM facts.blob_files WHERE blob_id IN (SELECT unnest($ids))",
            {"ids": sorted({k[0] for k in keys})}).fetchall()
        found: dict[tuple[str, str], CachedFacts] = {}
        for r in sorted(rows, key=lambda r: (r[7] is not None, str(r[7]), str(r[6]))):
            if (r[0], r[1]) in want and (r[7] is None or r[7] in usable):
                found.setdefault((r[0], r[1]), (r[2], r[3], r[4], r[5], r[6]))
        return found
    want = pa.table({"blob_id": [k[0] for k in keys], "language": [k[1] for k in keys]})
    out.register("_want", want)
    try:
        # Entries whose rows are in the cache, or in a source attached for this build.
        rows = out.execute(
            "SELECT f.blob_id, f.language, f.status, f.reason, f.content_hash, f.size, f.origin_path "
            "FROM facts.blob_files f JOIN _want w USING (blob_id, language) "
            "WHERE f.source IS NULL OR f.source IN (SELECT source FROM _fact_src)").fetchall()
    finally:
        out.unregister("_want")
    return {(r[0], r[1]): (r[2], r[3], r[4], r[5], r[6]) for r in rows}


def _where(source: str | None) -> str:
    return "f.source IS NULL" if source is None else "f.source = " + "'" + source.replace("'", "''") + "'"


def copy_same_path(writer: SnapshotWriter, same_path: list[tuple[str, str]]) -> None:
    """Rows of cached blobs at the path they were first built at: copied inside DuckDB."""
    if not same_path:
        return
    out = writer.con
    out.register("_same", pa.table({"blob_id": [b for b, _ in same_path], "path": [p for _, p in same_path]}))
    try:
        for source, prefix in _aliases(out):
            keys = ("(SELECT x.blob_id, x.path FROM _same x JOIN facts.blob_files f ON f.blob_id = x.blob_id "
                    f"AND f.origin_path = x.path WHERE {_where(source)})")
            for table in ("symbols", "edges", "damage"):
                writer.copy(table, f"SELECT s.* FROM {prefix}{table} s SEMI JOIN {keys} x "
                                   "ON s.blob_id = x.blob_id AND s.path = x.path")
    finally:
        out.unregister("_same")


def _prefix_of(out: duckdb.DuckDBPyConnection, blob: str, origin: str | None) -> str:
    """Where the rows of ``blob`` first built at ``origin`` are: the cache or a source."""
    row = out.execute("SELECT s.alias FROM facts.blob_files f JOIN _fact_src s ON f.source = s.source "
                      "WHERE f.blob_id = ? AND f.origin_path = ? LIMIT 1", [blob, origin]).fetchall()
    return f"{row[0][0]}." if row else "facts.blob_"


def copy_rehomed(writer: SnapshotWriter, blob: str, origin: str | None, path: str) -> None:
    """Rows of a cached blob first seen at ``origin``, placed at ``path`` (new handles)."""
    out = writer.con
    prefix = _prefix_of(out, blob, origin)
    rows = out.execute(f"SELECT * FROM {prefix}symbols WHERE blob_id = ? AND path = ?", [blob, origin]).fetchall()
    moved, mapping = rehome(rows, path)
    syms = empty_columns(SYMBOL_COLUMNS)
    for row in moved:
        for c, v in zip(SYMBOL_COLUMNS, row, strict=True):
            syms[c].append(v)
    edges = empty_columns(EDGE_COLUMNS)
    for row in out.execute(f"SELECT * FROM {prefix}edges WHERE blob_id = ? AND path = ?", [blob, origin]).fetchall():
        vals = dict(zip(EDGE_COLUMNS, row, strict=True))
        vals["path"] = path
        vals["source_handle"] = mapping.get(vals["source_handle"]) if vals["source_handle"] else None
        for c in EDGE_COLUMNS:
            edges[c].append(vals[c])
    damage = empty_columns(DAMAGE_COLUMNS)
    for row in out.execute(f"SELECT * FROM {prefix}damage WHERE blob_id = ? AND path = ? ORDER BY start_byte",
                           [blob, origin]).fetchall():
        for c, v in zip(DAMAGE_COLUMNS, row, strict=True):
            damage[c].append(path if c == "path" else v)
    writer.add(syms, edges, damage)


def remember(out: duckdb.DuckDBPyConnection, new_keys: list[tuple[str, str, str]],
             source: str | None = None) -> None:
    """Record the facts extracted by this build (keys: blob, language, origin path — none of
    them in the cache: ``lookup`` missed them), inside DuckDB (no Python rows): with
    ``source`` (a full snapshot, whose file keeps the rows) only the file facts, pointing
    there; else the rows too, copied from the snapshot under construction into the cache."""
    if not new_keys:
        return
    out.register("_new", pa.table({"blob_id": [k[0] for k in new_keys], "language": [k[1] for k in new_keys],
                                   "path": [k[2] for k in new_keys]}))
    try:
        # No DELETE first: a key extracted now is one ``lookup`` did not find (the entries of
        # a source this build could not attach were dropped by ``attach``).
        out.execute("INSERT INTO facts.blob_files SELECT f.blob_id, n.language, f.status, f.reason, "
                    "f.content_hash, f.size, f.path, ? FROM files f JOIN _new n ON f.path = n.path AND "
                    "f.blob_id = n.blob_id", [source])
        if source is not None:
            return
        for table in ("symbols", "edges", "damage"):
            out.execute(f"INSERT INTO facts.blob_{table} SELECT s.* FROM {table} s SEMI JOIN _new n "
                        "ON s.path = n.path AND s.blob_id = n.blob_id")
    finally:
        out.unregister("_new")
