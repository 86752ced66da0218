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


# Configuration that would make git run a command, or page, prompt or write: overridden on
# the command line (the highest-priority scope) of every git subprocess. Filter drivers are
# named by the configuration, so their overrides are added per name (``_filter_overrides``).
SAFE_CONFIG = (
    ("core.fsmonitor", "false"), ("core.hooksPath", os.devnull), ("core.pager", "cat"),
    ("core.sshCommand", ""), ("core.editor", ":"), ("core.askPass", ""), ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""), ("core.untrackedCache", "false"), ("credential.helper", ""),
    ("diff.external", ""), ("protocol.allow", "never"), ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"), ("sequence.editor", ":"), ("gpg.program", ""),
)
FILTER_VARS = ("clean", "smudge", "process")
# Environment that would run a program, page, prompt, or import someone else's -c settings.
_GIT_DROP = (*_GIT_REDIRECTS, "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR",
             "GIT_ASKPASS", "SSH_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND", "GIT_EXEC_PATH",
             "GIT_TRACE2_EVENT", "GIT_TRACE2", "GIT_TRACE2_PERF")


def _git_exe(root: str) -> str:
    exe = shutil.which("git")
    if exe is None:
        raise CitegraphError(f"{root}: the index is a sparse index (git's 'sdir' extension), which libgit2 cannot "
                             "read, and no git executable was found",
                             "install git, or run `git sparse-checkout init --no-sparse-index`", code=3)
    return exe


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _GIT_DROP and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
           and k != "GIT_CONFIG_COUNT"}
    env.update(GIT_OPTIONAL_LOCKS="0",  # never write (refresh) the user's index
               GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat", GIT_EDITOR=":", GIT_ASKPASS="",
               SSH_ASKPASS="", GIT_NO_LAZY_FETCH="1", GIT_ATTR_NOSYSTEM="1", LC_ALL="C")
    return env


def _with_config(env: dict[str, str], pairs: list[tuple[str, str]]) -> dict[str, str]:
    """``env`` carrying ``pairs`` as command-line configuration (GIT_CONFIG_COUNT, git
    2.31+; a sparse index needs 2.32): any key spelling passes, unlike ``-c k=v``."""
    out = dict(env)
    out["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (k, v) in enumerate(pairs):
        out[f"GIT_CONFIG_KEY_{i}"] = k
        out[f"GIT_CONFIG_VALUE_{i}"] = v
    return out


def _filter_overrides(exe: str, root: str, gitdir: str, env: dict[str, str]) -> list[tuple[str, str]]:
    """Empty ``clean``/``smudge``/``process`` (and ``required`` false) for every filter
    driver any configuration scope git reads here names: git then runs none of them
    (an empty command is no filter). Listing the configuration runs nothing."""
    try:
        proc = subprocess.run([exe, "--no-pager", f"--git-dir={gitdir}", f"--work-tree={root}", "config", "--null",
                               "--list"], cwd=root, env=env, capture_output=True, stdin=subprocess.DEVNULL,
                              timeout=60)
    except subprocess.TimeoutExpired as exc:  # an include.path naming a FIFO, say
        raise CitegraphError(f"{root}: git config --list did not finish in {exc.timeout:.0f} s",
                             "run `git config --list` there and fix what hangs (an include.path?)", code=3) from exc
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CitegraphError(f"{root}: git config failed ({err[-1] if err else proc.returncode})",
                             "run `git config --list` there and fix what it reports", code=3)
    names: dict[str, None] = {}
    for rec in proc.stdout.split(b"\0"):
        key = rec.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        if key.lower().startswith("filter.") and key.count(".") >= 2:
            names.setdefault(key[len("filter."):key.rindex(".")], None)
    return [(f"filter.{n}.{var}", value) for n in names
            for var, value in (*((v, "") for v in FILTER_VARS), ("required", "false"))]


def git_command(root: str, gitdir: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a git subprocess that runs nothing the
    repository's (or the user's) configuration names: no filter driver, hook, fsmonitor,
    pager, editor, askpass, ssh or proxy command, external diff; no lazy fetch; no index
    refresh written back."""
    exe = _git_exe(root)
    env = _with_config(_base_env(), list(SAFE_CONFIG))
    env = _with_config(env, [*SAFE_CONFIG, *_filter_overrides(exe, root, gitdir, env)])
    return [exe, "--no-pager", f"--git-dir={gitdir}", f"--work-tree={root}", *args], env


def _git(root: str, gitdir: str, *args: str) -> bytes:
    cmd, env = git_command(root, gitdir, *args)
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
    except subprocess.TimeoutExpired as exc:
        raise CitegraphError(f"{root}: git {args[0]} did not finish in {exc.timeout:.0f} s",
                             "run `git status` there to see what is slow", code=3, retryable=True) from exc
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CitegraphError(f"{root}: git {args[0]} failed ({err[-1] if err else proc.returncode})",
                             "run `git status` there and fix what it reports", code=3)
    return proc.stdout


def git_status(root: str, gitdir: str) -> list[StatusEntry]:
    """The paths ``git status`` reports (untracked included, ignored not, no rename pairing)."""
    out = _git(root, gitdir, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames",
               "--ignore-submodules=dirty")
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
    listed = {e.path for e in entries}
    entries += [StatusEntry(path, True, blob, GITLINK) for path, blob in _gitlinks(root, gitdir)
                if path not in listed and _submodule_dirty(os.path.join(root, path))]
    return entries


GITLINK = 0o160000


def _gitlinks(root: str, gitdir: str) -> list[tuple[str, str]]:
    """(path, commit) of every stage-0 submodule entry of the index."""
    out = _git(root, gitdir, "ls-files", "-s", "-z")
    links = []
    for rec in out.split(b"\0"):
        meta, _, path = rec.partition(b"\t")
        fields = meta.split()
        if len(fields) == 3 and fields[0] == b"160000" and fields[2] == b"0":
            links.append((os.fsdecode(path), fields[1].decode()))
    return links


def _submodule_dirty(path: str) -> bool:
    """Does a checked-out submodule hold changes (libgit2's status, which runs nothing,
    instead of git's recursion, which would read the submodule's own configuration)?
    The libgit2 scan reports such a submodule as modified; so does this one."""
    try:
        sub = pygit2.Repository(path)
        return any(not f & pygit2.GIT_STATUS_IGNORED for f in sub.status(untracked_files="all").values())
    except (pygit2.GitError, KeyError, ValueError, OSError):
        return False


def git_skip_worktree(root: str, gitdir: str, paths: list[str]) -> set[str]:
    """Which of ``paths`` carry the skip-worktree bit (``git ls-files -t``: tag ``S``)."""
    if not paths:
        return set()
    out = _git(root, gitdir, "ls-files", "-t", "-z", "--", *(f":(literal){p}" for p in paths))
    return {os.fsdecode(rec[2:]) for rec in out.split(b"\0") if rec[:2] == b"S "}
