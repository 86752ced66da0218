"""Publishing a built snapshot (SPEC §4): the catalog entry goes ``building`` (with the
builder's pid) before any work, the file is written aside in ``tmp/``, fsynced and renamed
into ``snapshots/`` (the directory fsynced), and only then is the entry rewritten ``ready``.
A crash at any point leaves every ready snapshot untouched and nothing half-built ready."""

from __future__ import annotations

import os
import time
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


def tmp_path(rs: RepoStore, snapshot_id: str, suffix: str = "duckdb") -> Path:
    """Where this process builds ``snapshot_id`` (``gc`` removes it once the pid is dead)."""
    return rs.root / "tmp" / f"{snapshot_id}.{os.getpid()}.{suffix}"


def cleanup_tmp(rs: RepoStore) -> None:
    """Remove this process's files in ``tmp/`` (after a failed build)."""
    for p in (rs.root / "tmp").glob(f"*.{os.getpid()}.*"):
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


def publish_entry(rs: RepoStore, entry: dict[str, Any], write: Callable[[], dict[str, Any]]) -> None:
    """The catalog states around writing one snapshot: ``building`` (with this process's
    pid) before any work; then ``ready`` with the summary ``write`` returns (it wrote and
    published the file), or ``failed`` with the reason — this process's ``tmp/`` files
    removed — when it raises (a build, a checkpoint import)."""
    entry.update(state="building", pid=os.getpid(), pid_start=process_start(os.getpid()), created_at=time.time())
    rs.write_entry(entry)
    try:
        summary = write()
    except BaseException as exc:
        entry.update(state="failed", reason=failure_reason(exc), finished_at=time.time())
        try:
            rs.write_entry(entry)
        finally:
            cleanup_tmp(rs)
        raise
    mark_ready(rs, entry, summary, time.time())
