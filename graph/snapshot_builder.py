"""Build and publish snapshots: inventory → blob facts → an immutable snapshot file.

The orchestrator of one build; each concern lives in its own module:

- graph/build_target.py      what is built (repository, commit or worktree state, id)
- graph/delta_plan.py        full or delta, and which rows (tree diff, dirty sets)
- graph/build_inventory.py   the inventory, path-level skips, the content digest
- graph/facts_cache.py       blob-keyed facts reused across snapshots and paths
- graph/extract_pool.py      extraction of the other blobs (process pool)
- graph/snapshot_writer.py   rows into the snapshot file, in Arrow batches, counted
- graph/build_publish.py     catalog states, write-aside + fsync + rename
- graph/build_hooks.py       the counters a build reports and the hooks a test injects

Work is keyed by blob: a (blob, language) pair is parsed at most once per extractor
version (facts cache), and rows of a path whose blob did not change are read through from
the base snapshot. The result is, by construction and by test, identical to a clean build.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pygit2

from citegraph.graph import build_inventory as inv
from citegraph.graph import coverage_summary, delta_plan, delta_resolution, facts_cache
from citegraph.graph.build_hooks import NO_HOOKS, BuildHooks, BuildStats, checkpoint
from citegraph.graph.build_inventory import TRANSIENT_REASONS, FileRow
from citegraph.graph.build_publish import base_entry, publish_entry, publish_file, tmp_path
from citegraph.graph.build_target import BuildTarget, resolve_target, snapshot_id_for
from citegraph.graph.delta_plan import Plan, base_symbol_count, plan
from citegraph.graph.extract_pool import Extracted, Job, default_workers, extract_all, extract_job
from citegraph.graph.identity import note_clone
from citegraph.graph.schema import RESOLVED_EDGES_INDEXES, SNAPSHOT_INDEXES, SNAPSHOT_SCHEMA_VERSION
from citegraph.graph.snapshot_writer import SnapshotWriter, close_snapshot, open_snapshot
from citegraph.graph.snapshot_writer import connect as writer_connect
from citegraph.graph.snapshot_writer import release as release_connection
from citegraph.graph.store import Home, RepoStore
from citegraph.indexer import gitrepo
from citegraph.indexer.extract import EXTRACTOR_VERSION

__all__ = ["BuildHooks", "BuildResult", "BuildStats", "build_snapshot", "resolve_target", "snapshot_id_for",
           "EXTRACTOR_VERSION"]

ProgressFn = Callable[[int, int], None]
INDEX_MIN_ROWS = 2048  # a smaller delta is scanned faster than indexed


@dataclass
class BuildResult:
    repository_id: str
    repository_kind: str
    snapshot_id: str
    commit: str
    dirty: bool
    state: str
    reused: bool
    files: int
    symbols: int
    coverage: dict[str, dict[str, int]]
    seconds: float
    content_id: str
    stats: BuildStats

    def to_json(self) -> dict[str, Any]:
        return {
            "repository_id": self.repository_id,
            "snapshot_id": self.snapshot_id,
            "commit": self.commit,
            "dirty": self.dirty,
            "state": self.state,
            "reused": self.reused,
            "files": self.files,
            "symbols": self.symbols,
            "coverage": self.coverage,
            "seconds": round(self.seconds, 4),
            "content_id": self.content_id,
        }


def build_snapshot(repo_path: str | os.PathLike[str], home: Home, rev: str | None = None,
                   progress: ProgressFn | None = None, jobs: int | None = None,
                   on_wait: Callable[[], None] | None = None,
                   state: gitrepo.WorktreeState | None = None,
                   pool_context: str = "fork", hooks: BuildHooks | None = None,
                   repo: pygit2.Repository | None = None) -> BuildResult:
    """Build (or reuse) the snapshot of the worktree's state (``state`` when the caller
    already knows it, else scanned), or of ``rev``; publish it. ``pool_context`` is the
    multiprocessing start method of the extraction pool: ``fork`` for a one-shot command,
    ``forkserver`` in a multi-threaded process (the service), where a fork could copy a
    lock another thread holds. ``hooks``: what a test injects (graph/build_hooks.py).
    ``repo``: the repository of ``repo_path`` opened already (``LiveRepo.build_repository``)."""
    hooks = hooks or NO_HOOKS
    t0 = time.perf_counter()
    target = resolve_target(repo_path, rev, state, skip_dirs=(home.root,), repo=repo)
    rs = home.repo(target.identity.repository_id)
    rs.ensure()
    info: dict[str, Any] = {"repository_id": target.identity.repository_id,
                            "kind": target.identity.kind, "source": target.identity.source}
    if target.repo.workdir:
        info["worktrees"] = [os.path.realpath(target.repo.workdir)]
    rs.write_repo_info(info)
    with contextlib.suppress(OSError):  # identity continuity is best effort, never a failed build
        note_clone(home, target.repo, target.identity, target.commit)
    stats = BuildStats()

    existing = rs.entry(target.snapshot_id)
    if existing and existing["state"] == "ready":
        return _result(target, existing, True, time.perf_counter() - t0, stats)
    with rs.build_lock(on_wait=on_wait):
        existing = rs.entry(target.snapshot_id)
        if existing and existing["state"] == "ready":
            return _result(target, existing, True, time.perf_counter() - t0, stats)
        entry = base_entry(target)
        publish_entry(rs, entry, lambda op: _assemble(target, rs, stats, progress, jobs, pool_context, hooks,
                                                        op))
        checkpoint("published", stats, hooks)
    return _result(target, entry, False, time.perf_counter() - t0, stats)


def _result(target: BuildTarget, entry: dict[str, Any], reused: bool, seconds: float,
            stats: BuildStats) -> BuildResult:
    return BuildResult(
        repository_id=target.identity.repository_id,
        repository_kind=target.identity.kind,
        snapshot_id=target.snapshot_id,
        commit=target.commit,
        dirty=bool(entry.get("dirty_fingerprint")),
        state=entry["state"],
        reused=reused,
        files=int(entry.get("files", 0)),
        symbols=int(entry.get("symbols", 0)),
        coverage=coverage_summary.join(entry.get("coverage"), entry.get("coverage_causes")),
        seconds=seconds,
        content_id=entry.get("content_id", ""),
        stats=stats,
    )


PARQUET_MAX_FILES = INDEX_MIN_ROWS  # a delta of at most this many file rows is one Parquet file


def warm(repo_path: str | os.PathLike[str], home: Home, state: gitrepo.WorktreeState,
         repo: pygit2.Repository) -> None:
    """Read now, through ``repo``, what the next build of this worktree reads first (the
    tree diff to its base: graph/delta_plan.py ``TreeDiffs``) and the DuckDB instance it
    builds in; the service calls this after a build, off the next edit's path."""
    target = resolve_target(repo_path, None, state, skip_dirs=(home.root,), repo=repo)
    rs = home.repo(target.identity.repository_id)
    delta_plan.warm(target, rs)
    release_connection(writer_connect(rs))  # the build's DuckDB instance, kept idle (snapshot_writer)


def _assemble(target: BuildTarget, rs: RepoStore, stats: BuildStats, progress: ProgressFn | None,
              jobs: int | None, pool_context: str, hooks: BuildHooks, op: str) -> dict[str, Any]:
    checkpoint("inventory", stats, hooks)
    out = writer_connect(rs)
    try:
        p = plan(target, rs, out, stats)
        container = "parquet" if p.base is not None and len(p.rows) + len(p.overrides) <= PARQUET_MAX_FILES \
            else "duckdb"
        tmp = tmp_path(rs, target.snapshot_id, container, op)
        open_snapshot(out, rs, tmp, container)
        rows = p.rows
        facts_cache.attach(out, rs)
        inv.classify(rows, target, p.contents)
        need = [r for r in rows if not r.status]
        base_files = int(p.base.get("files", 0)) if p.base else 0
        stats.copied_files = base_files - len(p.base_rows)
        writer = SnapshotWriter(out, stats)
        checkpoint("extract", stats, hooks)
        new_keys = _fill(need, target, p.contents, writer, stats, progress, jobs, len(rows), pool_context)
        writer.finish_rows()
        checkpoint("write", stats, hooks)
        index = container == "duckdb" and (p.base is None or len(rows) > INDEX_MIN_ROWS)
        summary = _write_tables(target, p, writer, index=index)
        # A full snapshot keeps its rows; the cache points there (graph/facts_cache.py).
        facts_cache.remember(out, new_keys, source=None if p.base else target.snapshot_id)
        if p.base:
            out.execute("DETACH base")
        facts_cache.detach(out)  # (it may hold the base attached as a source of rows)
        # Derived rows (resolved edges, import targets) over the union the readers will see.
        delta_resolution.resolve_snapshot(out, rs.snapshot_path(p.base["snapshot_id"]) if p.base else None,
                                          hooks.statement)
        if index:
            out.execute(RESOLVED_EDGES_INDEXES)
        close_snapshot(out, tmp, container)
    finally:
        release_connection(out)
    checkpoint("publish", stats, hooks)
    if container == "parquet":
        summary["container"] = "parquet"
    summary["bytes"] = publish_file(tmp, rs.published_path({"snapshot_id": target.snapshot_id, **summary}))
    return summary


def _write_tables(target: BuildTarget, p: Plan, writer: SnapshotWriter, index: bool) -> dict[str, Any]:
    """The files, overrides, contents and meta tables; the catalog summary (counts, content
    id and coverage: the base's minus the rows hidden plus the delta's own)."""
    out, rows = writer.con, p.rows
    writer.bulk("files", inv.file_columns(rows))
    if p.base is not None:
        if p.overrides:
            writer.bulk("overrides", {"path": p.overrides})
    else:
        # A full snapshot lists the paths a delta built over it must redo (readers of a
        # full snapshot ignore its overrides): so planning a delta reads this short list,
        # never every row of the base.
        redo = full_redo_paths(target, rows)
        if redo:
            writer.bulk("overrides", {"path": redo})
    dirty_blobs = sorted({r.entry.blob_id for r in rows if r.entry.dirty and r.entry.blob_id in p.contents})
    if dirty_blobs:
        writer.bulk("contents", {"blob_id": dirty_blobs, "data": [p.contents[b] for b in dirty_blobs]})
    own_sum = inv.row_sum(rows)
    own_symbols = writer.stats.rows_written["symbols"]
    coverage = inv.coverage(rows)
    if p.base:
        b = p.base
        hidden_sum = sum(inv.row_digest(*h) for h in p.base_rows)
        total = (int(b["content_sum"], 16) - hidden_sum + own_sum) % inv.MOD
        hidden_syms = base_symbol_count(out, [h[0] for h in p.base_rows])
        n_symbols = int(b.get("symbols", 0)) - hidden_syms + own_symbols
        n_files = int(b.get("files", 0)) - len(p.base_rows) + len(rows)
        coverage = inv.merge_coverage(coverage_summary.join(b.get("coverage"), b.get("coverage_causes")),
                                      p.base_rows, coverage)
    else:
        total, n_symbols, n_files = own_sum, own_symbols, len(rows)
    content_id = inv.content_id(total)
    if index:
        out.execute(SNAPSHOT_INDEXES)
    meta = {
        "snapshot_id": target.snapshot_id, "repository_id": target.identity.repository_id,
        "commit": target.commit,
        "dirty_fingerprint": (target.state.dirty_fingerprint if target.state else None) or "",
        "extractor_version": EXTRACTOR_VERSION, "schema_version": str(SNAPSHOT_SCHEMA_VERSION),
        "content_id": content_id, "inventory_complete": "true" if p.inventory_complete else "false",
        "base": p.base["snapshot_id"] if p.base else "",
    }
    writer.bulk("meta", {"key": list(meta), "value": list(meta.values())})
    summary: dict[str, Any] = {
        "files": n_files, "symbols": int(n_symbols), "content_id": content_id,
        "content_sum": f"{total:032x}", "inventory_complete": p.inventory_complete,
        "layout": "delta" if p.base else "full",
    }
    # counts under SPEC §16's keys; why files are not indexed apart (the catalog checks
    # that coverage holds integers only)
    summary["coverage"], summary["coverage_causes"] = coverage_summary.split(coverage)
    if p.base:
        summary["base"] = p.base["snapshot_id"]
        summary["delta_paths"] = len(p.overrides)  # how far from its base (compaction.due)
    return summary


def full_redo_paths(target: BuildTarget, rows: list[FileRow]) -> list[str]:
    """What a delta over this full snapshot redoes whatever its diff says: dirty rows and
    transient skips (a blob missing then, a parse that timed out — read through they would
    go stale), and the commit paths its worktree deleted (missing from its rows, and a
    clean build of the next state may hold them)."""
    redo = {r.entry.path for r in rows if r.entry.dirty or r.reason in TRANSIENT_REASONS}
    if target.state is not None and target.dirty:
        deleted = [path for path, blob in target.state.dirty_paths if blob is None]
        redo.update(inv.in_tree(target.repo, target.commit, deleted))
    return sorted(redo)


def _fill(need: list[FileRow], target: BuildTarget, contents: dict[str, bytes], writer: SnapshotWriter,
          stats: BuildStats, progress: ProgressFn | None, jobs: int | None, total: int,
          pool_context: str = "fork") -> list[tuple[str, str, str]]:
    """Give every row in ``need`` its status and rows: from the facts cache or by extracting.
    Returns the (blob, language, origin path) keys extracted now, for the cache."""
    done = total - len(need)
    if progress:
        progress(done, total)
    if not need:
        return []
    paths_of: dict[tuple[str, str], list[str]] = {}
    for r in need:
        paths_of.setdefault((r.entry.blob_id, r.language or ""), []).append(r.entry.path)
    # In path order: a full snapshot's rows then lie clustered by path, so a lookup by path
    # (a delta's hidden base rows, a reader's file) skips the other row groups.
    keys = sorted(paths_of, key=lambda k: (paths_of[k][0], k))
    results: dict[tuple[str, str], tuple[str, str | None, str | None, int | None]] = {}

    # 1. The facts cache: rows copied by SQL at the same path (or from the rows this
    # process extracted lately), re-homed at another path.
    rid = target.identity.repository_id
    cached = facts_cache.lookup(writer.con, keys)
    stats.cached_blobs = len(cached)
    same_path: list[tuple[str, str]] = []
    for (blob, lang), (status, reason, chash, size, origin) in cached.items():
        results[(blob, lang)] = (status, reason, chash, size)
        if not lang:
            continue
        for path in paths_of[(blob, lang)]:
            if path == origin:
                recent = facts_cache.RECENT.get((rid, EXTRACTOR_VERSION, blob, lang, path))
                if recent is not None:
                    writer.add(*recent)
                else:
                    same_path.append((blob, path))
            else:
                facts_cache.copy_rehomed(writer, blob, origin, path)
    facts_cache.copy_same_path(writer, same_path)
    done += sum(len(paths_of[k]) for k in results)

    # 2. Extraction of everything else: worktree bytes here, blobs in the pool.
    cap, timeout = target.config.max_file_bytes, target.config.parse_timeout_s
    todo = [k for k in keys if k not in results]
    new_keys: list[tuple[str, str, str]] = []

    def absorb(ex: Extracted) -> None:
        nonlocal done
        key = (ex.blob_id, ex.language)
        results[key] = (ex.status, ex.reason, ex.content_hash, ex.size)
        stats.extracted_blobs += 1
        stats.blob_reads += ex.read
        stats.parses += ex.parsed
        writer.add(ex.symbols, ex.edges, ex.damage)
        if ex.reason not in TRANSIENT_REASONS:
            new_keys.append((ex.blob_id, ex.language, paths_of[key][0]))
            # The rows at the origin path only, and only when they came with the result
            # (from the pool they came as Arrow tables: ``ex`` holds none).
            if ex.language and len(paths_of[key]) == 1 and not ex.packed:
                facts_cache.RECENT.put((rid, EXTRACTOR_VERSION, ex.blob_id, ex.language, paths_of[key][0]),
                                       (ex.symbols, ex.edges, ex.damage))
        done += len(paths_of[key])

    def report() -> None:
        if progress:
            progress(min(done, total), total)

    for blob, lang in (k for k in todo if k[0] in contents):
        absorb(extract_job(None, (blob, lang, tuple(paths_of[(blob, lang)]), timeout, cap), contents[blob]))
    remote: list[Job] = [(b, lang, tuple(paths_of[(b, lang)]), timeout, cap) for b, lang in todo
                         if b not in contents]
    extract_all(target.repo, remote, default_workers(jobs), pool_context, absorb, report, writer.add_tables)

    for r in need:
        r.status, r.reason, r.content_hash, r.size = results[(r.entry.blob_id, r.language or "")]
    return new_keys
