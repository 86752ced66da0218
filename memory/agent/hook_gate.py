"""The pre-edit hook's quick answer (issue 22): silence for a file no memory can cite,
decided before DuckDB, pyarrow or the build target are imported — a hook runs before every
edit an agent makes, and most files are cited by nothing.

``pre_edit`` (memory/agent/hooks.py) looks the file up as ``citegraph cited FILE`` does: in
the memory store's code index, by ("path", its stored path) and ("blob", its blob now —
the worktree's blob when git says the file is dirty, else HEAD's; an index blob for a
staged path outside a sparse set), for the repository and its former ids. It is silent
when nothing is found. ``certainly_silent`` proves the same silence from the code-keys
sidecar (memory/lifecycle/keys_sidecar.py: every path and blob key of the code index, of
every repository and status — a superset): the path is not among them, and none of the
blobs the full path could take for the file is either. The candidates are computed with
the code the full path uses (``WorktreeReader`` with git's clean conversion, HEAD's tree,
the index entry), so a repository with ``text``/``eol`` attributes or ``core.autocrlf``
hashes here exactly as there; whether git calls the file dirty does not matter, since
every candidate is checked.

Anything uncertain answers False (take the full path): no trustworthy sidecar, a path that
is cited, a path a ref would not spell as itself, an unborn HEAD, an object format other
than SHA-1, an index libgit2 cannot read (a sparse index), any error. docs/agents.md,
"Silence without the store".
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pygit2

from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.git_filters import GitFilters
from citegraph.indexer.paths import fs_path, stored_path
from citegraph.indexer.worktree import WorktreeReader
from citegraph.memory.lifecycle import keys_sidecar
from citegraph.validator.refs import check_path, parse_ref


def locate(file: str | os.PathLike[str]) -> tuple[pygit2.Repository, str, str] | None:
    """(repository, worktree root, repository-relative stored path) of ``file`` — which
    may not exist yet (a Write of a new file) — or None when it lies in no repository's
    worktree."""
    p = Path(os.path.abspath(os.fspath(file)))
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    probe = probe if probe.is_dir() else probe.parent
    try:
        repo = gitrepo.open_repository(probe)
        root = os.path.realpath(gitrepo.workdir(repo))
    except CitegraphError:
        return None
    real = os.path.realpath(p)
    try:
        rel = Path(real).relative_to(root)
    except ValueError:
        return None
    path = stored_path(rel.as_posix())
    if path in ("", ".") or path.split("/")[0] == ".git":
        return None
    try:
        check_path(path, path)
    except CitegraphError:
        return None
    return repo, root, path


def repository_path(file: str | os.PathLike[str]) -> tuple[str, str] | None:
    """(worktree root, stored path) of ``file``, or None (see ``locate``)."""
    found = locate(file)
    return None if found is None else found[1:]


def _spelled_as_itself(path: str) -> bool:
    """Would ``citegraph cited`` take ``path`` as a file ref to exactly this path? (Not a
    ``cgs_`` name, ``a::b``, ``x#L3``, ``./x`` or a URL, which it reads otherwise.)"""
    if path.startswith(("/", "./", "../")) or re.match(r"^https?://", path):
        return False
    try:
        p = parse_ref(path)
    except CitegraphError:
        return False
    return p.kind == "file" and p.path == path


def blobs_now(repo: pygit2.Repository, root: str, path: str) -> set[str] | None:
    """Every blob id the full path could take for ``path`` now: HEAD's, the index entry's,
    and the worktree file's in git's stored form; None when it cannot be told here."""
    try:
        fmt = repo.config["extensions.objectformat"]
    except KeyError:
        fmt = "sha1"
    if str(fmt).lower() != "sha1" or repo.head_is_unborn:
        return None
    fs = fs_path(path)
    out = {gitrepo.commit_tree_blob_id(repo, str(repo.head.target), path)}
    try:
        out.add(str(repo.index[fs].id))
    except KeyError:
        pass  # not in the index; any other error (an index libgit2 cannot read) goes up
    with WorktreeReader(root, filters=GitFilters(repo)) as reader:
        out.add(reader.read(fs).blob_id)
    out.discard(None)
    return out  # type: ignore[return-value]


def certainly_silent(store: str | os.PathLike[str], file: str | os.PathLike[str]) -> bool:
    """True only when ``pre_edit`` would certainly be silent for ``file``, proven from
    the memory store ``store``'s code-keys sidecar without opening the store; False when
    it cannot be told (the caller takes the full path)."""
    try:
        found = locate(file)
        if found is None:
            return True  # in no worktree: pre_edit is silent without reading the store
        repo, root, path = found
        if not _spelled_as_itself(path):
            return False
        keys = keys_sidecar.read(Path(os.path.realpath(store)))
        if keys is None or keys.has("path", path):
            return False
        blobs = blobs_now(repo, root, path)
        return blobs is not None and not any(keys.has("blob", b) for b in blobs)
    except Exception:  # noqa: BLE001 - any doubt: the full path answers (and reports)
        return False
