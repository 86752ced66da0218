"""A recursive inotify watch of one worktree and the git files that define its state.

Why not watchfiles: it drops events that carry no path, and the kernel's queue-overflow
notice (``IN_Q_OVERFLOW``) is exactly such an event (watchfiles issue #348, open; its
``lib.rs`` keeps ``event.paths.first()`` only). A watcher that can lose events without
saying so could serve a stale state as current — a false "fresh". This module reads the
raw inotify events (``inotify_simple``, a literal ctypes wrapper) and reports overflow.

What it reports, in kernel order, through ``on_batch`` (called in the watcher thread):
- worktree paths that changed (``/``-separated filesystem strings relative to the root),
- directories whose whole subtree must be re-checked (created, moved in or out, deleted),
- git state files that changed (``HEAD``, ``index``, ``packed-refs``, ``refs/…``,
  ``info/exclude``),
- cookies seen (files written by ``sync`` into the git directory),
- ``overflow`` when the kernel dropped events (or a watch could not be added).

Directories are watched as they appear: a new directory gets its watch *before* it is
listed, so a file created in it is either listed or reported. Symlinks are never followed
(``IN_DONT_FOLLOW``, ``scandir`` without following); the git directory, the data home and
directories for which ``skip_dir`` says so are not watched.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

COOKIE_PREFIX = "citegraph-cookie-"

try:  # Linux only; elsewhere the service falls back to a scan per read (docs/service.md)
    import inotify_simple as _ino
except ImportError:  # pragma: no cover - non-Linux
    _ino = None

AVAILABLE = _ino is not None and hasattr(os, "O_DIRECTORY")

if _ino is not None:
    F = _ino.flags
    DIR_MASK = (F.CREATE | F.DELETE | F.MODIFY | F.CLOSE_WRITE | F.MOVED_FROM | F.MOVED_TO | F.ATTRIB
                | F.DELETE_SELF | F.MOVE_SELF | F.DONT_FOLLOW | F.ONLYDIR | F.EXCL_UNLINK)
    GIT_MASK = (F.CREATE | F.DELETE | F.MODIFY | F.CLOSE_WRITE | F.MOVED_FROM | F.MOVED_TO | F.ATTRIB
                | F.DELETE_SELF | F.MOVE_SELF | F.DONT_FOLLOW | F.ONLYDIR)


@dataclass
class Batch:
    """What one read of the inotify queue said, in order of arrival."""

    paths: set[str] = field(default_factory=set)
    subtrees: set[str] = field(default_factory=set)
    git: set[str] = field(default_factory=set)
    cookies: list[str] = field(default_factory=list)
    overflow: bool = False
    events: int = 0

    def __bool__(self) -> bool:
        return bool(self.paths or self.subtrees or self.git or self.cookies or self.overflow)


class WatchError(Exception):
    """The watch could not be set up (no inotify, or limits reached)."""


class TreeWatcher:
    """Watches ``root`` recursively and the git state files under ``git_dirs``.

    ``git_dirs`` are ``(directory, recursive, prefix)``: the worktree's git directory
    (HEAD, index, cookies: not recursive), the common directory's ``refs`` (recursive,
    reported as ``refs/…``) and its root (``packed-refs``, not recursive), its ``info``."""

    def __init__(self, root: Path, git_dirs: list[tuple[Path, bool, str]],
                 on_batch: Callable[[Batch], None], *, skip_dir: Callable[[str], bool] | None = None,
                 exclude_abs: tuple[str, ...] = ()) -> None:
        if not AVAILABLE:
            raise WatchError("inotify is not available on this platform")
        self.root = Path(root)
        self.git_dirs = git_dirs
        self.on_batch = on_batch
        self.skip_dir = skip_dir or (lambda rel: False)
        self.exclude_abs = tuple(os.path.realpath(p) for p in exclude_abs)
        self.inotify = _ino.INotify()
        self.wd_path: dict[int, tuple[str, str]] = {}  # wd -> (kind "tree"|"git", rel path or prefix)
        self.path_wd: dict[tuple[str, str], int] = {}
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.watches = 0

    # --- setup --------------------------------------------------------------------------------

    def start(self) -> None:
        """Add every watch (the tree, then the git files) and start reading events."""
        for d, recursive, prefix in self.git_dirs:
            self._add_git(d, recursive, prefix)
        pending = Batch()
        self._add_tree("", pending)  # files listed now are the initial scan's business
        self.thread = threading.Thread(target=self._loop, name=f"citegraph-watch:{self.root.name}", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2)
        try:
            self.inotify.close()
        except OSError:
            pass

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive() and self.error is None

    def _watch(self, path: Path, mask: int) -> int | None:
        try:
            return self.inotify.add_watch(os.fspath(path), mask)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES):
                return None  # gone, not a directory, a symlink, unreadable: nothing to watch
            if exc.errno == errno.ENOSPC:
                raise WatchError("the inotify watch limit is reached (fs.inotify.max_user_watches)") from exc
            raise

    def _add_git(self, d: Path, recursive: bool, prefix: str) -> None:
        stack = [(d, prefix)]
        while stack:
            cur, pfx = stack.pop()
            wd = self._watch(cur, GIT_MASK)
            if wd is None:
                continue
            self._map(wd, ("git", pfx))
            if recursive:
                try:
                    entries = list(os.scandir(cur))
                except OSError:
                    continue
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        stack.append((Path(e.path), f"{pfx}{e.name}/"))

    def _map(self, wd: int, key: tuple[str, str]) -> None:
        old = self.wd_path.get(wd)
        if old is not None and old != key:
            self.path_wd.pop(old, None)
        self.wd_path[wd] = key
        self.path_wd[key] = wd
        self.watches = len(self.wd_path)

    def _add_tree(self, rel: str, batch: Batch) -> None:
        """Watch directory ``rel`` and everything under it; report the files found."""
        stack = [rel]
        while stack:
            cur = stack.pop()
            full = self.root / cur if cur else self.root
            if cur and (cur == ".git" or cur.startswith(".git/") or self.skip_dir(cur)):
                continue
            if self.exclude_abs and any(os.path.realpath(full) == x for x in self.exclude_abs):
                continue
            wd = self._watch(full, DIR_MASK)
            if wd is None:
                continue
            self._map(wd, ("tree", cur))
            try:
                entries = list(os.scandir(full))
            except OSError:
                continue
            for e in entries:
                child = f"{cur}/{e.name}" if cur else e.name
                if e.is_dir(follow_symlinks=False):
                    stack.append(child)
                elif child != ".git":
                    batch.paths.add(child)

    def _drop_tree(self, rel: str) -> None:
        """Forget the watches of ``rel`` and below (the directory moved away or is gone)."""
        prefix = rel + "/"
        for key in [k for k in self.path_wd if k[0] == "tree" and (k[1] == rel or k[1].startswith(prefix))]:
            wd = self.path_wd.pop(key)
            self.wd_path.pop(wd, None)
            try:
                self.inotify.rm_watch(wd)
            except OSError:
                pass
        self.watches = len(self.wd_path)

    # --- events -------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                events = self.inotify.read(timeout=200)
                if self.stop.is_set():
                    break
                if not events:
                    continue
                batch = self._translate(events)
                if batch:
                    self.on_batch(batch)
        except BaseException as exc:  # noqa: BLE001 - reported: the service treats it as a lost watcher
            self.error = exc
            try:
                self.on_batch(Batch(overflow=True))
            except Exception:  # noqa: BLE001
                pass

    def _translate(self, events: list) -> Batch:
        b = Batch(events=len(events))
        for ev in events:
            mask = ev.mask
            if mask & F.Q_OVERFLOW:
                b.overflow = True
                continue
            key = self.wd_path.get(ev.wd)
            if key is None:
                continue
            kind, base = key
            if kind == "git":
                if mask & (F.DELETE_SELF | F.MOVE_SELF | F.IGNORED):
                    continue
                name = f"{base}{ev.name}" if ev.name else base.rstrip("/")
                if ev.name.startswith(COOKIE_PREFIX):
                    if mask & (F.CREATE | F.MOVED_TO):
                        b.cookies.append(ev.name)
                    continue
                if name.endswith(".lock") or not ev.name:
                    continue
                if mask & F.ISDIR and mask & (F.CREATE | F.MOVED_TO) and name.startswith("refs/"):
                    # a new refs directory: watch it too (its files are refs)
                    for d, recursive, prefix in self.git_dirs:
                        if recursive and prefix == "refs/":
                            self._add_git(d / name[len("refs/"):], True, name + "/")
                b.git.add(name)
                continue
            # the worktree
            if mask & F.IGNORED:
                continue
            if mask & (F.DELETE_SELF | F.MOVE_SELF):
                if base:
                    b.subtrees.add(base)
                continue
            if not ev.name:
                continue
            rel = f"{base}/{ev.name}" if base else ev.name
            if rel == ".git" or rel.startswith(".git/"):
                continue
            if mask & F.ISDIR:
                if mask & (F.CREATE | F.MOVED_TO):
                    b.subtrees.add(rel)
                    # A WatchError (the watch limit) ends this watcher: a directory it cannot
                    # watch would change unseen, so the watch as a whole is lost.
                    self._add_tree(rel, b)
                elif mask & (F.DELETE | F.MOVED_FROM):
                    b.subtrees.add(rel)
                    self._drop_tree(rel)
                else:
                    b.paths.add(rel)  # attribute change of a directory: harmless to re-check
                continue
            b.paths.add(rel)
        return b


def write_cookie(git_dir: Path, name: str) -> None:
    """Create (and leave) cookie ``name`` in ``git_dir``; its event marks "now"."""
    fd = os.open(git_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    os.close(fd)


def remove_cookie(git_dir: Path, name: str) -> None:
    try:
        os.unlink(git_dir / name)
    except OSError:
        pass
