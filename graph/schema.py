"""The one column specification of snapshot files and the facts cache (versioned).

Every table is declared once, as a tuple of ``Column(name, sql_type, arrow_type, null)``;
the DuckDB DDL, the column-name tuples the builder fills, and the typed Arrow schemas
(bulk loads, delta files) are all generated from it. The facts cache's ``blob_symbols``,
``blob_edges`` and ``blob_damage`` hold exactly the snapshot rows, so they are generated
from the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SNAPSHOT_SCHEMA_VERSION = 7  # 3: escaped (stored) paths, not-regular rows; 4: damage regions;
# 5: a full snapshot's overrides list every path a delta over it must redo; deltas are Parquet;
# 6: resolved edges and import targets (graph/edge_resolution.py); 7: a full snapshot's
# resolution keys (name_stats, edge_names, file_keys: graph/delta_resolution.py)
FACTS_SCHEMA_VERSION = 4  # 3: damage regions; 4: rows may stay in a full snapshot (source)


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    arrow_type: pa.DataType
    null: bool = True  # False: NOT NULL


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def ddl(self, name: str | None = None, if_not_exists: bool = False) -> str:
        cols = []
        for c in self.columns:
            text = f"{c.name} {c.sql_type}"
            if c.name == self.primary_key:
                text += " PRIMARY KEY"
            elif not c.null:
                text += " NOT NULL"
            cols.append(text)
        guard = "IF NOT EXISTS " if if_not_exists else ""
        return f"CREATE TABLE {guard}{name or self.name}({', '.join(cols)});"

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.null) for c in self.columns])


def _c(name: str, sql_type: str, null: bool = True) -> Column:
    arrow = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "INTEGER": pa.int32(), "BOOLEAN": pa.bool_(),
             "BLOB": pa.binary()}[sql_type]
    return Column(name, sql_type, arrow, null)


META = Table("meta", (_c("key", "VARCHAR"), _c("value", "VARCHAR")), primary_key="key")
FILES = Table("files", (
    _c("path", "VARCHAR", False), _c("blob_id", "VARCHAR", False), _c("content_hash", "VARCHAR"),
    _c("language", "VARCHAR"), _c("status", "VARCHAR", False), _c("reason", "VARCHAR"), _c("size", "BIGINT"),
    _c("mode", "INTEGER"), _c("dirty", "BOOLEAN", False)))
SYMBOLS = Table("symbols", (
    _c("handle", "VARCHAR", False), _c("path", "VARCHAR", False), _c("language", "VARCHAR", False),
    _c("kind", "VARCHAR", False), _c("name", "VARCHAR", False), _c("qualified_name", "VARCHAR", False),
    _c("ordinal", "INTEGER", False), _c("start_byte", "BIGINT", False), _c("end_byte", "BIGINT", False),
    _c("start_line", "INTEGER", False), _c("end_line", "INTEGER", False), _c("parent_handle", "VARCHAR"),
    _c("fragment_hash", "VARCHAR", False), _c("body_hash", "VARCHAR", False), _c("blob_id", "VARCHAR", False)))
EDGES = Table("edges", (
    _c("path", "VARCHAR", False), _c("source_handle", "VARCHAR"), _c("kind", "VARCHAR", False),
    _c("target", "VARCHAR", False), _c("line", "INTEGER", False), _c("blob_id", "VARCHAR", False)))
# Damage regions of a partial file (SPEC §6.4 refinement; indexer/damage.py): bytes where
# the parse may be wrong, with the line and construct of the error behind each.
DAMAGE = Table("damage", (
    _c("path", "VARCHAR", False), _c("start_byte", "BIGINT", False), _c("end_byte", "BIGINT", False),
    _c("error_line", "INTEGER", False), _c("construct", "VARCHAR", False), _c("blob_id", "VARCHAR", False)))
CONTENTS = Table("contents", (_c("blob_id", "VARCHAR"), _c("data", "BLOB", False)), primary_key="blob_id")
OVERRIDES = Table("overrides", (_c("path", "VARCHAR", False),))
# Derived per snapshot from the (union) rows (graph/edge_resolution.py; docs/graph.md).
RESOLVED_EDGES = Table("resolved_edges", (
    _c("path", "VARCHAR", False), _c("source_handle", "VARCHAR"), _c("kind", "VARCHAR", False),
    _c("target", "VARCHAR", False), _c("line", "INTEGER", False), _c("target_handle", "VARCHAR"),
    _c("target_path", "VARCHAR"), _c("tier", "VARCHAR", False), _c("rule", "VARCHAR")))
IMPORT_TARGETS = Table("import_targets", (
    _c("path", "VARCHAR", False), _c("target", "VARCHAR", False), _c("target_path", "VARCHAR", False),
    _c("item", "VARCHAR")))
# A full snapshot's resolution keys, so a delta over it resolves its edges in O(change)
# (graph/delta_resolution.py; empty in a delta): per (language family, name, edge kind) how
# many symbols fit and, when one does, which (the repository level of resolution); the
# paths whose edges name a symbol so (calls, references, inherits); and each source file
# under the keys import mapping and the package level look it up by (``stem:``,
# ``dirname:``, ``implied:``, ``crate:``, ``pkg:``: graph/edge_resolution.py
# ``file_keys_sql``) — one indexed column, so each lookup is one index scan.
NAME_STATS = Table("name_stats", (
    _c("fam", "VARCHAR", False), _c("name", "VARCHAR", False), _c("ek", "VARCHAR", False), _c("n", "BIGINT", False),
    _c("handle", "VARCHAR", False), _c("path", "VARCHAR", False)))
EDGE_NAMES = Table("edge_names", (_c("name", "VARCHAR", False), _c("path", "VARCHAR", False)))
FILE_KEYS = Table("file_keys", (_c("key", "VARCHAR", False), _c("path", "VARCHAR", False),
                                _c("language", "VARCHAR", False)))

SNAPSHOT_TABLES = (META, FILES, SYMBOLS, EDGES, DAMAGE, CONTENTS, OVERRIDES, RESOLVED_EDGES, IMPORT_TARGETS)
# Derived from a full snapshot's own rows wherever one is written (a build, a compaction, a
# checkpoint import): never exported, never read through a snapshot's views.
RESOLUTION_KEY_TABLES = (NAME_STATS, EDGE_NAMES, FILE_KEYS)
TABLES = {t.name: t for t in (*SNAPSHOT_TABLES, *RESOLUTION_KEY_TABLES)}

SNAPSHOT_DDL = "\n".join(t.ddl() for t in (*SNAPSHOT_TABLES, *RESOLUTION_KEY_TABLES)) + "\n"

SNAPSHOT_INDEXES = """
CREATE INDEX files_path ON files(path);
CREATE INDEX files_blob ON files(blob_id);
CREATE INDEX symbols_handle ON symbols(handle);
CREATE INDEX symbols_fragment ON symbols(fragment_hash);
CREATE INDEX symbols_path ON symbols(path);
CREATE INDEX damage_path ON damage(path);
CREATE INDEX edges_path ON edges(path);
"""
# The resolved edges by their source's path (graph/graph_view.py reads a symbol's edges by
# its file): created once the rows are written — a build resolves after the tables above
# are indexed. Without it a capture's dependency walk scans every resolved edge (250k-file
# monorepo: 6M rows, ≈ 45 ms a level, 8 files; 7 ms with it). Snapshots written before it
# read the same rows by a scan.
RESOLVED_EDGES_INDEXES = """
CREATE INDEX resolved_edges_path ON resolved_edges(path);
"""
# A full snapshot's derived tables, indexed where a delta looks them up (graph/delta_resolution.py).
RESOLUTION_KEY_INDEXES = """
CREATE INDEX import_targets_path ON import_targets(path);
CREATE INDEX import_targets_target ON import_targets(target_path);
CREATE INDEX name_stats_name ON name_stats(name);
CREATE INDEX edge_names_name ON edge_names(name);
CREATE INDEX file_keys_key ON file_keys(key);
"""
# ``resolved_edges`` and ``import_targets`` (the files each import names) are derived per
# snapshot from the (union) rows (graph/edge_resolution.py): a delta holds the resolved
# rows of the edges it recomputed, which readers lay over its base's rows, and either the
# whole union's import targets or — when its meta has IMPORT_TARGETS_LAYOUT =
# LAYOUT_CHANGED_PATHS — only its changed paths' rows, laid over the base's like symbols.
IMPORT_TARGETS_LAYOUT = "import_targets_layout"
LAYOUT_CHANGED_PATHS = "changed-paths"

# The facts cache holds, per (blob, language), the file facts and the snapshot rows as
# first built at ``origin_path`` (handles are path-dependent: re-homed on reuse elsewhere).
# ``source``: the full snapshot whose own tables hold those rows (a cold build writes its
# rows once, into the snapshot); NULL when the rows are in the cache's ``blob_*`` tables.
BLOB_FILES = Table("blob_files", (
    _c("blob_id", "VARCHAR", False), _c("language", "VARCHAR", False), _c("status", "VARCHAR", False),
    _c("reason", "VARCHAR"), _c("content_hash", "VARCHAR"), _c("size", "BIGINT"), _c("origin_path", "VARCHAR"),
    _c("source", "VARCHAR")))
FACTS_ROW_TABLES = {"blob_symbols": SYMBOLS, "blob_edges": EDGES, "blob_damage": DAMAGE}
FACTS_DDL = "\n".join([META.ddl(if_not_exists=True), BLOB_FILES.ddl(if_not_exists=True),
                       *(t.ddl(name, if_not_exists=True) for name, t in FACTS_ROW_TABLES.items())]) + "\n"
# A delta's few blobs are looked up by id (graph/facts_cache.py ``lookup``): a scan of the
# cache's file facts cost 12 ms a build on the 250k-file monorepo, the index 1.5 ms.
# Created when missing (an older cache: once, ≈ 0.3 s at 250k rows).
FACTS_INDEXES = "CREATE INDEX IF NOT EXISTS blob_files_blob ON blob_files(blob_id);\n"

FILE_COLUMNS = FILES.names
SYMBOL_COLUMNS = SYMBOLS.names
EDGE_COLUMNS = EDGES.names
DAMAGE_COLUMNS = DAMAGE.names

# A small delta is one Parquet file holding every table (docs/storage.md): one row per
# table row, a ``tbl`` column naming its table, and the union of all tables' columns (a
# column's type is the same in every table that has it, checked here).
PARQUET_TABLE_COLUMN = "tbl"


def _union_columns() -> tuple[Column, ...]:
    seen: dict[str, Column] = {}
    for t in SNAPSHOT_TABLES:
        for c in t.columns:
            prior = seen.setdefault(c.name, c)
            if prior.sql_type != c.sql_type:
                raise TypeError(f"column {c.name} has two types ({prior.sql_type}, {c.sql_type})")
    return tuple(seen.values())


PARQUET_COLUMNS = _union_columns()
