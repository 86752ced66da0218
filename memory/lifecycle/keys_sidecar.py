"""The code-keys sidecar (``memories.duckdb.keys``): every ``path`` and ``blob`` key of the
memory store's code index, readable without DuckDB, so that ``citegraph hook pre-edit``
can tell "no memory can cite this file" before it imports the store (issue 22; a hook runs
before every edit an agent makes; docs/agents.md, "Silence without the store").

The keys are those of every row of the code index (memory/lifecycle/store.py), of any
memory status and any repository: a superset of what ``citegraph cited FILE`` looks up
(``Target.keys`` of a file ref: its stored path and its blob now). A key found here only
sends the hook down the full path; a key missing here proves silence — as long as the
sidecar describes the store as it is. So the sidecar carries the store's fingerprint at
the moment it was written (the ``stat`` of the database and of its write-ahead log, as
memory/lifecycle/read_memo.py uses it: any commit grows or replaces one of them), and a
reader trusts it only when the fingerprint still holds, the format and store schema are
this code's, and the body's digest checks. Anything else — missing, older, unreadable,
foreign — is "don't know": the caller takes the full path.

Written only by ``memory/lifecycle/store.py`` under the store's own lock
(memory/lifecycle/store_lock.py): marked invalid (``invalidate``) as soon as a read-write
connection has the lock, before any write can commit — a writer that dies leaves no
trusted sidecar —, rewritten from the code index when that connection closes (after
DuckDB's checkpoint, before the lock is released), and rewritten by a read-only
connection that finds it missing or out of step. Atomic: a temporary file renamed over it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

# The memory store's schema (memory/lifecycle/store.py takes it from here so that a reader
# without DuckDB can tell a sidecar written for another schema).
MEMORY_SCHEMA_VERSION = 4
FORMAT = "citegraph-code-keys 1"
TOMBSTONE = b"#"  # written over the first byte of FORMAT by ``invalidate``
KINDS = ("path", "blob")  # the code-index key kinds a file ref looks up (memory/agent/cited.py)
MAX_BYTES = 256 << 20  # a larger sidecar is not read (the full path answers)


def sidecar(store: Path) -> Path:
    return store.with_name(store.name + ".keys")


def store_fingerprint(store: Path) -> tuple | None:
    """The store file's identity now: (inode, size, mtime, ctime) of the database and of
    its write-ahead log (None for one that does not exist); None when it cannot be told."""
    out: list[Any] = []
    for path in (store, store.with_name(store.name + ".wal")):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            out.append(None)
            continue
        except OSError:
            return None
        out.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def _line(kind: str, key: str) -> str:
    # JSON-quoted, ASCII only (json.dumps's quoting, in C): a key with a newline or a tab
    # cannot break a line
    return f"{kind}\t{encode_basestring_ascii(key)}\n"


def _as_json(fp: tuple) -> list:
    return [list(x) if x is not None else None for x in fp]


def invalidate(store: Path) -> None:
    """Make the sidecar untrustworthy before the store is written: its first byte is
    overwritten in place (a tombstone; no block is freed or taken, so a write to a full
    disk fails exactly as it would without the sidecar), else it is removed. Best effort:
    one that can be neither is still out of step after any commit, by its fingerprint."""
    path = sidecar(store)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return  # none (or not ours to write: neither is the store)
    try:
        os.pwrite(fd, TOMBSTONE, 0)
        return
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass


def begin_write(store: Path) -> tuple | None:
    """Before a read-write connection may commit: the store's fingerprint when the sidecar
    is trusted now (``restore`` puts it back if nothing is committed), then ``invalidate``."""
    fp = store_fingerprint(store) if read(store) is not None else None
    invalidate(store)
    return fp


def restore(store: Path, fp: tuple | None) -> bool:
    """Undo ``invalidate`` after a read-write connection that committed nothing: the store's
    fingerprint is still ``fp`` (taken by ``begin_write``), so the keys still hold."""
    if fp is None or store_fingerprint(store) != fp:
        return False
    try:
        fd = os.open(sidecar(store), os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.pwrite(fd, FORMAT.encode()[:1], 0)
    except OSError:
        return False
    finally:
        os.close(fd)
    if read(store) is None:
        invalidate(store)
        return False
    return True


def write(store: Path, keys: Iterable[tuple[str, str]]) -> bool:
    """Write the sidecar for ``keys`` (code-index (kind, key) pairs; other kinds are left
    out) with the store's fingerprint now. The caller holds the store's lock and has
    closed its connection (the checkpoint is done). False (and no sidecar) when the
    fingerprint cannot be taken or the file cannot be written."""
    path = sidecar(store)
    fp = store_fingerprint(store)
    if fp is None or fp[0] is None:
        invalidate(store)
        return False
    body = "".join(_line(k, v) for k, v in keys if k in KINDS and isinstance(v, str)).encode("ascii")
    head = json.dumps({"schema": MEMORY_SCHEMA_VERSION, "store": _as_json(fp), "bytes": len(body),
                       "digest": hashlib.blake2b(body, digest_size=16).hexdigest()})
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(f"{FORMAT}\n{head}\n".encode() + body)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        invalidate(store)
        return False


def _header(raw: bytes) -> tuple[dict[str, Any], int] | None:
    """(header, offset of the body) when ``raw`` starts like a sidecar of this format."""
    first = raw.find(b"\n")
    second = raw.find(b"\n", first + 1)
    if first < 0 or second < 0 or raw[:first] != FORMAT.encode():
        return None
    try:
        head = json.loads(raw[first + 1:second])
    except ValueError:
        return None
    return (head, second + 1) if isinstance(head, dict) else None


def _matches(head: dict[str, Any], store: Path) -> bool:
    fp = store_fingerprint(store)
    return (head.get("schema") == MEMORY_SCHEMA_VERSION and fp is not None and fp[0] is not None
            and head.get("store") == _as_json(fp))


def in_step(store: Path) -> bool:
    """Is there a sidecar that ``read`` trusts now? (A read-only connection rewrites one
    that is not.)"""
    return read(store) is not None


class CodeKeys:
    """The keys of one trusted sidecar."""

    def __init__(self, body: bytes) -> None:
        self._body = b"\n" + body

    def has(self, kind: str, key: str) -> bool:
        return ("\n" + _line(kind, key)).encode("ascii") in self._body


def read(store: Path) -> CodeKeys | None:
    """The sidecar's keys when it is trustworthy now (see the module docstring), else None."""
    path = sidecar(store)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_BYTES:
        return None
    got = _header(raw)
    if got is None:
        return None
    head, start = got
    body = raw[start:]
    if head.get("bytes") != len(body) or head.get("digest") != hashlib.blake2b(body, digest_size=16).hexdigest():
        return None
    if not _matches(head, store):
        return None
    return CodeKeys(body)
