"""Read-side queries behind ``status``, ``symbols`` and ``find``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from citegraph.graph import coverage_summary
from citegraph.graph.current import CurrentState, ScanSource, StateSource
from citegraph.graph.ref_paths import RefPaths, from_url, normalize_path
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.graph.symbol_search import is_glob, search
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError

PUBLIC_SYMBOL_FIELDS = ("handle", "language", "kind", "name", "qualified_name", "path",
                        "start_line", "end_line")


def status(path: str | os.PathLike[str], home: Home, source: StateSource | None = None) -> dict[str, Any]:
    cur = (source or ScanSource()).read(path, home)
    snaps = []
    for e in cur.store.entries():
        snaps.append({k: e.get(k) for k in ("snapshot_id", "state", "kind", "commit", "dirty_fingerprint",
                                             "files", "symbols", "published_at", "reason")})
    coverage = (coverage_summary.join(cur.entry.get("coverage"), cur.entry.get("coverage_causes"))
                if cur.exact_current and cur.entry and cur.entry.get("coverage") is not None else None)
    partial = partial_files(cur) if coverage and any(c.get("partial") for c in coverage.values()) else []
    return {
        "repository_id": cur.identity.repository_id,
        "repository_kind": cur.identity.kind,
        "head": cur.head,
        "dirty": cur.dirty,
        "exact_current": cur.exact_current,
        "snapshot_id": cur.snapshot_id if cur.exact_current else None,
        "snapshots": snaps,
        "coverage": coverage,
        # where the partial files of the exact-current snapshot first fail to parse, so a
        # grammar gap is visible instead of a silent unknown (first PARTIAL_LISTED by path)
        "partial_files": partial,
    }


PARTIAL_LISTED = 20


def partial_files(cur: CurrentState, limit: int = PARTIAL_LISTED) -> list[dict[str, Any]]:
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        return snap.dicts(
            "SELECT f.path, f.language, min(d.error_line) AS line, f.reason AS construct FROM files f "
            "LEFT JOIN damage d ON d.path = f.path WHERE f.status = 'partial' "
            "GROUP BY f.path, f.language, f.reason ORDER BY f.path LIMIT ?", [limit])


def require_current(cur: CurrentState) -> None:
    if not cur.exact_current:
        state = cur.snapshot_state_text()
        raise CitegraphError(
            f"no exact-current snapshot for this repository state ({state})",
            "run citegraph index first", code=1, retryable=True)


def public_symbol(row: dict[str, Any]) -> dict[str, Any]:
    """A symbol as outputs show it, with ``locator``: the form to cite it by —
    ``path::Qualified.name``, with ``[N]`` (its ``ordinal``) where several definitions in
    the file share the name (overloads, a property's getter and setter), since the bare
    name is then refused or names only the implementation (issue 22)."""
    out = {k: row[k] for k in PUBLIC_SYMBOL_FIELDS}
    ordinal = int(row.get("ordinal") or 0)
    out["ordinal"] = ordinal
    out["locator"] = f"{row['path']}::{row['qualified_name']}" + (f"[{ordinal}]" if ordinal else "")
    return out


def symbols_of_file(file: Path | str, home: Home, source: StateSource | None = None,
                    cwd: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """The symbols of one file of the exact-current snapshot. ``file``: a path (absolute,
    or relative to ``cwd``), or a blob URL of the repository at ``cwd`` (graph/ref_paths.py)."""
    if isinstance(file, str) and file.startswith(("https://", "http://")):
        base = Path(cwd or os.getcwd())
        ctx = RefPaths.for_repo(gitrepo.open_repository(base), base)
        rel = from_url(file, ctx).split("#L", 1)[0]
        file = ctx.root / rel
    file = Path(file) if os.path.isabs(file) else Path(cwd or os.getcwd()) / file
    if file.is_dir() and not file.is_symlink():
        raise CitegraphError(f"{file}: is a directory, not a file",
                             "pass one file (symbols lists a file's symbols); to search a directory use "
                             "citegraph find NAME --path DIR", code=2, kind="usage")
    start = file.parent if not file.is_dir() else file
    while not start.exists() and start != start.parent:
        start = start.parent
    through_link = _through_symlink(file.parent)
    try:
        cur = (source or ScanSource()).read(start, home)
        root = Path(gitrepo.workdir(cur.repo)).resolve()
        rel = Path(os.path.realpath(file.parent)).joinpath(file.name).relative_to(root).as_posix()
    except (CitegraphError, ValueError):
        if through_link is None:
            if "cur" not in locals():
                raise
            raise CitegraphError(f"{file}: outside the repository {root}", "pass a file inside it",
                                 code=2) from None
        # A symlinked directory leads out of the worktree (docs/security.md): take the path
        # as written, in the repository that holds the link, never through the link.
        cur = (source or ScanSource()).read(through_link.parent, home)
        root = Path(os.path.abspath(gitrepo.workdir(cur.repo)))
        rel = os.path.relpath(os.path.abspath(file), root)
        if rel == ".." or rel.startswith("../"):
            raise CitegraphError(f"{file}: outside the repository {root}", "pass a file inside it",
                                 code=2) from None
        rel = Path(rel).as_posix()
    require_current(cur)
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        if snap.file(rel) is None:
            why = (f"{through_link} is a symlink: the files under a symlinked directory are not part of "
                   "the worktree (git sees them deleted)") if through_link else "check the path (is it ignored?)"
            raise CitegraphError(f"{rel}: not in the snapshot", why, code=2)
        return [public_symbol(s) for s in snap.symbols_in(rel)]


def _through_symlink(directory: Path) -> Path | None:
    """The deepest symlinked directory among ``directory`` and its ancestors, or None."""
    for d in (directory, *directory.parents):
        if d.is_symlink():
            return d
    return None


def find_symbols(repo_path: str | os.PathLike[str], home: Home, name: str, limit: int = 50,
                 source: StateSource | None = None, *, kinds: list[str] | None = None,
                 path: str | None = None, cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``find --json``: the symbols matching ``name`` (exact, qualified-suffix, prefix,
    glob, substring; ranked: graph/symbol_search.py), optionally only of ``kinds`` and
    under ``path`` (a file, directory or glob; cwd-relative, ``./`` or absolute like any
    ref path) — at most ``limit``, and ``truncated`` when more match (never a silent cut)."""
    cur = (source or ScanSource()).read(repo_path, home)
    require_current(cur)
    if path is not None and not is_glob(path):
        path = normalize_path(path, RefPaths.for_repo(cur.repo, cwd if cwd is not None else repo_path)) \
            if cur.repo.workdir else path
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        rows = [{**public_symbol(s), "match": s["match"]}
                for s in search(snap, name, kinds=kinds, path=path, limit=limit + 1)]
    return {"symbols": rows[:limit], "truncated": len(rows) > limit, "limit": limit}
