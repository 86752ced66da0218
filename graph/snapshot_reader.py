"""Read-only access to one published snapshot file (never written after publish)."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pygit2

from citegraph.graph.schema import (
    IMPORT_TARGETS_LAYOUT,
    LAYOUT_CHANGED_PATHS,
    PARQUET_TABLE_COLUMN,
    SNAPSHOT_SCHEMA_VERSION,
    SNAPSHOT_TABLES,
    SYMBOL_COLUMNS,
)
from citegraph.graph.store import RepoStore
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.worktree import NULL_BLOB

SYMBOL_FIELDS = SYMBOL_COLUMNS


@dataclass
class Snapshot:
    snapshot_id: str
    entry: dict[str, Any]
    con: duckdb.DuckDBPyConnection
    repo: pygit2.Repository | None = None

    @classmethod
    def open(cls, rs: RepoStore, snapshot_id: str, repo: pygit2.Repository | None = None,
             wait_s: float = 2.0) -> Snapshot:
        """Open a ready snapshot read-only. A delta snapshot is read through views that
        lay its own rows over its full base (paths in ``overrides`` hide the base's)."""
        entry = rs.entry(snapshot_id)
        if not entry or entry.get("state") != "ready":
            raise CitegraphError(f"snapshot {snapshot_id} is not ready", "run citegraph index", code=1,
                                 retryable=True)
        con = _instance().cursor()
        n = next(_ALIASES)
        d, b = f"snap_d{n}", f"snap_b{n}"
        aliases: list[str] = []
        try:
            own = _open_own(con, rs, entry, d, wait_s, aliases)
            base = entry.get("base")
            if base:
                bentry = rs.entry(base)
                if not bentry or bentry.get("state") != "ready":
                    rs.mark_failed(snapshot_id, f"base snapshot {base} is not usable", entry.get("published_at"))
                    raise CitegraphError(f"snapshot {snapshot_id} lacks its base {base}; it is marked failed",
                                         "run citegraph index to rebuild it", code=1, retryable=True)
                aliases.append(b)
                try:
                    _attach(con, b, rs.published_path(bentry), base, wait_s)
                except DamagedSnapshot as exc:
                    rs.mark_failed(base, exc.what, bentry.get("published_at"))
                    rs.mark_failed(snapshot_id, f"base snapshot {base} is damaged", entry.get("published_at"))
                    raise
                for t in LAYERED_TABLES:
                    con.execute(f"CREATE TEMP VIEW {t} AS SELECT * FROM {own(t)} UNION ALL SELECT x.* FROM {b}.{t} x "
                                f"WHERE NOT EXISTS (SELECT 1 FROM {own('overrides')} o WHERE o.path = x.path)")
                # Only bytes of files that are dirty in *this* snapshot: a base overlay's dirty
                # bytes must not leak into a snapshot where that file is clean or gone.
                con.execute(f"CREATE TEMP VIEW contents AS SELECT c.* FROM (SELECT * FROM {own('contents')} UNION ALL "
                            f"SELECT x.* FROM {b}.contents x WHERE x.blob_id NOT IN "
                            f"(SELECT blob_id FROM {own('contents')})) c "
                            "WHERE c.blob_id IN (SELECT blob_id FROM files WHERE dirty)")
            else:
                for t in (*LAYERED_TABLES, "contents"):
                    con.execute(f"CREATE TEMP VIEW {t} AS SELECT * FROM {own(t)}")
            con.execute(f"CREATE TEMP VIEW meta AS SELECT * FROM {own('meta')}")
            # Derived over the union (graph/edge_resolution.py): a delta holds the rows of the
            # edges whose resolution it recomputed, which replace the base's rows of the same
            # edge; the base's rows of its overridden paths are hidden like its edges.
            if base:
                con.execute(f"CREATE TEMP VIEW resolved_edges AS SELECT * FROM {own('resolved_edges')} UNION ALL "
                            f"SELECT x.* FROM {b}.resolved_edges x ANTI JOIN {own('overrides')} o ON o.path = x.path "
                            f"ANTI JOIN {own('resolved_edges')} r ON r.path = x.path AND r.kind = x.kind "
                            "AND r.target = x.target AND coalesce(r.source_handle, '') = coalesce(x.source_handle, '')")
            else:
                con.execute(f"CREATE TEMP VIEW resolved_edges AS SELECT * FROM {own('resolved_edges')}")
            if base:  # whole, or (graph/edge_resolution.py) the changed paths' rows over the base's
                con.execute(f"CREATE TEMP VIEW import_targets AS SELECT * FROM {own('import_targets')} UNION ALL "
                            f"SELECT x.* FROM {b}.import_targets x WHERE EXISTS (SELECT 1 FROM {own('meta')} m "
                            f"WHERE m.key = '{IMPORT_TARGETS_LAYOUT}' AND m.value = '{LAYOUT_CHANGED_PATHS}') "
                            f"AND NOT EXISTS (SELECT 1 FROM {own('overrides')} o WHERE o.path = x.path)")
            else:
                con.execute(f"CREATE TEMP VIEW import_targets AS SELECT * FROM {own('import_targets')}")
        except BaseException:
            _release(con, aliases)
            raise
        snap = cls(snapshot_id, entry, con, repo)
        snap._aliases = aliases
        return snap

    @classmethod
    def from_parquet(cls, snapshot_id: str, entry: dict[str, Any], tables: dict[str, Path],
                     repo: pygit2.Repository | None = None) -> Snapshot:
        """A snapshot read from the Parquet files of a checkpoint partition (one file per
        table, its logical rows: graph/checkpoint_snapshots.py), through views of the same
        names on a private DuckDB connection of one thread (a batch task: memory/batch/)."""
        con = duckdb.connect(":memory:", config={"threads": 1})
        try:
            for t in SNAPSHOT_TABLES:
                quoted = str(tables[t.name]).replace("'", "''")
                # The tables evidence queries again and again are read once; the others are
                # views (most validations never read edges, contents or overrides).
                what = "TABLE" if t.name in PARQUET_LOADED else "VIEW"
                con.execute(f"CREATE {what} {t.name} AS SELECT {', '.join(t.names)} FROM read_parquet('{quoted}')")
            _check_meta(con, "meta", tables["meta"], snapshot_id)
        except KeyError as exc:
            con.close()
            raise _corrupt(snapshot_id, tables.get("meta", "?"), f"no {exc.args[0]} table") from None
        except duckdb.Error as exc:
            con.close()
            raise _corrupt(snapshot_id, tables.get("meta", "?"), str(exc).splitlines()[0]) from None
        except BaseException:
            con.close()
            raise
        return cls(snapshot_id, entry, con, repo)

    def close(self) -> None:
        _release(self.con, getattr(self, "_aliases", []))

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def dicts(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def file(self, path: str) -> dict[str, Any] | None:
        rows = self.dicts("SELECT * FROM files WHERE path = ?", [path])
        return rows[0] if rows else None

    def files_at(self, paths: list[str]) -> dict[str, dict[str, Any]]:
        """The rows of ``paths`` present in the snapshot, in one query (a capture's refs)."""
        if not paths:
            return {}
        return {r["path"]: r for r in self.dicts("SELECT * FROM files WHERE path IN (SELECT unnest(?))",
                                                 [sorted(set(paths))])}

    def symbols_at(self, paths: list[str]) -> dict[str, list[dict[str, Any]]]:
        """``symbols_in`` of each of ``paths`` (an empty list for a path without any), in one
        query: a symbols scan costs the same for one path as for eight."""
        out: dict[str, list[dict[str, Any]]] = {p: [] for p in sorted(set(paths))}
        if out:
            for r in self.dicts("SELECT * FROM symbols WHERE path IN (SELECT unnest(?)) "
                                "ORDER BY path, start_byte, end_byte DESC", [list(out)]):
                out[r["path"]].append(r)
        return out

    def symbols_in(self, path: str) -> list[dict[str, Any]]:
        return self.dicts("SELECT * FROM symbols WHERE path = ? ORDER BY start_byte, end_byte DESC", [path])

    def symbol(self, handle: str) -> dict[str, Any] | None:
        rows = self.dicts("SELECT * FROM symbols WHERE handle = ?", [handle])
        return rows[0] if rows else None

    def blob_bytes(self, blob_id: str) -> bytes | None:
        """File bytes by blob id: dirty overlay contents first, then the object database.
        A FIFO, socket or device in the worktree (NULL_BLOB) holds no bytes."""
        if blob_id == NULL_BLOB:
            return b""
        if self.entry.get("kind") != "commit":  # a commit snapshot holds no dirty bytes
            rows = self.query("SELECT data FROM contents WHERE blob_id = ?", [blob_id])
            if rows:
                return bytes(rows[0][0])
        if self.repo is None:
            return None
        try:
            return self.repo.odb.read(blob_id)[1]
        except (KeyError, ValueError, pygit2.GitError):
            return None


LAYERED_TABLES = ("files", "symbols", "edges", "damage")
PARQUET_LOADED = ("meta", "files", "symbols", "damage")  # Snapshot.from_parquet

# One in-memory DuckDB instance per process: creating an instance costs ~30 ms, a cursor
# on it with an ATTACH ~2 ms. Each Snapshot gets its own cursor, unique attach aliases and
# connection-local (TEMP) views, so concurrent snapshots never see each other's names.
_SHARED: duckdb.DuckDBPyConnection | None = None
_SHARED_LOCK = threading.Lock()
_ALIASES = itertools.count()


def _instance() -> duckdb.DuckDBPyConnection:
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED_PID[0] != os.getpid():
            _SHARED = duckdb.connect(":memory:")
            _SHARED_PID[0] = os.getpid()
        return _SHARED


_SHARED_PID = [0]


def _release(con: duckdb.DuckDBPyConnection, aliases: list[str]) -> None:
    for alias in aliases:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"DETACH {alias}")
    with contextlib.suppress(duckdb.Error):
        con.close()


def _open_own(con: duckdb.DuckDBPyConnection, rs: RepoStore, entry: dict[str, Any], alias: str, wait_s: float,
              aliases: list[str]) -> Callable[[str], str]:
    """Make the snapshot's own tables readable on ``con``; returns table -> relation name.

    A DuckDB file is attached read-only. A Parquet delta (small by construction) is read
    whole into Arrow tables registered on this cursor: the reader then holds its rows, so
    it sees the snapshot as published even if ``gc`` removes the file meanwhile."""
    snapshot_id = entry["snapshot_id"]
    path = rs.published_path(entry)
    try:
        if entry.get("container") != "parquet":
            aliases.append(alias)
            _attach(con, alias, path, snapshot_id, wait_s)
            return lambda t: f"{alias}.{t}"
        tables = read_parquet_tables(path, snapshot_id)
        for t, arrow in tables.items():
            con.register(f"{alias}_{t}", arrow)
        _check_meta(con, f"{alias}_meta", path, snapshot_id)
        return lambda t: f"{alias}_{t}"
    except DamagedSnapshot as exc:
        rs.mark_failed(snapshot_id, exc.what, entry.get("published_at"))
        raise


def read_parquet_tables(path: Path, snapshot_id: str) -> dict[str, pa.Table]:
    """The tables of a Parquet delta (graph/schema.py: a ``tbl`` column, the union of
    every table's columns), each typed by its column spec."""
    import pyarrow.compute as pc  # here, not at the top: most reads never open a Parquet delta

    try:
        whole = pq.read_table(path)
        tables = {}
        for t in SNAPSHOT_TABLES:
            part = whole.filter(pc.equal(whole[PARQUET_TABLE_COLUMN], t.name)).select(list(t.names))
            tables[t.name] = part.cast(t.arrow_schema)
        return tables
    except FileNotFoundError as exc:
        raise _corrupt(snapshot_id, path, "file missing") from exc
    except (OSError, pa.ArrowException, KeyError, ValueError) as exc:
        raise _corrupt(snapshot_id, path, "not a snapshot file") from exc


def _attach(con: duckdb.DuckDBPyConnection, alias: str, path: object, snapshot_id: str, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            quoted = str(path).replace("'", "''")  # a home path may contain a quote
            con.execute(f"ATTACH '{quoted}' AS {alias} (READ_ONLY)")
            break
        except duckdb.IOException as exc:
            msg = str(exc)
            if "not a valid DuckDB database" in msg or "No such file" in msg or "does not exist" in msg:
                raise _corrupt(snapshot_id, path, "not a snapshot database") from exc
            if time.monotonic() > deadline:
                raise CitegraphError(f"snapshot {snapshot_id} cannot be opened ({exc})",
                                     "retry; if it persists run citegraph gc and index again",
                                     code=3, retryable=True) from exc
            time.sleep(0.02)
        except duckdb.Error as exc:
            raise _corrupt(snapshot_id, path, str(exc).splitlines()[0]) from exc
    _check_meta(con, f"{alias}.meta", path, snapshot_id)


def _check_meta(con: duckdb.DuckDBPyConnection, meta: str, path: object, snapshot_id: str) -> None:
    """The file is the snapshot it is published as, in the schema this citegraph reads."""
    try:
        rows = con.execute(f"SELECT value FROM {meta} WHERE key = 'snapshot_id'").fetchall()
    except duckdb.Error as exc:
        raise _corrupt(snapshot_id, path, "no snapshot metadata") from exc
    if not rows or rows[0][0] != snapshot_id:
        raise _corrupt(snapshot_id, path, "a different snapshot's database")
    version = con.execute(f"SELECT value FROM {meta} WHERE key = 'schema_version'").fetchall()
    if not version or version[0][0] != str(SNAPSHOT_SCHEMA_VERSION):
        # An older layout (schema 2 had no damage table) is refused, never misread.
        raise CitegraphError(
            f"snapshot {snapshot_id} has schema {version[0][0] if version else '?'}, this citegraph reads "
            f"schema {SNAPSHOT_SCHEMA_VERSION}", "run citegraph index to build the current layout", code=3)


class DamagedSnapshot(CitegraphError):
    """A published snapshot file that cannot be read as published (marked failed)."""


def _corrupt(snapshot_id: str, path: object, why: str) -> CitegraphError:
    # The reader marks the catalog entry failed: the next index rebuilds it, gc removes it.
    err = DamagedSnapshot(f"snapshot {snapshot_id} is damaged ({why}); it is marked failed",
                          "run citegraph index to rebuild it", code=1, retryable=True)
    err.what = f"snapshot file damaged ({why})"
    return err
