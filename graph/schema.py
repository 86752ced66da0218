"""DuckDB schemas of snapshot files and the facts cache (versioned)."""

from __future__ import annotations

SNAPSHOT_SCHEMA_VERSION = 5  # 3: escaped (stored) paths, not-regular rows; 4: damage regions;
# 5: resolved edges (graph/edge_resolution.py)
FACTS_SCHEMA_VERSION = 3  # 3: damage regions

SNAPSHOT_DDL = """
CREATE TABLE meta(key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE files(path VARCHAR NOT NULL, blob_id VARCHAR NOT NULL, content_hash VARCHAR,
  language VARCHAR, status VARCHAR NOT NULL, reason VARCHAR, size BIGINT, mode INTEGER,
  dirty BOOLEAN NOT NULL);
CREATE TABLE symbols(handle VARCHAR NOT NULL, path VARCHAR NOT NULL, language VARCHAR NOT NULL,
  kind VARCHAR NOT NULL, name VARCHAR NOT NULL, qualified_name VARCHAR NOT NULL,
  ordinal INTEGER NOT NULL, start_byte BIGINT NOT NULL, end_byte BIGINT NOT NULL,
  start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, parent_handle VARCHAR,
  fragment_hash VARCHAR NOT NULL, body_hash VARCHAR NOT NULL, blob_id VARCHAR NOT NULL);
CREATE TABLE edges(path VARCHAR NOT NULL, source_handle VARCHAR, kind VARCHAR NOT NULL,
  target VARCHAR NOT NULL, line INTEGER NOT NULL, blob_id VARCHAR NOT NULL);
CREATE TABLE damage(path VARCHAR NOT NULL, start_byte BIGINT NOT NULL, end_byte BIGINT NOT NULL,
  error_line INTEGER NOT NULL, construct VARCHAR NOT NULL, blob_id VARCHAR NOT NULL);
CREATE TABLE contents(blob_id VARCHAR PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE overrides(path VARCHAR NOT NULL);
CREATE TABLE resolved_edges(path VARCHAR NOT NULL, source_handle VARCHAR, kind VARCHAR NOT NULL,
  target VARCHAR NOT NULL, line INTEGER NOT NULL, target_handle VARCHAR, target_path VARCHAR,
  tier VARCHAR NOT NULL, rule VARCHAR);
CREATE TABLE import_targets(path VARCHAR NOT NULL, target VARCHAR NOT NULL, target_path VARCHAR NOT NULL,
  item VARCHAR);
"""

SNAPSHOT_INDEXES = """
CREATE INDEX files_path ON files(path);
CREATE INDEX files_blob ON files(blob_id);
CREATE INDEX symbols_handle ON symbols(handle);
CREATE INDEX symbols_fragment ON symbols(fragment_hash);
CREATE INDEX symbols_path ON symbols(path);
CREATE INDEX damage_path ON damage(path);
"""
# ``resolved_edges`` and ``import_targets`` (the files each import names) are derived per
# snapshot from the (union) rows (graph/edge_resolution.py): a delta holds the whole
# union's import targets, and the resolved rows of the edges it recomputed, which readers
# lay over its base's rows.

# The facts cache holds, per (blob, language), the file facts and the snapshot rows as
# first built at ``origin_path`` (handles are path-dependent: re-homed on reuse elsewhere).
FACTS_DDL = """
CREATE TABLE IF NOT EXISTS meta(key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS blob_files(blob_id VARCHAR NOT NULL, language VARCHAR NOT NULL,
  status VARCHAR NOT NULL, reason VARCHAR, content_hash VARCHAR, size BIGINT, origin_path VARCHAR);
CREATE TABLE IF NOT EXISTS blob_symbols(handle VARCHAR NOT NULL, path VARCHAR NOT NULL,
  language VARCHAR NOT NULL, kind VARCHAR NOT NULL, name VARCHAR NOT NULL,
  qualified_name VARCHAR NOT NULL, ordinal INTEGER NOT NULL, start_byte BIGINT NOT NULL,
  end_byte BIGINT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
  parent_handle VARCHAR, fragment_hash VARCHAR NOT NULL, body_hash VARCHAR NOT NULL,
  blob_id VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS blob_edges(path VARCHAR NOT NULL, source_handle VARCHAR,
  kind VARCHAR NOT NULL, target VARCHAR NOT NULL, line INTEGER NOT NULL, blob_id VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS blob_damage(path VARCHAR NOT NULL, start_byte BIGINT NOT NULL,
  end_byte BIGINT NOT NULL, error_line INTEGER NOT NULL, construct VARCHAR NOT NULL,
  blob_id VARCHAR NOT NULL);
"""

FILE_COLUMNS = ("path", "blob_id", "content_hash", "language", "status", "reason", "size", "mode", "dirty")
SYMBOL_COLUMNS = ("handle", "path", "language", "kind", "name", "qualified_name", "ordinal",
                  "start_byte", "end_byte", "start_line", "end_line", "parent_handle",
                  "fragment_hash", "body_hash", "blob_id")
EDGE_COLUMNS = ("path", "source_handle", "kind", "target", "line", "blob_id")
# Damage regions of a partial file (SPEC §6.4 refinement; indexer/damage.py): bytes where
# the parse may be wrong, with the line and construct of the error behind each.
DAMAGE_COLUMNS = ("path", "start_byte", "end_byte", "error_line", "construct", "blob_id")
