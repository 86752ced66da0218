"""Build and publish snapshots: inventory → blob facts → an immutable snapshot file.

Work is keyed by blob: a (blob, language) pair is parsed at most once per extractor
version (facts cache), and rows of a path whose blob did not change are copied from the
parent snapshot. The result is, by construction and by test, identical to a clean build.
Publishing is write-aside + fsync + rename + catalog update, so a crash at any point
leaves every ready snapshot untouched and nothing half-built marked ready.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
import duckdb
import pyarrow as pa
import pygit2

from citegraph.graph.handles import symbol_handle
from citegraph.graph.schema import (
    EDGE_COLUMNS,
    FACTS_DDL,
    FILE_COLUMNS,
    SNAPSHOT_DDL,
    SNAPSHOT_INDEXES,
    SNAPSHOT_SCHEMA_VERSION,
    SYMBOL_COLUMNS,
)
from citegraph.graph.store import Home, RepoStore
from citegraph.indexer import gitrepo
from citegraph.indexer.blob_facts import BlobInfo, facts_for_blob
from citegraph.indexer.config import CONFIG_FILE, IndexConfig, parse_config
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION, EdgeFact, FileFacts, SymbolFact
from citegraph.indexer.languages import language_for_path

BATCH_FILES = 2048
POOL_THRESHOLD = 48  # blobs to extract before a process pool pays for itself

ProgressFn = Callable[[int, int], None]


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


def _worker_init(repo_path: str) -> None:
    global _WORKER_REPO
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _WORKER_REPO = pygit2.Repository(repo_path)


def _extract_batch(batch: list[tuple[str, str, float]]) -> list[tuple[str, str, BlobInfo | None, FileFacts]]:
    assert _WORKER_REPO is not None
    return [_extract_one(_WORKER_REPO, b, lang, t) for b, lang, t in batch]


def _extract_one(repo: pygit2.Repository, blob_id: str, language: str, timeout: float
                 ) -> tuple[str, str, BlobInfo | None, FileFacts]:
    try:
        data = repo.odb.read(blob_id)[1]
    except (KeyError, ValueError, pygit2.GitError):
        return blob_id, language, None, FileFacts(status="skipped", reason="missing-blob")
    info, facts = facts_for_blob(language or None, data, timeout)
    return blob_id, language, info, facts


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


def resolve_target(repo_path: str | os.PathLike[str], rev: str | None = None) -> _Target:
    repo = gitrepo.open_repository(repo_path)
    identity = gitrepo.repository_identity(repo)
    if rev is not None:
        commit = gitrepo.resolve_rev(repo, rev)
        state = None
    else:
        gitrepo.workdir(repo)
        state = gitrepo.worktree_state(repo)
        commit = state.head
    config = parse_config(gitrepo.commit_tree_file(repo, commit, CONFIG_FILE), CONFIG_FILE)
    fp = state.dirty_fingerprint if state else None
    return _Target(repo, identity, commit, state, config,
                   snapshot_id_for(identity.repository_id, commit, fp, config))


def build_snapshot(repo_path: str | os.PathLike[str], home: Home, rev: str | None = None,
                   progress: ProgressFn | None = None, jobs: int | None = None,
                   on_wait: Callable[[], None] | None = None) -> BuildResult:
    """Build (or reuse) the snapshot of the worktree's state, or of ``rev``; publish it."""
    t0 = time.perf_counter()
    target = resolve_target(repo_path, rev)
    rs = home.repo(target.identity.repository_id)
    rs.ensure()
    info: dict[str, Any] = {"repository_id": target.identity.repository_id,
                            "kind": target.identity.kind, "source": target.identity.source}
    if target.repo.workdir:
        info["worktrees"] = [os.path.realpath(target.repo.workdir)]
    rs.write_repo_info(info)
    stats = BuildStats()

    existing = rs.entry(target.snapshot_id)
    if existing and existing["state"] == "ready":
        return _result(target, existing, True, time.perf_counter() - t0, stats)
    with rs.build_lock(on_wait=on_wait):
        existing = rs.entry(target.snapshot_id)
        if existing and existing["state"] == "ready":
            return _result(target, existing, True, time.perf_counter() - t0, stats)
        entry = _base_entry(target)
        entry.update(state="building", pid=os.getpid(), created_at=time.time())
        rs.write_entry(entry)
        try:
            summary = _assemble(target, rs, stats, progress, jobs)
        except BaseException as exc:
            entry.update(state="failed", reason=_failure_reason(exc), finished_at=time.time())
            try:
                rs.write_entry(entry)
            finally:
                _cleanup_tmp(rs)
            raise
        entry.update(state="ready", published_at=time.time(), **summary)
        entry.pop("pid", None)
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
        coverage=entry.get("coverage", {}),
        seconds=seconds,
        content_id=entry.get("content_id", ""),
        stats=stats,
    )


def _inventory(target: _Target) -> tuple[list[gitrepo.InventoryEntry], dict[str, bytes], bool]:
    """The snapshot's inventory; dirty contents are read and checked against the state."""
    listed, complete = gitrepo.commit_inventory(target.repo, target.commit)
    entries = {e.path: e for e in listed}
    contents: dict[str, bytes] = {}
    if target.state and target.state.dirty:
        root = gitrepo.workdir(target.repo)
        for path, blob in target.state.dirty_paths:
            if blob is None:
                entries.pop(path, None)
                continue
            try:
                now_blob, data, mode = gitrepo.hash_worktree_file(root / path)
            except OSError:
                now_blob, data, mode = None, None, 0
            if now_blob != blob:
                raise CitegraphError(f"{path}: changed while the snapshot was being built",
                                     "run citegraph index again", code=1, retryable=True)
            entries[path] = gitrepo.InventoryEntry(path, blob, mode, dirty=True)
            if data is not None:
                contents[blob] = data
    return sorted(entries.values(), key=lambda e: e.path), contents, complete


@dataclass
class _FileRow:
    entry: gitrepo.InventoryEntry
    language: str | None
    status: str = ""
    reason: str | None = None
    content_hash: str | None = None
    size: int | None = None
    facts: FileFacts | None = None


def _classify(rows: list[_FileRow], target: _Target, contents: dict[str, bytes]) -> None:
    """Decide path-level skips (no content needed) and sizes."""
    odb = target.repo.odb
    cap = target.config.max_file_bytes
    for r in rows:
        e = r.entry
        if e.mode == gitrepo.MODE_SYMLINK:
            r.status, r.reason = "skipped", "symlink"
        elif e.mode == gitrepo.MODE_GITLINK:
            r.status, r.reason = "skipped", "submodule"
        elif target.config.excluded(e.path):
            r.status, r.reason = "skipped", "excluded"
        else:
            if e.blob_id in contents:
                r.size = len(contents[e.blob_id])
            else:
                try:
                    r.size = int(odb.read_header(e.blob_id)[1])
                except (KeyError, ValueError, pygit2.GitError):
                    r.status, r.reason = "skipped", "missing-blob"
                    continue
            if r.size > cap:
                r.status, r.reason = "skipped", "too-large"


def _open_facts(rs: RepoStore) -> duckdb.DuckDBPyConnection:
    try:
        con = duckdb.connect(str(rs.facts_path))
        con.execute(FACTS_DDL)
    except duckdb.Error:
        # The facts cache is only a cache: a corrupt one is discarded and rebuilt.
        rs.facts_path.unlink(missing_ok=True)
        Path(str(rs.facts_path) + ".wal").unlink(missing_ok=True)
        con = duckdb.connect(str(rs.facts_path))
        con.execute(FACTS_DDL)
    rows = con.execute("SELECT value FROM meta WHERE key='extractor_version'").fetchall()
    row = rows[0] if rows else None
    if row is None or row[0] != EXTRACTOR_VERSION:
        con.execute("DELETE FROM blob_files; DELETE FROM blob_symbols; DELETE FROM blob_edges;")
        con.execute("INSERT OR REPLACE INTO meta VALUES ('extractor_version', ?)", [EXTRACTOR_VERSION])
    return con


def _pick_parent(rs: RepoStore, target: _Target) -> str | None:
    """The most recent ready snapshot with the same extractor and config, if any."""
    best = None
    for e in rs.entries():
        if (e["state"] == "ready" and e.get("extractor_version") == EXTRACTOR_VERSION
                and e.get("config") == target.config.fingerprint()
                and e.get("schema_version") == SNAPSHOT_SCHEMA_VERSION):
            key = (e.get("commit") == target.commit, e.get("published_at", 0))
            if best is None or key > best[0]:
                best = (key, e["snapshot_id"])
    return best[1] if best else None


def _content_id(rows: list[_FileRow]) -> str:
    h = blake3.blake3()
    h.update(f"{EXTRACTOR_VERSION}\0".encode())
    for r in rows:
        e = r.entry
        h.update(f"{e.path}\0{e.blob_id}\0{r.language}\0{r.status}\0{r.reason}\0{e.mode}\0{e.dirty}\n"
                 .encode("utf-8", "surrogateescape"))
    return h.hexdigest(16)


def _assemble(target: _Target, rs: RepoStore, stats: BuildStats, progress: ProgressFn | None,
              jobs: int | None) -> dict[str, Any]:
    _checkpoint("inventory", stats)
    inventory, contents, inventory_complete = _inventory(target)
    rows = [_FileRow(e, language_for_path(e.path)) for e in inventory]
    _classify(rows, target, contents)
    parent_id = _pick_parent(rs, target)

    tmp = rs.root / "tmp" / f"{target.snapshot_id}.{os.getpid()}.duckdb"
    tmp.unlink(missing_ok=True)
    out = duckdb.connect(str(tmp))
    facts = _open_facts(rs)
    try:
        out.execute(SNAPSHOT_DDL)
        reuse: set[str] = set()
        parent_files: dict[str, tuple] = {}
        if parent_id:
            ppath = rs.snapshot_path(parent_id)
            out.execute(f"ATTACH '{ppath}' AS parent (READ_ONLY)")
            for path, blob, lang, status, reason, chash, size in out.execute(
                "SELECT path, blob_id, language, status, reason, content_hash, size FROM parent.files"
            ).fetchall():
                parent_files[path] = (blob, lang, status, reason, chash, size)
        # Decide per file: reuse the parent's rows, take cached facts, or extract.
        need: list[_FileRow] = []
        for r in rows:
            if r.status:
                continue
            p = parent_files.get(r.entry.path)
            if p and p[0] == r.entry.blob_id and p[1] == r.language and p[2]:
                r.status, r.reason, r.content_hash = p[2], p[3], p[4]
                reuse.add(r.entry.path)
            else:
                need.append(r)
        stats.copied_files = len(reuse)
        _checkpoint("extract", stats)
        _fill_facts(need, target, contents, facts, stats, progress, jobs, len(rows))
        _checkpoint("write", stats)
        _write_rows(out, rows, reuse, parent_id is not None, contents)
        coverage = _coverage(rows)
        content_id = _content_id(rows)
        n_symbols = out.execute("SELECT count(*) FROM symbols").fetchall()[0][0]
        out.execute(SNAPSHOT_INDEXES)
        meta = {
            "snapshot_id": target.snapshot_id, "repository_id": target.identity.repository_id,
            "commit": target.commit,
            "dirty_fingerprint": (target.state.dirty_fingerprint if target.state else None) or "",
            "extractor_version": EXTRACTOR_VERSION, "schema_version": str(SNAPSHOT_SCHEMA_VERSION),
            "content_id": content_id, "inventory_complete": "true" if inventory_complete else "false",
        }
        out.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
        if parent_id:
            out.execute("DETACH parent")
        out.execute("CHECKPOINT")
    finally:
        out.close()
        facts.close()
    _checkpoint("publish", stats)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, rs.snapshot_path(target.snapshot_id))
    dir_fd = os.open(rs.root / "snapshots", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return {"files": len(rows), "symbols": int(n_symbols), "coverage": coverage,
            "content_id": content_id, "parent": parent_id, "inventory_complete": inventory_complete}


def _coverage(rows: list[_FileRow]) -> dict[str, dict[str, int]]:
    cov: dict[str, dict[str, int]] = {}
    for r in rows:
        lang = r.language or "other"
        c = cov.setdefault(lang, {"indexed": 0, "partial": 0, "skipped": 0})
        c[r.status] = c.get(r.status, 0) + 1
    return dict(sorted(cov.items()))


def _fill_facts(need: list[_FileRow], target: _Target, contents: dict[str, bytes],
                facts: duckdb.DuckDBPyConnection, stats: BuildStats, progress: ProgressFn | None,
                jobs: int | None, total: int) -> None:
    """Give every row in ``need`` its status and facts: from the cache or by extracting."""
    if not need:
        if progress:
            progress(total, total)
        return
    keys = sorted({(r.entry.blob_id, r.language or "") for r in need})
    cached = _load_cached(facts, keys)
    stats.cached_blobs = len(cached)
    todo = [k for k in keys if k not in cached]
    timeout = target.config.parse_timeout_s
    fresh: dict[tuple[str, str], tuple[BlobInfo | None, FileFacts]] = {}
    done = total - len(need)
    if progress:
        progress(done, total)

    def absorb(results: Iterable[tuple[str, str, BlobInfo | None, FileFacts]]) -> None:
        nonlocal done
        batch = []
        for blob, lang, info, ff in results:
            fresh[(blob, lang)] = (info, ff)
            batch.append((blob, lang, info, ff))
            stats.extracted_blobs += 1
            done += 1
        _store_facts(facts, batch)
        if progress:
            progress(min(done, total), total)

    in_odb = [k for k in todo if k[0] not in contents]
    local = [k for k in todo if k[0] in contents]
    for blob, lang in local:
        info, ff = facts_for_blob(lang or None, contents[blob], timeout)
        absorb([(blob, lang, info, ff)])
    workers = jobs if jobs is not None else min(2, os.cpu_count() or 1)
    if workers > 1 and len(in_odb) >= POOL_THRESHOLD:
        chunks = [[(b, lang, timeout) for b, lang in in_odb[i:i + 64]] for i in range(0, len(in_odb), 64)]
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init,
                                 initargs=(target.repo.path,)) as pool:
            for res in pool.map(_extract_batch, chunks):
                absorb(res)
    else:
        for i in range(0, len(in_odb), 64):
            absorb([_extract_one(target.repo, b, lang, timeout) for b, lang in in_odb[i:i + 64]])

    for r in need:
        key = (r.entry.blob_id, r.language or "")
        info, ff = fresh[key] if key in fresh else cached[key]
        r.status, r.reason, r.facts = ff.status, ff.reason, ff
        r.content_hash = info.content_hash if info else None


def _load_cached(facts: duckdb.DuckDBPyConnection, keys: list[tuple[str, str]]
                 ) -> dict[tuple[str, str], tuple[BlobInfo | None, FileFacts]]:
    if not keys:
        return {}
    want = pa.table({"blob_id": [k[0] for k in keys], "language": [k[1] for k in keys]})
    facts.register("want", want)
    try:
        out: dict[tuple[str, str], tuple[BlobInfo | None, FileFacts]] = {}
        for blob, lang, status, reason, chash, size in facts.execute(
            "SELECT f.blob_id, f.language, status, reason, content_hash, size FROM blob_files f "
            "JOIN want w USING (blob_id, language)").fetchall():
            info = BlobInfo(chash, size) if chash is not None else None
            out[(blob, lang)] = (info, FileFacts(status=status, reason=reason))
        if not out:
            return out
        for row in facts.execute(
            "SELECT s.* FROM blob_symbols s JOIN want w USING (blob_id, language) ORDER BY blob_id, language, idx"
        ).fetchall():
            ff = out[(row[0], row[1])][1]
            ff.symbols.append(SymbolFact(*row[3:]))
        for row in facts.execute(
            "SELECT e.* FROM blob_edges e JOIN want w USING (blob_id, language)"
        ).fetchall():
            out[(row[0], row[1])][1].edges.append(EdgeFact(*row[2:]))
        for _info, ff in out.values():
            ff.edges.sort(key=lambda e: (e.line, e.source, e.kind, e.target))
        return out
    finally:
        facts.unregister("want")


def _store_facts(facts: duckdb.DuckDBPyConnection,
                 batch: list[tuple[str, str, BlobInfo | None, FileFacts]]) -> None:
    if not batch:
        return
    cacheable = [b for b in batch if b[3].reason not in ("parse-timeout", "missing-blob")]
    if not cacheable:
        return
    files = {c: [] for c in ("blob_id", "language", "status", "reason", "content_hash", "size")}
    syms: dict[str, list] = {c: [] for c in ("blob_id", "language", "idx", "kind", "name", "qualified_name",
                                             "ordinal", "start_byte", "end_byte", "start_line", "end_line",
                                             "parent", "fragment_hash", "body_hash")}
    edges: dict[str, list] = {c: [] for c in ("blob_id", "language", "source", "kind", "target", "line")}
    for blob, lang, info, ff in cacheable:
        for c, v in zip(files, (blob, lang, ff.status, ff.reason, info.content_hash if info else None,
                                info.size if info else None), strict=True):
            files[c].append(v)
        for i, s in enumerate(ff.symbols):
            for c, v in zip(syms, (blob, lang, i, s.kind, s.name, s.qualified_name, s.ordinal, s.start_byte,
                                   s.end_byte, s.start_line, s.end_line, s.parent, s.fragment_hash,
                                   s.body_hash), strict=True):
                syms[c].append(v)
        for e in ff.edges:
            for c, v in zip(edges, (blob, lang, e.source, e.kind, e.target, e.line), strict=True):
                edges[c].append(v)
    _bulk(facts, "blob_files", files)
    _bulk(facts, "blob_symbols", syms)
    _bulk(facts, "blob_edges", edges)


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


def _write_rows(out: duckdb.DuckDBPyConnection, rows: list[_FileRow], reuse: set[str], has_parent: bool,
                contents: dict[str, bytes]) -> None:
    for chunk in _chunks(rows, BATCH_FILES):
        fcols: dict[str, list] = {c: [] for c in FILE_COLUMNS}
        scols: dict[str, list] = {c: [] for c in SYMBOL_COLUMNS}
        ecols: dict[str, list] = {c: [] for c in EDGE_COLUMNS}
        for r in chunk:
            e = r.entry
            for c, v in zip(FILE_COLUMNS, (e.path, e.blob_id, r.content_hash, r.language, r.status,
                                           r.reason, r.size, e.mode, e.dirty), strict=True):
                fcols[c].append(v)
            if e.path in reuse or r.facts is None or not r.language:
                continue
            handles = [symbol_handle(e.path, r.language, s.kind, s.qualified_name, s.ordinal)
                       for s in r.facts.symbols]
            for s, h in zip(r.facts.symbols, handles, strict=True):
                vals = (h, e.path, r.language, s.kind, s.name, s.qualified_name, s.ordinal, s.start_byte,
                        s.end_byte, s.start_line, s.end_line, handles[s.parent] if s.parent >= 0 else None,
                        s.fragment_hash, s.body_hash, e.blob_id)
                for c, v in zip(SYMBOL_COLUMNS, vals, strict=True):
                    scols[c].append(v)
            for ed in r.facts.edges:
                vals = (e.path, handles[ed.source] if ed.source >= 0 else None, ed.kind, ed.target, ed.line,
                        e.blob_id)
                for c, v in zip(EDGE_COLUMNS, vals, strict=True):
                    ecols[c].append(v)
        _bulk(out, "files", fcols)
        _bulk(out, "symbols", scols)
        _bulk(out, "edges", ecols)
    if has_parent and reuse:
        out.register("_reuse", pa.table({"path": sorted(reuse)}))
        out.execute("INSERT INTO symbols SELECT s.* FROM parent.symbols s SEMI JOIN _reuse r ON s.path = r.path")
        out.execute("INSERT INTO edges SELECT s.* FROM parent.edges s SEMI JOIN _reuse r ON s.path = r.path")
        out.unregister("_reuse")
    dirty_blobs = sorted({r.entry.blob_id for r in rows if r.entry.dirty and r.entry.blob_id in contents})
    if dirty_blobs:
        _bulk(out, "contents", {"blob_id": dirty_blobs, "data": [contents[b] for b in dirty_blobs]})


def _chunks(items: list, n: int) -> Iterator[list]:
    for i in range(0, len(items), n):
        yield items[i:i + n]
