"""Validation orchestration: scope → one exact-current snapshot per repository → evidence
(set-based) → pure decisions → racing re-check → aggregation.

Validation never writes to a snapshot and never builds one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import pygit2

from citegraph.graph.current import CurrentState, current_state
from citegraph.graph.snapshot_reader import DamagedSnapshot, Snapshot
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION
from citegraph.validator import decisions
from citegraph.validator.evidence import SnapshotEvidence, reextract_fragment
from citegraph.validator.model import OUTCOMES, MemoryVerdict, Observation, Receipt

MAX_REPO_CONCURRENCY = 4


@dataclass
class MemoryInput:
    """What validation needs of a memory (the memory store maps its rows to this)."""

    memory_id: str
    receipts: list[Receipt]
    source_commit: str | None = None


class ObservationCache(Protocol):
    def get_many(self, snapshot_id: str, citation_ids: list[str]) -> dict[str, Observation]: ...

    def put_many(self, snapshot_id: str, observations: list[Observation]) -> None: ...


@dataclass
class ScopeMember:
    path: str
    cur: CurrentState | None
    error: str | None = None
    exc: CitegraphError | None = None  # the error behind ``error`` (its exit code and advice)


@dataclass
class ValidationReport:
    verdicts: list[MemoryVerdict]
    receipts: dict[str, Receipt] = field(default_factory=dict)

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for v in self.verdicts:
            for o in v.observations:
                counts[o.outcome] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {"memories": [self.memory_json(v) for v in self.verdicts], "summary": self.summary()}

    def memory_json(self, v: MemoryVerdict) -> dict[str, Any]:
        cites = []
        for o in v.observations:
            r = self.receipts[o.citation_id]
            cites.append({"id": r.id, "ref": r.ref, "kind": r.kind, "path": r.path, "handle": r.handle,
                          "outcome": o.outcome, "reason": o.reason,
                          "observed": o.observed.to_dict() if o.observed else None,
                          "dirty": r.dirty})
        out = {"id": v.memory_id, "freshness": v.freshness, "status": v.status, "reason": v.reason,
               "citations": cites}
        if v.warnings:
            out["warnings"] = v.warnings
        return out


def resolve_scope(home: Home, repo_paths: list[str], at: str | None = None) -> list[ScopeMember]:
    members = []
    for p in repo_paths:
        try:
            members.append(ScopeMember(os.fspath(p), current_state(p, home, at)))
        except CitegraphError as err:
            members.append(ScopeMember(os.fspath(p), None, err.what, err))
    return members


def validate(home: Home, items: list[MemoryInput], scope: list[ScopeMember], at: str | None = None,
             cache: ObservationCache | None = None, limit_citations: int | None = None,
             _before_recheck: Callable[[], None] | None = None) -> ValidationReport:
    """Validate every citation of ``items`` against the scope's exact-current snapshots."""
    by_repo: dict[str, list[ScopeMember]] = {}
    for m in scope:
        if m.cur is not None:
            by_repo.setdefault(m.cur.identity.repository_id, []).append(m)
    receipts: dict[str, Receipt] = {}
    order: list[Receipt] = []
    for it in items:
        for r in it.receipts:
            if r.id not in receipts:
                receipts[r.id] = r
                order.append(r)
    allowed = set(r.id for r in order[:limit_citations]) if limit_citations is not None else None

    obs: dict[str, Observation] = {}
    groups: dict[str, list[Receipt]] = {}
    for r in order:
        if allowed is not None and r.id not in allowed:
            obs[r.id] = Observation(r.id, "unknown", "limit")
            continue
        members = by_repo.get(r.repository_id, [])
        if not members:
            obs[r.id] = decisions.precondition(r, in_scope=False, current=False, extractor_ok=False)  # type: ignore[assignment]
        elif len(members) > 1 and len({m.cur.snapshot_id for m in members if m.cur}) > 1:
            obs[r.id] = Observation(r.id, "unknown", "repository-ambiguous")
        else:
            groups.setdefault(r.repository_id, []).append(r)
    locked = _LockedCache(cache) if cache is not None else None
    # An injected racing hook (tests) needs a defined order of repositories: run serially.
    if len(groups) <= 1 or _before_recheck is not None:
        for rid, rs in groups.items():
            obs.update(_validate_repo(home, by_repo[rid][0], rs, at, locked, _before_recheck))
    else:
        # Repositories are independent: at most MAX_REPO_CONCURRENCY at once (SPEC §8).
        with ThreadPoolExecutor(min(MAX_REPO_CONCURRENCY, len(groups))) as pool:
            futures = [pool.submit(_validate_repo, home, by_repo[rid][0], rs, at, locked, _before_recheck)
                       for rid, rs in groups.items()]
            for f in futures:
                obs.update(f.result())

    verdicts = []
    for it in items:
        verdicts.append(_aggregate(it, [obs[r.id] for r in it.receipts], scope))
    return ValidationReport(verdicts, receipts)


class _LockedCache:
    """Serialises cache access: one store connection is shared by the repository threads."""

    def __init__(self, inner: ObservationCache) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def get_many(self, snapshot_id: str, citation_ids: list[str]) -> dict[str, Observation]:
        with self.lock:
            return self.inner.get_many(snapshot_id, citation_ids)

    def put_many(self, snapshot_id: str, observations: list[Observation]) -> None:
        with self.lock:
            self.inner.put_many(snapshot_id, observations)


def _validate_repo(home: Home, member: ScopeMember, rs: list[Receipt], at: str | None,
                   cache: ObservationCache | None, before_recheck: Callable[[], None] | None
                   ) -> dict[str, Observation]:
    cur = member.cur
    assert cur is not None
    if not cur.exact_current:
        return {r.id: Observation(r.id, "unknown", "not-current") for r in rs}
    out: dict[str, Observation] = {}
    cached = cache.get_many(cur.snapshot_id, [r.id for r in rs]) if cache else {}
    out.update(cached)
    todo = [r for r in rs if r.id not in cached]
    fresh: list[Observation] = []
    if todo:
        try:
            snap = Snapshot.open(cur.store, cur.snapshot_id, cur.repo)
        except DamagedSnapshot:
            # Found damaged (and now marked failed): it cannot answer for the current state.
            return {r.id: Observation(r.id, "unknown", "not-current") for r in rs}
        with snap:
            ev = SnapshotEvidence.gather(snap, todo)
            snap_extractor = snap.entry.get("extractor_version", EXTRACTOR_VERSION)
            for r in todo:
                o = decide_one(r, ev, cur.repo, cur.head, snap_extractor)
                out[r.id] = o
                fresh.append(o)
    if before_recheck is not None:
        before_recheck()
    try:
        again = current_state(member.path, home, at)
        moved = again.token() != cur.token()
    except CitegraphError:
        moved = True
    if moved:
        return {r.id: Observation(r.id, "unknown", "racing") for r in rs}
    if cache and fresh:
        cache.put_many(cur.snapshot_id, fresh)
    return out


def decide_one(r: Receipt, ev: SnapshotEvidence, repo: pygit2.Repository | None, snapshot_commit: str,
               snapshot_extractor: str) -> Observation:
    if r.kind == "symbol" and r.extractor_version != snapshot_extractor:
        extractor_ok = reextract_fragment(repo, r) == r.fragment_hash
        pre = decisions.precondition(r, in_scope=True, current=True, extractor_ok=extractor_ok)
        if pre is not None:
            return pre
    if r.kind == "file":
        return decisions.decide_file(r, ev.file_evidence(r))
    if r.kind == "span":
        return decisions.decide_span(r, ev.span_evidence(r, repo, snapshot_commit))
    return decisions.decide_symbol(r, ev.symbol_evidence(r))


def _aggregate(it: MemoryInput, observations: list[Observation], scope: list[ScopeMember]) -> MemoryVerdict:
    if observations:
        outcomes = [o.outcome for o in observations]
        v = MemoryVerdict(it.memory_id, decisions.freshness(outcomes), decisions.precise_status(outcomes),
                          observations=observations)
        for o in observations:
            if o.outcome == "relocated" and o.observed:
                loc = o.observed.path + (f"#L{o.observed.start_line}-L{o.observed.end_line}"
                                         if o.observed.start_line else "")
                v.warnings.append(f"stale-link: {o.citation_id} now at {loc}")
        return v
    return legacy_verdict(it, scope)


def legacy_verdict(it: MemoryInput, scope: list[ScopeMember]) -> MemoryVerdict:
    """SPEC §6.5: no citations — judged by source_commit against the first repository."""
    cur = next((m.cur for m in scope if m.cur is not None), None)
    if not it.source_commit or cur is None:
        return MemoryVerdict(it.memory_id, "unknown", None, reason="no-basis")
    repo = cur.repo
    try:
        exists = isinstance(repo.get(it.source_commit) or repo.revparse_single(it.source_commit), pygit2.Object)
        commit = repo.revparse_single(it.source_commit).peel(pygit2.Commit)
        sha = str(commit.id)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        exists, sha = False, ""
    is_head = exists and sha == cur.head
    ancestor = False
    behind = None
    if exists and not is_head:
        try:
            ancestor = repo.descendant_of(cur.head, sha)
            if ancestor:
                behind, _ = repo.ahead_behind(cur.head, sha)
        except (KeyError, ValueError, pygit2.GitError):
            ancestor = False
    fresh, reason = decisions.legacy_freshness(it.source_commit, is_head=is_head, worktree_clean=not cur.dirty,
                                               exists=exists, is_ancestor=ancestor)
    v = MemoryVerdict(it.memory_id, fresh, None, reason=reason)
    if behind is not None:
        v.warnings.append(f"source commit is {behind} commit(s) behind HEAD")
    return v
