"""Worksets (SPEC §9): the records (create, add, remove, delete, list, show), ``prepare``,
``status``, and a workset's scope for the validation pipeline.

A workset is a named set of repository paths. ``prepare`` builds every member to
exact-current (bounded concurrency, default 2), reports ``ready`` / ``missing`` /
``failed`` per member and pins the ready snapshots against gc. Reads over a workset
(``brief``, ``validate --workset``) never build: ``load_scope`` hands the members, with the
repository ids recorded for them, to validator/pipeline.py, which routes citations to them
by repository id and reads only the exact-current snapshots they already have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from citegraph.graph.current import ScanSource, StateSource, current_state
from citegraph.graph.retention import set_pins
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle.store import MemoryStore, check_name
from citegraph.validator.pipeline import Scope

DEFAULT_PREPARE_JOBS = 2
PIN_OWNER = "workset:"


# --- the workset records ----------------------------------------------------------------------


def _now() -> float:
    return time.time()


def _require(ms: MemoryStore, name: str) -> None:
    check_name("workset", name)
    if not ms.con.execute("SELECT 1 FROM worksets WHERE name = ?", [name]).fetchall():
        raise CitegraphError(f"no workset {name!r}", "create it with citegraph workset create NAME PATH…",
                             code=2, kind="no-workset")


def _member_identity(path: str) -> tuple[str, str]:
    """(real path, repository id) of a repository given on the command line."""
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise CitegraphError(f"{path}: no such directory", "pass the path of a git repository", code=2)
    try:
        repo = gitrepo.open_repository(real)
        gitrepo.workdir(repo)
    except CitegraphError as err:
        raise CitegraphError(f"{path}: {err.what}", "add a repository with a worktree", code=2) from err
    return os.path.realpath(repo.workdir.rstrip("/")), gitrepo.repository_identity(repo).repository_id


def members(ms: MemoryStore, name: str) -> list[tuple[str, str | None]]:
    rows = ms.con.execute("SELECT path, repository_id FROM workset_members WHERE workset = ? "
                          "ORDER BY added_at, path", [name]).fetchall()
    return [(r[0], r[1]) for r in rows]


def create(home: Home, name: str, paths: Iterable[str] = ()) -> dict[str, Any]:
    check_name("workset", name)
    resolved = [_member_identity(p) for p in paths]
    with MemoryStore.open(home) as ms:
        if ms.con.execute("SELECT 1 FROM worksets WHERE name = ?", [name]).fetchall():
            raise CitegraphError(f"workset {name!r} already exists",
                                 "add members with citegraph workset add, or choose another name",
                                 code=2, kind="exists")
        with ms.transaction():
            ms.con.execute("INSERT INTO worksets VALUES (?, ?)", [name, _now()])
            _insert_members(ms, name, resolved)
        return _show(ms, name)


def _insert_members(ms: MemoryStore, name: str, resolved: list[tuple[str, str]]) -> list[str]:
    have = {p for p, _ in members(ms, name)}
    added = []
    t = _now()
    for i, (path, rid) in enumerate(resolved):
        if path in have:
            continue
        have.add(path)
        ms.con.execute("INSERT INTO workset_members VALUES (?, ?, ?, ?)", [name, path, rid, t + i * 1e-6])
        added.append(path)
    return added


def add(home: Home, name: str, paths: Iterable[str]) -> dict[str, Any]:
    resolved = [_member_identity(p) for p in paths]
    with MemoryStore.open(home) as ms:
        _require(ms, name)
        _insert_members(ms, name, resolved)
        return _show(ms, name)


def remove(home: Home, name: str, paths: Iterable[str]) -> dict[str, Any]:
    with MemoryStore.open(home) as ms:
        _require(ms, name)
        have = {p for p, _ in members(ms, name)}
        for p in paths:
            real = os.path.realpath(p)
            target = real if real in have else (p if p in have else None)
            if target is None:
                raise CitegraphError(f"{p} is not a member of workset {name!r}",
                                     "see the members with citegraph workset show NAME", code=2)
            ms.con.execute("DELETE FROM workset_members WHERE workset = ? AND path = ?", [name, target])
            ms.con.execute("DELETE FROM workset_pins WHERE workset = ? AND path = ?", [name, target])
        _repin(home, ms, name)
        return _show(ms, name)


def delete(home: Home, name: str) -> dict[str, Any]:
    with MemoryStore.open(home) as ms:
        _require(ms, name)
        for table, col in (("workset_pins", "workset"), ("workset_members", "workset"), ("worksets", "name")):
            ms.con.execute(f"DELETE FROM {table} WHERE {col} = ?", [name])
    set_pins(home, PIN_OWNER + name, [])
    return {"name": name, "deleted": True}


def _repin(home: Home, ms: MemoryStore, name: str) -> list[str]:
    ids = [r[0] for r in ms.con.execute(
        "SELECT snapshot_id FROM workset_pins WHERE workset = ? AND state = 'ready' AND snapshot_id IS NOT NULL",
        [name]).fetchall()]
    set_pins(home, PIN_OWNER + name, ids)
    return sorted(set(ids))


def list_worksets(home: Home) -> dict[str, Any]:
    with MemoryStore.open(home, read_only=True) as ms:
        rows = ms.con.execute(
            "SELECT w.name, w.created_at, count(m.path) FROM worksets w LEFT JOIN workset_members m "
            "ON m.workset = w.name GROUP BY w.name, w.created_at ORDER BY w.name").fetchall()
    return {"worksets": [{"name": r[0], "created_at": r[1], "members": int(r[2])} for r in rows]}


def _pins(ms: MemoryStore, name: str) -> dict[str, dict[str, Any]]:
    rows = ms.con.execute("SELECT path, repository_id, snapshot_id, state, reason, prepared_at "
                          "FROM workset_pins WHERE workset = ?", [name]).fetchall()
    return {r[0]: {"repository_id": r[1], "snapshot_id": r[2], "state": r[3], "reason": r[4],
                   "prepared_at": r[5]} for r in rows}


def _show(ms: MemoryStore, name: str) -> dict[str, Any]:
    created = ms.con.execute("SELECT created_at FROM worksets WHERE name = ?", [name]).fetchall()[0][0]
    pins = _pins(ms, name)
    return {"name": name, "created_at": created,
            "members": [{"path": p, "repository_id": rid, "prepared": pins.get(p)} for p, rid in members(ms, name)]}


def show(home: Home, name: str) -> dict[str, Any]:
    with MemoryStore.open(home, read_only=True) as ms:
        _require(ms, name)
        return _show(ms, name)


def load_scope(ms: MemoryStore, name: str, source: StateSource | None = None) -> Scope:
    """The workset's members (with their recorded repository ids) as a validation scope;
    ``source``: where their states are read (default: a git-status scan)."""
    _require(ms, name)
    return Scope(members(ms, name), source=source or ScanSource())


# --- prepare and status -----------------------------------------------------------------------


def _prepare_one(home_root: str, path: str, build_jobs: int | None) -> dict[str, Any]:
    """Build one member to exact-current in this process."""
    from citegraph.graph.snapshot_builder import build_snapshot

    t0 = time.perf_counter()
    out: dict[str, Any] = {"path": path, "repository_id": None, "snapshot_id": None, "reused": False}
    if not os.path.isdir(path):
        return {**out, "state": "missing", "reason": "path does not exist"}
    try:
        res = build_snapshot(path, Home.open(home_root), jobs=build_jobs)
    except CitegraphError as err:
        return {**out, "state": "failed", "reason": err.what, "seconds": time.perf_counter() - t0}
    except Exception as exc:  # a bug in one member must not lose the others' results
        return {**out, "state": "failed", "reason": f"{type(exc).__name__}: {exc}",
                "seconds": time.perf_counter() - t0}
    return {**out, "repository_id": res.repository_id, "snapshot_id": res.snapshot_id,
            "reused": res.reused, "state": "ready" if res.state == "ready" else "failed",
            "reason": None if res.state == "ready" else res.state, "commit": res.commit,
            "dirty": res.dirty, "seconds": time.perf_counter() - t0}


def _prepare_child(home: Home, path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    out: dict[str, Any] = {"path": path, "repository_id": None, "snapshot_id": None, "reused": False}
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    try:
        proc = subprocess.run([sys.executable, "-m", "citegraph.cli.main", "index", path, "--json", "--quiet"],
                              env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        return {**out, "state": "failed", "reason": f"cannot start the build ({exc.strerror})"}
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        reason = lines[-1].removeprefix("citegraph: ") if lines else f"build exited with {proc.returncode}"
        return {**out, "state": "failed", "reason": reason, "seconds": seconds}
    try:
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {**out, "state": "failed", "reason": "unreadable build output", "seconds": seconds}
    ready = res.get("state") == "ready"
    return {**out, "repository_id": res.get("repository_id"), "snapshot_id": res.get("snapshot_id"),
            "reused": bool(res.get("reused")), "state": "ready" if ready else "failed",
            "reason": None if ready else res.get("state"), "commit": res.get("commit"), "dirty": res.get("dirty"),
            "seconds": seconds}


def prepare(home: Home, name: str, jobs: int = DEFAULT_PREPARE_JOBS) -> dict[str, Any]:
    """Build every member to exact-current (at most ``jobs`` builds at once) and pin them."""
    if jobs < 1:
        raise CitegraphError("--jobs must be at least 1", "pass --jobs 1 or more", code=2)
    t0 = time.perf_counter()
    with MemoryStore.open(home, read_only=True) as ms:
        _require(ms, name)
        mem = members(ms, name)
    results: dict[str, dict[str, Any]] = {}
    need: list[str] = []
    for path, _ in mem:  # members already exact-current need no build (cheap check)
        if not os.path.isdir(path):
            results[path] = {"path": path, "repository_id": None, "snapshot_id": None, "reused": False,
                             "state": "missing", "reason": "path does not exist"}
            continue
        try:
            cur = current_state(path, home)
        except CitegraphError as err:
            results[path] = {"path": path, "repository_id": None, "snapshot_id": None, "reused": False,
                             "state": "missing", "reason": err.what}
            continue
        if cur.exact_current:
            results[path] = {"path": path, "repository_id": cur.identity.repository_id,
                             "snapshot_id": cur.snapshot_id, "reused": True, "state": "ready",
                             "reason": None, "commit": cur.head, "dirty": cur.dirty, "seconds": 0.0}
        else:
            need.append(path)
    workers = min(jobs, len(need))
    if workers <= 1:
        for p in need:
            results[p] = _prepare_one(str(home.root), p, None)
    else:
        # Each build is a `citegraph index` child process: isolated (a crash or a leak in
        # one cannot take the others down) and free of fork-with-threads hazards; at most
        # ``workers`` run at once.
        with ThreadPoolExecutor(workers) as pool:
            for p, r in zip(need, pool.map(lambda p: _prepare_child(home, p), need), strict=True):
                results[p] = r
    ordered = [results[p] for p, _ in mem]
    now = _now()
    with MemoryStore.open(home) as ms:
        _require(ms, name)
        still = {p for p, _ in members(ms, name)}
        with ms.transaction():
            ms.con.execute("DELETE FROM workset_pins WHERE workset = ?", [name])
            for r in ordered:
                if r["path"] not in still:
                    continue
                ms.con.execute("INSERT INTO workset_pins VALUES (?, ?, ?, ?, ?, ?, ?)",
                               [name, r["path"], r["repository_id"], r["snapshot_id"], r["state"], r["reason"],
                                now])
                if r["repository_id"]:
                    ms.con.execute("UPDATE workset_members SET repository_id = ? WHERE workset = ? AND path = ?",
                                   [r["repository_id"], name, r["path"]])
        pinned = _repin(home, ms, name)
    counts = {s: sum(1 for r in ordered if r["state"] == s) for s in ("ready", "missing", "failed")}
    return {"name": name, "members": ordered, "pinned": pinned, "counts": counts,
            "ready": counts["ready"] == len(ordered), "seconds": time.perf_counter() - t0}


def status(home: Home, name: str) -> dict[str, Any]:
    """Per member: ready (an exact-current ready snapshot exists) | stale | not-prepared |
    building | failed | missing. Never builds."""
    with MemoryStore.open(home, read_only=True) as ms:
        _require(ms, name)
        mem = members(ms, name)
        pins = _pins(ms, name)
    scope = Scope(mem)
    read = scope.read_all(home)
    out = []
    for (path, rid), m in zip(mem, read, strict=True):
        pin = pins.get(path) or {}
        row: dict[str, Any] = {"path": path, "repository_id": rid, "prepared_snapshot_id": pin.get("snapshot_id"),
                               "current_snapshot_id": None, "exact_current": False, "pinned": False}
        if m.cur is None:
            row.update(state="missing", reason=m.error)
        else:
            cur = m.cur
            row.update(repository_id=cur.identity.repository_id, current_snapshot_id=cur.snapshot_id,
                       head=cur.head, dirty=cur.dirty, exact_current=cur.exact_current,
                       pinned=cur.snapshot_id == pin.get("snapshot_id"))
            if cur.exact_current:
                row.update(state="ready", reason=None)
            elif cur.entry is not None and cur.entry.get("state") == "building":
                row.update(state="building", reason="the exact-current snapshot is being built")
            elif pin.get("state") == "failed" and not pin.get("snapshot_id"):
                row.update(state="failed", reason=pin.get("reason"))
            elif pin:
                row.update(state="stale", reason="the repository moved since it was prepared "
                           "(HEAD or worktree changed); run citegraph workset prepare")
            else:
                row.update(state="not-prepared", reason="no exact-current snapshot; run citegraph workset prepare")
        out.append(row)
    return {"name": name, "members": out, "ready": all(r["state"] == "ready" for r in out)}
