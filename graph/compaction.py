"""Compaction: a ready delta becomes a full snapshot (a new base), in the background.

A delta holds every path that differs from its base, so deltas over one old base grow
with the distance from it (each one-file commit then rewrites all earlier changes, and
past ``max(512, 20 %)`` a full build costs the whole repository). Once the newest delta
holds ``COMPACT_MIN_PATHS`` paths (or ``COMPACT_MIN_BYTES``), it is rewritten as a full
DuckDB file of the same snapshot — the base's rows its overrides do not hide plus its own,
by SQL, nothing parsed — and the next build layers its delta over that.

Crash safety and reader isolation (SPEC §4, docs/storage.md):

1. nothing is locked while the rows are written to ``tmp/<id>.<pid>.<op>.duckdb`` (stage
   ``compact-write``); builds and readers go on; one compaction per repository at a time
   (``compact.lock``, never waited for);
2. under the build lock (stage ``compact-publish`` before it), the entry is read again —
   still the same ready delta (``published_at``), else the work is dropped — the file is
   fsynced and renamed to ``snapshots/<id>.duckdb``, the directory fsynced;
3. (stage ``compact-catalog`` before it) the catalog entry is rewritten atomically:
   ``layout: full``, no base, the new size,
   a new ``published_at`` (stage ``compacted``). Its logical content (files, symbols,
   edges, damage, contents, content id, coverage) is unchanged.

Compaction stages, in order: ``COMPACT_STAGES``. A kill before 3 leaves the delta ready and readable as before (an orphan in ``tmp/`` or a
``.duckdb`` no entry points to, which ``gc`` removes). A reader that opened the delta
keeps its rows; one that opens after 3 reads the full file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from typing import Any

import duckdb
import pygit2

from citegraph.graph import delta_resolution
from citegraph.graph.build_hooks import NO_HOOKS, BuildHooks, BuildStats, checkpoint
from citegraph.graph.build_inventory import TRANSIENT_REASONS, in_tree
from citegraph.graph.build_publish import cleanup_tmp, op_token, publish_file, tmp_path
from citegraph.graph.schema import IMPORT_TARGETS_LAYOUT, RESOLVED_EDGES_INDEXES, SNAPSHOT_INDEXES
from citegraph.graph.snapshot_reader import read_parquet_tables
from citegraph.graph.snapshot_writer import SnapshotWriter, close_snapshot, open_snapshot, sql_str
from citegraph.graph.store import RepoStore

COMPACT_STAGES = ("compact-write", "compact-publish", "compact-catalog", "compacted")
COMPACT_MIN_PATHS = 256
COMPACT_MIN_BYTES = 1 << 20
LAYERED = ("files", "symbols", "edges", "damage")
PUBLISH_LOCK_WAIT_S = 30.0


def due(entry: dict[str, Any], min_paths: int | None = None, min_bytes: int | None = None) -> bool:
    """Should this (ready) snapshot be compacted? (thresholds default to the module's)"""
    paths = COMPACT_MIN_PATHS if min_paths is None else min_paths
    size = COMPACT_MIN_BYTES if min_bytes is None else min_bytes
    return (entry.get("state") == "ready" and entry.get("layout") == "delta"
            and (int(entry.get("delta_paths", 0)) >= paths or int(entry.get("bytes", 0)) >= size))


def newest_due(rs: RepoStore, min_paths: int | None = None, min_bytes: int | None = None) -> str | None:
    """The most recently built ready delta, when it is due for compaction (built: a
    compaction moves ``published_at``, not ``created_at``)."""
    deltas = [e for e in rs.entries() if e["state"] == "ready" and e.get("layout") == "delta"]
    if not deltas:
        return None
    newest = max(deltas, key=lambda e: (e.get("created_at", 0), e.get("published_at", 0)))
    return newest["snapshot_id"] if due(newest, min_paths, min_bytes) else None


@contextlib.contextmanager
def _compact_lock(rs: RepoStore) -> Iterator[bool]:
    """One compaction per repository; True when taken (never waits)."""
    fd = os.open(rs.root / "compact.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)


def compact(rs: RepoStore, snapshot_id: str, repo_path: str | None = None,
            hooks: BuildHooks | None = None) -> dict[str, Any] | None:
    """Rewrite the ready delta ``snapshot_id`` as a full snapshot; the new catalog entry,
    or None when there is nothing to do (not a ready delta, another compaction running,
    or the snapshot changed meanwhile). ``repo_path``: the repository, to tell which
    paths a full overlay's worktree deleted (without it, every absent path the delta or
    its base listed is kept as a path to redo: a superset, never wrong)."""
    hooks = hooks or NO_HOOKS
    stats = BuildStats()
    with _compact_lock(rs) as mine:
        if not mine:
            return None
        entry = rs.entry(snapshot_id)
        if not entry or entry.get("state") != "ready" or entry.get("layout") != "delta":
            return None
        base = rs.entry(entry["base"]) if entry.get("base") else None
        if not base or base.get("state") != "ready":
            return None
        op = op_token()  # its own temporaries: another build's cleanup never removes them
        tmp = tmp_path(rs, snapshot_id, "duckdb", op)
        try:
            checkpoint("compact-write", stats, hooks)
            _write_full(rs, entry, base, tmp, repo_path, stats)
            checkpoint("compact-publish", stats, hooks)
            with rs.build_lock(wait_s=PUBLISH_LOCK_WAIT_S):
                now = rs.entry(snapshot_id)
                if not now or now.get("state") != "ready" or now.get("published_at") != entry.get("published_at"):
                    return None
                size = publish_file(tmp, rs.snapshot_path(snapshot_id))
                checkpoint("compact-catalog", stats, hooks)
                for key in ("base", "container", "delta_paths"):
                    now.pop(key, None)
                now.update(layout="full", bytes=size, published_at=time.time(), compacted_from=entry["base"])
                rs.write_entry(now)
        finally:
            cleanup_tmp(rs, op)  # the file unless published, and DuckDB's side files
        checkpoint("compacted", stats, hooks)
        return now


def _write_full(rs: RepoStore, entry: dict[str, Any], base: dict[str, Any], tmp: Any,
                repo_path: str | None, stats: BuildStats) -> None:
    out = duckdb.connect(":memory:")
    try:
        out.execute(f"ATTACH {sql_str(rs.published_path(base))} AS base (READ_ONLY)")
        if entry.get("container") == "parquet":
            for t, arrow in read_parquet_tables(rs.published_path(entry), entry["snapshot_id"]).items():
                out.register(f"d_{t}", arrow)
            own = "d_{}".format
        else:
            out.execute(f"ATTACH {sql_str(rs.published_path(entry))} AS d (READ_ONLY)")
            own = "d.{}".format
        open_snapshot(out, rs, tmp, "duckdb")
        writer = SnapshotWriter(out, stats)
        hidden = f"NOT EXISTS (SELECT 1 FROM {own('overrides')} o WHERE o.path = x.path)"
        for t in LAYERED:
            writer.copy(t, f"SELECT * FROM (SELECT * FROM {own(t)} UNION ALL SELECT x.* FROM base.{t} x "
                           f"WHERE {hidden}) ORDER BY path")
        # Only bytes of files dirty in this snapshot, as its readers see them.
        writer.copy("contents", f"SELECT DISTINCT ON (blob_id) * FROM (SELECT * FROM {own('contents')} "
                                "UNION ALL SELECT * FROM base.contents) "
                                "WHERE blob_id IN (SELECT blob_id FROM files WHERE dirty)")
        redo = _redo_paths(out, own, entry, repo_path)
        if redo:
            writer.bulk("overrides", {"path": redo})
        writer.copy("meta", f"SELECT key, CASE WHEN key = 'base' THEN '' ELSE value END FROM {own('meta')} "
                    f"WHERE key <> '{IMPORT_TARGETS_LAYOUT}'")  # a full snapshot's import targets are whole
        # Derived rows recomputed over the union now held whole (what a clean build writes).
        delta_resolution.resolve_snapshot(out, None)
        out.execute(SNAPSHOT_INDEXES)
        out.execute(RESOLVED_EDGES_INDEXES)
        out.execute("DETACH base")
        close_snapshot(out, tmp, "duckdb")
    finally:
        out.close()


def _redo_paths(out: duckdb.DuckDBPyConnection, own: Any, entry: dict[str, Any], repo_path: str | None) -> list[str]:
    """A full snapshot's overrides (snapshot_builder.full_redo_paths): its dirty rows and
    transient skips, and the commit paths its worktree deleted: of the paths the delta
    lists (it lists every path its worktree deleted, delta_plan.py) and its base's, those
    no row holds and the commit's tree does."""
    reasons = ", ".join(f"'{r}'" for r in TRANSIENT_REASONS)
    redo = {r[0] for r in out.execute(f"SELECT path FROM files WHERE dirty OR reason IN ({reasons})").fetchall()}
    absent = [r[0] for r in out.execute(
        f"SELECT path FROM (SELECT path FROM {own('overrides')} UNION SELECT path FROM base.overrides) "
        "WHERE path NOT IN (SELECT path FROM files)").fetchall()]
    if not absent or entry.get("kind") == "commit":
        return sorted(redo)  # a commit snapshot holds a row for every path of its tree
    repo = None
    if repo_path is not None:
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            repo = pygit2.Repository(repo_path)
    if repo is None:
        redo.update(absent)  # a superset: redoing a path is never wrong
        return sorted(redo)
    redo.update(in_tree(repo, entry["commit"], absent))
    return sorted(redo)
