"""The data home: layout, the snapshot catalog, and locks.

Layout (see docs/storage.md)::

    <home>/STORE_VERSION
    <home>/memories.duckdb                    memory store (short-lived connections)
    <home>/repos/<repository_id>/repo.json    identity, known worktrees
    <home>/repos/<repository_id>/build.lock   one builder per repository (flock)
    <home>/repos/<repository_id>/facts.duckdb blob-keyed facts cache (builders only)
    <home>/repos/<repository_id>/catalog/<snapshot_id>.json   state of each snapshot
    <home>/repos/<repository_id>/snapshots/<snapshot_id>.duckdb  immutable, published
                                                                  by atomic rename
    <home>/repos/<repository_id>/snapshots/<snapshot_id>.parquet a small delta (one
                                                                  Parquet file, same rules)

Readers need only the catalog (a stat and a small JSON read) and published snapshot
files, which are never written again: no reader ever waits for a builder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from citegraph.indexer.errors import CitegraphError

STORE_VERSION = 1


def default_home() -> Path:
    env = os.environ.get("CITEGRAPH_HOME")
    return Path(env) if env else Path.home() / ".citegraph"


def atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``path`` whole or not at all. The temporary file is named per operation, not
    per process: two writers in one process (two worktrees of one repository under one
    ``serve``) each replace their own file (issue 22: a shared ``.repo.json.<pid>.tmp``
    made the slower one fail on a file the other had already moved)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


STATES = ("building", "ready", "failed", "retired")
_ENTRY_TYPES: dict[str, tuple[type, ...]] = {
    "repository_id": (str,), "kind": (str,), "commit": (str,), "extractor_version": (str,),
    "config": (str,), "schema_version": (int,), "files": (int,), "symbols": (int,), "bytes": (int,),
    "content_id": (str,), "content_sum": (str,), "layout": (str,), "base": (str,), "pid": (int,), "pid_start": (str,),
    "created_at": (int, float), "published_at": (int, float), "inventory_complete": (bool,),
    "coverage": (dict,), "reason": (str,), "dirty_fingerprint": (str,), "container": (str,), "delta_paths": (int,), "compacted_from": (str,),
}


def entry_problem(data: Any, snapshot_id: str) -> str | None:
    """Why a catalog entry (untrusted JSON) cannot be used, or None."""
    if not isinstance(data, dict):
        return "malformed catalog entry (not an object)"
    if data.get("snapshot_id") != snapshot_id:
        return "malformed catalog entry (snapshot id does not match its file)"
    if data.get("state") not in STATES:
        return "malformed catalog entry (state)"
    for key, types in _ENTRY_TYPES.items():
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"malformed catalog entry ({key})"
    cov = data.get("coverage")
    if cov is not None and not all(isinstance(c, dict) and all(isinstance(n, int) and not isinstance(n, bool)
                                                               for n in c.values()) for c in cov.values()):
        return "malformed catalog entry (coverage)"
    return None


class CatalogReads:
    """Parsed catalog entries by the identity of the file they were read from.

    Every build lists the catalog (the base to build over), and the catalog keeps one file
    per snapshot ever built, retired ones included: a service that published a day of
    edits re-read and re-parsed a thousand JSON files per build (+100 ms on ruff). An
    entry is written whole by a rename (``atomic_write_json``), so a file whose device,
    inode, size, mtime and ctime are unchanged holds the text parsed before (ctime moves
    on any write or ``utime``, and only the kernel sets it). What is kept is the parse
    and the shape check (``entry_problem``); what can change without the file changing —
    a builder's liveness, the snapshot file's size, the base — is checked on every read.
    Each read returns a copy of the entry's top level: callers set keys (state, reason)
    before writing an entry back, and none updates a nested value."""

    def __init__(self, max_entries: int = 16384) -> None:
        self.max_entries = max_entries
        self._parsed: dict[str, tuple[tuple[int, ...], Any, str | None]] = {}
        self._lock = threading.Lock()

    def read(self, path: str, snapshot_id: str) -> tuple[dict[str, Any], str | None] | None:
        """(entry data, why it cannot be used or None); None when there is no such file."""
        try:
            hit = self._hit(path, os.stat(path))
            if hit is not None:
                return hit
            with open(path, "rb") as f:  # the key of what is read: the open file's
                key = _key(os.fstat(f.fileno()))
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError:
            return {}, "unreadable catalog entry"
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            data, problem = {}, "unreadable catalog entry"
        else:
            problem = entry_problem(data, snapshot_id)
        with self._lock:
            if len(self._parsed) >= self.max_entries:
                self._parsed.clear()
            self._parsed[path] = (key, data, problem)
        return (data if problem else dict(data)), problem

    def _hit(self, path: str, st: os.stat_result) -> tuple[dict[str, Any], str | None] | None:
        with self._lock:
            hit = self._parsed.get(path)
        if hit is None or hit[0] != _key(st):
            return None
        return (hit[1] if hit[2] else dict(hit[1])), hit[2]


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


CATALOG_READS = CatalogReads()


def _failed_stub(snapshot_id: str, repository_id: str, reason: str) -> dict[str, Any]:
    return {"snapshot_id": snapshot_id, "repository_id": repository_id, "state": "failed", "reason": reason}


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (Linux ``/proc``), to tell a reused pid apart;
    None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Is ``pid`` a live (not zombie) process — the same one that started at ``start``?"""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return True  # no /proc: trust kill(0)
    if fields[0] in (b"Z", b"X"):
        return False
    return start is None or fields[19].decode() == start


@dataclass(frozen=True)
class Home:
    root: Path

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None) -> Home:
        path = Path(root) if root else default_home()
        try:
            path.mkdir(parents=True, exist_ok=True)
            (path / "repos").mkdir(exist_ok=True)
        except OSError as exc:
            raise CitegraphError(f"{path}: cannot create the data home ({exc.strerror})",
                                 "set CITEGRAPH_HOME or --home to a writable directory", code=3) from exc
        vfile = path / "STORE_VERSION"
        if vfile.exists():
            try:
                version = int(vfile.read_text().strip())
            except ValueError:
                raise CitegraphError(f"{vfile}: unreadable store version",
                                     "this is not a citegraph data home; choose another --home", code=3) from None
            if version > STORE_VERSION:
                raise CitegraphError(
                    f"{path}: store version {version} is newer than this citegraph ({STORE_VERSION})",
                    "upgrade citegraph or use another --home", code=3)
        else:
            with contextlib.suppress(OSError):
                vfile.write_text(f"{STORE_VERSION}\n")
        return cls(path)

    def repo(self, repository_id: str) -> RepoStore:
        return RepoStore(self.root / "repos" / repository_id, repository_id)

    def repo_ids(self) -> list[str]:
        return sorted(p.name for p in (self.root / "repos").iterdir() if p.is_dir())

    @property
    def memory_db(self) -> Path:
        return self.root / "memories.duckdb"


@dataclass(frozen=True)
class RepoStore:
    root: Path
    repository_id: str

    def ensure(self) -> None:
        for sub in ("catalog", "snapshots", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def snapshot_path(self, snapshot_id: str) -> Path:
        return self.root / "snapshots" / f"{snapshot_id}.duckdb"

    def parquet_path(self, snapshot_id: str) -> Path:
        """Where a small delta is published (catalog ``container: parquet``)."""
        return self.root / "snapshots" / f"{snapshot_id}.parquet"

    def published_path(self, entry: dict[str, Any]) -> Path:
        """The file a catalog entry's snapshot is read from (its container)."""
        if entry.get("container") == "parquet":
            return self.parquet_path(entry["snapshot_id"])
        return self.snapshot_path(entry["snapshot_id"])

    def snapshot_files(self, snapshot_id: str) -> list[Path]:
        """Every published file of ``snapshot_id`` that exists (either container)."""
        return [p for p in (self.snapshot_path(snapshot_id), self.parquet_path(snapshot_id)) if p.exists()]

    def catalog_path(self, snapshot_id: str) -> Path:
        return self.root / "catalog" / f"{snapshot_id}.json"

    @property
    def facts_path(self) -> Path:
        return self.root / "facts.duckdb"

    def entry(self, snapshot_id: str) -> dict[str, Any] | None:
        """The catalog entry with its effective state.

        The data home is untrusted (SPEC §12.1): an entry that is malformed, whose
        builder died, whose file is missing or not the size published, or whose base is
        not ready reads as ``failed`` — never as ready — and a ready entry found damaged
        is marked ``failed`` in the catalog then and there (``index`` rebuilds it, ``gc``
        removes it)."""
        return self._entry_at(os.path.join(self.root, "catalog", f"{snapshot_id}.json"), snapshot_id)

    def _entry_at(self, path: str, snapshot_id: str) -> dict[str, Any] | None:
        parsed = CATALOG_READS.read(path, snapshot_id)
        if parsed is None:
            return None
        data, problem = parsed
        if problem:
            return _failed_stub(snapshot_id, self.repository_id, problem)
        if data["state"] == "building" and not pid_alive(data.get("pid", 0), data.get("pid_start")):
            data["state"] = "failed"
            data["reason"] = "interrupted"
        if data["state"] == "ready":
            damage = self._damage(data)
            if damage:
                self.mark_failed(snapshot_id, damage, data.get("published_at"))
                data["state"] = "failed"
                data["reason"] = damage
        return data

    def _damage(self, data: dict[str, Any]) -> str | None:
        """Why a ready entry cannot be read as published (cheap checks: stats only)."""
        try:
            size = os.stat(self.published_path(data)).st_size
        except OSError:
            return "snapshot file missing"
        if isinstance(data.get("bytes"), int) and size != data["bytes"]:
            return f"snapshot file damaged (size {size}, published {data['bytes']})"
        base = data.get("base")
        if base:
            bentry = self.entry(base) if base != data["snapshot_id"] else None
            if bentry is None or bentry.get("state") != "ready" or bentry.get("base"):
                why = bentry.get("reason") if bentry else "missing"
                return f"base snapshot {base} is not usable ({why})"
        return None

    def mark_failed(self, snapshot_id: str, reason: str, published_at: Any = None) -> None:
        """Record that a ready snapshot was found damaged, unless it was republished
        meanwhile (its ``published_at`` changed)."""
        try:
            data = json.loads(self.catalog_path(snapshot_id).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return
        if not isinstance(data, dict) or data.get("state") != "ready" or data.get("published_at") != published_at:
            return
        data.update(state="failed", reason=reason, failed_at=time.time())
        with contextlib.suppress(OSError):
            self.write_entry(data)

    def entries(self) -> list[dict[str, Any]]:
        try:
            listing = list(os.scandir(os.path.join(self.root, "catalog")))
        except FileNotFoundError:
            return []
        out = []
        for de in listing:
            if de.name.endswith(".json") and not de.name.startswith("."):
                e = self._entry_at(de.path, de.name[:-5])
                if e:
                    out.append(e)
        out.sort(key=lambda e: (e.get("created_at", 0), e["snapshot_id"]))
        return out

    def write_entry(self, entry: dict[str, Any]) -> None:
        self.ensure()
        atomic_write_json(self.catalog_path(entry["snapshot_id"]), entry)

    def write_repo_info(self, info: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "repo.json"
        try:
            old = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            old = {}
        worktrees = sorted(set(old.get("worktrees", [])) | set(info.pop("worktrees", [])))
        merged = {**old, **info, "worktrees": worktrees}
        if merged != old:
            atomic_write_json(path, merged)

    def repo_info(self) -> dict[str, Any]:
        try:
            return json.loads((self.root / "repo.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    @contextlib.contextmanager
    def build_lock(self, wait_s: float = 600.0, on_wait: Any = None) -> Iterator[None]:
        """One builder per repository; waits (bounded) for another build to finish.

        A POSIX record lock (``lockf``), not ``flock``: it belongs to the process, is never
        inherited by forked extraction workers, and the kernel drops it the moment its
        owner dies, so a killed build's lock is taken over at once. POSIX locks do not
        exclude threads of one process, so a per-path thread lock is taken first. The
        file records the owner's pid (for diagnostics only)."""
        self.ensure()
        path = self.root / "build.lock"
        tlock = _thread_lock(str(path))
        deadline = time.monotonic() + wait_s
        told = False

        def waiting() -> None:
            nonlocal told
            if time.monotonic() > deadline:
                raise CitegraphError("another build of this repository is still running",
                                     "wait for it or retry later", code=1, retryable=True, kind="busy")
            if on_wait and not told:
                on_wait()
                told = True
            time.sleep(0.05)

        while not tlock.acquire(timeout=0.05):
            waiting()
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                while True:
                    try:
                        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as exc:
                        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                            raise
                        waiting()
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                yield
            finally:
                os.close(fd)  # releases the record lock
        finally:
            tlock.release()


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(key: str) -> threading.Lock:
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())
