"""Which citations a diff between two commits can affect (SPEC §20, ``citegraph check``).

A citation's verdict against a snapshot (decisions.py, §6.1–§6.4) reads:
- the file and the symbols at its own path (exact / changed at the path or handle);
- where its path or handle is gone: the files holding its content (by blob), the symbols
  anywhere with its fragment hash, body hash or (language, kind, qualified name), the files
  added since its capture commit (spans), and the coverage of its language — non-indexed
  files in which the cited name occurs;
- the snapshot's inventory completeness, and the configuration (what is excluded).

Two commit snapshots of one repository, built by one extractor under one configuration,
differ only in the rows of the paths their tree diff names (facts are keyed by blob). So a
citation can change verdict between base and head only if one of the rules of
``scope_reason`` holds: those citations are validated at both sides; every other one is
*untouched* (its verdict at head is its verdict at base) and is not validated at all.
Over-approximating costs only time (both sides give the same verdict and nothing is
reported); missing a case would hide a finding, so each rule errs towards "affected".

Pure parts: ``touched_keys`` and ``scope_reason``, ``head_region`` and ``change_kind``. I/O
edges: ``tree_changes`` (one libgit2 tree diff: O(diff)), ``side_rows`` (the changed paths'
rows of one snapshot), ``names_in_blobs`` and ``line_hunks`` (bounded git reads).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

import pyarrow as pa
import pygit2

from citegraph.graph.snapshot_reader import Snapshot
from citegraph.indexer.config import CONFIG_FILE
from citegraph.indexer.paths import fs_path, stored_path
from citegraph.validator.model import Observation, Receipt

MAX_NAME_SEARCH_BYTES = 64 << 20  # uncovered changed files searched for cited names, in all


class ScopeReason(StrEnum):
    """Why a citation is re-validated by ``check`` (shown in its JSON as ``scope``)."""

    PATH_CHANGED = "path-changed"  # its path was added, modified or deleted
    CONTENT_ELSEWHERE = "content-elsewhere"  # a changed path held or holds its file's blob
    RELOCATION_CANDIDATE = "relocation-candidate"  # a changed path held or holds its fragment
    SUCCESSOR_CANDIDATE = "successor-candidate"  # ... its qualified name or body hash
    COVERAGE_CHANGED = "coverage-changed"  # a changed non-indexed file of its language holds its name
    ADDED_FILES = "added-files"  # its span's file is gone: files added since capture are evidence
    CONFIGURATION_CHANGED = "configuration-changed"  # .citegraph.toml changed: every citation
    INVENTORY_CHANGED = "inventory-changed"  # one side's inventory is incomplete: every citation
    DEPENDENCY_CHANGED = "dependency-changed"  # a recorded dependency's path or fragment changed (SPEC §21)


class PathChange(NamedTuple):
    path: str  # stored (escaped) path
    status: str  # added | deleted | modified
    old_blob: str | None
    new_blob: str | None


class SideRows(NamedTuple):
    """One snapshot's rows for the changed paths."""

    files: list[tuple[str, str, str | None, str]]  # (path, blob, language, status)
    symbols: list[tuple[str, str, str, str, str]]  # (fragment, body, language, kind, qualified name)
    inventory_complete: bool


@dataclass(frozen=True)
class Touched:
    """Everything of the diff a citation's evidence could depend on (plain data)."""

    paths: frozenset[str]
    blobs: frozenset[str]
    fragments: frozenset[str]
    bodies: frozenset[str]
    qnames: frozenset[tuple[str, str, str]]
    uncovered_names: frozenset[tuple[str, str]]  # (language, cited name) found in a changed non-indexed file
    gone_span_paths: frozenset[str]  # cited span paths that are in neither snapshot
    # capture commits at which some changed path did not exist (or that cannot be read): a
    # gone span's evidence is the files added since its capture, and only a changed path
    # that is one of them (on either side) can move it (``new_since_capture``)
    captures_before_change: frozenset[str]
    any_change: bool
    everything: ScopeReason | None  # every citation is affected


def touched_keys(changes: list[PathChange], base: SideRows, head: SideRows, *,
                 uncovered_names: Iterable[tuple[str, str]] = (),
                 gone_span_paths: Iterable[str] = (),
                 captures_before_change: Iterable[str] = ()) -> Touched:
    """The keys of the diff (pure). ``uncovered_names``, ``gone_span_paths`` and
    ``captures_before_change`` are facts found at the edge (``names_in_blobs``; the cited
    span paths absent from the head; ``new_since_capture``)."""
    everything = None
    if any(c.path == CONFIG_FILE for c in changes):
        everything = ScopeReason.CONFIGURATION_CHANGED
    elif not (base.inventory_complete and head.inventory_complete):
        everything = ScopeReason.INVENTORY_CHANGED
    rows = base.symbols + head.symbols
    blobs = {b for c in changes for b in (c.old_blob, c.new_blob) if b}
    blobs.update(f[1] for f in base.files + head.files)
    return Touched(
        paths=frozenset(c.path for c in changes), blobs=frozenset(blobs),
        fragments=frozenset(s[0] for s in rows), bodies=frozenset(s[1] for s in rows),
        qnames=frozenset((s[2], s[3], s[4]) for s in rows),
        uncovered_names=frozenset(uncovered_names), gone_span_paths=frozenset(gone_span_paths),
        captures_before_change=frozenset(captures_before_change), any_change=bool(changes), everything=everything)


def uncovered_blobs(base: SideRows, head: SideRows) -> dict[str, set[str]]:
    """{language: blob ids} of changed files that are not ``indexed`` on one side: the files
    a coverage judgement (§6.4) could read differently at base and at head."""
    out: dict[str, set[str]] = {}
    for _path, blob, language, status in base.files + head.files:
        if language and status != "indexed":
            out.setdefault(language, set()).add(blob)
    return out


def dependency_touched(r: Receipt, t: Touched) -> bool:
    """Can the diff add a ``dependency-changed`` advisory to this citation? When one of its
    recorded dependencies sits in a changed path, or its recorded fragment is among the
    changed rows. Pure."""
    return any(d.get("path") in t.paths or d.get("fragment_hash") in t.fragments for d in r.dependencies)


def scope_reason(r: Receipt, t: Touched) -> ScopeReason | None:
    """Why the diff can change this citation's verdict, or None (untouched). Pure."""
    if t.everything is not None:
        return t.everything
    if r.path in t.paths:
        return ScopeReason.PATH_CHANGED  # the file (and every symbol) at its path
    if r.kind != "symbol":
        if r.blob_id in t.blobs:
            return ScopeReason.CONTENT_ELSEWHERE  # "a file anywhere has the cited content" changed
        if r.kind == "span" and r.path in t.gone_span_paths and r.commit in t.captures_before_change:
            # Its file is gone: its evidence is the files added since its capture (their
            # bytes, their number and size against the search bounds). Both sides hold the
            # same such files but for the changed paths, so only a changed path that did
            # not exist at its capture can move it.
            return ScopeReason.ADDED_FILES
        return None
    # Its path is unchanged: if the handle is there, it decides (on both sides alike); if it
    # is gone, only matches and coverage among the changed paths can differ.
    if r.fragment_hash in t.fragments:
        return ScopeReason.RELOCATION_CANDIDATE
    if r.body_hash in t.bodies or (r.language, r.symbol_kind, r.qualified_name) in t.qnames:
        return ScopeReason.SUCCESSOR_CANDIDATE
    if (r.language, r.name) in t.uncovered_names:
        return ScopeReason.COVERAGE_CHANGED
    return None


def change_kind(base: Observation, head: Observation) -> str:
    """``finding`` (the diff changed what the citation's verdict says), ``resolved`` (it
    became exact) or ``unchanged`` (same outcome, reason and observed place). Pure."""
    where_b = (base.observed.path, base.observed.handle) if base.observed else None
    where_h = (head.observed.path, head.observed.handle) if head.observed else None
    if base.outcome == head.outcome and base.reason == head.reason and (
            head.outcome == "exact" or where_b == where_h):
        return "unchanged"
    if head.outcome == "exact":
        return "resolved"
    return "finding"


# --- I/O edges ------------------------------------------------------------------------------


def tree_changes(repo: pygit2.Repository, base_commit: str, head_commit: str) -> list[PathChange]:
    """The paths whose entry differs between the two commits' trees (no rename detection: a
    move is a deletion and an addition, as the snapshots see it). libgit2 skips identical
    subtrees, so the cost is the diff's, not the repository's."""
    diff = repo.diff(repo[base_commit].peel(pygit2.Tree), repo[head_commit].peel(pygit2.Tree))
    out = []
    for d in diff.deltas:
        if d.status == pygit2.GIT_DELTA_ADDED:
            out.append(PathChange(stored_path(d.new_file.path), "added", None, str(d.new_file.id)))
        elif d.status == pygit2.GIT_DELTA_DELETED:
            out.append(PathChange(stored_path(d.old_file.path), "deleted", str(d.old_file.id), None))
        else:  # modified, type change (file <-> symlink), mode change
            out.append(PathChange(stored_path(d.new_file.path), "modified", str(d.old_file.id), str(d.new_file.id)))
    return sorted(out)


def side_rows(snap: Snapshot, paths: list[str]) -> SideRows:
    """One snapshot's file and symbol rows at ``paths`` (a semi-join: O(diff))."""
    meta = dict(snap.query("SELECT key, value FROM meta"))
    complete = meta.get("inventory_complete", "true") == "true"
    if not paths:
        return SideRows([], [], complete)
    snap.con.register("_changed", pa.table({"p": paths}))
    try:
        files = snap.con.execute("SELECT f.path, f.blob_id, f.language, f.status FROM files f "
                                 "SEMI JOIN _changed c ON f.path = c.p ORDER BY f.path").fetchall()
        symbols = snap.con.execute("SELECT s.fragment_hash, s.body_hash, s.language, s.kind, s.qualified_name "
                                   "FROM symbols s SEMI JOIN _changed c ON s.path = c.p").fetchall()
    finally:
        snap.con.unregister("_changed")
    return SideRows(files, symbols, complete)


def new_since_capture(repo: pygit2.Repository, captures: Iterable[str], changes: list[PathChange]) -> set[str]:
    """The capture commits (of gone span citations) at which one of the changed paths was
    not a file: there the diff changes a file "added since capture" (span evidence,
    validator/evidence.py; a file that replaced a directory is added too). A capture commit
    that cannot be read counts as one: never too few. One tree lookup per (capture, changed
    path) — O(diff)."""
    if not changes:
        return set()
    out: set[str] = set()
    for commit in captures:
        try:
            tree = repo[commit].peel(pygit2.Tree)
            if not all(_is_file(tree, c.path) for c in changes):
                out.add(commit)
        except (KeyError, ValueError, TypeError, pygit2.GitError):
            out.add(commit)
    return out


def _is_file(tree: pygit2.Tree, path: str) -> bool:
    try:
        return tree[fs_path(path)].type_str == "blob"
    except KeyError:
        return False


def present_paths(snap: Snapshot, paths: list[str]) -> set[str]:
    """The ``paths`` the snapshot's inventory holds."""
    if not paths:
        return set()
    snap.con.register("_asked", pa.table({"p": paths}))
    try:
        return {r[0] for r in snap.con.execute("SELECT f.path FROM files f SEMI JOIN _asked a ON f.path = a.p")
                .fetchall()}
    finally:
        snap.con.unregister("_asked")


def names_in_blobs(repo: pygit2.Repository, blobs: dict[str, set[str]],
                   names: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (language, name) pairs whose name occurs in one of ``blobs[language]`` (an exact
    byte search, as §6.4's coverage rule does). A blob that cannot be read, or a search
    beyond ``MAX_NAME_SEARCH_BYTES``, counts as holding every name: never too few."""
    by_lang: dict[str, list[str]] = {}
    for lang, name in names:
        if lang in blobs and name:
            by_lang.setdefault(lang, []).append(name)
    out: set[tuple[str, str]] = set()
    budget = MAX_NAME_SEARCH_BYTES
    for lang, wanted in by_lang.items():
        datas = []
        for b in sorted(blobs[lang]):
            try:
                data = repo.odb.read(b)[1]
            except (KeyError, ValueError, pygit2.GitError):
                data = None
            budget -= len(data) if data is not None else 0
            if data is None or budget < 0:
                out.update((lang, n) for n in wanted)
                break
            datas.append(data)
        else:
            for n in wanted:
                needle = n.encode("utf-8", "surrogateescape")
                if any(needle in d for d in datas):
                    out.add((lang, n))
    return out


class Hunk(NamedTuple):
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int


def line_hunks(repo: pygit2.Repository, old_blob: str | None, new_blob: str | None) -> list[Hunk]:
    """The hunks (no context lines) of one file between two blobs; [] if unreadable."""
    try:
        old = repo[old_blob] if old_blob else None
        new = repo[new_blob] if new_blob else None
        if old is None:
            return [Hunk(0, 0, 1, new.data.count(b"\n") or 1)] if new is not None else []
        patch = old.diff(new, context_lines=0) if new is not None else old.diff(None, context_lines=0)
    except (KeyError, ValueError, pygit2.GitError, AttributeError):
        return []
    return [Hunk(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in patch.hunks]


class LineLengths:
    """Lines of files at commits, read once each: what a location needs to stay inside its
    file and to end at the end of its last line."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self._trees: dict[str, pygit2.Tree] = {}
        self._cache: dict[tuple[str, str], list[bytes]] = {}

    def lines(self, commit: str, path: str) -> list[bytes]:
        key = (commit, path)
        if key not in self._cache:
            try:
                if commit not in self._trees:
                    self._trees[commit] = self.repo[commit].peel(pygit2.Tree)
                data = (self._trees[commit] / fs_path(path)).data
            except (KeyError, ValueError, TypeError, pygit2.GitError, AttributeError):
                data = b""
            self._cache[key] = data.splitlines()
        return self._cache[key]

    def length(self, commit: str, path: str, line: int) -> int:
        """Characters of 1-based ``line`` (without its line break); 0 if there is none."""
        lines = self.lines(commit, path)
        return len(lines[line - 1].rstrip(b"\r").decode("utf-8", "replace")) if 1 <= line <= len(lines) else 0


def head_region(hunks: list[Hunk], old_start: int | None, old_end: int | None,
                head_start: int | None = None, head_end: int | None = None) -> tuple[int, int] | None:
    """The head-side lines of the first change that touches the cited base lines
    ``old_start..old_end`` (all of the file when None), clipped to ``head_start..head_end``
    (where the cited symbol is now, if known) — lines of one hunk only, so that a pull
    request shows them as changed. A change that only removed lines points at the line
    after the removal. None when no hunk touches them. Pure."""
    for h in hunks:
        if old_start is not None and old_end is not None:
            if h.old_lines == 0:  # an insertion after line h.old_start
                touches = old_start <= h.old_start < old_end
            else:
                touches = h.old_start <= old_end and h.old_start + h.old_lines - 1 >= old_start
            if not touches:
                continue
        if h.new_lines == 0:
            line = max(1, h.new_start + 1)
            start, end = line, line
        else:
            start, end = h.new_start, h.new_start + h.new_lines - 1
        if head_start is not None and head_end is not None:
            start, end = max(start, head_start), min(end, head_end)
            if start > end:
                start = end = min(max(start, head_start), head_end)
        return max(1, start), max(1, end)
    return None
