"""The memory store's own inter-process lock: a record lock on a sidecar file
(``memories.duckdb.lock``), shared for a read-only connection, exclusive for a read-write
one, taken before DuckDB opens the store and released only after DuckDB has closed it.

Why DuckDB's own file lock is not enough: it is released when DuckDB closes the database
file, but closing a read-write database also checkpoints and then removes the write-ahead
log (``memories.duckdb.wal``). A second process that takes the store in that window
appends its commit to the log the first one is about to delete, and the commit is lost
without an error (or a later open reads a block past the end of the file: "Could not read
enough bytes"). Reproduced with DuckDB alone: six processes committing 30 rows each, with
connect/commit/close per row, lost 1-3 rows in 4 of 8 rounds; with this lock around
connect..close, 0 in every round (see docs/design.md, "Memory store: one writer").

A POSIX record lock (``lockf``), like the build lock: it belongs to the process, is never
inherited by forked workers, and the kernel drops it when its owner dies. Only
``_Gate`` (one per store file per process) opens the sidecar, so no other descriptor of
this process can drop the lock by closing the file."""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from citegraph.indexer.errors import CitegraphError


def sidecar(store: Path) -> Path:
    return store.with_name(store.name + ".lock")


def acquire(store: Path, exclusive: bool, deadline: float) -> int | None:
    """The locked sidecar's descriptor (close it to release), waiting until ``deadline``
    (then a retryable 'busy'). None when the sidecar can be neither created nor opened
    (a read-only data home): no process can write the store there, and DuckDB's own lock
    and error answer for it."""
    path = sidecar(store)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT):
            raise
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        if exclusive:
            os.close(fd)
            return None  # cannot write the sidecar: the store's open reports the read-only home
    delay = 0.005
    while True:
        try:
            fcntl.lockf(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
        if time.monotonic() > deadline:
            os.close(fd)
            raise CitegraphError("the memory store is busy (another citegraph process holds it)",
                                 "retry in a moment", code=1, retryable=True, kind="busy")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def release(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)
