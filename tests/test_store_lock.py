"""The memory store's inter-process lock (memory/lifecycle/store_lock.py): held from before
DuckDB opens the store until after DuckDB has closed it — closing checkpoints and removes the
write-ahead log, and a writer of another process that slipped in between lost its commit
(tests/test_concurrent_remember.py found 30 of 31 memories about one run in eight)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle import store_lock
from citegraph.memory.lifecycle.store import MemoryStore

PROBE = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
try:
    fcntl.lockf(fd, (fcntl.LOCK_SH if sys.argv[2] == "sh" else fcntl.LOCK_EX) | fcntl.LOCK_NB)
except OSError:
    print("held")
else:
    print("free")
"""


def probe(home, mode: str = "ex") -> str:
    """What another process finds when it tries the sidecar lock now."""
    path = store_lock.sidecar(home.memory_db)
    return subprocess.run([sys.executable, "-c", PROBE, str(path), mode], capture_output=True, text=True,
                          check=True).stdout.strip()


class _Watched:
    """A connection whose close first asks another process whether the store is still locked."""

    def __init__(self, con, home, seen: list[str]) -> None:
        self._con, self._home, self._seen = con, home, seen

    def cursor(self):
        return self._con.cursor()

    def close(self) -> None:
        self._seen.append(probe(self._home))
        self._con.close()


def test_lock_is_held_until_duckdb_has_closed_the_store(home, monkeypatch):
    with MemoryStore.open(home):
        pass  # create the store
    seen: list[str] = []
    real = MemoryStore._connect.__func__

    def watched(cls, h, rw, deadline):
        return _Watched(real(cls, h, rw, deadline), home, seen)

    monkeypatch.setattr(MemoryStore, "_connect", classmethod(watched))
    with MemoryStore.open(home) as ms:
        ms.con.execute("SELECT count(*) FROM memories").fetchall()
    assert seen == ["held"]  # DuckDB's close (checkpoint, WAL removal) ran under the lock
    assert probe(home) == "free"  # and the lock went with it


def test_a_writer_excludes_other_processes_and_readers_share(home):
    with MemoryStore.open(home):
        assert probe(home, "sh") == "held"  # a reader of another process waits for the writer
    with MemoryStore.open(home, read_only=True):
        assert probe(home, "sh") == "free"  # readers share
        assert probe(home, "ex") == "held"  # a writer waits for them
    assert probe(home, "ex") == "free"


def test_a_held_lock_is_a_retryable_busy_after_the_wait(home, tmp_path):
    with MemoryStore.open(home):
        pass
    holder = subprocess.Popen([sys.executable, "-c", r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(30)
""", str(store_lock.sidecar(home.memory_db))], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(CitegraphError) as err, MemoryStore.open(home, read_only=True, wait_s=0.2):
            pass
        assert err.value.retryable and err.value.kind == "busy"
    finally:
        holder.kill()
        holder.wait()
    with MemoryStore.open(home, read_only=True, wait_s=2):
        pass  # the kernel dropped the dead holder's lock
