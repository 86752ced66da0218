"""``citegraph refresh``: a reviewed re-anchoring of moved citations (SPEC §18).

For each selected memory, its citations are validated (one pipeline) against the
exact-current snapshot of the repository; ``validator.decisions.refresh_action`` says,
per citation, whether it may be re-captured at its observed location: a ``relocated``
one (``--accept relocated``, the default), a changed symbol with its unique observed
successor (``--accept successor``) or a change of comments/formatting only at the cited
place (``--accept cosmetic``, SPEC §6.3a) — never another change, a deletion or an
unknown. The new receipts are captured against the same exact-current state that was
validated (one read; a move of the repository in between refuses the whole refresh as
``racing``, nothing written) and must carry the same evidence as the old ones (the same
blob for a file, the same span hash for a span, the same fragment hash for a relocated
symbol). A memory with at least one refreshed citation gets a new revision: the same
text, the kept citations unchanged, the refreshed ones replaced in place; that revision
records, per replaced citation, the old receipt's id, the new one's, what was accepted,
and the observation that justified it (with its snapshot and commit). The old receipts
stay in the memory's history (``citegraph history``). ``--dry-run`` computes exactly the
same — the new receipts included, ids and all — and writes nothing.

Refresh is never automatic: nothing else in citegraph calls it.
"""

from __future__ import annotations

import os
from typing import Any

from citegraph.graph.current import CurrentState, StateSource
from citegraph.graph.handles import repo_handle
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.api import select_memories, to_inputs
from citegraph.memory.lifecycle.observation_cache import StoreCache
from citegraph.memory.lifecycle.store import Memory, MemoryStore
from citegraph.validator import decisions, pipeline
from citegraph.validator.capture import receipt_evidence, resolve_each, respell
from citegraph.validator.decisions import Reason
from citegraph.validator.model import Observation, Receipt
from citegraph.validator.next_steps import still_indexing
from citegraph.validator.refs import parse_ref

ACCEPTS = ("relocated", "successor", "cosmetic")


def parse_accept(value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Any of ``relocated``, ``successor``, ``cosmetic``, comma-separated (default: relocated)."""
    if value is None:
        return ("relocated",)
    parts = value.split(",") if isinstance(value, str) else [p for v in value for p in str(v).split(",")]
    out = tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))
    bad = [p for p in out if p not in ACCEPTS]
    if bad or not out:
        raise CitegraphError(f"--accept {','.join(bad) or repr(value)}: not an outcome refresh accepts",
                             "use relocated, successor, cosmetic or a comma-separated list of them", code=2, kind="usage")
    return out


def _new_ref(r: Receipt, o: Observation, cur: CurrentState) -> str:
    """The ref that re-captures ``r`` at its observed location (a symbol by its observed
    handle; respelled afterwards in the user's form)."""
    ob = o.observed
    assert ob is not None
    if r.kind == "symbol":
        assert ob.handle is not None
        return ob.handle
    if r.kind == "span":
        return f"{ob.path}#L{ob.start_line}-L{ob.end_line}"
    return ob.path


def _spelled(old: Receipt, new: Receipt, cur: CurrentState) -> Receipt:
    """Keep the form the user cited in: a locator stays a locator, a cgr_ handle a cgr_."""
    if new.kind != "symbol":
        return new
    if old.ref.startswith("cgs_"):
        return new
    if old.ref.startswith("cgr_"):
        return respell(new, repo_handle(cur.identity.repository_id, new.handle or ""))
    return respell(new, new.locator)


def _same_evidence(old: Receipt, new: Receipt, accepted: str, o: Observation) -> bool:
    """What a refresh re-captures must be the evidence the observation vouched for."""
    if accepted == "successor":
        return o.observed is not None and new.handle == o.observed.handle
    if accepted == "cosmetic":  # other bytes, the same code: the same tokens where it was observed
        return new.token_hash is not None and new.token_hash == old.token_hash
    if old.kind == "file":
        return new.blob_id == old.blob_id
    if old.kind == "span":
        return new.span_hash == old.span_hash
    return new.fragment_hash == old.fragment_hash


def _citation_json(r: Receipt, o: Observation | None, action: str, why: str, new: Receipt | None) -> dict[str, Any]:
    return {"id": r.id, "ref": r.ref, "locator": r.locator, "kind": r.kind,
            "outcome": o.outcome if o else "unknown", "reason": o.reason if o else None,
            "observed": o.observed.to_dict() if o and o.observed else None, "action": action, "why": why,
            "new": None if new is None else {"id": new.id, "ref": new.ref, "locator": new.locator,
                                             "path": new.path, "start_line": new.start_line,
                                             "end_line": new.end_line, "handle": new.handle, "dirty": new.dirty}}


def refresh(home: Home, memory_ids: list[str] | None = None, *, all_memories: bool = False,
            accept: str | list[str] | tuple[str, ...] | None = None, dry_run: bool = False,
            repo: str | os.PathLike[str] = ".", project: str | None = None,
            source: StateSource | None = None) -> dict[str, Any]:
    """``citegraph refresh [MEMORY…|--all] [--accept …] [--dry-run] --json`` (module docstring)."""
    accepted = parse_accept(accept)
    if bool(memory_ids) == bool(all_memories):
        raise CitegraphError("name the memories to refresh, or pass --all (not both)",
                             "citegraph refresh MEMORY… | citegraph refresh --all", code=2, kind="usage")
    scope = pipeline.Scope.for_paths([os.path.realpath(os.fspath(repo))], source=source)
    member = scope.read_all(home)[0]
    if member.cur is None:
        exc = member.exc
        raise CitegraphError(str(member.error), exc.todo if exc else "pass --repo PATH", code=exc.code if exc else 3)
    cur = member.cur
    cache = StoreCache()
    with MemoryStore.open(home) as ms:
        mems = select_memories(ms, list(memory_ids or []) or None, project)
        mems = [m for m in mems if m.citations]
        plan = pipeline.plan(home, to_inputs(mems), scope)
        cache.load(ms, plan.wanted())
    report = pipeline.aggregate(plan, pipeline.run(plan, cache=cache))
    verdicts = {v.memory_id: v for v in report.verdicts}

    # What each citation would become, in one capture against the validated state.
    todo: list[tuple[Memory, Receipt, Observation, str]] = []
    for m in mems:
        obs = {o.citation_id: o for o in verdicts[m.id].observations}
        for r in m.citations:
            o = obs.get(r.id) or Observation(r.id, "unknown", str(Reason.INVALID_CITATION))
            action, why = decisions.refresh_action(r, o, accept_relocated="relocated" in accepted,
                                                   accept_successor="successor" in accepted,
                                                   accept_cosmetic="cosmetic" in accepted)
            if action == decisions.REFRESH:
                todo.append((m, r, o, why))
    new_by_id: dict[str, Receipt] = {}
    if todo:
        if not cur.exact_current:
            if cur.indexing_s is not None:  # through the service, its build still running
                raise CitegraphError(f"{still_indexing(cur.indexing_s)}; nothing was written", "retry in a moment",
                                     code=1, retryable=True, kind=str(Reason.RACING))
            raise CitegraphError("no exact-current snapshot to re-capture at; nothing was written",
                                 "the running citegraph service has not built it (`citegraph status` and the "
                                 "service log say why); retry" if cur.service else
                                 "run `citegraph index` (or keep `citegraph serve` running), then retry", code=1,
                                 retryable=True, kind=str(Reason.NOT_CURRENT))
        parsed = [parse_ref(_new_ref(r, o, cur)) for _, r, o, _ in todo]
        fresh = resolve_each(cur, parsed)
        for (_, r, o, why), new in zip(todo, fresh, strict=True):
            if new is not None:
                new = _spelled(r, new, cur)
                if _same_evidence(r, new, why, o):
                    new_by_id[r.id] = new
        if scope.source.moved(cur):
            raise CitegraphError("the repository changed during the refresh; nothing was written",
                                 "run the command again", code=1, retryable=True, kind=str(Reason.RACING))

    out_mems = []
    summary = {"memories": len(mems), "changed": 0, "refreshed": 0, "kept": 0, "refused": 0}
    writes: list[tuple[Memory, list[Receipt], list[dict[str, Any]]]] = []
    for m in mems:
        obs = {o.citation_id: o for o in verdicts[m.id].observations}
        cites: list[dict[str, Any]] = []
        receipts: list[Receipt] = []
        entries: list[dict[str, Any]] = []
        seen: dict[tuple, Receipt] = {}
        for r in m.citations:
            o = obs.get(r.id)
            action, why = decisions.refresh_action(
                r, o or Observation(r.id, "unknown", str(Reason.INVALID_CITATION)),
                accept_relocated="relocated" in accepted, accept_successor="successor" in accepted,
                accept_cosmetic="cosmetic" in accepted)
            new = new_by_id.get(r.id)
            if action == decisions.REFRESH and new is None:
                action, why = decisions.REFUSE, "not-recaptured"  # the observed place did not resolve the same
            stored = new if action == decisions.REFRESH and new is not None else r
            twin = seen.get(receipt_evidence(stored))
            merged = twin is not None
            if merged:  # it now names the evidence of another citation: stored once (SPEC §5)
                assert twin is not None
                new, action, why = twin, decisions.REFRESH, f"{why}, same as {twin.locator}"
            else:
                seen[receipt_evidence(stored)] = stored
                receipts.append(stored)
            if action == decisions.REFRESH and new is not None:
                entries.append({"old_citation_id": r.id, "new_citation_id": new.id, "accepted": why,
                                "merged": merged, "observation": o.to_dict() if o else None,
                                "snapshot_id": cur.snapshot_id, "commit": cur.head})
            summary["refreshed" if action == decisions.REFRESH else "kept" if action == decisions.KEEP
                    else "refused"] += 1
            cites.append(_citation_json(r, o, action, why, new if action == decisions.REFRESH else None))
        entry = {"id": m.id, "project": m.project, "topic": m.topic, "from_revision": m.revision,
                 "revision": m.revision + 1 if entries else None, "written": False, "citations": cites}
        if entries:
            summary["changed"] += 1
            writes.append((m, receipts, entries))
        out_mems.append(entry)
    if writes and not dry_run:
        with MemoryStore.open(home) as ms:
            for m, receipts, entries in writes:
                ms.remember(m.text, kind=m.kind, project=m.project, topic=m.topic, receipts=receipts,
                            author=m.author, agent_id=m.agent_id, session_id=m.session_id,
                            supersedes=m.supersedes, source_commit=m.source_commit, legacy=m.legacy,
                            refresh=entries, memory_id=m.id, expect_revision=m.revision)
        written = {m.id for m, _, _ in writes}
        for e in out_mems:
            e["written"] = e["id"] in written
    if cache.new:
        try:
            with MemoryStore.open(home, wait_s=0.25) as ms2:
                cache.flush(ms2)
        except CitegraphError:
            pass
    return {"dry_run": dry_run, "accept": list(accepted),
            "repository": {"path": str(cur.path), "repository_id": cur.identity.repository_id,
                           "snapshot_id": cur.snapshot_id if cur.exact_current else None, "head": cur.head,
                           "dirty": cur.dirty},
            "memories": out_mems, "summary": summary}
