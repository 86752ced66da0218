"""Build and publish snapshots: inventory → blob facts → an immutable snapshot file.

Work is keyed by blob: a (blob, language) pair is parsed at most once per extractor
version (facts cache), and rows of a path whose blob did not change are copied from the
parent snapshot. The result is, by construction and by test, identical to a clean build.
Publishing is write-aside + fsync + rename + catalog update, so a crash at any point
leaves every ready snapshot untouched and nothing half-built marked ready.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
import duckdb
import pyarrow as pa
import pygit2

from citegraph.graph import coverage_summary, edge_resolution
from citegraph.graph.fact_rows import Columns, add_rows, empty_columns, rehome
from citegraph.graph.identity import note_clone
from citegraph.graph.schema import (
    DAMAGE_COLUMNS,
    EDGE_COLUMNS,
    FACTS_DDL,
    FACTS_SCHEMA_VERSION,
    FILE_COLUMNS,
    SNAPSHOT_DDL,
    SNAPSHOT_INDEXES,
    SNAPSHOT_SCHEMA_VERSION,
    SYMBOL_COLUMNS,
)
from citegraph.graph.store import Home, RepoStore, process_start
from citegraph.indexer import gitrepo
from citegraph.indexer.blob_facts import facts_for_blob
from citegraph.indexer.config import CONFIG_FILE, IndexConfig, parse_config
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION
from citegraph.indexer.languages import language_for_path
from citegraph.indexer.paths import fs_path, is_undecodable, stored_path
from citegraph.indexer.worktree import MODE_NOT_REGULAR, WorktreeReader

BATCH_FILES = 2048
POOL_THRESHOLD = 48  # blobs to extract before a process pool pays for itself

ProgressFn = Callable[[int, int], None]
TRANSIENT_REASONS = ("parse-timeout", "missing-blob")


@dataclass
class BuildStats:
    """Counters a test or benchmark can read: how much real work a build did."""

    extracted_blobs: int = 0
    cached_blobs: int = 0
    copied_files: int = 0
    stages: list[str] = field(default_factory=list)


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


def snapshot_id_for(repository_id: str, commit: str, dirty_fingerprint: str | None,
                    config: IndexConfig) -> str:
    h = blake3.blake3()
    parts = ("overlay" if dirty_fingerprint else "commit", repository_id, commit,
             dirty_fingerprint or "", EXTRACTOR_VERSION, config.fingerprint(), str(SNAPSHOT_SCHEMA_VERSION))
    for p in parts:
        h.update(p.encode() + b"\0")
    return "cgsnap_" + h.hexdigest(16)


def _checkpoint(stage: str, stats: BuildStats) -> None:
    """Test hook: CITEGRAPH_TEST_STALL_AT=<stage> stalls the build there (crash tests)."""
    stats.stages.append(stage)
    want = os.environ.get("CITEGRAPH_TEST_STALL_AT")
    if want == stage:
        marker = os.environ.get("CITEGRAPH_TEST_STALL_MARKER")
        if marker:
            Path(marker).write_text(stage)
        time.sleep(float(os.environ.get("CITEGRAPH_TEST_STALL_SECONDS", "60")))


# --- worker side -----------------------------------------------------------------------

_WORKER_REPO: pygit2.Repository | None = None

# One unit of extraction work: (blob id, language or "", paths holding it, timeout, cap).
Job = tuple[str, str, tuple[str, ...], float, int]


@dataclass
class Extracted:
    """A blob's file facts plus its snapshot rows (for every path that holds it)."""

    blob_id: str
    language: str
    status: str
    reason: str | None
    content_hash: str | None
    size: int | None
    symbols: Columns
    edges: Columns
    damage: Columns = field(default_factory=lambda: empty_columns(DAMAGE_COLUMNS))


def _worker_init(repo_path: str, parent_pid: int) -> None:
    """``parent_pid``: the forking builder (fork), or 0 when the parent is a fork server."""
    global _WORKER_REPO
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    die_with_parent(parent_pid or os.getppid())
    _WORKER_REPO = pygit2.Repository(repo_path)


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Make this (forked) worker die when its parent does, however the parent died.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; elsewhere a daemon thread polls the
    parent pid. Checked once more after arming: a parent that died before is noticed."""
    armed = False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        armed = False
    if not armed:
        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="citegraph-parent-watch").start()
    if os.getppid() != parent_pid:
        os._exit(1)


def _extract_batch(batch: list[Job]) -> list[Extracted]:
    assert _WORKER_REPO is not None
    return [extract_job(_WORKER_REPO, job) for job in batch]


def extract_job(repo: pygit2.Repository | None, job: Job, data: bytes | None = None) -> Extracted:
    """Read (unless given), classify, extract and build rows for one blob."""
    blob_id, language, paths, timeout, cap = job
    syms, edges = empty_columns(SYMBOL_COLUMNS), empty_columns(EDGE_COLUMNS)
    if data is None:
        try:
            assert repo is not None
            data = repo.odb.read(blob_id)[1]
        except (KeyError, ValueError, AssertionError, pygit2.GitError):
            return Extracted(blob_id, language, "skipped", "missing-blob", None, None, syms, edges)
    if len(data) > cap:
        return Extracted(blob_id, language, "skipped", "too-large", None, len(data), syms, edges)
    info, facts = facts_for_blob(language or None, data, timeout)
    damage = empty_columns(DAMAGE_COLUMNS)
    if language:
        for path in paths:
            add_rows(facts, language, blob_id, path, syms, edges, damage)
    return Extracted(blob_id, language, facts.status, facts.reason, info.content_hash, info.size, syms, edges,
                     damage)


# --- build -------------------------------------------------------------------------------

@dataclass
class _Target:
    """What a build is about to describe."""

    repo: pygit2.Repository
    identity: gitrepo.RepoIdentity
    commit: str
    state: gitrepo.WorktreeState | None
    config: IndexConfig
    snapshot_id: str


def resolve_target(repo_path: str | os.PathLike[str], rev: str | None = None,
                   state: gitrepo.WorktreeState | None = None) -> _Target:
    """What a build (or a read) is about: the commit of ``rev``, or the worktree's state —
    scanned now, or ``state`` as the resident service already knows it."""
    repo = gitrepo.open_repository(repo_path)
    identity = gitrepo.repository_identity(repo)
    if rev is not None:
        commit = gitrepo.resolve_rev(repo, rev)
        state = None
    else:
        gitrepo.workdir(repo)
        if state is None:
            state = gitrepo.worktree_state(repo)
        commit = state.head
    config = parse_config(gitrepo.commit_tree_file(repo, commit, CONFIG_FILE), CONFIG_FILE)
    fp = state.dirty_fingerprint if state else None
    return _Target(repo, identity, commit, state, config,
                   snapshot_id_for(identity.repository_id, commit, fp, config))


def build_snapshot(repo_path: str | os.PathLike[str], home: Home, rev: str | None = None,
                   progress: ProgressFn | None = None, jobs: int | None = None,
                   on_wait: Callable[[], None] | None = None,
                   state: gitrepo.WorktreeState | None = None,
                   pool_context: str = "fork") -> BuildResult:
    """Build (or reuse) the snapshot of the worktree's state (``state`` when the caller
    already knows it, else scanned), or of ``rev``; publish it. ``pool_context`` is the
    multiprocessing start method of the extraction pool: ``fork`` for a one-shot command,
    ``forkserver`` in a multi-threaded process (the service), where a fork could copy a
    lock another thread holds."""
    t0 = time.perf_counter()
    target = resolve_target(repo_path, rev, state)
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
        entry = _base_entry(target)
        entry.update(state="building", pid=os.getpid(), pid_start=process_start(os.getpid()),
                     created_at=time.time())
        rs.write_entry(entry)
        try:
            summary = _assemble(target, rs, stats, progress, jobs, pool_context)
        except BaseException as exc:
            entry.update(state="failed", reason=_failure_reason(exc), finished_at=time.time())
            try:
                rs.write_entry(entry)
            finally:
                _cleanup_tmp(rs)
            raise
        entry.update(state="ready", published_at=time.time(), **summary)
        entry.pop("pid", None)
        entry.pop("pid_start", None)
        rs.write_entry(entry)
        _checkpoint("published", stats)
    return _result(target, entry, False, time.perf_counter() - t0, stats)


def _failure_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, CitegraphError):
        return exc.what
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


def _cleanup_tmp(rs: RepoStore) -> None:
    for p in (rs.root / "tmp").glob(f"*.{os.getpid()}.*"):
        try:
            p.unlink()
        except OSError:
            pass


def _base_entry(target: _Target) -> dict[str, Any]:
    return {
        "snapshot_id": target.snapshot_id,
        "repository_id": target.identity.repository_id,
        "kind": "overlay" if target.state and target.state.dirty else "commit",
        "commit": target.commit,
        "dirty_fingerprint": target.state.dirty_fingerprint if target.state else None,
        "extractor_version": EXTRACTOR_VERSION,
        "config": target.config.fingerprint(),
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
    }


def _result(target: _Target, entry: dict[str, Any], reused: bool, seconds: float,
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


def _dirty_entries(target: _Target, paths: set[str] | None = None
                   ) -> tuple[dict[str, gitrepo.InventoryEntry | None], dict[str, bytes]]:
    """The worktree's dirty paths (None = deleted), read again through the worktree
    reader (bytes kept up to the size cap) and checked against the state."""
    out: dict[str, gitrepo.InventoryEntry | None] = {}
    contents: dict[str, bytes] = {}
    if not (target.state and target.state.dirty):
        return out, contents
    with WorktreeReader(gitrepo.workdir(target.repo), keep_bytes=target.config.max_file_bytes) as reader:
        for path, blob in target.state.dirty_paths:
            if paths is not None and path not in paths:
                continue
            if blob is None:
                out[path] = None
                continue
            found = reader.read(fs_path(path))
            if found.blob_id != blob:
                raise CitegraphError(f"{path}: changed while the snapshot was being built",
                                     "run citegraph index again", code=1, retryable=True)
            out[path] = gitrepo.InventoryEntry(path, blob, found.mode, dirty=True)
            if found.data is not None:
                contents[blob] = found.data
    return out, contents


def _inventory(target: _Target) -> tuple[list[gitrepo.InventoryEntry], dict[str, bytes], bool]:
    """The snapshot's full inventory: the commit's tree plus the dirty worktree."""
    listed, complete = gitrepo.commit_inventory(target.repo, target.commit)
    entries: dict[str, gitrepo.InventoryEntry] = {e.path: e for e in listed}
    dirty, contents = _dirty_entries(target)
    for path, e in dirty.items():
        if e is None:
            entries.pop(path, None)
        else:
            entries[path] = e
    return sorted(entries.values(), key=lambda e: e.path), contents, complete


@dataclass
class _FileRow:
    entry: gitrepo.InventoryEntry
    language: str | None
    status: str = ""
    reason: str | None = None
    content_hash: str | None = None
    size: int | None = None


def _classify(rows: list[_FileRow], target: _Target, contents: dict[str, bytes]) -> None:
    """Decide path-level skips (no content needed)."""
    for r in rows:
        if r.status:
            continue
        e = r.entry
        if e.mode == gitrepo.MODE_SYMLINK:
            r.status, r.reason = "skipped", "symlink"
        elif e.mode == MODE_NOT_REGULAR:
            r.status, r.reason = "skipped", "not-regular"
        elif is_undecodable(e.path):
            r.status, r.reason = "skipped", "undecodable-path"
        elif e.mode == gitrepo.MODE_GITLINK:
            r.status, r.reason = "skipped", "submodule"
        elif target.config.excluded(e.path):
            r.status, r.reason = "skipped", "excluded"
        elif e.dirty and e.blob_id not in contents:
            # The worktree reader keeps the bytes of every regular file up to the cap.
            r.status, r.reason = "skipped", "too-large"


def _sql_str(path: Path) -> str:
    """A path as an SQL string literal (a home path may contain a quote)."""
    return "'" + str(path).replace("'", "''") + "'"


def _attach_facts(out: duckdb.DuckDBPyConnection, rs: RepoStore) -> None:
    """Attach the blob-keyed facts cache read-write (builders hold the repo lock)."""
    def attach() -> None:
        out.execute(f"ATTACH {_sql_str(rs.facts_path)} AS facts")
        out.execute(FACTS_DDL.replace("IF NOT EXISTS ", "IF NOT EXISTS facts."))

    try:
        attach()
    except duckdb.Error:
        # The facts cache is only a cache: a corrupt one is discarded and rebuilt.
        with contextlib.suppress(duckdb.Error):
            out.execute("DETACH facts")
        rs.facts_path.unlink(missing_ok=True)
        Path(str(rs.facts_path) + ".wal").unlink(missing_ok=True)
        attach()
    rows = out.execute("SELECT value FROM facts.meta WHERE key='extractor_version'").fetchall()
    if not rows or rows[0][0] != f"{EXTRACTOR_VERSION}/{FACTS_SCHEMA_VERSION}":
        out.execute("DELETE FROM facts.blob_files; DELETE FROM facts.blob_symbols; DELETE FROM facts.blob_edges; "
                    "DELETE FROM facts.blob_damage;")
        out.execute("INSERT OR REPLACE INTO facts.meta VALUES ('extractor_version', ?)",
                    [f"{EXTRACTOR_VERSION}/{FACTS_SCHEMA_VERSION}"])


def _pick_base(rs: RepoStore, target: _Target) -> dict[str, Any] | None:
    """The most recent ready *full* snapshot with the same extractor and config."""
    best = None
    for e in rs.entries():
        if (e["state"] == "ready" and e.get("layout", "full") == "full" and e.get("content_sum")
                and e.get("extractor_version") == EXTRACTOR_VERSION
                and e.get("config") == target.config.fingerprint()
                and e.get("schema_version") == SNAPSHOT_SCHEMA_VERSION):
            key = (e.get("commit") == target.commit, e.get("published_at", 0))
            if best is None or key > best[0]:
                best = (key, e)
    return best[1] if best else None


def _row_digest(path: str, blob: str, language: str | None, status: str, reason: str | None, mode: int,
                dirty: bool) -> int:
    text = f"{EXTRACTOR_VERSION}\0{path}\0{blob}\0{language}\0{status}\0{reason}\0{mode}\0{bool(dirty)}"
    return int(blake3.blake3(text.encode("utf-8", "surrogateescape")).hexdigest(16), 16)


def _row_sum(rows: list[_FileRow]) -> int:
    """Order-independent digest of an inventory (sum mod 2^128): a delta updates it by
    subtracting the base rows it overrides and adding its own."""
    total = 0
    for r in rows:
        e = r.entry
        total += _row_digest(e.path, e.blob_id, r.language, r.status, r.reason, e.mode, e.dirty)
    return total % MOD


MOD = 1 << 128


def _content_id(total: int) -> str:
    return f"{total % MOD:032x}"


class _Sink:
    """Buffers snapshot rows and flushes them to DuckDB through Arrow in large batches."""

    def __init__(self, con: duckdb.DuckDBPyConnection, flush_rows: int = 200_000) -> None:
        self.con = con
        self.flush_rows = flush_rows
        self.syms = empty_columns(SYMBOL_COLUMNS)
        self.edges = empty_columns(EDGE_COLUMNS)
        self.damage = empty_columns(DAMAGE_COLUMNS)

    def add(self, syms: Columns, edges: Columns, damage: Columns | None = None) -> None:
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
        _bulk(self.con, "symbols", self.syms)
        _bulk(self.con, "edges", self.edges)
        _bulk(self.con, "damage", self.damage)
        self.syms = empty_columns(SYMBOL_COLUMNS)
        self.edges = empty_columns(EDGE_COLUMNS)
        self.damage = empty_columns(DAMAGE_COLUMNS)


INDEX_MIN_ROWS = 2048


def _empty_snapshot_file(rs: RepoStore, dest: Path) -> None:
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


DELTA_MIN_FILES = 512
DELTA_MAX_FRACTION = 0.2


@dataclass
class _Plan:
    """What one build writes: its own file rows and the base paths they hide."""

    rows: list[_FileRow]
    contents: dict[str, bytes]
    inventory_complete: bool
    base: dict[str, Any] | None = None
    overrides: list[str] = field(default_factory=list)
    base_rows: list[tuple] = field(default_factory=list)  # base file rows hidden by overrides


def _full_plan(target: _Target) -> _Plan:
    inventory, contents, complete = _inventory(target)
    return _Plan([_FileRow(e, language_for_path(e.path)) for e in inventory], contents, complete)


def _delta_plan(target: _Target, rs: RepoStore, base: dict[str, Any], out: duckdb.DuckDBPyConnection
                ) -> _Plan | None:
    """Rows that differ from ``base``: a tree diff plus both dirty sets; None when a full
    build is better (too many changes) or the diff cannot be read."""
    repo = target.repo
    try:
        old = repo[base["commit"]].peel(pygit2.Tree)
        new = repo[target.commit].peel(pygit2.Tree)
        diff = repo.diff(old, new)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    changed: set[str] = set()
    for d in diff.deltas:
        changed.add(stored_path(d.old_file.path))
        changed.add(stored_path(d.new_file.path))
    try:
        out.execute(f"ATTACH {_sql_str(rs.snapshot_path(base['snapshot_id']))} AS base (READ_ONLY)")
        # Dirty rows, and transient skips (a blob missing then, a parse that timed out),
        # are redone as a clean build would; read through they would go stale.
        base_redo = [r[0] for r in out.execute(
            "SELECT path FROM base.files WHERE dirty OR reason IN ('parse-timeout', 'missing-blob') "
            # A full overlay lists the commit paths its worktree had deleted: they are
            # missing from its rows, and a clean build of the next state may hold them.
            "UNION SELECT path FROM base.overrides"
        ).fetchall()]
    except duckdb.Error:
        return None  # a damaged base (corrupt or foreign file): build in full
    changed.update(base_redo)
    if target.state and target.state.dirty:
        changed.update(p for p, _ in target.state.dirty_paths)
    if len(changed) > max(DELTA_MIN_FILES, DELTA_MAX_FRACTION * int(base.get("files", 0))):
        return None
    out.register("_changed", pa.table({"path": sorted(changed)}))
    base_rows = {r[0]: r for r in out.execute(
        "SELECT path, blob_id, language, status, reason, mode, dirty FROM base.files f "
        "SEMI JOIN _changed c ON f.path = c.path").fetchall()}
    out.unregister("_changed")
    dirty, contents = _dirty_entries(target, changed)
    rows: list[_FileRow] = []
    overrides: list[str] = []
    for path in sorted(changed):
        if path in dirty:
            entry = dirty[path]
        else:
            try:
                te = new[fs_path(path)]
                entry = None if te.filemode == pygit2.GIT_FILEMODE_TREE else \
                    gitrepo.InventoryEntry(path, str(te.id), int(te.filemode))
            except KeyError:
                entry = None
        b = base_rows.get(path)
        if entry is not None and b is not None and (b[1], b[5], b[6]) == (entry.blob_id, entry.mode, entry.dirty) \
                and b[4] not in TRANSIENT_REASONS:
            continue  # identical to the base: read through
        if entry is None and b is None:
            continue
        overrides.append(path)
        if entry is not None:
            rows.append(_FileRow(entry, language_for_path(path)))
    hidden = [base_rows[p] for p in overrides if p in base_rows]
    return _Plan(rows, contents, bool(base.get("inventory_complete", True)), base, overrides, hidden)


def _assemble(target: _Target, rs: RepoStore, stats: BuildStats, progress: ProgressFn | None,
              jobs: int | None, pool_context: str = "fork") -> dict[str, Any]:
    _checkpoint("inventory", stats)
    tmp = rs.root / "tmp" / f"{target.snapshot_id}.{os.getpid()}.duckdb"
    tmp.unlink(missing_ok=True)
    _empty_snapshot_file(rs, tmp)
    out = duckdb.connect(str(tmp))
    try:
        base = _pick_base(rs, target)
        plan = _delta_plan(target, rs, base, out) if base else None
        if plan is None:
            with contextlib.suppress(duckdb.Error):
                out.execute("DETACH base")
            plan = _full_plan(target)
        rows = plan.rows
        _attach_facts(out, rs)
        _classify(rows, target, plan.contents)
        need = [r for r in rows if not r.status]
        base_files = int(plan.base.get("files", 0)) if plan.base else 0
        stats.copied_files = base_files - len(plan.base_rows)
        sink = _Sink(out)
        _checkpoint("extract", stats)
        new_keys = _fill(need, target, plan.contents, out, sink, stats, progress, jobs, len(rows), pool_context)
        sink.flush()
        _checkpoint("write", stats)
        fcols = empty_columns(FILE_COLUMNS)
        for r in rows:
            e = r.entry
            for c, v in zip(FILE_COLUMNS, (e.path, e.blob_id, r.content_hash, r.language, r.status,
                                           r.reason, r.size, e.mode, e.dirty), strict=True):
                fcols[c].append(v)
        _bulk(out, "files", fcols)
        if plan.overrides:
            _bulk(out, "overrides", {"path": plan.overrides})
        elif plan.base is None and target.state and target.state.dirty:
            # A full overlay: record the paths of its commit that the worktree deleted, so
            # that a delta built over it redoes them (readers of a full snapshot ignore this).
            deleted = sorted(p for p, blob in target.state.dirty_paths if blob is None)
            if deleted:
                _bulk(out, "overrides", {"path": deleted})
        dirty_blobs = sorted({r.entry.blob_id for r in rows if r.entry.dirty and r.entry.blob_id in plan.contents})
        if dirty_blobs:
            _bulk(out, "contents", {"blob_id": dirty_blobs, "data": [plan.contents[b] for b in dirty_blobs]})
        _remember_facts(out, new_keys)
        own_sum = _row_sum(rows)
        own_symbols = out.execute("SELECT count(*) FROM symbols").fetchall()[0][0]
        coverage = _coverage(rows)
        if plan.base:
            b = plan.base
            hidden_sum = sum(_row_digest(*h) for h in plan.base_rows)
            total = (int(b["content_sum"], 16) - hidden_sum + own_sum) % MOD
            hidden_syms = 0
            if plan.overrides:
                hidden_syms = out.execute("SELECT count(*) FROM base.symbols s SEMI JOIN overrides o "
                                          "ON s.path = o.path").fetchall()[0][0]
            n_symbols = int(b.get("symbols", 0)) - hidden_syms + own_symbols
            n_files = base_files - len(plan.base_rows) + len(rows)
            coverage = _merge_coverage(coverage_summary.join(b.get("coverage"), b.get("coverage_causes")),
                                       plan.base_rows, coverage)
            out.execute("DETACH base")
        else:
            total, n_symbols, n_files = own_sum, own_symbols, len(rows)
        edge_resolution.write_resolution(out, rs.snapshot_path(plan.base["snapshot_id"]) if plan.base else None)
        content_id = _content_id(total)
        if plan.base is None or len(rows) > INDEX_MIN_ROWS:
            out.execute(SNAPSHOT_INDEXES)  # a small delta is scanned faster than indexed
        meta = {
            "snapshot_id": target.snapshot_id, "repository_id": target.identity.repository_id,
            "commit": target.commit,
            "dirty_fingerprint": (target.state.dirty_fingerprint if target.state else None) or "",
            "extractor_version": EXTRACTOR_VERSION, "schema_version": str(SNAPSHOT_SCHEMA_VERSION),
            "content_id": content_id, "inventory_complete": "true" if plan.inventory_complete else "false",
            "base": plan.base["snapshot_id"] if plan.base else "",
        }
        out.execute("INSERT INTO meta VALUES " + ", ".join(["(?, ?)"] * len(meta)),
                    [x for kv in meta.items() for x in kv])
        out.execute("DETACH facts")
        out.execute("CHECKPOINT")
    finally:
        out.close()
    _checkpoint("publish", stats)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, rs.snapshot_path(target.snapshot_id))
    dir_fd = os.open(rs.root / "snapshots", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    summary: dict[str, Any] = {
        "bytes": os.stat(rs.snapshot_path(target.snapshot_id)).st_size,
        "files": n_files, "symbols": int(n_symbols), "content_id": content_id,
        "content_sum": f"{total:032x}", "inventory_complete": plan.inventory_complete,
        "layout": "delta" if plan.base else "full",
    }
    # counts under SPEC §16's keys; why files are not indexed apart (the catalog checks
    # that coverage holds integers only)
    summary["coverage"], summary["coverage_causes"] = coverage_summary.split(coverage)
    if plan.base:
        summary["base"] = plan.base["snapshot_id"]
    return summary


def _merge_coverage(base: dict[str, dict[str, Any]], hidden: list[tuple], own: dict[str, dict[str, Any]]
                    ) -> dict[str, dict[str, Any]]:
    return coverage_summary.merge(base, [(h[2], h[3], h[4]) for h in hidden], own)


PATH_REASONS = ("symlink", "submodule", "excluded", "not-regular", "undecodable-path", "too-large")


def _coverage(rows: list[_FileRow]) -> dict[str, dict[str, Any]]:
    return coverage_summary.summarize((r.language, r.status, r.reason) for r in rows)




def _fill(need: list[_FileRow], target: _Target, contents: dict[str, bytes], out: duckdb.DuckDBPyConnection,
          sink: _Sink, stats: BuildStats, progress: ProgressFn | None, jobs: int | None, total: int,
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
    keys = sorted(paths_of)
    results: dict[tuple[str, str], tuple[str, str | None, str | None, int | None]] = {}

    # 2. The facts cache: rows copied by SQL at the same path, re-homed at another path.
    want = pa.table({"blob_id": [k[0] for k in keys], "language": [k[1] for k in keys]})
    out.register("_want", want)
    cached = out.execute(
        "SELECT f.blob_id, f.language, f.status, f.reason, f.content_hash, f.size, f.origin_path "
        "FROM facts.blob_files f JOIN _want w USING (blob_id, language)").fetchall()
    out.unregister("_want")
    stats.cached_blobs = len(cached)
    same_path: list[tuple[str, str]] = []
    for blob, lang, status, reason, chash, size, origin in cached:
        results[(blob, lang)] = (status, reason, chash, size)
        if not lang:
            continue
        for path in paths_of[(blob, lang)]:
            if path == origin:
                same_path.append((blob, path))
            else:
                _rehome(out, sink, blob, origin, path)
    if same_path:
        out.register("_same", pa.table({"blob_id": [b for b, _ in same_path], "path": [p for _, p in same_path]}))
        out.execute("INSERT INTO symbols SELECT s.* FROM facts.blob_symbols s SEMI JOIN _same x "
                    "ON s.blob_id = x.blob_id AND s.path = x.path")
        out.execute("INSERT INTO edges SELECT e.* FROM facts.blob_edges e SEMI JOIN _same x "
                    "ON e.blob_id = x.blob_id AND e.path = x.path")
        out.execute("INSERT INTO damage SELECT d.* FROM facts.blob_damage d SEMI JOIN _same x "
                    "ON d.blob_id = x.blob_id AND d.path = x.path")
        out.unregister("_same")
    done += sum(len(paths_of[k]) for k in results)

    # 3. Extraction of everything else, in a process pool when it pays.
    cap, timeout = target.config.max_file_bytes, target.config.parse_timeout_s
    todo = [k for k in keys if k not in results]
    new_keys: list[tuple[str, str, str]] = []

    def absorb(ex: Extracted) -> None:
        nonlocal done
        key = (ex.blob_id, ex.language)
        results[key] = (ex.status, ex.reason, ex.content_hash, ex.size)
        stats.extracted_blobs += 1
        sink.add(ex.symbols, ex.edges, ex.damage)
        if ex.reason not in TRANSIENT_REASONS:
            new_keys.append((ex.blob_id, ex.language, paths_of[key][0]))
        done += len(paths_of[key])

    local = [k for k in todo if k[0] in contents]
    remote = [k for k in todo if k[0] not in contents]
    for blob, lang in local:
        absorb(extract_job(None, (blob, lang, tuple(paths_of[(blob, lang)]), timeout, cap), contents[blob]))
    jobs_list: list[Job] = [(b, lang, tuple(paths_of[(b, lang)]), timeout, cap) for b, lang in remote]
    chunks = [jobs_list[i:i + 32] for i in range(0, len(jobs_list), 32)]
    workers = jobs if jobs is not None else min(2, os.cpu_count() or 1)
    if workers > 1 and len(jobs_list) >= POOL_THRESHOLD:
        import multiprocessing as mp

        pool = ProcessPoolExecutor(workers, mp_context=mp.get_context(pool_context), initializer=_worker_init,
                                   initargs=(target.repo.path, os.getpid() if pool_context == "fork" else 0))
        try:
            for batch in pool.map(_extract_batch, chunks):
                for ex in batch:
                    absorb(ex)
                if progress:
                    progress(min(done, total), total)
        except BaseException:
            # Ctrl-C or a failure: drop queued work and stop the workers now.
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
            raise
        pool.shutdown()
    else:
        for chunk in chunks:
            for job in chunk:
                absorb(extract_job(target.repo, job))
            if progress:
                progress(min(done, total), total)

    for r in need:
        r.status, r.reason, r.content_hash, r.size = results[(r.entry.blob_id, r.language or "")]
    return new_keys


def _rehome(out: duckdb.DuckDBPyConnection, sink: _Sink, blob: str, origin: str, path: str) -> None:
    """Rows of a cached blob first seen at ``origin``, placed at ``path`` (new handles)."""
    rows = out.execute("SELECT * FROM facts.blob_symbols WHERE blob_id = ? AND path = ?", [blob, origin]).fetchall()
    moved, mapping = rehome(rows, path)
    syms = empty_columns(SYMBOL_COLUMNS)
    for row in moved:
        for c, v in zip(SYMBOL_COLUMNS, row, strict=True):
            syms[c].append(v)
    edges = empty_columns(EDGE_COLUMNS)
    for row in out.execute("SELECT * FROM facts.blob_edges WHERE blob_id = ? AND path = ?", [blob, origin]).fetchall():
        vals = dict(zip(EDGE_COLUMNS, row, strict=True))
        vals["path"] = path
        vals["source_handle"] = mapping.get(vals["source_handle"]) if vals["source_handle"] else None
        for c in EDGE_COLUMNS:
            edges[c].append(vals[c])
    damage = empty_columns(DAMAGE_COLUMNS)
    for row in out.execute("SELECT * FROM facts.blob_damage WHERE blob_id = ? AND path = ? ORDER BY start_byte",
                           [blob, origin]).fetchall():
        for c, v in zip(DAMAGE_COLUMNS, row, strict=True):
            damage[c].append(path if c == "path" else v)
    sink.add(syms, edges, damage)


def _remember_facts(out: duckdb.DuckDBPyConnection, new_keys: list[tuple[str, str, str]]) -> None:
    """Copy the facts extracted by this build into the cache, inside DuckDB (no Python rows)."""
    if not new_keys:
        return
    out.register("_new", pa.table({"blob_id": [k[0] for k in new_keys], "language": [k[1] for k in new_keys],
                                   "path": [k[2] for k in new_keys]}))
    try:
        out.execute("DELETE FROM facts.blob_files f USING _new n WHERE f.blob_id = n.blob_id "
                    "AND f.language = n.language")
        out.execute("INSERT INTO facts.blob_files SELECT f.blob_id, n.language, f.status, f.reason, "
                    "f.content_hash, f.size, f.path FROM files f JOIN _new n ON f.path = n.path AND "
                    "f.blob_id = n.blob_id")
        out.execute("INSERT INTO facts.blob_symbols SELECT s.* FROM symbols s SEMI JOIN _new n "
                    "ON s.path = n.path AND s.blob_id = n.blob_id")
        out.execute("INSERT INTO facts.blob_edges SELECT e.* FROM edges e SEMI JOIN _new n "
                    "ON e.path = n.path AND e.blob_id = n.blob_id")
        out.execute("INSERT INTO facts.blob_damage SELECT d.* FROM damage d SEMI JOIN _new n "
                    "ON d.path = n.path AND d.blob_id = n.blob_id")
    finally:
        out.unregister("_new")


def _bulk(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, list]) -> None:
    """Arrow bulk insert (never executemany)."""
    first = next(iter(columns.values()))
    if not first:
        return
    arrow = pa.table(columns)
    con.register("_bulk_src", arrow)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM _bulk_src")
    finally:
        con.unregister("_bulk_src")
