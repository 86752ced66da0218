"""Reading the worktree, which is untrusted input (SPEC §12.1).

Every read of a worktree file goes through ``WorktreeReader.read``. It walks the path one
component at a time from the worktree root with directory file descriptors
(``openat`` with ``O_NOFOLLOW | O_DIRECTORY``), so a symlink or a non-directory in *any*
ancestor component makes the path read as absent — git's own view of a tracked directory
replaced by a symlink is "the files under it are deleted" — and never as the link's
target. The last component is ``lstat``-ed first: a symlink yields the blob of its target
*text* (never followed); a FIFO, socket or device yields ``not-regular`` without being
opened; a regular file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked again with
``fstat`` (the same inode, still regular), then hashed as a git blob while at most
``keep_bytes`` of it are kept in memory. Nothing outside the worktree is ever opened.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pygit2

from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.git_filters import MAX_FILTERED_BYTES, GitFilters

MODE_FILE = 0o100644
MODE_EXECUTABLE = 0o100755
MODE_SYMLINK = 0o120000
MODE_NOT_REGULAR = 0  # a FIFO, socket or device where a file was expected
# The blob id recorded for content that is not a regular file's (git's null object id):
# no real blob has it, so it never equals a cited blob.
NULL_BLOB = "0" * 40

CHUNK = 1 << 20
MAX_OPEN_DIRS = 64

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class WorktreeFile:
    """What the worktree holds at one path."""

    kind: str  # file | symlink | absent | not-regular
    blob_id: str | None  # git blob id; NULL_BLOB for not-regular; None when absent
    mode: int
    size: int = 0
    data: bytes | None = None  # a regular file's bytes (at most keep_bytes), a symlink's target text

    @property
    def exists(self) -> bool:
        return self.kind != "absent"


ABSENT = WorktreeFile("absent", None, 0)
NOT_REGULAR = WorktreeFile("not-regular", NULL_BLOB, MODE_NOT_REGULAR)


class ChangedWhileReading(CitegraphError):
    """The file changed under the reader (size or inode moved): the caller retries."""


def _unreadable(path: str, exc: OSError) -> CitegraphError:
    return CitegraphError(f"{os.fsencode(path).decode('utf-8', 'backslashreplace')}: cannot read the worktree "
                          f"file ({exc.strerror or exc})",
                          "fix its permissions, or add it to .gitignore", code=3, kind="worktree-unreadable")


class WorktreeReader:
    """Reads worktree paths (git's ``/``-separated filesystem strings) under one root.

    Directory descriptors of recently used parents are cached (a bounded number), so a
    scan of many paths in one directory opens that directory once. Use as a context
    manager, or call ``close``.
    """

    def __init__(self, root: str | os.PathLike[str], keep_bytes: int = 0, filters: GitFilters | None = None) -> None:
        self.keep_bytes = keep_bytes
        # git's clean conversion (eol, autocrlf, ident): a regular file is hashed and kept
        # as git would store it (indexer/git_filters.py); None reads bytes as they are.
        self.filters = filters
        try:
            self._root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise CitegraphError(f"{root}: cannot open the worktree ({exc.strerror or exc})",
                                 "check that the repository's worktree exists", code=3) from exc
        self._dirs: OrderedDict[str, int | None] = OrderedDict()

    def close(self) -> None:
        for fd in self._dirs.values():
            if fd is not None:
                os.close(fd)
        self._dirs.clear()
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    def __enter__(self) -> WorktreeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _dir_fd(self, parent: str) -> int | None:
        """A descriptor of directory ``parent`` reached without following any symlink,
        or None when some component is not a real directory (or is missing)."""
        if not parent:
            return self._root_fd
        if parent in self._dirs:
            self._dirs.move_to_end(parent)
            return self._dirs[parent]
        head, _, name = parent.rpartition("/")
        up = self._dir_fd(head)
        fd: int | None = None
        if up is not None and name not in ("", ".", ".."):
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=up)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    raise _unreadable(parent, exc) from exc
        self._dirs[parent] = fd
        while len(self._dirs) > MAX_OPEN_DIRS:
            _, old = self._dirs.popitem(last=False)
            if old is not None:
                os.close(old)
        return fd

    def read(self, path: str) -> WorktreeFile:
        """The worktree's content at repository path ``path`` (never follows a symlink)."""
        parent, _, name = path.rpartition("/")
        if name in ("", ".", "..") or "\0" in path:
            return ABSENT
        dfd = self._dir_fd(parent)
        if dfd is None:
            return ABSENT
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return ABSENT
            raise _unreadable(path, exc) from exc
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.fsencode(os.readlink(name, dir_fd=dfd))
            except OSError as exc:
                raise _unreadable(path, exc) from exc
            # The link's own bytes (its target text) are the blob; the target is never read.
            return WorktreeFile("symlink", str(pygit2.hash(target)), MODE_SYMLINK, len(target), target)
        if not stat.S_ISREG(st.st_mode):
            return NOT_REGULAR
        # Decided before the file is opened: the attribute lookup stays out of the window
        # between ``fstat`` and the read, in which a concurrent writer is detected.
        convert = self.filters is not None and st.st_size <= MAX_FILTERED_BYTES and self.filters.converts(path)
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):
                raise ChangedWhileReading(f"{path}: changed while being read", "retry",
                                          code=1, retryable=True) from exc
            raise _unreadable(path, exc) from exc
        try:
            return self._read_regular(path, fd, st, convert)
        finally:
            os.close(fd)

    def _read_regular(self, path: str, fd: int, before: os.stat_result, convert: bool = False) -> WorktreeFile:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_dev) != (before.st_ino, before.st_dev):
            raise ChangedWhileReading(f"{path}: changed while being read", "retry", code=1, retryable=True)
        mode = MODE_EXECUTABLE if st.st_mode & stat.S_IXUSR else MODE_FILE
        size = st.st_size
        if convert and self.filters is not None and size <= MAX_FILTERED_BYTES:
            data = self.filters.to_odb(path, _read_exactly(fd, size, path))
            return WorktreeFile("file", str(pygit2.hash(data)), mode, len(data),
                                data if len(data) <= self.keep_bytes else None)
        if size <= self.keep_bytes:
            data = _read_exactly(fd, size, path)
            return WorktreeFile("file", str(pygit2.hash(data)), mode, size, data)
        h = hashlib.sha1(b"blob %d\0" % size)
        left = size
        while left > 0:
            chunk = os.read(fd, min(CHUNK, left))
            if not chunk:
                raise ChangedWhileReading(f"{path}: shrank while being read", "retry", code=1, retryable=True)
            h.update(chunk)
            left -= len(chunk)
        if os.read(fd, 1):
            raise ChangedWhileReading(f"{path}: grew while being read", "retry", code=1, retryable=True)
        return WorktreeFile("file", h.hexdigest(), mode, size)


def _read_exactly(fd: int, size: int, path: str) -> bytes:
    parts = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(CHUNK, left))
        if not chunk:
            raise ChangedWhileReading(f"{path}: shrank while being read", "retry", code=1, retryable=True)
        parts.append(chunk)
        left -= len(chunk)
    if os.read(fd, 1):
        raise ChangedWhileReading(f"{path}: grew while being read", "retry", code=1, retryable=True)
    return b"".join(parts)


def read_one(root: str | Path, path: str, keep_bytes: int = 0, filters: GitFilters | None = None) -> WorktreeFile:
    """Read a single path (opens and closes its own reader)."""
    with WorktreeReader(root, keep_bytes, filters) as reader:
        return reader.read(path)
