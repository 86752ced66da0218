"""Publishing a built snapshot (SPEC §4): the catalog entry goes ``building`` (with the
builder's pid) before any work, the file is written aside in ``tmp/``, fsynced and renamed
into ``snapshots/`` (the directory fsynced), and only then is the entry rewritten ``ready``.
A crash at any point leaves every ready snapshot untouched and nothing half-built ready."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from citegraph.graph.build_target import BuildTarget
from citegraph.graph.schema import SNAPSHOT_SCHEMA_VERSION
from citegraph.graph.store import RepoStore, process_start
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION


def base_entry(target: BuildTarget) -> dict[str, Any]:
    """The catalog fields a snapshot has whatever its state."""
    return {
        "snapshot_id": target.snapshot_id,
        "repository_id": target.identity.repository_id,
        "kind": "overlay" if target.dirty else "commit",
        "commit": target.commit,
        "dirty_fingerprint": target.state.dirty_fingerprint if target.state else None,
        "extractor_version": EXTRACTOR_VERSION,
        "config": target.config.fingerprint(),
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
    }


def failure_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, CitegraphError):
        return exc.what
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


def op_token() -> str:
    """A name for one operation (a build, an import, a compaction) of this process: its
    temporaries carry it, so cleaning up after one never touches another's."""
    return "op" + uuid.uuid4().hex[:12]  # never all digits: gc reads the pid as the first all-digit part


def tmp_path(rs: RepoStore, snapshot_id: str, suffix: str = "duckdb", op: str | None = None) -> Path:
    """Where one operation of this process writes ``snapshot_id``: named per process
    (``gc`` removes it once the pid is dead) and per operation (``op``, default a new
    one), so a failed build's cleanup leaves a concurrent compaction's file alone."""
    return rs.root / "tmp" / f"{snapshot_id}.{os.getpid()}.{op or op_token()}.{suffix}"


def cleanup_tmp(rs: RepoStore, op: str) -> None:
    """Remove operation ``op``'s files in ``tmp/`` (after it failed), DuckDB's side files
    (``.wal``) included — nothing of another operation, even of this process."""
    for p in (rs.root / "tmp").glob(f"*.{os.getpid()}.{op}.*"):
        try:
            p.unlink()
        except OSError:
            pass


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_file(tmp: Path, dest: Path) -> int:
    """fsync the built file, rename it to ``dest`` in ``snapshots/``, fsync the directory;
    its size (recorded in the catalog: a reader checks it)."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dest)
    fsync_dir(dest.parent)
    return os.stat(dest).st_size


def mark_ready(rs: RepoStore, entry: dict[str, Any], summary: dict[str, Any], now: float) -> None:
    entry.update(state="ready", published_at=now, **summary)
    entry.pop("pid", None)
    entry.pop("pid_start", None)
    rs.write_entry(entry)


def publish_entry(rs: RepoStore, entry: dict[str, Any], write: Callable[[str], dict[str, Any]]) -> None:
    """The catalog states around writing one snapshot: ``building`` (with this process's
    pid) before any work; then ``ready`` with the summary ``write(op)`` returns (it wrote
    and published the file, its temporaries named by ``tmp_path(..., op=op)``), or
    ``failed`` with the reason — that operation's ``tmp/`` files removed, and only
    those — when it raises (a build, a checkpoint import)."""
    entry.update(state="building", pid=os.getpid(), pid_start=process_start(os.getpid()), created_at=time.time())
    rs.write_entry(entry)
    op = op_token()
    try:
        summary = write(op)
    except BaseException as exc:
        entry.update(state="failed", reason=failure_reason(exc), finished_at=time.time())
        try:
            rs.write_entry(entry)
        finally:
            cleanup_tmp(rs, op)
        raise
    mark_ready(rs, entry, summary, time.time())
