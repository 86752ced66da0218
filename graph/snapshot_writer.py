"""The writer of one snapshot being built: a DuckDB file in ``tmp/`` that rows reach in
large Arrow batches (never row by row), with every row counted per table."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa

from citegraph.graph.build_hooks import BuildStats
from citegraph.graph.fact_rows import Columns, empty_columns
from citegraph.graph.schema import (
    DAMAGE_COLUMNS,
    EDGE_COLUMNS,
    SNAPSHOT_DDL,
    SNAPSHOT_SCHEMA_VERSION,
    SYMBOL_COLUMNS,
    TABLES,
)
from citegraph.graph.store import RepoStore

FLUSH_ROWS = 250_000  # rows buffered before one insert: bounds the builder's memory
# The build's DuckDB connection: a memory limit (DuckDB writes finished blocks to the file
# and evicts them; sorts and index builds spill to ``temp_directory``), so the builder's
# memory is bounded by a constant, not by the repository (SPEC §3).
BUILD_MEMORY_LIMIT = "384MB"


def connect(path: Path) -> duckdb.DuckDBPyConnection:
    """The connection a build writes its snapshot (and the facts cache) through: one DuckDB
    thread while the extraction workers hold the cores (``SnapshotWriter.finish_rows``
    gives it all of them for the indexes and the checkpoint)."""
    spill = path.parent / "spill"  # one builder per repository (the build lock); DuckDB empties it
    return duckdb.connect(str(path), config={"memory_limit": BUILD_MEMORY_LIMIT, "temp_directory": str(spill),
                                             "threads": 1})


def sql_str(path: Path) -> str:
    """A path as an SQL string literal (a home path may contain a quote)."""
    return "'" + str(path).replace("'", "''") + "'"


def empty_snapshot_file(rs: RepoStore, dest: Path) -> None:
    """Start from a copy of an empty snapshot database (schema only): cheaper than DDL."""
    template = rs.root / "tmp" / f"empty-v{SNAPSHOT_SCHEMA_VERSION}.duckdb"
    if not template.exists():
        staging = template.with_name(f"{template.name}.{os.getpid()}.staging")
        con = duckdb.connect(str(staging))
        try:
            con.execute(SNAPSHOT_DDL)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(staging, template)
    shutil.copyfile(template, dest)


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
