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

Readers need only the catalog (a stat and a small JSON read) and published snapshot
files, which are never written again: no reader ever waits for a builder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
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
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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

    def catalog_path(self, snapshot_id: str) -> Path:
        return self.root / "catalog" / f"{snapshot_id}.json"

    @property
    def facts_path(self) -> Path:
        return self.root / "facts.duckdb"

    def entry(self, snapshot_id: str) -> dict[str, Any] | None:
        """The catalog entry with its effective state (a dead builder's entry is failed)."""
        try:
            data = json.loads(self.catalog_path(snapshot_id).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        if data.get("state") == "building" and not pid_alive(int(data.get("pid", 0))):
            data["state"] = "failed"
            data["reason"] = "interrupted"
        if data.get("state") == "ready" and not self.snapshot_path(snapshot_id).exists():
            data["state"] = "failed"
            data["reason"] = "snapshot file missing"
        return data

    def entries(self) -> list[dict[str, Any]]:
        cat = self.root / "catalog"
        if not cat.exists():
            return []
        out = []
        for p in cat.glob("*.json"):
            e = self.entry(p.stem)
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
        """One builder per repository; waits (bounded) for another build to finish."""
        self.ensure()
        fd = os.open(self.root / "build.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + wait_s
            told = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                    if time.monotonic() > deadline:
                        raise CitegraphError("another build of this repository is still running",
                                             "wait for it or retry later", code=1, retryable=True) from None
                    if on_wait and not told:
                        on_wait()
                        told = True
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)
