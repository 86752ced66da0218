"""Code → memories (SPEC §18): ``citegraph cited REF…``, brief ``--code-ref`` and the hooks.

A ref names code: a file, a span, a symbol (by locator, ordinal, ``cgs_``/``cgr_``
handle). It is resolved against the exact-current snapshot when there is one (the current
content of the file, the symbol's handle, lines and fragment hash) and looked up in the
memory store's **code index** (memory/lifecycle/store.py: one row per (citation of a current
revision, key), written by capture, import and refresh) — point lookups by key, never a
scan of memories. A citation *touches* the ref when (docs/agent-loop.md):

| ref | a citation touches it when |
|---|---|
| file | it cites that file (a file, span or symbol citation), or its file's content at capture is exactly the file's content now (the file moved here unchanged) |
| span | as for a file, and its lines overlap the span: a file citation always; a span or symbol by its current lines when validation observed it in this file, else by its captured lines |
| symbol | same handle; same locator (``path::Name``, any ordinal); same fragment hash (a moved copy); a span or symbol of the same file whose lines overlap the symbol's; a citation of the whole file |

The memories found are validated (one pipeline, SPEC §17) so each comes with its
current freshness; at most ``limit`` memories (default 24) are validated, strongest match
and most recently updated first. Repository identity history counts (graph/identity.py):
citations captured under a former id of the repository are found too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from citegraph.graph import graph_view
from citegraph.graph.current import CurrentState, StateSource
from citegraph.graph.ref_paths import RefPaths, normalize_refs
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.api import to_inputs
from citegraph.memory.lifecycle.observation_cache import StoreCache
from citegraph.memory.lifecycle.store import Memory, MemoryStore
from citegraph.validator import pipeline
from citegraph.validator.capture import find_symbol, suggest_paths
from citegraph.validator.model import MemoryVerdict, Receipt
from citegraph.validator.refs import ParsedRef, parse_ref

DEFAULT_LIMIT = 24
MAX_LIMIT = 200
MAX_REFS = 64
CACHE_WAIT_S = 0.25
# How a citation touches a ref, strongest first (the order of the results; a citation
# matched two ways shows the stronger).
HOW_RANK = {"handle": 0, "locator": 1, "fragment": 2, "overlap": 3, "path": 4, "file": 5, "content": 6}
FRESH_RANK = {"fresh": 0, "unknown": 1, "stale": 2}


@dataclass
class Target:
    """A ref as resolved for the lookup."""

    ref: str
    kind: str  # file | span | symbol
    path: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    handle: str | None = None
    fragment_hash: str | None = None
    qualified_name: str | None = None
    ordinal: int | None = None
    blob_id: str | None = None  # the file's content now (None: gone, or not read)
    resolved: bool = False  # against the exact-current snapshot
    note: str | None = None

    @property
    def locator(self) -> str:
        if self.kind == "symbol" and self.path and self.qualified_name:
            return f"{self.path}::{self.qualified_name}" + (f"[{self.ordinal}]" if self.ordinal else "")
        if self.kind == "span" and self.path:
            return f"{self.path}#L{self.start_line}-L{self.end_line}"
        return self.path or self.ref

    def keys(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str | None]] = [("path", self.path), ("blob", self.blob_id)]
        if self.kind == "symbol":
            out += [("handle", self.handle), ("fragment", self.fragment_hash),
                    ("locator", f"{self.path}::{self.qualified_name}" if self.path and self.qualified_name else None)]
        return [(k, v) for k, v in out if v]

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "kind": self.kind, "locator": self.locator, "path": self.path,
                "start_line": self.start_line, "end_line": self.end_line, "handle": self.handle,
                "resolved": self.resolved, "note": self.note}


def parse_targets(refs: list[str]) -> list[tuple[ParsedRef, Target]]:
    if not refs:
        raise CitegraphError("no ref given", "name a file, path#L10-L24, path::Name or a cgs_ handle", code=2,
                             kind="usage")
    if len(refs) > MAX_REFS:
        raise CitegraphError(f"{len(refs)} refs given; at most {MAX_REFS}", "ask about fewer places", code=2,
                             kind="usage")
    out = []
    for ref in dict.fromkeys(refs):
        p = parse_ref(ref)
        out.append((p, Target(ref, p.kind, p.path, p.start_line, p.end_line, p.handle,
                              qualified_name=p.qualified_name, ordinal=p.ordinal)))
    return out


def _blob_now(cur: CurrentState, path: str) -> str | None:
    """The blob id of ``path`` in the state ``cur`` describes (dirty content first)."""
    if cur.state is not None:
        for p, blob in cur.state.dirty_paths:
            if p == path:
                return blob
    return gitrepo.commit_tree_blob_id(cur.repo, cur.head, path)


def resolve(targets: list[tuple[ParsedRef, Target]], cur: CurrentState | None) -> list[Target]:
    """Fill in what the current code says about each ref (best effort: a ref the snapshot
    cannot resolve is still looked up by what it spells)."""
    if cur is None:
        return [t for _, t in targets]
    for _p, t in targets:
        if t.path:
            t.blob_id = _blob_now(cur, t.path)
            t.resolved = t.kind != "symbol"
    symbols = [(p, t) for p, t in targets if t.kind == "symbol"]
    # a file or span ref to a path the current code lacks: likely mistyped (issue 22) —
    # still looked up as written (memories may cite a deleted file), with the closest paths
    missing = [t for _, t in targets if t.kind != "symbol" and t.path and t.blob_id is None]
    if not symbols and not missing:
        return [t for _, t in targets]
    if not cur.exact_current:
        for _, t in symbols:
            t.note = "no exact-current snapshot: looked up by the ref as written"
        return [t for _, t in targets]
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        for t in missing:
            if t.path is not None and snap.file(t.path) is None:
                near = suggest_paths(snap, t.path)
                t.note = f"{t.path} is not in the current code" + (f"; closest: {', '.join(near)}" if near else "")
        for p, t in symbols:
            try:
                sym = find_symbol(p, cur, snap)
            except CitegraphError as err:
                t.note = err.what.split(": ", 1)[-1]
                continue
            t.path, t.handle, t.fragment_hash = sym["path"], sym["handle"], sym["fragment_hash"]
            t.qualified_name, t.ordinal = sym["qualified_name"], sym["ordinal"] or None
            t.start_line, t.end_line = sym["start_line"], sym["end_line"]
            t.blob_id = _blob_now(cur, sym["path"])
            t.resolved = True
    return [t for _, t in targets]


@dataclass
class Match:
    target: Target
    citation_id: str
    how: str


@dataclass
class Found:
    memory: Memory
    matches: list[Match] = field(default_factory=list)
    verdict: MemoryVerdict | None = None

    @property
    def strength(self) -> int:
        return min(HOW_RANK[m.how] for m in self.matches)


def _overlaps(a: tuple[int | None, int | None], b: tuple[int | None, int | None]) -> bool:
    if None in a or None in b:
        return False
    return a[0] <= b[1] and b[0] <= a[1]  # type: ignore[operator]


def _classify(t: Target, row: dict[str, Any]) -> tuple[str | None, bool]:
    """(how, sure): how a code-index row touches ``t`` judged by its captured location;
    ``sure`` is False when only the current (observed) lines can tell."""
    kk = row["key_kind"]
    if kk in ("handle", "locator", "fragment"):
        if t.kind != "symbol" or (kk == "locator" and t.ordinal is not None):
            return None, True  # a named ordinal: another definition of the name is not this one
        return kk, True
    here = (kk == "path" and row["path"] == t.path) or (kk == "blob" and row["key"] == t.blob_id)
    if not here:
        return None, True
    if t.kind == "file":
        return ("path" if kk == "path" else "content"), True
    if row["kind"] == "file":
        return "file", True
    return ("overlap", True) if _overlaps((row["start_line"], row["end_line"]), (t.start_line, t.end_line)) \
        else ("overlap", False)


def lookup(ms: MemoryStore, targets: list[Target], repository_ids: list[str], *,
           include_archived: bool = False) -> dict[str, list[tuple[Match, bool]]]:
    """memory id → [(match, sure)] from the code index."""
    keys = list(dict.fromkeys(k for t in targets for k in t.keys()))
    rows = ms.code_lookup(repository_ids, keys, include_archived=include_archived)
    best: dict[tuple[str, str, str], tuple[Match, bool]] = {}
    for t in targets:
        tk = set(t.keys())
        for row in rows:
            if (row["key_kind"], row["key"]) not in tk:
                continue
            how, sure = _classify(t, row)
            if how is None:
                continue
            key = (row["memory_id"], t.ref, row["citation_id"])
            old = best.get(key)
            if old is None or (sure, -HOW_RANK[how]) > (old[1], -HOW_RANK[old[0].how]):
                best[key] = (Match(t, row["citation_id"], how), sure)
    out: dict[str, list[tuple[Match, bool]]] = {}
    for (mid, _ref, _cid), v in best.items():
        out.setdefault(mid, []).append(v)
    return out


def _confirm(found: Found, pending: list[Match]) -> None:
    """Keep the uncertain overlaps whose current (observed) lines touch the target."""
    if found.verdict is None:
        return
    obs = {o.citation_id: o for o in found.verdict.observations}
    for m in pending:
        o = obs.get(m.citation_id)
        ob = o.observed if o is not None else None
        if ob is not None and ob.path == m.target.path and _overlaps((ob.start_line, ob.end_line),
                                                                     (m.target.start_line, m.target.end_line)):
            found.matches.append(m)


def cited(home: Home, refs: list[str], *, repo: str | os.PathLike[str] = ".", limit: int = DEFAULT_LIMIT,
          include_archived: bool = False, source: StateSource | None = None,
          cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``citegraph cited REF… --json``: the memories whose citations touch the refs, each
    with its current freshness (validated now; never indexes). Ref paths are normalised
    first (graph/ref_paths.py) relative to ``cwd`` (default ``repo``)."""
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise CitegraphError(f"--limit {limit} is out of range", f"use 1–{MAX_LIMIT}", code=2, kind="usage")
    if not refs:
        parse_targets([])
    scope = pipeline.Scope.for_paths([os.path.realpath(os.fspath(repo))], source=source)
    member = scope.read_all(home)[0]
    if member.cur is None:
        exc = member.exc
        raise CitegraphError(str(member.error), exc.todo if exc else "pass --repo PATH",
                             code=exc.code if exc else 3)
    cur = member.cur
    ctx = RefPaths.for_repo(cur.repo, cwd if cwd is not None else repo) if cur.repo.workdir else None
    targets = parse_targets(normalize_refs(list(refs), ctx))
    resolved = resolve(targets, cur)
    ids = [cur.identity.repository_id, *cur.former_ids()]
    cache = StoreCache()
    with MemoryStore.open(home, read_only=True) as ms:
        hits = lookup(ms, resolved, ids, include_archived=include_archived)
        mems = {m.id: m for m in ms.load(where="list_contains(?::VARCHAR[], id)", params=[list(hits)])} \
            if hits else {}
        found: list[Found] = []
        pending: dict[str, list[Match]] = {}
        for mid, ms_ in hits.items():
            if mid not in mems:
                continue
            f = Found(mems[mid], [m for m, sure in ms_ if sure])
            pending[mid] = [m for m, sure in ms_ if not sure]
            found.append(f)
        # certain matches first, then the ones only current lines can confirm; strongest,
        # then most recently updated
        found.sort(key=lambda f: (0 if f.matches else 1, f.strength if f.matches else 9, -f.memory.updated_at,
                                  f.memory.id))
        total = len(found)
        chosen = found[:limit]
        plan = pipeline.plan(home, to_inputs([f.memory for f in chosen]), scope)
        cache.load(ms, plan.wanted())
    report = pipeline.aggregate(plan, pipeline.run(plan, cache=cache))
    if cache.new:
        try:
            with MemoryStore.open(home, wait_s=CACHE_WAIT_S) as ms2:
                cache.flush(ms2)
        except CitegraphError:
            pass  # busy: a cache only
    verdicts = {v.memory_id: v for v in report.verdicts}
    for f in chosen:
        f.verdict = verdicts.get(f.memory.id)
        _confirm(f, pending.get(f.memory.id, []))
    shown = [f for f in chosen if f.matches]
    shown.sort(key=lambda f: (f.strength, FRESH_RANK.get(f.verdict.freshness if f.verdict else "unknown", 1),
                              -f.memory.updated_at, f.memory.id))
    return {
        "repository": {"path": str(cur.path), "repository_id": cur.identity.repository_id,
                       "former_ids": list(cur.former_ids()), "head": cur.head, "dirty": cur.dirty,
                       "snapshot_id": cur.snapshot_id if cur.exact_current else None,
                       "exact_current": cur.exact_current, "indexing_s": cur.indexing_s},
        "refs": [t.to_json() for t in resolved],
        "memories": [memory_json(f, report.receipts) for f in shown],
        "candidates": total, "validated": len(chosen), "truncated": max(0, total - len(chosen)),
    }


def memory_json(f: Found, receipts: dict[str, Receipt]) -> dict[str, Any]:
    m, v = f.memory, f.verdict
    cites = []
    for o in (v.observations if v else []):
        r = receipts.get(o.citation_id) or next((c for c in m.citations if c.id == o.citation_id), None)
        if r is None:
            continue
        cites.append({"id": r.id, "ref": r.ref, "locator": r.locator, "kind": r.kind, "outcome": o.outcome,
                      "reason": o.reason, "observed": o.observed.to_dict() if o.observed else None})
        if o.change:
            cites[-1]["change"] = o.change
    return {"id": m.id, "kind": m.kind, "project": m.project, "topic": m.topic, "text": m.text,
            "updated_at": m.updated_at, "freshness": v.freshness if v else "unknown",
            "status": v.status if v else None, "reason": v.reason if v else None,
            "warnings": list(v.warnings) if v else [],
            "matches": [{"ref": x.target.ref, "citation_id": x.citation_id, "how": x.how} for x in f.matches],
            "citations": cites}


NEAR_HOPS = 2
MAX_NEAR = 64  # neighbour handles per brief: bounds the traversal and the boost join


def nearby_handles(refs: list[str], cur: CurrentState | None, hops: int = NEAR_HOPS,
                   limit: int = MAX_NEAR) -> list[str]:
    """Handles of the symbols within ``hops`` of the symbols ``refs`` name, in the
    exact-current snapshot's resolved edges (either direction; the symbols themselves
    excluded; at most ``limit``, nearest first). Empty without an exact-current snapshot
    or a symbol ref: proximity is a ranking hint, never a claim."""
    if cur is None or not cur.exact_current:
        return []
    parsed = []
    for ref in refs:
        try:
            p = parse_ref(ref)
        except CitegraphError:
            continue
        if p.kind == "symbol":
            parsed.append(p)
    if not parsed:
        return []
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        roots = []
        for p in parsed:
            try:
                roots.append(find_symbol(p, cur, snap)["handle"])
            except CitegraphError:
                continue
        if not roots:
            return []
        g, _cut = graph_view.subgraph(snap, roots, "both", hops, max_nodes=limit + len(roots))
    near = graph_view.distances(g, roots, "both")
    return sorted((h for h in near if h not in roots), key=lambda h: (near[h], h))[:limit]


def cited_ids(ms: MemoryStore, refs: list[str], cur: CurrentState | None, repository_ids: list[str]) -> list[str]:
    """The memories whose citations touch ``refs`` by their captured locations (no
    validation): brief ``--code-ref`` ranks them first. Invalid refs are skipped (the
    brief reports them)."""
    targets = []
    for ref in refs:
        try:
            targets.extend(parse_targets([ref]))
        except CitegraphError:
            continue
    if not targets:
        return []
    resolved = resolve(targets, cur)
    hits = lookup(ms, resolved, repository_ids)
    return [mid for mid, ms_ in hits.items() if any(sure for _, sure in ms_)]
