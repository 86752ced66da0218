"""The one validation pipeline (SPEC §17): plan → run → aggregate.

Every reader of verdicts uses it: ``validate`` and ``validate --workset``
(memory/api.py), ``brief`` (memory/brief/compose.py), the MCP ``validate`` tool (through the API)
and the resident service (which injects its own ``StateSource``).

- **plan**: route each citation to the scope members carrying its repository id. Only the
  members some citation needs are read (``Scope.read``: once each, at most 4 at once).
  The rows before the tables (malformed, limit, out of scope, repository-ambiguous, member
  missing, not current) are ``decisions.before_anything`` over the facts gathered here.
- **run**: per repository (at most 4 at once): the exact-current snapshot, the observation
  cache, the evidence (set-based, validator/evidence.py), the extractor row and the tables
  (validator/decisions.py), then one ``moved`` check per member → ``decisions.after_run``
  (racing).
- **aggregate**: SPEC §6.5 per memory; memories without citations by their source commit.

Validation never writes to a snapshot and never builds one. One command reads each
repository's state once before and checks it once after (``StateSource``); a ``Scope``
therefore belongs to one command.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import pygit2

from citegraph.graph.current import CurrentState, ScanSource, StateSource
from citegraph.graph.identity import former_ids
from citegraph.graph.snapshot_reader import DamagedSnapshot, Snapshot
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION
from citegraph.indexer.git_filters import GitFilters
from citegraph.indexer.paths import fs_path
from citegraph.validator import decisions, spans
from citegraph.validator.evidence import (
    SnapshotEvidence,
    at_handle_columns,
    dependency_evidence,
    observed_token_hashes,
    reextract_fragment,
)
from citegraph.validator.model import OUTCOMES, MemoryVerdict, Observation, Receipt
from citegraph.validator.next_steps import next_step

MAX_REPO_CONCURRENCY = 4  # SPEC §8: repositories read at once (plan and run)
_GC_PAUSE_MIN = 5000  # citations from which plan/run/aggregate pause the cyclic collector


class _CyclicGcPause:
    """Batch validation allocates several small objects per citation (observations, dict
    entries) while tens of thousands of receipts stay alive: the cyclic collector would scan
    that growing heap again and again (a third of a 76k-citation run on ruff). Nothing here
    creates reference cycles, so plan, run and aggregate pause it for large inputs and
    restore it after; reference counting frees everything as usual. Counted, so that
    concurrent validations (the service's threads) restore it only when the last ends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False

    def __enter__(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.depth += 1

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0 and self.was_enabled:
                gc.enable()


_GC_PAUSE = _CyclicGcPause()


def _gc_paused(n: int) -> contextlib.AbstractContextManager[None]:
    return _GC_PAUSE if n >= _GC_PAUSE_MIN else contextlib.nullcontext()


@dataclass
class MemoryInput:
    """What validation needs of a memory (the memory store maps its rows to this)."""

    memory_id: str
    receipts: list[Receipt]
    source_commit: str | None = None


class ObservationCache(Protocol):
    """Observations are deterministic for (snapshot id, citation id), SPEC §6.5."""

    def get_many(self, snapshot_id: str, citation_ids: list[str]) -> dict[str, Observation]: ...

    def put_many(self, snapshot_id: str, observations: list[Observation]) -> None: ...


# --- scope ------------------------------------------------------------------------------------


@dataclass
class ScopeMember:
    path: str
    cur: CurrentState | None  # None: the path could not be read (see error/exc)
    error: str | None = None
    exc: CitegraphError | None = None  # the error behind ``error`` (its exit code and advice)


@dataclass
class Scope:
    """The repositories one validation may read, in order: (path, repository id when known
    beforehand — a workset records it — else None). Members are read through ``source``
    when first needed and never again (``members``: path → member read)."""

    paths: list[tuple[str, str | None]]
    at: str | None = None  # validate against the snapshot of this commit (SPEC §6.6 --at)
    source: StateSource = field(default_factory=ScanSource)
    members: dict[str, ScopeMember] = field(default_factory=dict)

    @classmethod
    def for_paths(cls, paths: Iterable[str | os.PathLike[str]], *, at: str | None = None,
                  source: StateSource | None = None) -> Scope:
        unique = dict.fromkeys(os.fspath(p) for p in paths)
        return cls([(p, None) for p in unique], at, source or ScanSource())

    def read(self, home: Home | None, paths: Iterable[str]) -> None:
        """Read the members of ``paths`` not read yet (at most 4 at once)."""
        todo = [p for p in dict.fromkeys(paths) if p not in self.members]
        if len(todo) <= 1:
            for p in todo:
                self.members[p] = self._read_one(home, p)
            return
        with ThreadPoolExecutor(min(MAX_REPO_CONCURRENCY, len(todo))) as pool:
            for p, m in zip(todo, pool.map(lambda p: self._read_one(home, p), todo), strict=True):
                self.members[p] = m

    def read_all(self, home: Home) -> list[ScopeMember]:
        self.read(home, [p for p, _ in self.paths])
        return [self.members[p] for p, _ in self.paths]

    def _read_one(self, home: Home | None, path: str) -> ScopeMember:
        try:
            return ScopeMember(path, self.source.read(path, home, self.at))
        except CitegraphError as err:
            return ScopeMember(path, None, err.what, err)


def resolve_scope(home: Home, paths: Iterable[str | os.PathLike[str]], at: str | None = None,
                  source: StateSource | None = None) -> Scope:
    """A scope of ``paths``, every member read now (a path that is not a repository gets
    ``cur=None`` and ``error``/``exc``)."""
    scope = Scope.for_paths(paths, at=at, source=source)
    scope.read_all(home)
    return scope


# --- plan -------------------------------------------------------------------------------------


@dataclass
class Group:
    """The citations of one repository and the scope members (all in one state) it is
    read through."""

    members: list[ScopeMember]
    receipts: list[Receipt] = field(default_factory=list)

    @property
    def cur(self) -> CurrentState:
        cur = self.members[0].cur
        assert cur is not None
        return cur


@dataclass
class Plan:
    """What a validation will do: citations decided before any snapshot is read, and the
    rest grouped by repository."""

    items: list[MemoryInput]
    scope: Scope
    receipts: dict[str, Receipt]  # citation id → receipt (first occurrence)
    decided: dict[str, Observation]  # decided by the rows before the tables
    groups: dict[str, Group]  # repository id → what ``run`` reads
    limited: list[str]  # citation ids beyond a bound
    invalid: list[tuple[str, str]]  # (memory id, citation id) of malformed receipts
    validated: int  # citations within the bounds
    repositories: int  # distinct repositories among them
    legacy: ScopeMember | None  # what memories without citations are judged against
    # dependency-changed advisories over recorded dependencies up to this depth (0: none)
    dependency_depth: int = 1
    # citation id → (read through the resident service, seconds it was still indexing the
    # state read or None): the wording of next steps
    read_by: dict[str, tuple[bool, float | None]] = field(default_factory=dict)

    def wanted(self) -> dict[str, list[str]]:
        """{snapshot id: citation ids} the observation cache may already hold."""
        out: dict[str, list[str]] = {}
        for g in self.groups.values():
            out.setdefault(g.cur.snapshot_id, []).extend(r.id for r in g.receipts)
        return out


@dataclass
class _Route:
    """The scope members carrying one repository id."""

    members: list[ScopeMember]

    @property
    def read(self) -> list[ScopeMember]:
        return [m for m in self.members if m.cur is not None]

    def facts(self) -> dict[str, Any]:
        """The plain facts ``decisions.before_anything`` decides on."""
        curs = [m.cur for m in self.members if m.cur is not None]
        return {"members": len(self.members), "read": len(curs), "states": len({c.snapshot_id for c in curs}),
                "current": bool(curs) and curs[0].exact_current,
                "indexing": bool(curs) and curs[0].indexing_s is not None}


NOT_LOOKED_AT = {"members": 0, "read": 0, "states": 0, "current": False, "indexing": False}


def plan(home: Home | None, items: list[MemoryInput], scope: Scope, *, max_citations: int | None = None,
         max_repositories: int | None = None, dependency_depth: int = 1) -> Plan:
    """``dependency_depth``: how deep recorded dependencies are checked for advisories
    (1: direct ones, the default; at most 3; 0: not at all)."""
    if not 0 <= dependency_depth <= decisions.MAX_DEPENDENCY_DEPTH:
        raise CitegraphError(f"dependency depth {dependency_depth} is out of range",
                             f"use 0..{decisions.MAX_DEPENDENCY_DEPTH} (1 is the default)", code=2)
    with _gc_paused(sum(len(it.receipts) for it in items)):
        p = _plan(home, items, scope, max_citations=max_citations, max_repositories=max_repositories)
    p.dependency_depth = dependency_depth
    return p


def _plan(home: Home | None, items: list[MemoryInput], scope: Scope, *, max_citations: int | None = None,
          max_repositories: int | None = None) -> Plan:
    """Bound, check and route the citations of ``items`` (in their order).

    Citations beyond ``max_citations``, or of a repository beyond the first
    ``max_repositories``, cost nothing: their repositories are not even read. Only members
    that some citation routes to (and, for memories without citations, the first member)
    are read."""
    receipts: dict[str, Receipt] = {}
    checked: list[tuple[Receipt, bool, bool]] = []  # (receipt, well formed, within the bounds)
    invalid: list[tuple[str, str]] = []
    limited: list[str] = []
    admitted: set[str] = set()  # repository ids of the citations within the bounds
    validated = 0
    for it in items:
        for r in it.receipts:
            if r.id in receipts:
                continue
            receipts[r.id] = r
            ok = decisions.well_formed(r)
            within = ok and decisions.within_bounds(
                citations=validated, repositories=len(admitted), new_repository=r.repository_id not in admitted,
                max_citations=max_citations, max_repositories=max_repositories)
            if not ok:
                invalid.append((it.memory_id, r.id))
            elif within:
                validated += 1
                admitted.add(r.repository_id)
            else:
                limited.append(r.id)
            checked.append((r, ok, within))

    need_legacy = any(not it.receipts and it.source_commit for it in items)
    # A member whose recorded id is not admitted is still read when one of its former ids
    # (identity history, graph/identity.py) is: its clone answers for those citations.
    to_read = [p for p, rid in scope.paths if rid is None or rid in admitted
               or (home is not None and any(old in admitted for old in former_ids(home, rid)))]
    if need_legacy and scope.paths:
        to_read.insert(0, scope.paths[0][0])
    scope.read(home, to_read)
    routes: dict[str, _Route] = {}
    former: dict[str, _Route] = {}
    for p, rid in scope.paths:
        m = scope.members.get(p)
        actual = m.cur.identity.repository_id if m is not None and m.cur is not None else rid
        if actual in admitted:  # every member of an admitted id was read (above)
            assert m is not None
            routes.setdefault(actual, _Route([])).members.append(m)
        if m is not None and m.cur is not None:
            for old in m.cur.former_ids():
                if old in admitted:
                    former.setdefault(old, _Route([])).members.append(m)
    for old, route in former.items():
        routes.setdefault(old, route)  # a member that carries the id itself wins over a former id

    decided: dict[str, Observation] = {}
    groups: dict[str, Group] = {}
    facts = {rid: route.facts() for rid, route in routes.items()}
    for r, ok, within in checked:
        f = facts.get(r.repository_id, NOT_LOOKED_AT) if within else NOT_LOOKED_AT
        o = decisions.before_anything(r, well_formed=ok, within_bounds=within, **f)
        if o is not None:
            decided[r.id] = o
        else:
            g = groups.get(r.repository_id)
            if g is None:
                g = groups[r.repository_id] = Group(routes[r.repository_id].read)
            g.receipts.append(r)
    legacy = scope.members.get(scope.paths[0][0]) if need_legacy and scope.paths else None
    read_by: dict[str, tuple[bool, float | None]] = {}  # how each citation's state was read (next steps)
    for r, _ok, within in checked:
        route = routes.get(r.repository_id) if within else None
        cur = route.read[0].cur if route is not None and route.read else None
        if cur is not None and cur.service:
            read_by[r.id] = (True, cur.indexing_s)
    return Plan(items, scope, receipts, decided, groups, limited, invalid, validated, len(admitted), legacy,
                read_by=read_by)


# --- run --------------------------------------------------------------------------------------


class _LockedCache:
    """Serialises cache access: one store connection may be shared by the repository threads."""

    def __init__(self, inner: ObservationCache) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def get_many(self, snapshot_id: str, citation_ids: list[str]) -> dict[str, Observation]:
        with self.lock:
            return self.inner.get_many(snapshot_id, citation_ids)

    def put_many(self, snapshot_id: str, observations: list[Observation]) -> None:
        with self.lock:
            self.inner.put_many(snapshot_id, observations)


def run(plan: Plan, *, cache: ObservationCache | None = None) -> dict[str, Observation]:
    """Every citation's observation: the plan's, and per repository group (at most 4 at
    once) the exact-current snapshot's, re-checked with ``moved`` afterwards."""
    with _gc_paused(len(plan.receipts)):
        return _run(plan, cache)


def _run(plan: Plan, cache: ObservationCache | None) -> dict[str, Observation]:
    obs = dict(plan.decided)
    locked = _LockedCache(cache) if cache is not None else None
    source = plan.scope.source
    groups = list(plan.groups.values())
    depth = plan.dependency_depth
    if len(groups) <= 1:
        results = [_run_group(g, source, locked, depth) for g in groups]
    else:
        with ThreadPoolExecutor(min(MAX_REPO_CONCURRENCY, len(groups))) as pool:
            results = list(pool.map(lambda g: _run_group(g, source, locked, depth), groups))
    spans.clear_caches()
    for res in results:
        obs.update(res)
    return obs


def _run_group(g: Group, source: StateSource, cache: ObservationCache | None,
               dependency_depth: int = 1) -> dict[str, Observation]:
    cur, rs = g.cur, g.receipts
    cached = cache.get_many(cur.snapshot_id, [r.id for r in rs]) if cache is not None else {}
    out: dict[str, Observation] = dict(cached)
    fresh: list[Observation] = []
    todo = [r for r in rs if r.id not in cached]
    if todo:
        try:
            with cur.open_snapshot() as snap:
                extractor = snap.entry.get("extractor_version", EXTRACTOR_VERSION)
                todo = _decide_at_handles(snap, todo, extractor, out, fresh)
                ev = SnapshotEvidence.gather(snap, todo)
                for r in todo:
                    o = decide(r, ev, cur, extractor)
                    out[r.id] = o
                    fresh.append(o)
        except CitegraphError as err:
            damaged = isinstance(err, DamagedSnapshot)
            return {r.id: decisions.snapshot_unreadable(r, damaged=damaged) for r in rs}
    moved = any(source.moved(m.cur) for m in g.members if m.cur is not None)
    final = decisions.after_run([out[r.id] for r in rs], moved=moved)
    if cache is not None and fresh and not moved:  # a racing answer is never cached
        cache.put_many(cur.snapshot_id, fresh)
    final = _unsettled(cur, rs, final)
    final = _with_advisories(cur, rs, final, dependency_depth)
    final = _with_change(cur, rs, final)
    return {o.citation_id: o for o in final}


class _AdvisoryMemo:
    """Advisories are deterministic for (snapshot id, citation id, depth) — snapshots are
    immutable — so a process (the resident service) answers a repeated read from memory,
    as the observation cache answers the outcome. Bounded; cleared when full."""

    MAX = 100_000

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: dict[tuple[str, str, int], tuple] = {}

    def get(self, key: tuple[str, str, int]) -> tuple | None:
        with self.lock:
            return self.known.get(key)

    def put_many(self, items: dict[tuple[str, str, int], tuple]) -> None:
        with self.lock:
            if len(self.known) + len(items) > self.MAX:
                self.known.clear()
            self.known.update(items)


_ADVISORIES = _AdvisoryMemo()


def _with_advisories(cur: CurrentState, rs: list[Receipt], final: list[Observation], depth: int
                     ) -> list[Observation]:
    """``dependency-changed`` advisories (SPEC §21) on the exact symbol observations whose
    receipts recorded dependencies: one evidence pass over the snapshot for all of them.
    Computed after the cache (they depend on ``depth``) and never change an outcome."""
    by_id = {r.id: r for r in rs}
    todo = [(by_id[o.citation_id], o) for o in final if o.outcome == "exact" and depth > 0
            and o.citation_id in by_id and by_id[o.citation_id].deps]
    if not todo:
        return final
    known = {r.id: a for r, _ in todo if (a := _ADVISORIES.get((cur.snapshot_id, r.id, depth))) is not None}
    if len(known) == len(todo):
        return [o._replace(advisories=known[o.citation_id]) if known.get(o.citation_id) else o for o in final]
    todo = [(r, o) for r, o in todo if r.id not in known]
    wanted = [(decisions.dependent_of(r, deps, d), d) for r, _ in todo
              for deps in (r.dependencies,) for d in deps if d.get("depth", 1) <= depth]
    try:
        with cur.open_snapshot() as snap:
            ev = dependency_evidence(snap, wanted)
    except CitegraphError:
        return final  # an advisory is optional: the outcomes stand without it
    adv = {r.id: decisions.dependency_advisories(r, o, ev, depth) for r, o in todo}
    _ADVISORIES.put_many({(cur.snapshot_id, rid, depth): a for rid, a in adv.items()})
    adv.update(known)
    return [o._replace(advisories=adv[o.citation_id]) if adv.get(o.citation_id) else o for o in final]


# (snapshot id, citation id, 0) -> (change, span lines now): deterministic as advisories are
_CHANGES = _AdvisoryMemo()


def _with_change(cur: CurrentState, rs: list[Receipt], final: list[Observation]) -> list[Observation]:
    """SPEC §6.3a: the change detail of the ``changed`` span and symbol observations whose
    receipts recorded a token hash (``decisions.change_kind`` over the token hash of the
    code now at the cited place). After the cache, as advisories: the outcome is unchanged."""
    by_id = {r.id: r for r in rs}
    todo = [(by_id[o.citation_id], o) for o in final if o.outcome == "changed" and o.citation_id in by_id
            and by_id[o.citation_id].token_hash and by_id[o.citation_id].kind in ("span", "symbol")]
    if not todo:
        return final
    known = {r.id: c for r, _ in todo if (c := _CHANGES.get((cur.snapshot_id, r.id, 0))) is not None}
    rest = [(r, o) for r, o in todo if r.id not in known]
    if rest:
        try:
            with cur.open_snapshot() as snap:
                hashes = observed_token_hashes(snap, [(r, o.observed.path if o.observed else None) for r, o in rest])
        except CitegraphError:
            hashes = {}  # a detail: the outcome stands without it
        got = {}
        for r, o in rest:
            observed, lines = hashes.get(r.id, (None, None))
            got[r.id] = (decisions.change_kind(r, o, observed), lines)
        if hashes:
            _CHANGES.put_many({(cur.snapshot_id, rid, 0): c for rid, c in got.items()})
        known.update(got)

    def detailed(o: Observation) -> Observation:
        change, lines = known.get(o.citation_id, (None, None))
        if change is None:
            return o
        if lines is not None and o.observed is not None:  # a span's lines now (refresh re-captures there)
            return o._replace(change=change, observed=o.observed._replace(start_line=lines[0], end_line=lines[1]))
        return o._replace(change=change)

    return [detailed(o) for o in final]


def _unsettled(cur: CurrentState, rs: list[Receipt], final: list[Observation]) -> list[Observation]:
    """``decisions.unsettled_content`` for observations that read a dirty file whose stored
    form a filter driver makes (indexer/git_filters.py). Applied after the cache: it
    depends on the configuration, which the snapshot id does not name."""
    present = {p for p, blob in cur.state.dirty_paths if blob is not None} if cur.state is not None else set()
    if not present or cur.repo is None:
        return final
    filters = GitFilters(cur.repo)
    memo: dict[str, bool] = {}

    def unsettled(path: str | None) -> bool:
        if path is None or path not in present:
            return False
        if path not in memo:
            memo[path] = filters.external_driver(fs_path(path)) is not None
        return memo[path]

    by_id = {r.id: r for r in rs}
    return [decisions.unsettled_content(o, cited_unsettled=unsettled(by_id[o.citation_id].path)
                                        if o.citation_id in by_id else False,
                                        observed_unsettled=unsettled(o.observed.path if o.observed else None))
            for o in final]


def _decide_at_handles(snap: Snapshot, todo: list[Receipt], extractor: str, out: dict[str, Observation],
                       fresh: list[Observation]) -> list[Receipt]:
    """Batch path (SPEC §6.6): the symbol citations whose handle exists in the snapshot —
    most of them — decided in one SQL pass and one vectorised table
    (``decisions.decide_symbols_at_handle``). Returns the receipts left for ``decide``:
    files, spans, symbols of another extractor version and symbols whose handle is gone."""
    batch, rest = [], []
    for r in todo:
        (batch if r.kind == "symbol" and not decisions.needs_reextraction(r, extractor) else rest).append(r)
    if not batch:
        return rest
    for r, o in zip(batch, decisions.decide_symbols_at_handle(batch, at_handle_columns(snap, batch)), strict=True):
        if o is None:
            rest.append(r)
        else:
            out[r.id] = o
            fresh.append(o)
    return rest


def decide(r: Receipt, ev: SnapshotEvidence, cur: CurrentState, snapshot_extractor: str) -> Observation:
    """One citation against the snapshot: the extractor row, then its kind's table."""
    again = reextract_fragment(cur.repo, r) if decisions.needs_reextraction(r, snapshot_extractor) else None
    gate = decisions.extractor_gate(r, snapshot_extractor=snapshot_extractor, reextracted_fragment=again)
    if gate is not None:
        return gate
    if r.kind == "file":
        return decisions.decide_file(r, ev.file_evidence(r))
    if r.kind == "span":
        return decisions.decide_span(r, ev.span_evidence(r, cur.repo, cur.head))
    return decisions.decide_symbol(r, ev.symbol_evidence(r))


# --- aggregate ----------------------------------------------------------------------------------


@dataclass
class ValidationReport:
    verdicts: list[MemoryVerdict]
    receipts: dict[str, Receipt] = field(default_factory=dict)
    limited: list[str] = field(default_factory=list)  # citation ids not validated (a bound)
    limited_memories: list[str] = field(default_factory=list)
    validated: int = 0  # citations within the bounds
    repositories: int = 0  # distinct repositories among them
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (memory id, citation id)
    at: str | None = None  # the --at REV validated against (it words the next steps)
    about: dict[str, dict[str, Any]] = field(default_factory=dict)  # memory id → project, topic, excerpt
    # citation id → how its repository was read, for the wording of next steps: (read
    # through the service, seconds the service was still indexing that state or None)
    read_by: dict[str, tuple[bool, float | None]] = field(default_factory=dict)

    def summary(self) -> dict[str, int]:
        """Citations by outcome (SPEC §16: the keys are the outcomes)."""
        counts = dict.fromkeys(OUTCOMES, 0)
        for v in self.verdicts:
            for o in v.observations:
                counts[o.outcome] += 1
        return counts

    def freshness_summary(self) -> dict[str, int]:
        """Memories by freshness (a memory without citations counts too)."""
        counts = {"fresh": 0, "stale": 0, "unknown": 0}
        for v in self.verdicts:
            counts[v.freshness] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {"memories": [self.memory_json(v) for v in self.verdicts], "summary": self.summary(),
                "freshness_summary": self.freshness_summary()}

    def memory_json(self, v: MemoryVerdict) -> dict[str, Any]:
        cites = []
        for o in v.observations:
            r = self.receipts[o.citation_id]
            cites.append({"id": r.id, "ref": r.ref, "locator": r.locator, "kind": r.kind, "path": r.path,
                          "handle": r.handle,
                          "outcome": o.outcome, "reason": o.reason,
                          "observed": o.observed.to_dict() if o.observed else None,
                          "dirty": r.dirty})
            if o.change:
                cites[-1]["change"] = o.change
            if o.outcome == "unknown":
                service, indexing_s = self.read_by.get(r.id, (False, None))
                step = next_step(o.reason, at=self.at, service=service, indexing_s=indexing_s)
                if step:
                    cites[-1]["next_step"] = step
            if o.advisories:
                cites[-1]["advisories"] = [a.to_dict() for a in o.advisories]
        out = {"id": v.memory_id, **self.about.get(v.memory_id, {}), "freshness": v.freshness,
               "status": v.status, "reason": v.reason, "citations": cites}
        if not cites and v.freshness != "fresh":  # a memory without citations: its own next step
            step = next_step(v.reason, at=self.at)
            if step:
                out["next_step"] = step
        if v.warnings:
            out["warnings"] = v.warnings
        return out


def aggregate(plan: Plan, observations: dict[str, Observation]) -> ValidationReport:
    """SPEC §6.5 per memory, in the plan's order."""
    with _gc_paused(len(observations)):
        return _aggregate(plan, observations)


def _aggregate(plan: Plan, observations: dict[str, Observation]) -> ValidationReport:
    verdicts = []
    limited = set(plan.limited)
    limited_memories = []
    for it in plan.items:
        if not it.receipts:
            verdicts.append(legacy_verdict(it, plan.legacy))
            continue
        verdicts.append(memory_verdict(it.memory_id, [observations[r.id] for r in it.receipts]))
        if any(r.id in limited for r in it.receipts):
            limited_memories.append(it.memory_id)
    return ValidationReport(verdicts, plan.receipts, plan.limited, limited_memories, plan.validated,
                            plan.repositories, plan.invalid, at=plan.scope.at if plan.scope else None,
                            read_by=plan.read_by)


def memory_verdict(memory_id: str, observations: list[Observation]) -> MemoryVerdict:
    """One memory with citations: freshness, precise status, reason, stale-link warnings."""
    outcomes = [o.outcome for o in observations]
    v = MemoryVerdict(memory_id, decisions.freshness(outcomes), decisions.precise_status(outcomes),
                      reason=decisions.memory_reason(observations), observations=list(observations))
    for o in observations:
        if o.outcome == "relocated" and o.observed:
            loc = o.observed.path + (f"#L{o.observed.start_line}-L{o.observed.end_line}"
                                     if o.observed.start_line else "")
            v.warnings.append(f"stale-link: {o.citation_id} now at {loc}")
        v.warnings.extend(a.text() for a in o.advisories)
    return v


def legacy_verdict(it: MemoryInput, member: ScopeMember | None) -> MemoryVerdict:
    """SPEC §6.5: no citations — judged by source_commit against the scope's first member."""
    cur = member.cur if member is not None else None
    if cur is None:  # no repository to judge it against: no basis
        fresh, reason = decisions.legacy_freshness(None, is_head=False, worktree_clean=False, exists=False,
                                                   is_ancestor=False)
        return MemoryVerdict(it.memory_id, fresh, None, reason=reason)
    repo = cur.repo
    exists, sha = False, ""
    if it.source_commit:
        try:
            exists = isinstance(repo.get(it.source_commit) or repo.revparse_single(it.source_commit),
                                pygit2.Object)
            sha = str(repo.revparse_single(it.source_commit).peel(pygit2.Commit).id)
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


def validate(home: Home | None, items: list[MemoryInput], scope: Scope, *, cache: ObservationCache | None = None,
             max_citations: int | None = None, max_repositories: int | None = None,
             dependency_depth: int = 1) -> ValidationReport:
    """plan → run → aggregate: every citation of ``items`` against the scope's exact-current
    snapshots. ``home`` is where scope members and identity histories are read; None when
    the scope's source needs none (a checkpoint partition: memory/batch/partition.py)."""
    p = plan(home, items, scope, max_citations=max_citations, max_repositories=max_repositories,
             dependency_depth=dependency_depth)
    return aggregate(p, run(p, cache=cache))
