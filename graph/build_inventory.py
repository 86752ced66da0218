"""The rows a snapshot's ``files`` table will hold: the inventory (commit tree plus the
dirty worktree), the path-level skips decided without reading content, and the
order-independent digest (content id) of an inventory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import blake3
import pygit2

from citegraph.graph import coverage_summary
from citegraph.graph.build_target import BuildTarget
from citegraph.graph.schema import FILE_COLUMNS
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION
from citegraph.indexer.git_filters import GitFilters
from citegraph.indexer.paths import fs_path, is_undecodable
from citegraph.indexer.worktree import MODE_NOT_REGULAR, WorktreeReader

# Skips that a later build must redo (the blob may be there next time, the machine faster).
TRANSIENT_REASONS = ("parse-timeout", "missing-blob")
# Skips ``classify`` decides from the path or mode, never from a blob's content: such rows
# never enter the blob-keyed facts cache (the same blob elsewhere may well be indexed).
PATH_REASONS = ("symlink", "not-regular", "undecodable-path", "submodule", "excluded")


@dataclass
class FileRow:
    entry: gitrepo.InventoryEntry
    language: str | None
    status: str = ""
    reason: str | None = None
    content_hash: str | None = None
    size: int | None = None


def dirty_entries(target: BuildTarget, paths: set[str] | None = None
                  ) -> tuple[dict[str, gitrepo.InventoryEntry | None], dict[str, bytes]]:
    """The worktree's dirty paths (None = deleted), read again through the worktree
    reader (bytes kept up to the size cap) and checked against the state."""
    out: dict[str, gitrepo.InventoryEntry | None] = {}
    contents: dict[str, bytes] = {}
    if not (target.state and target.state.dirty):
        return out, contents
    from_index = dict(target.state.from_index)
    with WorktreeReader(gitrepo.workdir(target.repo), keep_bytes=target.config.max_file_bytes,
                        filters=GitFilters(target.repo)) as reader:
        for path, blob in target.state.dirty_paths:
            if paths is not None and path not in paths:
                continue
            if blob is None:
                out[path] = None
                continue
            if path in from_index:  # outside the sparse set: the index's blob (indexer.sparse)
                data, _missing = gitrepo.index_blob_content(target.repo, blob, target.config.max_file_bytes)
                out[path] = gitrepo.InventoryEntry(path, blob, from_index[path], dirty=True)
                if data is not None:
                    contents[blob] = data
                continue
            found = reader.read(fs_path(path))
            if found.blob_id != blob:
                raise CitegraphError(f"{path}: changed while the snapshot was being built",
                                     "run citegraph index again", code=1, retryable=True)
            out[path] = gitrepo.InventoryEntry(path, blob, found.mode, dirty=True)
            if found.data is not None:
                contents[blob] = found.data
    return out, contents


def inventory(target: BuildTarget) -> tuple[list[gitrepo.InventoryEntry], dict[str, bytes], bool]:
    """The snapshot's full inventory: the commit's tree plus the dirty worktree."""
    listed, complete = gitrepo.commit_inventory(target.repo, target.commit)
    entries: dict[str, gitrepo.InventoryEntry] = {e.path: e for e in listed}
    dirty, contents = dirty_entries(target)
    for path, e in dirty.items():
        if e is None:
            entries.pop(path, None)
        else:
            entries[path] = e
    return sorted(entries.values(), key=lambda e: e.path), contents, complete


def classify(rows: list[FileRow], target: BuildTarget, contents: dict[str, bytes]) -> None:
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
            missing = target.state is not None and e.path in dict(target.state.from_index) \
                and gitrepo.index_blob_content(target.repo, e.blob_id, 0)[1]
            r.status, r.reason = "skipped", "missing-blob" if missing else "too-large"


def file_columns(rows: list[FileRow]) -> dict[str, list]:
    """The ``files`` table's columns for ``rows`` (graph/schema.py FILES order)."""
    cols: dict[str, list] = {c: [] for c in FILE_COLUMNS}
    for r in rows:
        e = r.entry
        for c, v in zip(FILE_COLUMNS, (e.path, e.blob_id, r.content_hash, r.language, r.status,
                                       r.reason, r.size, e.mode, e.dirty), strict=True):
            cols[c].append(v)
    return cols


MOD = 1 << 128


def row_digest(path: str, blob: str, language: str | None, status: str, reason: str | None, mode: int,
               dirty: bool) -> int:
    text = f"{EXTRACTOR_VERSION}\0{path}\0{blob}\0{language}\0{status}\0{reason}\0{mode}\0{bool(dirty)}"
    return int(blake3.blake3(text.encode("utf-8", "surrogateescape")).hexdigest(16), 16)


def row_sum(rows: list[FileRow]) -> int:
    """Order-independent digest of an inventory (sum mod 2^128): a delta updates it by
    subtracting the base rows it overrides and adding its own."""
    total = 0
    for r in rows:
        e = r.entry
        total += row_digest(e.path, e.blob_id, r.language, r.status, r.reason, e.mode, e.dirty)
    return total % MOD


def content_id(total: int) -> str:
    return f"{total % MOD:032x}"


def coverage(rows: list[FileRow]) -> dict[str, dict[str, Any]]:
    return coverage_summary.summarize((r.language, r.status, r.reason) for r in rows)


def merge_coverage(base: dict[str, dict[str, Any]], hidden: list[tuple], own: dict[str, dict[str, Any]]
                   ) -> dict[str, dict[str, Any]]:
    """The base's coverage minus the hidden base rows ``(path, blob, language, status,
    reason, …)`` plus the delta's own."""
    return coverage_summary.merge(base, [(h[2], h[3], h[4]) for h in hidden], own)


def in_tree(repo: pygit2.Repository, commit: str, paths: list[str]) -> list[str]:
    """Those of ``paths`` the commit's tree holds (a lookup each, no listing)."""
    if not paths:
        return []
    tree = repo[commit].peel(pygit2.Tree)
    found = []
    for path in paths:
        try:
            tree[fs_path(path)]
        except KeyError:
            continue
        found.append(path)
    return found
