"""Worksets (SPEC §9) and scoped, bounded validation shared by ``brief`` and
``validate --workset``.

A workset is a named set of repository paths. ``prepare`` builds every member to
exact-current (bounded concurrency, default 2), reports ``ready`` / ``missing`` /
``failed`` per member and pins the ready snapshots against gc. Reads over a workset never
build: they use the exact-current ready snapshot a member already has, else its citations
are ``unknown`` (``not-current``; ``member-missing`` when the path is gone or no longer a
repository). Citations route to members by repository id (the 16-hex prefix a ``cgr_``
handle carries); a repository id matching two members is ``unknown/repository-ambiguous``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from citegraph.graph.current import current_state
from citegraph.graph.retention import set_pins
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.store import Memory, MemoryStore, check_name
from citegraph.validator import decisions
from citegraph.validator.model import MemoryVerdict, Observation, Observed, Receipt
from citegraph.validator.validate import (
    MemoryInput,
    ScopeMember,
    ValidationReport,
    legacy_verdict,
    validate,
)

DEFAULT_PREPARE_JOBS = 2
REPO_CONCURRENCY = 4
PIN_OWNER = "workset:"


def _prefix(repository_id: str | None) -> str | None:
    return repository_id[:16] if repository_id else None


# --- scoped, bounded validation -------------------------------------------------------------


@dataclass
class ScopeSpec:
    """Repositories in scope: (path, repository id known beforehand or None).

    Members are resolved (``current_state``: one git status each, no database) lazily,
    only when a citation routes to them, with at most ``REPO_CONCURRENCY`` at once.
    """

    paths: list[tuple[str, str | None]]
    label: str = "repo"  # "repo" (--repo) or "workset"
    members: dict[str, ScopeMember] = field(default_factory=dict)  # path → resolved member

    @classmethod
    def for_paths(cls, paths: Iterable[str]) -> ScopeSpec:
        seen: dict[str, None] = {}
        for p in paths:
            seen.setdefault(os.path.realpath(os.fspath(p)), None)
        return cls([(p, None) for p in seen], "repo")

    def resolve(self, home: Home, paths: list[str]) -> None:
        todo = [p for p in dict.fromkeys(paths) if p not in self.members]
        if not todo:
            return

        def one(p: str) -> ScopeMember:
            try:
                return ScopeMember(p, current_state(p, home))
            except CitegraphError as err:
                return ScopeMember(p, None, err.what)

        if len(todo) == 1:
            self.members[todo[0]] = one(todo[0])
            return
        with ThreadPoolExecutor(min(REPO_CONCURRENCY, len(todo))) as pool:
            for p, m in zip(todo, pool.map(one, todo), strict=True):
                self.members[p] = m

    def route(self, home: Home, receipts: list[Receipt], need_legacy: bool
              ) -> tuple[dict[str, ScopeMember], dict[str, str]]:
        """Resolve what is needed; return ({repository_id: member}, {prefix: unknown reason})."""
        wanted = {_prefix(r.repository_id) for r in receipts}
        to_resolve = [p for p, rid in self.paths if rid is None or _prefix(rid) in wanted]
        if need_legacy and self.paths:
            to_resolve.insert(0, self.paths[0][0])
        self.resolve(home, to_resolve)
        by_prefix: dict[str, list[tuple[str, ScopeMember | None]]] = {}
        for p, rid in self.paths:
            m = self.members.get(p)
            actual = m.cur.identity.repository_id if m is not None and m.cur is not None else rid
            if actual:
                by_prefix.setdefault(actual[:16], []).append((p, m))
        routes: dict[str, ScopeMember] = {}
        blocked: dict[str, str] = {}
        for pfx, ms in by_prefix.items():
            if len(ms) > 1:
                blocked[pfx] = "repository-ambiguous"
                continue
            _, m = ms[0]
            if m is None:
                continue  # not needed
            if m.cur is None:
                blocked[pfx] = "member-missing" if self.label == "workset" else "not-current"
                continue
            routes[m.cur.identity.repository_id] = m
        return routes, blocked

    def legacy_member(self) -> ScopeMember | None:
        for p, _ in self.paths:
            m = self.members.get(p)
            if m is not None and m.cur is not None:
                return m
        return None


class DictCache:
    """Observation cache held in memory while the memory store is closed: preloaded from
    the store, new observations flushed back afterwards (thread-safe)."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, str], Observation] = {}
        self.new: dict[str, list[Observation]] = {}
        self._lock = threading.Lock()

    def get_many(self, snapshot_id: str, citation_ids: list[str]) -> dict[str, Observation]:
        return {c: self.known[(snapshot_id, c)] for c in citation_ids if (snapshot_id, c) in self.known}

    def put_many(self, snapshot_id: str, observations: list[Observation]) -> None:
        with self._lock:
            self.new.setdefault(snapshot_id, []).extend(observations)

    def load(self, ms: MemoryStore, wanted: dict[str, list[str]]) -> None:
        """One query for every (snapshot, citation) pair (the rows ``get_many`` reads)."""
        pairs = [(sid, cid) for sid, cids in wanted.items() for cid in cids]
        if not pairs:
            return
        ms.con.register("_want", pa.table({"s": [p[0] for p in pairs], "c": [p[1] for p in pairs]}))
        try:
            rows = ms.con.execute(
                "SELECT o.snapshot_id, o.citation_id, o.outcome, o.reason, o.path, o.start_line, o.end_line, "
                "o.handle FROM observations o JOIN _want w ON o.snapshot_id = w.s AND o.citation_id = w.c"
            ).fetchall()
        finally:
            ms.con.unregister("_want")
        for sid, cid, outcome, reason, path, start, end, handle in rows:
            observed = Observed(path, start, end, handle) if path else None
            self.known[(sid, cid)] = Observation(cid, outcome, reason, observed)

    def flush(self, ms: MemoryStore) -> int:
        n = 0
        for sid, obs in self.new.items():
            ms.put_many(sid, obs)
            n += len(obs)
        self.new.clear()
        return n


@dataclass
class ScopedResult:
    report: ValidationReport
    limited: list[str]  # citation ids not validated because of a bound
    limited_memories: list[str]
    validated: int  # citations handed to the validator
    repositories: int  # distinct repositories among the citations within the bounds
    invalid: list[tuple[str, str]]  # (memory id, citation id) with a malformed receipt


def _receipt_ok(r: Receipt) -> bool:
    if r.kind not in ("file", "span", "symbol") or not r.repository_id or not r.path:
        return False
    if r.kind == "span" and (not r.start_line or not r.end_line):
        return False
    return not (r.kind == "symbol" and not r.handle)


@dataclass
class Plan:
    """What a scoped validation will do: citations already decided without any work
    (limit, malformed, blocked, out of scope) and the rest grouped by repository."""

    mems: list[Memory]
    scope: ScopeSpec
    receipts: dict[str, Receipt]
    obs: dict[str, Observation]
    groups: dict[str, list[Receipt]]
    routes: dict[str, ScopeMember]
    limited: list[str]
    invalid: list[tuple[str, str]]
    validated: int
    repositories: int

    def wanted(self) -> dict[str, list[str]]:
        """{snapshot id: citation ids} the observation cache may already hold."""
        out: dict[str, list[str]] = {}
        for rid, rs in self.groups.items():
            cur = self.routes[rid].cur
            if cur is not None and cur.exact_current:
                out.setdefault(cur.snapshot_id, []).extend(r.id for r in rs)
        return out


def plan_validation(home: Home, mems: list[Memory], scope: ScopeSpec, *, max_citations: int | None = None,
                    max_repositories: int | None = None) -> Plan:
    """Bound and route the citations of ``mems`` (in their order).

    Citations beyond ``max_citations`` or in a repository beyond the first
    ``max_repositories`` are ``unknown/limit`` and cost nothing: their repositories are not
    even looked at. Only repositories that citations route to are resolved.
    """
    receipts: dict[str, Receipt] = {}
    order: list[Receipt] = []
    invalid: list[tuple[str, str]] = []
    for m in mems:
        for r in m.citations:
            if r.id in receipts:
                continue
            receipts[r.id] = r
            if _receipt_ok(r):
                order.append(r)
            else:
                invalid.append((m.id, r.id))
    obs: dict[str, Observation] = {cid: Observation(cid, "unknown", "invalid-citation") for _, cid in invalid}
    allowed: list[Receipt] = []
    repos: set[str] = set()
    limited: list[str] = []
    for r in order:
        over_c = max_citations is not None and len(allowed) >= max_citations
        over_r = (max_repositories is not None and r.repository_id not in repos
                  and len(repos) >= max_repositories)
        if over_c or over_r:
            limited.append(r.id)
            obs[r.id] = Observation(r.id, "unknown", "limit")
            continue
        allowed.append(r)
        repos.add(r.repository_id)
    need_legacy = any(not m.citations and m.source_commit for m in mems)
    routes, blocked = scope.route(home, allowed, need_legacy)
    groups: dict[str, list[Receipt]] = {}
    for r in allowed:
        pfx = r.repository_id[:16]
        if pfx in blocked:
            obs[r.id] = Observation(r.id, "unknown", blocked[pfx])
        elif r.repository_id in routes:
            groups.setdefault(r.repository_id, []).append(r)
        else:
            pre = decisions.precondition(r, in_scope=False, current=False, extractor_ok=False)
            assert pre is not None
            obs[r.id] = pre
    return Plan(mems, scope, receipts, obs, groups, routes, limited, invalid, len(allowed), len(repos))


def run_plan(home: Home, plan: Plan, *, cache: Any = None, concurrency: int = REPO_CONCURRENCY) -> ScopedResult:
    """Validate each repository group against its exact-current snapshot (at most
    ``concurrency`` repositories at once; never builds), then aggregate per memory."""
    obs = dict(plan.obs)

    def run(rid: str) -> dict[str, Observation]:
        member, rs = plan.routes[rid], plan.groups[rid]
        try:
            rep = validate(home, [MemoryInput("_", rs)], [member], cache=cache)
        except CitegraphError:
            return {r.id: Observation(r.id, "unknown", "snapshot-unreadable") for r in rs}
        return {o.citation_id: o for o in rep.verdicts[0].observations}

    rids = list(plan.groups)
    if len(rids) <= 1 or concurrency <= 1:
        for rid in rids:
            obs.update(run(rid))
    else:
        with ThreadPoolExecutor(min(concurrency, len(rids))) as pool:
            for res in pool.map(run, rids):
                obs.update(res)

    legacy_scope = [m for m in [plan.scope.legacy_member()] if m is not None]
    verdicts = []
    limited_set = set(plan.limited)
    limited_mems = []
    for m in plan.mems:
        if not m.citations:
            verdicts.append(legacy_verdict(MemoryInput(m.id, [], m.source_commit), legacy_scope))
            continue
        verdicts.append(aggregate(m.id, [obs[r.id] for r in m.citations]))
        if any(r.id in limited_set for r in m.citations):
            limited_mems.append(m.id)
    return ScopedResult(ValidationReport(verdicts, plan.receipts), plan.limited, limited_mems, plan.validated,
                        plan.repositories, plan.invalid)


def scoped_validate(home: Home, mems: list[Memory], scope: ScopeSpec, *,
                    max_citations: int | None = None, max_repositories: int | None = None,
                    concurrency: int = REPO_CONCURRENCY,
                    preload: Callable[[dict[str, list[str]]], None] | None = None,
                    cache: Any = None) -> ScopedResult:
    """``plan_validation`` + optional cache preload + ``run_plan``."""
    plan = plan_validation(home, mems, scope, max_citations=max_citations, max_repositories=max_repositories)
    wanted = plan.wanted()
    if preload is not None and wanted:
        preload(wanted)
    return run_plan(home, plan, cache=cache, concurrency=concurrency)


def aggregate(memory_id: str, observations: list[Observation]) -> MemoryVerdict:
    """SPEC §6.5 over one memory's observations (same rules as the validator)."""
    outcomes = [o.outcome for o in observations]
    v = MemoryVerdict(memory_id, decisions.freshness(outcomes), decisions.precise_status(outcomes),
                      observations=list(observations))
    if v.freshness == "unknown":
        reasons = sorted({o.reason or "unknown" for o in observations if o.outcome == "unknown"})
        v.reason = ",".join(reasons)
    for o in observations:
        if o.outcome == "relocated" and o.observed:
            loc = o.observed.path + (f"#L{o.observed.start_line}-L{o.observed.end_line}"
                                     if o.observed.start_line else "")
            v.warnings.append(f"stale-link: {o.citation_id} now at {loc}")
    return v


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
        ms.con.execute("BEGIN TRANSACTION")
        ms.con.execute("INSERT INTO worksets VALUES (?, ?)", [name, _now()])
        _insert_members(ms, name, resolved)
        ms.con.execute("COMMIT")
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


def load_scope(ms: MemoryStore, name: str) -> ScopeSpec:
    _require(ms, name)
    return ScopeSpec(members(ms, name), "workset")


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
        ms.con.execute("BEGIN TRANSACTION")
        ms.con.execute("DELETE FROM workset_pins WHERE workset = ?", [name])
        for r in ordered:
            if r["path"] not in still:
                continue
            ms.con.execute("INSERT INTO workset_pins VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [name, r["path"], r["repository_id"], r["snapshot_id"], r["state"], r["reason"], now])
            if r["repository_id"]:
                ms.con.execute("UPDATE workset_members SET repository_id = ? WHERE workset = ? AND path = ?",
                               [r["repository_id"], name, r["path"]])
        ms.con.execute("COMMIT")
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
    spec = ScopeSpec(mem, "workset")
    spec.resolve(home, [p for p, _ in mem])
    out = []
    for path, rid in mem:
        m = spec.members[path]
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


def validate_workset(home: Home, name: str, *, memory_ids: list[str] | None = None,
                     project: str | None = None) -> ValidationReport:
    """``citegraph validate --workset NAME``: every citation routed to its member's
    exact-current snapshot; never builds."""
    from citegraph.memory.api import select_memories

    with MemoryStore.open(home) as ms:
        scope = load_scope(ms, name)
        mems = select_memories(ms, memory_ids, project)
        cache = DictCache()
        res = scoped_validate(home, mems, scope, preload=lambda w: cache.load(ms, w), cache=cache)
        cache.flush(ms)
    return res.report

