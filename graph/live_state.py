"""The current state of a worktree kept from file-system events (the resident service).

One ``LiveRepo`` per watched worktree: after one initial scan (the same ``git status``
semantics and worktree reader as the one-shot path), events name the paths to re-check,
and only those are re-hashed. A read first *syncs*: it writes a cookie file into the git
directory and waits until the watcher has delivered that cookie's event — every change
made before the cookie has then been seen (the technique of Watchman and git's fsmonitor
daemon) — and then applies the pending changes. After the read it syncs again and
compares ``(generation, version)``: any change of the state in between, an overflowed or
restarted watcher, or a failed sync means the read raced (``unknown/racing``).

Never a false fresh: a lost event can only cause a rescan (overflow: the kernel says so)
or an unknown (a failed sync), never a stale state served as current. See docs/service.md.

When the full scan runs (the rule): the initial state; after the watcher lost events (an
overflow, a dead or restarted watcher: a new generation); after a change of what is
ignored (``info/exclude``, a ``.gitignore``: any untracked path may flip), of the
attributes (a ``.gitattributes``, ``info/attributes``) or of the configuration
(``core.autocrlf``): any dirty file's stored form may move; when the index
is sparse (libgit2 cannot read it) or its skip-worktree entries changed. Never otherwise —
a read or ``remember`` applies only what events named. A change of HEAD or the index
(commit, checkout, reset, ``git add``/``rm --cached``, stash) re-checks only the paths it
can affect: the dirty paths, the paths where the old and new HEAD trees differ, and the
paths where the new index differs from the new HEAD (a path whose index entry changed is
in one of those: an index entry that differs from HEAD makes its path dirty).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from citegraph.indexer import gitrepo, sparse
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.git_filters import GitFilters
from citegraph.indexer.paths import fs_path, stored_path
from citegraph.indexer.tree_watch import (
    COOKIE_PREFIX,
    Batch,
    TreeWatcher,
    WatchError,
    remove_cookie,
    write_cookie,
)
from citegraph.indexer.worktree import MODE_SYMLINK, WorktreeReader

MODE_GITLINK = 0o160000
MODE_TREE = 0o040000
SYNC_TIMEOUT_S = 2.0
# A git state file whose change can flip any untracked path (the excludes): a full scan.
# A change of these git files decides the full scan: what is ignored, and the configuration
# (core.autocrlf, core.excludesFile, …: every path's status and stored form may move).
FULL_RESCAN_GIT = ("info/exclude", "info/attributes", "config")
# Worktree files whose change decides the full scan: what is ignored, and the attributes
# (``working-tree-encoding``, ``eol``, ``ident``: the stored form of any path they match).
RESCAN_NAMES = frozenset((".gitignore", ".gitattributes"))
WARM_PATH = "citegraph-warm"  # any path: an attribute lookup loads every attribute source

_COOKIES = itertools.count(1)


@dataclass(frozen=True)
class LiveView:
    """The state a read is answered for: what the exact-current snapshot must describe."""

    state: gitrepo.WorktreeState
    generation: int
    version: int

    @property
    def token(self) -> tuple[int, int]:
        return (self.generation, self.version)


class SyncFailed(CitegraphError):
    """The watcher did not confirm a cookie in time (dead, stalled or restarted)."""


class LiveRepo:
    """A worktree's state, kept current by events (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, exclude_abs: tuple[str, ...] = (),
                 on_change: Callable[[LiveRepo], None] | None = None,
                 sync_timeout_s: float = SYNC_TIMEOUT_S) -> None:
        repo = gitrepo.open_repository(path)
        self.root = Path(os.path.realpath(gitrepo.workdir(repo)))
        self.gitdir = Path(os.path.realpath(repo.path))
        self.commondir = Path(os.path.realpath(gitrepo.common_dir(repo)))
        self.identity = gitrepo.repository_identity(repo)
        self.exclude_abs = exclude_abs
        self.skip = gitrepo.dirs_inside(self.root, exclude_abs)  # not watched, not part of the state
        self.on_change = on_change
        self.sync_timeout_s = sync_timeout_s
        self.lock = threading.RLock()
        self._cond = threading.Condition(self.lock)
        self._repo = repo
        self.repo_epoch = 0  # moves whenever ``_repo`` is replaced by a fresh repository
        self._build_repo: tuple[int, pygit2.Repository] | None = None
        self.head = ""
        self.dirty: dict[str, str | None] = {}
        self.from_index: dict[str, int] = {}  # dirty paths whose content is the index's (sparse)
        self.generation = 0
        self.version = 0
        self.pending_paths: set[str] = set()
        self.pending_subtrees: set[str] = set()
        self.pending_git: set[str] = set()
        self.need_full = True
        self.skip_key: frozenset[tuple[str, str, int]] = frozenset()  # skip-worktree entries at the last scan
        self.events = 0
        self.rescans = 0
        self.rehashed = 0
        self._seen_cookies: set[str] = set()
        self.watcher: TreeWatcher | None = None
        self.watch_error: str | None = None
        self.start_watcher()

    # --- the watcher ---------------------------------------------------------------------------

    def start_watcher(self) -> None:
        """(Re)start the watch, then (lazily) rescan: every restart is a new generation."""
        old = self.watcher
        if old is not None:
            old.close()
        git_dirs = [(self.gitdir, False, "")]
        if self.commondir != self.gitdir:
            git_dirs.append((self.commondir, False, ""))
        git_dirs += [(self.commondir / "refs", True, "refs/"), (self.commondir / "info", False, "info/")]
        with self.lock:
            self.generation += 1
            self.need_full = True
        try:
            w = TreeWatcher(self.root, git_dirs, self._on_batch, skip_dir=self._skip_dir,
                            exclude_abs=self.exclude_abs)
            with self.lock:
                self.watcher = w
                self.watch_error = None
            w.start()
        except (WatchError, OSError) as exc:
            with self.lock:
                self.watch_error = str(exc)
            if self.watcher is not None:
                self.watcher.close()
            raise CitegraphError(f"{self.root}: cannot watch this worktree ({exc})",
                                 "raise fs.inotify.max_user_watches, or use --no-service", code=3,
                                 kind="not-watchable") from exc

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()

    def watching(self) -> bool:
        return self.watcher is not None and self.watcher.alive()

    def _skip_dir(self, rel: str) -> bool:
        """Ignored directories need no watch — unless git tracks something inside them."""
        try:
            if not self._repo.path_is_ignored(rel + "/"):
                return False
            tree = self._repo.revparse_single("HEAD").peel(pygit2.Tree)
            tree[fs_path(rel)]
            return False  # tracked content below an ignored pattern
        except KeyError:
            return True
        except (pygit2.GitError, ValueError):
            return False

    def _on_batch(self, b: Batch) -> None:
        """In the watcher thread: record what changed, then release the cookies seen."""
        with self._cond:
            self.events += b.events
            if b.overflow:
                # Events were lost (or the watcher failed): nothing but a rescan is true now,
                # and every read in flight raced.
                self.generation += 1
                self.need_full = True
                if self.watcher is not None and self.watcher.error is not None:
                    self.watch_error = f"{type(self.watcher.error).__name__}: {self.watcher.error}"
            self.pending_paths |= b.paths
            self.pending_subtrees |= b.subtrees
            self.pending_git |= b.git
            for name in b.paths:
                if name.rsplit("/", 1)[-1] in RESCAN_NAMES:
                    self.need_full = True
            self._seen_cookies.update(b.cookies)
            self._cond.notify_all()
        if self.on_change is not None and (b.paths or b.subtrees or b.git or b.overflow):
            self.on_change(self)

    # --- reads ---------------------------------------------------------------------------------

    def sync(self, timeout_s: float | None = None) -> LiveView:
        """Everything changed before this call has been seen and applied: the view now."""
        timeout_s = self.sync_timeout_s if timeout_s is None else timeout_s
        if not self.watching():
            raise SyncFailed(f"{self.root}: the file watcher is not running ({self.watch_error or 'stopped'})",
                             "retry; the service restarts its watcher", code=1, retryable=True, kind="racing")
        name = f"{COOKIE_PREFIX}{os.getpid()}-{next(_COOKIES)}"
        try:
            write_cookie(self.gitdir, name)
        except OSError as exc:
            raise SyncFailed(f"{self.root}: cannot write a sync cookie ({exc.strerror or exc})",
                             "check the permissions of the git directory", code=1, retryable=True,
                             kind="racing") from exc
        deadline = time.monotonic() + timeout_s
        try:
            with self._cond:
                while name not in self._seen_cookies:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self.watching():
                        raise SyncFailed(f"{self.root}: the file watcher did not confirm a sync in "
                                         f"{timeout_s:.1f}s", "retry", code=1, retryable=True, kind="racing")
                    self._cond.wait(min(left, 0.05))
                self._seen_cookies.discard(name)
        finally:
            remove_cookie(self.gitdir, name)
        return self.apply()

    def apply(self) -> LiveView:
        """Apply the pending changes (rehash only the named paths) and return the view.
        A change it cannot read through (a file that grows while it is hashed) raises,
        and the next apply rescans: the paths it had taken off the pending set are never
        lost, so no stale state is ever served as current."""
        with self.lock:
            try:
                if self.need_full or self.pending_git & set(FULL_RESCAN_GIT):
                    self._rescan()
                elif self.pending_git:
                    self._git_moved()
                if self.pending_paths or self.pending_subtrees:
                    self._recheck()
            except BaseException:
                self.need_full = True
                self.generation += 1  # whatever was read before this is not this state
                raise
            return self.view()

    def view(self) -> LiveView:
        with self.lock:
            dirty = sorted(self.dirty.items())
            state = gitrepo.state_from_dirty(self.head, dirty, sorted(self.from_index.items()))
            return LiveView(state, self.generation, self.version)

    def _git_moved(self) -> None:
        """HEAD, the index or a ref changed: queue the paths that can have changed status
        (the module docstring's rule) — no full scan unless skip-worktree entries changed."""
        index_changed = "index" in self.pending_git
        self.pending_git.clear()
        self.repo_epoch += 1  # whatever moved in the git directory, builds open afresh
        repo = self._fresh_repo()
        try:
            head = gitrepo.head_commit(repo)
        except CitegraphError:
            head = ""
        if head == self.head and not index_changed:
            return  # another ref moved, HEAD did not
        if not head or not self.head or (index_changed and _skip_key(repo, self.gitdir) != self.skip_key):
            self._rescan()  # an unborn branch, or a sparse-checkout change: the full scan
            return
        try:
            old_tree = repo.revparse_single(self.head).peel(pygit2.Tree)
            new_tree = repo.revparse_single(head).peel(pygit2.Tree)
            index = repo.index
            index.read(False)
            staged = index.diff_to_tree(new_tree)
            moved = repo.diff(old_tree, new_tree) if head != self.head else None
        except (KeyError, ValueError, pygit2.GitError):
            self._rescan()  # unreadable objects or a sparse index: the full scan decides
            return
        paths = {fs_path(p) for p in self.dirty}
        for diff in (staged, moved):
            for d in diff.deltas if diff is not None else ():
                paths.update(_delta_path(f) for f in (d.old_file, d.new_file) if f.raw_path)
        self._repo = repo
        self.repo_epoch += 1
        if head != self.head:
            self.head = head
            self.version += 1
        self.pending_paths |= paths

    def _fresh_repo(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.gitdir))

    @contextlib.contextmanager
    def build_repository(self) -> Iterator[pygit2.Repository]:
        """A repository object for one build of this worktree, kept for the next build.

        A fresh ``pygit2.Repository`` reads the whole git index at its first attribute
        lookup (the clean conversion of a dirty file: 12 ms on ruff, 280–400 ms on the
        250k-file monorepo — per build). One is kept while the watcher's own repository
        is (``repo_epoch``): a change of HEAD, the index, the configuration or the excludes
        replaces that one, and then this one too; a ``.gitattributes`` edited in the worktree
        is seen by libgit2's attribute cache (it checks the files' stamps). One build holds
        it at a time: a concurrent build opens its own."""
        with self.lock:
            kept, self._build_repo = self._build_repo, None
            epoch = self.repo_epoch
        repo = kept[1] if kept is not None and kept[0] == epoch else self._fresh_repo()
        yield repo
        with self.lock:
            if self.repo_epoch == epoch and self._build_repo is None:
                self._build_repo = (epoch, repo)

    def warm_build_repository(self, also: Callable[[pygit2.Repository], None] | None = None) -> None:
        """Have the next build's repository opened and its attributes read (the git index
        included) now, after a build, rather than in front of the next edit's build (once
        read, a lookup costs libgit2 a stat of each attribute source: a build that found
        its snapshot ready looked up nothing)."""
        with self.build_repository() as repo:
            with contextlib.suppress(pygit2.GitError, ValueError):
                repo.get_attr(WARM_PATH, "working-tree-encoding")
            if also is not None:
                also(repo)  # (the caller's own reads through the same repository)

    def _rescan(self) -> None:
        """The full scan (the one-shot path's): the initial state, and after any change the
        events cannot describe path by path (index, HEAD, excludes, overflow)."""
        self.pending_paths.clear()
        self.pending_subtrees.clear()
        self.pending_git.clear()
        self.need_full = False
        self._repo = self._fresh_repo()
        self.repo_epoch += 1
        self.skip_key = _skip_key(self._repo, self.gitdir)
        state = gitrepo.worktree_state(self._repo, self.skip)
        self.rescans += 1
        self._set(state.head, dict(state.dirty_paths), dict(state.from_index))

    def _set(self, head: str, dirty: dict[str, str | None], from_index: dict[str, int]) -> None:
        if head != self.head or dirty != self.dirty or from_index != self.from_index:
            self.head, self.dirty, self.from_index = head, dirty, from_index
            self.version += 1

    def _recheck(self) -> None:
        """Re-check only the paths events named (and the subtrees of moved directories)."""
        paths = set(self.pending_paths)
        subtrees = set(self.pending_subtrees)
        self.pending_paths.clear()
        self.pending_subtrees.clear()
        repo = self._repo
        try:
            tree = repo.revparse_single(self.head).peel(pygit2.Tree) if self.head else None
        except (KeyError, ValueError, pygit2.GitError):
            tree = None
        for sub in subtrees:
            paths |= self._expand(sub, tree)
        try:
            index = repo.index
            index.read(False)
            flags = sparse.IndexFlags(repo, index)
        except pygit2.GitError as exc:
            if not sparse.is_sparse_index_error(exc):
                raise
            # A sparse index (libgit2 cannot read it): the one-shot scan, which asks git.
            self._rescan()
            return
        dirty = dict(self.dirty)
        from_index = dict(self.from_index)
        with WorktreeReader(self.root, filters=GitFilters(repo)) as reader:
            for p in paths:
                if p == ".git" or p.startswith(".git/") or gitrepo.under_any(p, self.skip):
                    continue
                stored = stored_path(p)
                is_dirty, blob, mode = self._path_state(repo, tree, index, flags, reader, p)
                if is_dirty:
                    dirty[stored] = blob
                else:
                    dirty.pop(stored, None)
                if is_dirty and mode is not None:
                    from_index[stored] = mode
                else:
                    from_index.pop(stored, None)
                self.rehashed += 1
        self._set(self.head, dirty, from_index)

    def _expand(self, sub: str, tree: pygit2.Tree | None) -> set[str]:
        """Every path that may have changed with directory ``sub``: tracked at HEAD, dirty
        now, or found on disk (never following a symlink)."""
        out: set[str] = set()
        prefix = sub + "/"
        for stored in self.dirty:
            p = fs_path(stored)
            if p == sub or p.startswith(prefix):
                out.add(p)
        if tree is not None:
            try:
                entry = tree[sub]
            except KeyError:
                entry = None
            if entry is not None and entry.filemode == MODE_TREE:
                stack = [(self._repo[entry.id], prefix)]
                while stack:
                    t, pfx = stack.pop()
                    for e in t:
                        if e.filemode == MODE_TREE:
                            stack.append((self._repo[e.id], f"{pfx}{e.name}/"))
                        else:
                            out.add(f"{pfx}{e.name}")
            elif entry is not None:
                out.add(sub)
        full = self.root / sub
        if full.is_dir() and not full.is_symlink():
            for dirpath, dirnames, filenames in os.walk(full, followlinks=False):
                rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
                dirnames[:] = [d for d in dirnames if not (rel == "." and d == ".git")]
                for f in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                    out.add(f if rel == "." else f"{rel}/{f}")
        out.add(sub)
        return out

    def _path_state(self, repo: pygit2.Repository, tree: pygit2.Tree | None, index: pygit2.Index,
                    flags: sparse.IndexFlags, reader: WorktreeReader, p: str
                    ) -> tuple[bool, str | None, int | None]:
        """(dirty?, content blob, index mode when the content is the index's) of one path,
        as git status would say it: HEAD and the index differ, or the index and the
        worktree, or an untracked file not ignored. A skip-worktree entry (outside a sparse
        checkout) has the index's content whatever the worktree holds (indexer.sparse)."""
        head_e = _entry(tree, p)
        try:
            ie = index[p]
            idx_e: tuple[str, int] | None = (str(ie.id), int(ie.mode))
        except (KeyError, ValueError):
            idx_e = None
        if idx_e is not None and idx_e[1] == MODE_GITLINK:
            return head_e != idx_e, idx_e[0] if head_e != idx_e else None, None
        found = reader.read(p)
        if idx_e is None and head_e is None:
            if found.kind not in ("file", "symlink"):
                return False, None, None  # git lists no untracked FIFO, device or directory
            try:
                if repo.path_is_ignored(p):
                    return False, None, None
            except (pygit2.GitError, ValueError):
                pass
            return True, found.blob_id, None
        if idx_e is not None and flags.worktree_is_index(p, found.exists) is not None:
            return (True, idx_e[0], idx_e[1]) if head_e != idx_e else (False, None, None)
        wt_e = None if found.kind == "absent" else (found.blob_id, found.mode)
        if found.kind == "symlink":
            wt_e = (found.blob_id, MODE_SYMLINK)
        dirty = head_e != idx_e or idx_e != wt_e
        return dirty, (found.blob_id if found.exists else None), None


def _delta_path(f: pygit2.DiffFile) -> str:
    return os.fsdecode(f.raw_path)


def _skip_key(repo: pygit2.Repository, gitdir: Path) -> frozenset[tuple[str, str, int]]:
    """The index's skip-worktree entries (a change of them is a sparse-checkout change:
    the full scan). An index of version 2 cannot carry the bit: nothing to read then."""
    try:
        with open(gitdir / "index", "rb") as fh:
            head = fh.read(8)
    except OSError:
        return frozenset()
    if len(head) == 8 and head[:4] == b"DIRC" and int.from_bytes(head[4:8], "big") == 2:
        return frozenset()
    try:
        return frozenset(sparse.IndexFlags(repo).skip_worktree_entries())
    except pygit2.GitError:
        return frozenset({("", "sparse-index", 0)})  # unreadable by libgit2 (a sparse index)


def _entry(tree: pygit2.Tree | None, p: str) -> tuple[str, int] | None:
    if tree is None:
        return None
    try:
        e = tree[p]
    except KeyError:
        return None
    if e.filemode == MODE_TREE:
        return None
    return (str(e.id), int(e.filemode))
