"""Read-only access to one published snapshot file (never written after publish)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import duckdb
import pygit2

from citegraph.graph.store import RepoStore
from citegraph.indexer.errors import CitegraphError

SYMBOL_FIELDS = ("handle", "path", "language", "kind", "name", "qualified_name", "ordinal",
                 "start_byte", "end_byte", "start_line", "end_line", "parent_handle",
                 "fragment_hash", "body_hash", "blob_id")


@dataclass
class Snapshot:
    snapshot_id: str
    entry: dict[str, Any]
    con: duckdb.DuckDBPyConnection
    repo: pygit2.Repository | None = None

    @classmethod
    def open(cls, rs: RepoStore, snapshot_id: str, repo: pygit2.Repository | None = None,
             wait_s: float = 2.0) -> Snapshot:
        entry = rs.entry(snapshot_id)
        if not entry or entry.get("state") != "ready":
            raise CitegraphError(f"snapshot {snapshot_id} is not ready", "run citegraph index", code=1,
                                 retryable=True)
        path = rs.snapshot_path(snapshot_id)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                con = duckdb.connect(str(path), read_only=True)
                break
            except duckdb.IOException as exc:
                if time.monotonic() > deadline:
                    raise CitegraphError(f"snapshot {snapshot_id} cannot be opened ({exc})",
                                         "retry; if it persists run citegraph gc and index again",
                                         code=3, retryable=True) from exc
                time.sleep(0.02)
            except duckdb.Error as exc:
                raise CitegraphError(f"snapshot {snapshot_id} is unreadable ({exc})",
                                     "run citegraph index again to rebuild it", code=3) from exc
        return cls(snapshot_id, entry, con, repo)

    def close(self) -> None:
        self.con.close()

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

    def symbols_in(self, path: str) -> list[dict[str, Any]]:
        return self.dicts("SELECT * FROM symbols WHERE path = ? ORDER BY start_byte, end_byte DESC", [path])

    def symbol(self, handle: str) -> dict[str, Any] | None:
        rows = self.dicts("SELECT * FROM symbols WHERE handle = ?", [handle])
        return rows[0] if rows else None

    def find(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        return self.dicts(
            "SELECT * FROM symbols WHERE name = ? OR qualified_name = ? OR qualified_name LIKE ? "
            "ORDER BY (qualified_name = ?) DESC, path, start_line LIMIT ?",
            [name, name, f"%.{name}", name, limit])

    def blob_bytes(self, blob_id: str) -> bytes | None:
        """File bytes by blob id: dirty overlay contents first, then the object database."""
        rows = self.query("SELECT data FROM contents WHERE blob_id = ?", [blob_id])
        if rows:
            return bytes(rows[0][0])
        if self.repo is None:
            return None
        try:
            return self.repo.odb.read(blob_id)[1]
        except (KeyError, ValueError, pygit2.GitError):
            return None
