"""Sparse checkouts: the index entries git takes as matching the worktree without looking.

git marks an index entry *skip-worktree* when its path is outside the sparse set
(``git sparse-checkout``, cone or not) or by ``git update-index --skip-worktree``. For such
a path git assumes the worktree holds the index's blob: the path is neither dirty nor
deleted, although no file is there. libgit2 (pygit2) ignores the bit — it reports every
file outside the cone as deleted — and cannot read a *sparse index* at all (``git
sparse-checkout init --sparse-index``: whole directories outside the cone collapse into
one entry, announced by the mandatory ``sdir`` extension). This module supplies both:

- ``IndexFlags`` answers, per path, whether git takes the worktree as the index (the
  skip-worktree bit read from libgit2's parsed index), and lists the skip-worktree
  entries (libgit2's status never reports one whose file is present), and
- ``git_status`` runs ``git status`` itself for a sparse index (git is installed wherever a
  sparse index exists: only git writes one).

One exception, git's own (2.37+): in a sparse checkout a skip-worktree file that *is*
present in the worktree loses its bit (git clears it at the next index refresh) and is
compared like any tracked file — unless ``sparse.expectFilesOutsideOfPatterns`` is set.

The snapshot of a sparse worktree is therefore the commit's snapshot plus the dirty paths
inside the sparse set (docs/design.md, "Sparse checkouts").
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pygit2

from citegraph.indexer.errors import CitegraphError

SKIP_WORKTREE = 1 << 14  # GIT_INDEX_ENTRY_SKIP_WORKTREE in an entry's extended flags
STAGE_MASK = 0x3000  # GIT_INDEX_ENTRY_STAGEMASK in an entry's flags
NULL_MODE = "000000"
# Environment variables that would point git at another repository, index or worktree.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
                  "GIT_NAMESPACE", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES")


def _config_bool(repo: pygit2.Repository, name: str) -> bool:
    try:
        return name in repo.config and repo.config.get_bool(name)
    except (pygit2.GitError, ValueError):
        return False


def is_sparse_index_error(exc: BaseException) -> bool:
    """True when libgit2 refused the index because it is a sparse index."""
    return isinstance(exc, pygit2.GitError) and "sdir" in str(exc)


class IndexFlags:
    """Skip-worktree lookups in one read of the repository's index.

    ``worktree_is_index(path, present)`` returns the (blob id, mode) of the index entry when
    git takes ``path``'s worktree content to be that entry (skip-worktree, and not a file
    present in a sparse checkout, see the module docstring), else None."""

    def __init__(self, repo: pygit2.Repository, index: pygit2.Index | None = None) -> None:
        self._repo = repo
        self._index = index  # read on first use (a clean worktree never needs it)
        self.clears_present = (_config_bool(repo, "core.sparseCheckout")
                               and not _config_bool(repo, "sparse.expectFilesOutsideOfPatterns"))

    @property
    def _c(self) -> object | None:
        if self._index is None:
            self._index = self._repo.index
        return getattr(self._index, "_index", None)

    def skip_worktree(self, path: str) -> tuple[str, int] | None:
        """(blob id, mode) of ``path``'s stage-0 entry when it carries the skip-worktree bit."""
        c = self._c
        if c is None:  # a pygit2 without the C handle: no entry is taken as skipped
            return None
        from pygit2.ffi import C, ffi

        try:
            raw = os.fsencode(path)
        except UnicodeError:
            return None
        ce = C.git_index_get_bypath(c, raw, 0)
        if ce == ffi.NULL or not ce.flags_extended & SKIP_WORKTREE:
            return None
        return (bytes(ffi.buffer(ffi.addressof(ce, "id"))[:20]).hex(), int(ce.mode))

    def skip_worktree_entries(self) -> Iterator[tuple[str, str, int]]:
        """(path, blob id, mode) of every stage-0 skip-worktree entry, in index order."""
        c = self._c
        if c is None:
            return
        from pygit2.ffi import C, ffi

        for i in range(C.git_index_entrycount(c)):
            ce = C.git_index_get_byindex(c, i)
            if ce.flags_extended & SKIP_WORKTREE and not ce.flags & STAGE_MASK:
                yield (os.fsdecode(ffi.string(ce.path)), bytes(ffi.buffer(ffi.addressof(ce, "id"))[:20]).hex(),
                       int(ce.mode))

    def worktree_is_index(self, path: str, present: bool) -> tuple[str, int] | None:
        if present and self.clears_present:
            return None
        return self.skip_worktree(path)


@dataclass(frozen=True)
class StatusEntry:
    """One path ``git status`` names: tracked with (index blob, index mode), or untracked."""

    path: str  # a filesystem string (git's bytes, surrogate-escaped)
    tracked: bool
    index_blob: str | None = None  # None when not in the index (deleted from it, untracked)
    index_mode: int = 0
    worktree_unchanged: bool = False  # git: the worktree matches the index (Y is '.')


def _git(root: str, gitdir: str, *args: str) -> bytes:
    exe = shutil.which("git")
    if exe is None:
        raise CitegraphError(f"{root}: the index is a sparse index (git's 'sdir' extension), which libgit2 cannot "
                             "read, and no git executable was found",
                             "install git, or run `git sparse-checkout init --no-sparse-index`", code=3)
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # never write (refresh) the user's index
    # core.fsmonitor would run a command named by the repository's config: never.
    cmd = [exe, "-c", "core.fsmonitor=false", f"--git-dir={gitdir}", f"--work-tree={root}", *args]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CitegraphError(f"{root}: git {args[0]} failed ({err[-1] if err else proc.returncode})",
                             "run `git status` there and fix what it reports", code=3)
    return proc.stdout


def git_status(root: str, gitdir: str) -> list[StatusEntry]:
    """The paths ``git status`` reports (untracked included, ignored not, no rename pairing)."""
    out = _git(root, gitdir, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames",
               "--ignore-submodules=none")
    entries: list[StatusEntry] = []
    for rec in out.split(b"\0"):
        if not rec:
            continue
        kind = rec[:1]
        if kind == b"?":
            entries.append(StatusEntry(os.fsdecode(rec[2:]), False))
        elif kind in (b"1", b"u"):
            n = 8 if kind == b"1" else 10  # fields before the path
            parts = rec.split(b" ", n)
            xy = parts[1].decode()
            if kind == b"1":
                m_index, h_index = parts[4].decode(), parts[7].decode()
            else:  # unmerged: no stage-0 entry
                m_index, h_index = NULL_MODE, ""
            present = m_index != NULL_MODE
            entries.append(StatusEntry(os.fsdecode(parts[n]), True, h_index if present else None,
                                       int(m_index, 8) if present else 0, worktree_unchanged=xy[1] == "."))
    return entries


def git_skip_worktree(root: str, gitdir: str, paths: list[str]) -> set[str]:
    """Which of ``paths`` carry the skip-worktree bit (``git ls-files -t``: tag ``S``)."""
    if not paths:
        return set()
    out = _git(root, gitdir, "ls-files", "-t", "-z", "--", *(f":(literal){p}" for p in paths))
    return {os.fsdecode(rec[2:]) for rec in out.split(b"\0") if rec[:2] == b"S "}
