"""The writer of one snapshot being built, and its container.

The build's connection is an in-memory DuckDB; the snapshot under construction is
attached to it as ``snap`` (and made the default database, so SQL names its tables
unqualified). A full snapshot or a large delta is a DuckDB file in ``tmp/``; a small delta
is an in-memory database exported at the end as one Parquet file (docs/storage.md): a
fresh DuckDB file costs 268 KiB empty, the Parquet file of a one-file delta a few KiB.
Rows reach the snapshot in large Arrow batches (never row by row), counted per table."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections import OrderedDict
from pathlib import Path

import duckdb
import pyarrow as pa

from citegraph.graph.build_hooks import BuildStats
from citegraph.graph.fact_rows import Columns, empty_columns
from citegraph.graph.schema import (
    DAMAGE_COLUMNS,
    EDGE_COLUMNS,
    PARQUET_TABLE_COLUMN,
    SNAPSHOT_DDL,
    SNAPSHOT_SCHEMA_VERSION,
    SNAPSHOT_TABLES,
    SYMBOL_COLUMNS,
    TABLES,
)
from citegraph.graph.store import RepoStore

FLUSH_ROWS = 250_000  # rows buffered before one insert: bounds the builder's memory
# The build's DuckDB connection: a memory limit (DuckDB writes finished blocks to the file
# and evicts them; sorts and index builds spill to ``temp_directory``), so the builder's
# memory is bounded by a constant, not by the repository (SPEC §3).
BUILD_MEMORY_LIMIT = "384MB"


class _BuildDatabases:
    """Idle in-memory DuckDBs for builds, one per spill directory (a repository: one
    builder per repository, the build lock), the most recently used ``KEEP_IDLE`` kept.

    Opening a DuckDB costs 20–35 ms, more than a one-file delta's own writes, so a
    long-lived builder reuses it — the service builds each change in a new lane thread,
    hence a process-wide pool, not a per-thread one. Each build works through its own
    connection to the instance (``cursor``): its temporary tables and registered Arrow views
    die with that connection. Attached databases belong to the instance, so ``release``
    closes an instance a build left something attached to (a failure): no file stays open."""

    KEEP_IDLE = 4  # ≈ 4 MiB each once warm

    def __init__(self) -> None:
        self._idle: OrderedDict[str, duckdb.DuckDBPyConnection] = OrderedDict()
        self._out: dict[int, tuple[str, duckdb.DuckDBPyConnection]] = {}  # id(cursor) -> (spill, instance)
        self._lock = threading.Lock()

    def take(self, spill: str) -> duckdb.DuckDBPyConnection:
        with self._lock:
            db = self._idle.pop(spill, None)
        if db is None:
            db = duckdb.connect(":memory:", config={"memory_limit": BUILD_MEMORY_LIMIT, "temp_directory": spill,
                                                    "threads": 1})
        db.execute("SET threads = 1")
        con = db.cursor()
        with self._lock:
            self._out[id(con)] = (spill, db)
        return con

    def give_back(self, con: duckdb.DuckDBPyConnection) -> None:
        with self._lock:
            spill, db = self._out.pop(id(con), ("", None))
        con.close()
        if db is None:
            return
        try:
            attached = [r[0] for r in db.execute("SELECT database_name FROM duckdb_databases()").fetchall()]
        except duckdb.Error:
            attached = ["?"]
        if any(name not in _OWN_DATABASES for name in attached):
            db.close()
            return
        with self._lock:
            drop = [self._idle.pop(spill)] if spill in self._idle else []  # (a second one of that repository)
            self._idle[spill] = db
            while len(self._idle) > self.KEEP_IDLE:
                drop.append(self._idle.popitem(last=False)[1])
        for old in drop:
            old.close()

    def idle(self) -> list[str]:
        """The spill directories with an idle instance (for tests)."""
        with self._lock:
            return list(self._idle)

    def close_all(self) -> None:
        with self._lock:
            dbs, self._idle = list(self._idle.values()), OrderedDict()
        for db in dbs:
            db.close()


_OWN_DATABASES = ("memory", "system", "temp")
BUILD_DATABASES = _BuildDatabases()


def connect(rs: RepoStore) -> duckdb.DuckDBPyConnection:
    """The (in-memory) connection a build works through, the snapshot under construction
    and the facts cache attached to it: one DuckDB thread while the extraction workers
    hold the cores (``SnapshotWriter.finish_rows`` gives it all of them for the indexes and
    the checkpoint). Close it with ``release``."""
    return BUILD_DATABASES.take(str(rs.root / "tmp" / "spill"))  # DuckDB empties the spill directory


def release(con: duckdb.DuckDBPyConnection) -> None:
    """Close a build's connection; its instance stays for the next build of the repository
    unless the build left a database attached to it."""
    BUILD_DATABASES.give_back(con)


def sql_str(path: Path) -> str:
    """A path as an SQL string literal (a home path may contain a quote)."""
    return "'" + str(path).replace("'", "''") + "'"


def empty_snapshot_file(rs: RepoStore, dest: Path) -> None:
    """Start from a copy of an empty snapshot database (schema only): cheaper than DDL."""
    template = rs.root / "tmp" / f"empty-v{SNAPSHOT_SCHEMA_VERSION}.duckdb"
    if not template.exists():
        staging = template.with_name(f"{template.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.staging")
        con = duckdb.connect(str(staging))
        try:
            con.execute(SNAPSHOT_DDL)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(staging, template)
    shutil.copyfile(template, dest)


CONTAINERS = ("duckdb", "parquet")


def open_snapshot(out: duckdb.DuckDBPyConnection, rs: RepoStore, tmp: Path, container: str) -> None:
    """Attach the snapshot under construction to ``out`` as ``snap`` and use it."""
    if container == "parquet":
        out.execute("ATTACH ':memory:' AS snap")
        out.execute("USE snap")
        out.execute(SNAPSHOT_DDL)
        return
    tmp.unlink(missing_ok=True)
    empty_snapshot_file(rs, tmp)
    out.execute(f"ATTACH {sql_str(tmp)} AS snap")
    out.execute("USE snap")


def close_snapshot(out: duckdb.DuckDBPyConnection, tmp: Path, container: str) -> None:
    """Write the snapshot out to ``tmp`` (checkpoint, or the Parquet export) and detach it."""
    if container == "parquet":
        union = " UNION ALL BY NAME ".join(f"SELECT '{t.name}' AS {PARQUET_TABLE_COLUMN}, * FROM snap.{t.name}"
                                           for t in SNAPSHOT_TABLES)
        out.execute(f"COPY ({union}) TO {sql_str(tmp)} (FORMAT parquet, COMPRESSION zstd)")
    else:
        out.execute("CHECKPOINT snap")
    out.execute("USE memory")
    out.execute("DETACH snap")


class SnapshotWriter:
    """Rows into the snapshot under construction (``con``): buffered symbol, edge and damage
    rows flushed through Arrow in large batches, bulk tables, and SQL copies — each
    counted in ``stats.rows_written``."""

    def __init__(self, con: duckdb.DuckDBPyConnection, stats: BuildStats, flush_rows: int = FLUSH_ROWS) -> None:
        self.con = con
        self.stats = stats
        self.flush_rows = flush_rows
        self._reset()

    def _reset(self) -> None:
        self.syms = empty_columns(SYMBOL_COLUMNS)
        self.edges = empty_columns(EDGE_COLUMNS)
        self.damage = empty_columns(DAMAGE_COLUMNS)
        self.tables: dict[str, list[pa.Table]] = {}  # Arrow rows from the extraction workers
        self.table_rows = 0

    def add_tables(self, tables: dict[str, pa.Table]) -> None:
        """Rows that come as Arrow tables (typed by the table specs): no work per row here."""
        for name, t in tables.items():
            self.tables.setdefault(name, []).append(t)
            self.table_rows += t.num_rows
        if self.table_rows + len(self.syms["handle"]) + len(self.edges["path"]) >= self.flush_rows:
            self.flush()

    def add(self, syms: Columns, edges: Columns, damage: Columns | None = None) -> None:
        if not syms["handle"] and not edges["path"] and not (damage and damage["path"]):
            return  # nothing (a file without symbols, or rows that came as Arrow tables)
        for c in SYMBOL_COLUMNS:
            self.syms[c].extend(syms[c])
        for c in EDGE_COLUMNS:
            self.edges[c].extend(edges[c])
        if damage:
            for c in DAMAGE_COLUMNS:
                self.damage[c].extend(damage[c])
        if len(self.syms["handle"]) + len(self.edges["path"]) >= self.flush_rows:
            self.flush()

    def flush(self) -> None:
        self.bulk("symbols", self.syms)
        self.bulk("edges", self.edges)
        self.bulk("damage", self.damage)
        for name, parts in self.tables.items():
            self._insert(name, pa.concat_tables(parts))
        self._reset()

    def finish_rows(self) -> None:
        """The last rows of the extraction are in; the cores are free again for DuckDB."""
        self.flush()
        self.con.execute(f"SET threads = {max(1, os.cpu_count() or 1)}")

    def _insert(self, table: str, arrow: pa.Table) -> None:
        if not arrow.num_rows:
            return
        self.con.register("_bulk_src", arrow)
        try:
            self.con.execute(f"INSERT INTO {table} ({', '.join(arrow.column_names)}) SELECT * FROM _bulk_src")
        finally:
            self.con.unregister("_bulk_src")
        self.stats.rows_written[table] += arrow.num_rows

    def bulk(self, table: str, columns: dict[str, list]) -> None:
        """Arrow bulk insert (never executemany), typed by the table's column spec."""
        first = next(iter(columns.values()))
        if not first:
            return
        spec = TABLES[table].arrow_schema
        self._insert(table, pa.table(columns, schema=pa.schema([spec.field(c) for c in columns])))

    def copy(self, table: str, sql: str) -> None:
        """``INSERT INTO table`` + ``sql`` (a SELECT over attached databases), counted."""
        n = self.con.execute(f"INSERT INTO {table} {sql}").fetchall()[0][0]
        self.stats.rows_written[table] += int(n)
