"""Context Brief (SPEC §8): bounded recall → bounded validation → a budgeted projection.

Pipeline (docs/brief.md):

1. recall (``memory/brief/recall.py``): BM25 + citation boosts, at most 24 candidates — the
   *selected* memories;
2. validation of the selected memories' citations only, in rank order: at most 96
   citations across at most 32 repositories, at most 4 repositories at once; citations
   beyond a bound are ``unknown/limit`` and cost nothing. Only exact-current snapshots that
   already exist are read — a brief never indexes;
3. projection under ``--budget-tokens`` (800–1500, default 1250): ``memory/brief/pack.py``
   (the estimator, and packing that never stops at the first memory that does not fit).

Memory text is data: the text rendering shows it only as a JSON-escaped string in quotes
(``> "…"``) with control, format and line-separator characters escaped, so it can never
start a line of its own or read as an instruction.
"""

from __future__ import annotations

import os
import time
from typing import Any

from citegraph.graph.current import StateSource
from citegraph.graph.identity import former_ids
from citegraph.graph.ref_paths import RefPaths, normalize_ref
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.api import to_inputs
from citegraph.memory.brief.bounds import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET
from citegraph.memory.brief.pack import (  # noqa: F401 - the projection, re-exported for callers
    ESTIMATOR,
    BriefResult,
    Item,
    coverage_of,
    dumps,
    estimate_tokens,
    location,
    quote,
    render,
    render_whole,
    safe,
)
from citegraph.memory.brief.recall import MAX_CANDIDATES, W_NEAR, Candidate, recall, task_patterns
from citegraph.memory.lifecycle.observation_cache import StoreCache
from citegraph.memory.lifecycle.store import Memory, MemoryStore, check_name
from citegraph.memory.worksets.workset import load_scope
from citegraph.validator import pipeline
from citegraph.validator.decisions import Reason
from citegraph.validator.model import CHANGE_TEXT, MemoryVerdict, Receipt
from citegraph.validator.next_steps import next_step

MAX_CITATIONS = 96
MAX_REPOSITORIES = 32
MESSAGE_CAP = 160
MAX_REF_ISSUES = 3
CACHE_WAIT_S = 0.25  # the observation cache is optional: never wait long for it



def _short(msg: str) -> str:
    return msg if len(msg) <= MESSAGE_CAP else msg[:MESSAGE_CAP - 1] + "…"


# --- the selected memories as presented ----------------------------------------------------


def _moved(r: Receipt, d: dict[str, Any] | None) -> bool:
    """Whether the observed evidence sits elsewhere than cited (relocated, a successor,
    moved lines) — what the text rendering points at with an arrow."""
    if d is None:
        return False
    return not (d["path"] == r.path and d["handle"] in (None, r.handle) and (
        d["start_line"] is None or (d["start_line"], d["end_line"]) == (r.start_line, r.end_line)))


def _item(rank: int, mem: Memory, cand: Candidate, v: MemoryVerdict,
          read_by: dict[str, tuple[bool, float | None]] | None = None) -> Item:
    receipts = {r.id: r for r in mem.citations}
    # how its repository was read (through the service, still indexing): the next steps' words
    service, indexing_s = next(((read_by or {})[r.id] for r in mem.citations if r.id in (read_by or {})),
                               (False, None))
    cites = []
    bad = []
    moved: set[str] = set()
    advisories: list[tuple[str, Any]] = []  # (citing locator, Advisory)
    for o in v.observations:
        r = receipts[o.citation_id]
        # ``observed`` means what it means in validate (docs/schemas/common.schema.json):
        # where the evidence is in the snapshot, also when that is the cited place.
        observed = o.observed.to_dict() if o.observed else None
        cites.append({"id": r.id, "ref": r.ref, "locator": r.locator, "kind": r.kind, "outcome": o.outcome,
                      "reason": o.reason, "observed": observed})
        if o.change:
            cites[-1]["change"] = o.change
        if _moved(r, observed):
            moved.add(r.id)
        advisories += [(r.locator, a) for a in o.advisories]
        if o.outcome in ("changed", "deleted"):
            detail = f" ({CHANGE_TEXT[o.change]})" if o.change in CHANGE_TEXT else ""
            bad.append(f"{o.outcome} {r.locator}{detail}")
    reason: str | None = None
    issues: list[dict[str, Any]] = []
    if v.freshness == "stale":
        reason = _short("; ".join(bad) if bad else (v.reason or "stale"))
        issues.append({"kind": "stale-memory", "memory_id": mem.id, "message": _short(f"stale: {reason}")})
    elif v.freshness == "unknown":
        reason = v.reason or "unknown"
        # the same next steps as validate's (validator/next_steps.py)
        hints = list(dict.fromkeys(next_step(x, command="brief", service=service, indexing_s=indexing_s) or x
                                   for x in reason.split(",")))
        if v.warnings and not mem.citations:
            hints = [v.warnings[0]]  # e.g. "source commit is 3 commit(s) behind HEAD"
        issues.append({"kind": "unknown-memory-freshness", "memory_id": mem.id, "message": _short("; ".join(hints))})
    for c in cites:
        if c["outcome"] == "relocated" and c["id"] in moved:
            issues.append({"kind": "stale-link", "memory_id": mem.id,
                           "message": _short(f"{c['locator']} now at {location(c['observed'])}")})
        if c["reason"] == Reason.INVALID_CITATION:
            issues.append({"kind": "invalid-code-citation", "memory_id": mem.id,
                           "message": _short(f"stored citation {c['id']} is malformed")})
    for locator, a in advisories:  # an issue beside the memory; its freshness is unchanged (SPEC §21)
        now = a.now
        where = f" (now {now.path}#L{now.start_line}-L{now.end_line})" if now and a.change != "deleted" else ""
        issues.append({"kind": "dependency-changed", "memory_id": mem.id,
                       "message": _short(f"{locator} depends on {a.locator}: {a.change}{where}")})
    return Item(rank, mem, cand.score, v, cites, reason, issues, moved=moved)


# --- the whole brief ------------------------------------------------------------------------------


def _pinned(home: Home, ms: MemoryStore, scope: pipeline.Scope, code_refs: list[str], workset: bool,
            repository_memories: bool) -> list[str]:
    """The memories ranked first: those whose citations touch ``code_refs`` (resolved in
    the first repository in scope — read once, the pipeline reuses the read — or, for a
    workset, as written), or with ``repository_memories`` those citing that repository."""
    if not code_refs and not repository_memories:
        return []
    from citegraph.memory.agent.cited import cited_ids

    cur = None
    if workset:
        rids = [rid for _, rid in scope.paths if rid]
        rids += [old for rid in list(rids) for old in former_ids(home, rid)]
    elif scope.paths:
        first = scope.paths[0][0]
        scope.read(home, [first])
        cur = scope.members[first].cur
        rids = [cur.identity.repository_id, *cur.former_ids()] if cur is not None else []
    else:
        rids = []
    if repository_memories:
        return ms.memories_citing(rids, MAX_CANDIDATES)
    return cited_ids(ms, code_refs, cur, rids)



def check_budget(budget_tokens: int) -> int:
    if not isinstance(budget_tokens, int) or not MIN_BUDGET <= budget_tokens <= MAX_BUDGET:
        raise CitegraphError(f"--budget-tokens {budget_tokens} is out of range",
                             f"use {MIN_BUDGET}–{MAX_BUDGET} (default {DEFAULT_BUDGET})", code=2,
                             kind="invalid-budget")
    return budget_tokens


def _normalized(refs: list[str] | tuple[str, ...], repo_paths: list[str] | None, cwd: str | os.PathLike[str] | None,
                workset: str | None) -> tuple[list[str], list[tuple[str, str]]]:
    """``--code-ref`` values in the repository-relative form (graph/ref_paths.py), read
    against the first repository in scope from ``cwd`` (default: that repository); a ref
    that cannot be normalised is reported as an issue, like any invalid ref."""
    if not refs or workset:
        return list(refs), []
    base = (repo_paths or ["."])[0]
    try:
        ctx = RefPaths.at(base, cwd if cwd is not None else base)
    except CitegraphError:
        return list(refs), []  # the scope reports an unreadable repository
    out, bad = [], []
    for r in refs:
        try:
            out.append(normalize_ref(r, ctx))
        except CitegraphError as err:
            bad.append((r, err.what))
    return out, bad


def run_brief(home: Home, task: str, *, project: str | None = None, workset: str | None = None,
              code_refs: list[str] | tuple[str, ...] = (), budget_tokens: int = DEFAULT_BUDGET,
              repo_paths: list[str] | None = None, use_cache: bool = True,
              source: StateSource | None = None, repository_memories: bool = False,
              cwd: str | os.PathLike[str] | None = None, dependency_depth: int = 1,
              text_only: bool = False) -> BriefResult:
    """Build a Context Brief; never indexes and never writes a snapshot. ``source``: where
    repository states are read (default: a git-status scan). Memories whose citations
    touch ``code_refs`` rank first (the code index, memory/agent/cited.py); with
    ``repository_memories`` (the session-start hook) the memories citing the first
    repository in scope do, most recently updated first, and the task may be empty.
    ``text_only``: the caller injects the text alone (the session-start hook): whole
    memories in rank order, the budget counted on the text (``pack.render_whole``)."""
    t0 = time.perf_counter()
    check_budget(budget_tokens)
    if (not task or not task.strip()) and not repository_memories:
        raise CitegraphError("the task is empty", "pass --task with what you are about to do", code=2)
    task = task or ""
    if project is not None:
        check_name("project", project)
    if workset is not None:
        check_name("workset", workset)
    code_refs, unusable = _normalized(code_refs, repo_paths, cwd, workset)
    pats = task_patterns(task, code_refs)
    pats.invalid_refs[:0] = unusable
    timings: dict[str, float] = {}

    cache = StoreCache() if use_cache else None
    # One short read of the memory store: recall, the selected memories, the workset, and
    # the cached observations of the exact-current snapshots their citations route to.
    with MemoryStore.open(home, read_only=True) as ms:
        if workset:
            scope = load_scope(ms, workset, source=source)
        else:
            paths = repo_paths if repo_paths is not None else ["."]
            scope = pipeline.Scope.for_paths([os.path.realpath(os.fspath(p)) for p in paths], source=source)
        pinned = _pinned(home, ms, scope, list(code_refs), bool(workset), repository_memories)
        if code_refs and not workset and scope.paths:  # recall by proximity (SPEC §21)
            from citegraph.memory.agent.cited import nearby_handles

            cur = scope.members[scope.paths[0][0]].cur if scope.paths[0][0] in scope.members else None
            prefix = cur.identity.repository_id[:16] if cur is not None else None
            for h in nearby_handles(list(code_refs), cur):
                pats.add("handle", h, prefix, W_NEAR)
        cands = recall(ms, task, project=project, patterns=pats, limit=MAX_CANDIDATES, pinned=pinned)
        ids = [c.memory_id for c in cands]
        loaded = {m.id: m for m in ms.load(where="list_contains(?::VARCHAR[], id)", params=[ids])} if ids else {}
        timings["recall"] = time.perf_counter() - t0
        pairs = [(c, loaded[c.memory_id]) for c in cands if c.memory_id in loaded]
        mems = [m for _, m in pairs]
        t1 = time.perf_counter()
        plan = pipeline.plan(home, to_inputs(mems), scope, max_citations=MAX_CITATIONS,
                             max_repositories=MAX_REPOSITORIES, dependency_depth=dependency_depth)
        if cache is not None:
            cache.load(ms, plan.wanted())
        timings["plan"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    res = pipeline.aggregate(plan, pipeline.run(plan, cache=cache))
    timings["validate"] = time.perf_counter() - t1
    if cache is not None and cache.new:
        try:
            with MemoryStore.open(home, wait_s=CACHE_WAIT_S) as ms3:
                cache.flush(ms3)
        except CitegraphError:
            pass  # busy: the next brief recomputes; observations are deterministic

    items = [_item(rank, m, c, v, res.read_by) for rank, ((c, m), v) in enumerate(zip(pairs, res.verdicts,
                                                                         strict=True), start=1)]
    global_issues: list[dict[str, Any]] = []
    if res.limited:
        global_issues.append({"kind": "limit", "memory_id": None, "message": _short(
            f"{len(res.limited)} citation(s) of {len(res.limited_memories)} memories not validated: at most "
            f"{MAX_CITATIONS} citations across {MAX_REPOSITORIES} repositories per brief")})
    for _ref, why in pats.invalid_refs[:MAX_REF_ISSUES]:
        global_issues.append({"kind": "invalid-code-citation", "memory_id": None,
                              "message": _short(f"--code-ref ignored: {why}")})
    if len(pats.invalid_refs) > MAX_REF_ISSUES:
        global_issues.append({"kind": "invalid-code-citation", "memory_id": None,
                              "message": f"{len(pats.invalid_refs) - MAX_REF_ISSUES} more invalid --code-ref"})
    limits = {"max_candidates": MAX_CANDIDATES, "max_citations": MAX_CITATIONS,
              "max_repositories": MAX_REPOSITORIES, "validated_citations": res.validated,
              "limited_citations": len(res.limited), "repositories": res.repositories}
    t2 = time.perf_counter()
    out = (render_whole if text_only else render)(items, budget=budget_tokens, global_issues=global_issues,
                                                  limits=limits)
    timings["render"] = time.perf_counter() - t2
    timings["total"] = time.perf_counter() - t0
    out.timings = timings
    return out
