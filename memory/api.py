"""The Python API behind the CLI: remember (capture + store) and validate memories.

Every function here does exactly what the matching command does and returns the same
JSON-shaped data (SPEC §16); the CLI and the MCP server only format it.
"""

from __future__ import annotations

import os
import re
from typing import Any

from citegraph.graph.current import StateSource
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle import read_memo
from citegraph.memory.lifecycle.observation_cache import StoreCache
from citegraph.memory.lifecycle.store import Memory, MemoryStore
from citegraph.validator import pipeline
from citegraph.validator.capture import capture
from citegraph.validator.pipeline import MemoryInput, Scope, ValidationReport


def remember(home: Home, text: str, *, repo: str | os.PathLike[str] = ".", refs: list[str] | None = None,
             kind: str = "durable", project: str = "default", topic: str | None = None,
             author: str | None = None, agent_id: str | None = None, session_id: str | None = None,
             supersedes: str | None = None, source_commit: str | None = None,
             source: StateSource | None = None, cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Capture ``refs`` (atomic; never indexes) and store the memory as a new revision.
    ``source``: where the repository state is read (default: a git-status scan); ``cwd``:
    the caller's directory relative refs are read from (default ``repo``)."""
    refs = list(refs or [])
    source_commit = _resolve_source_commit(repo, source_commit)
    notes: list[str] = []
    receipts = capture(home, repo, refs, notes=notes, source=source, cwd=cwd) if refs else []
    with MemoryStore.open(home) as ms:
        if supersedes:
            ms.require(supersedes)
        mem, cleared = ms.remember(text, kind=kind, project=project, topic=topic, receipts=receipts,
                                   author=author, agent_id=agent_id, session_id=session_id,
                                   supersedes=supersedes, source_commit=source_commit)
    if supersedes and mem.id == supersedes:
        notes.append(f"supersedes names {mem.id}, the memory this call revises: revision {mem.revision} "
                     "replaces the earlier one (no supersede link is stored)")
    return {
        "id": mem.id, "project": mem.project, "topic": mem.topic, "kind": mem.kind, "revision": mem.revision,
        "citations": [{"id": r.id, "ref": r.ref, "locator": r.locator, "kind": r.kind, "path": r.path,
                       "handle": r.handle, "dirty": r.dirty} for r in mem.citations],
        "cleared_citations": cleared,
        "notes": notes,
    }


def _resolve_source_commit(repo: str | os.PathLike[str], rev: str | None) -> str | None:
    """Store a commit id, never a moving name: ``HEAD`` or ``main`` would otherwise be
    re-read at every validation and always look current. A commit id this repository does
    not have (another clone's) is kept as given and validates as gone."""
    if rev is None:
        return None
    rev = rev.strip()
    try:
        return gitrepo.resolve_rev(gitrepo.open_repository(repo), rev)
    except CitegraphError:
        if re.fullmatch(r"[0-9a-fA-F]{7,64}", rev):
            return rev.lower()
        raise CitegraphError(f"source commit {rev!r} is not a commit of {os.fspath(repo)}",
                             "pass a commit id or a revision of that repository", code=2) from None


def select_memories(ms: MemoryStore, memory_ids: list[str] | None = None, project: str | None = None,
                    include_archived: bool = False) -> list[Memory]:
    if memory_ids:
        return [m for m in ms.require_many(memory_ids) if project is None or m.project == project]
    where, params = ["TRUE"], []
    if not include_archived:
        where.append("status = 'active'")
    if project:
        where.append("project = ?")
        params.append(project)
    return ms.load(where=" AND ".join(where), params=params, order="id")


def to_inputs(mems: list[Memory]) -> list[MemoryInput]:
    return [MemoryInput(m.id, list(m.citations), m.source_commit) for m in mems]


def default_scope(repo_paths: list[str] | None) -> list[str]:
    if repo_paths:
        return list(repo_paths)
    return ["."]


def validate_memories(home: Home, *, memory_ids: list[str] | None = None, project: str | None = None,
                      repo_paths: list[str] | None = None, at: str | None = None,
                      scope: Scope | None = None, source: StateSource | None = None,
                      dependency_depth: int = 1) -> ValidationReport:
    """Validate the selected memories against the exact-current snapshots of the scope
    (``repo_paths``, default the current directory, read through ``source``; or a prepared
    ``scope``, which carries its own source and ``at``)."""
    if scope is None:
        scope = Scope.for_paths(default_scope(repo_paths), at=at, source=source)
        # A repository the user named (or the current directory) that cannot be read, or an
        # --at REV that is not a commit, is an error with its own exit code — not a silently
        # empty scope. Each is read once, here; the pipeline reuses the read.
        for m in scope.read_all(home):
            if m.cur is None:
                code = m.exc.code if m.exc else 3
                todo = m.exc.todo if m.exc and code != 3 else "run inside a repository or pass --repo PATH"
                what = m.error if repo_paths else f"{os.getcwd()}: {m.error}"
                raise CitegraphError(str(what), todo, code=code)
    if read_memo.enabled():
        return _validate_resident(home, memory_ids, project, scope, dependency_depth)
    with MemoryStore.open_caching(home) as ms:
        mems = select_memories(ms, memory_ids, project)
        return validate_stored(home, ms, mems, scope, dependency_depth=dependency_depth)


def _validate_resident(home: Home, memory_ids: list[str] | None, project: str | None, scope: Scope,
                       dependency_depth: int) -> ValidationReport:
    """``validate_memories`` in a long-running process (the service): the same answer, but
    the memory store is opened only for what the process does not already hold — the
    selection while the store file is unchanged, observations it has seen (read_memo) —
    and written only when there are new observations."""
    key = ("select", tuple(memory_ids) if memory_ids else None, project)
    fp, mems = read_memo.selection(home, key)
    if mems is None:
        with MemoryStore.open(home) as ms:
            mems = select_memories(ms, memory_ids, project)
        read_memo.keep(home, key, fp, mems)
    cache = StoreCache()
    plan = pipeline.plan(home, to_inputs(mems), scope, dependency_depth=dependency_depth)
    left = cache.prefill(plan.wanted())
    if left:
        with MemoryStore.open(home) as ms:
            cache.load(ms, left)
    report = pipeline.aggregate(plan, pipeline.run(plan, cache=cache))
    cache.remember()
    if cache.new:
        with MemoryStore.open(home) as ms:
            cache.flush(ms)
    report.about = {m.id: {"project": m.project, "topic": m.topic, "excerpt": excerpt(m.text)} for m in mems}
    return report


def validate_stored(home: Home, ms: MemoryStore, mems: list[Memory], scope: Scope, *,
                    max_citations: int | None = None, max_repositories: int | None = None,
                    dependency_depth: int = 1) -> ValidationReport:
    """The pipeline over stored memories, with the store as observation cache (preloaded
    in one query, new observations written back)."""
    cache = StoreCache()
    plan = pipeline.plan(home, to_inputs(mems), scope, max_citations=max_citations,
                         max_repositories=max_repositories, dependency_depth=dependency_depth)
    cache.load(ms, plan.wanted())
    report = pipeline.aggregate(plan, pipeline.run(plan, cache=cache))
    cache.flush(ms)
    report.about = {m.id: {"project": m.project, "topic": m.topic, "excerpt": excerpt(m.text)} for m in mems}
    return report


EXCERPT_CHARS = 80


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of a memory's text on one line (whitespace runs collapsed, no trailing
    space), cut at ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "…"


# --- Context Brief, worksets, legacy import (memory/brief/compose.py, memory/worksets/workset.py) ------------


def brief(home: Home, task: str, *, project: str | None = None, workset: str | None = None,
          code_refs: list[str] | None = None, budget_tokens: int = 1250,
          repo_paths: list[str] | None = None, repo: str | os.PathLike[str] | None = None,
          use_cache: bool = True, source: StateSource | None = None, repository_memories: bool = False,
          cwd: str | os.PathLike[str] | None = None, dependency_depth: int = 1) -> Any:
    """Context Brief (SPEC §8). Returns a ``BriefResult``: ``.to_json()`` is the
    ``brief --json`` structure, ``.to_text()`` the text rendering; text + JSON together stay
    under ``budget_tokens``. Never indexes. Memories citing ``code_refs`` rank first;
    ``repository_memories``: the memories citing the repository do (the task may be empty)."""
    from citegraph.memory.brief.compose import run_brief

    paths = list(repo_paths) if repo_paths else ([os.fspath(repo)] if repo is not None else None)
    return run_brief(home, task, project=project, workset=workset, code_refs=list(code_refs or []),
                     budget_tokens=budget_tokens, repo_paths=paths, use_cache=use_cache, source=source,
                     repository_memories=repository_memories, cwd=cwd, dependency_depth=dependency_depth)


def workset_prepare(home: Home, name: str, *, concurrency: int | None = None, jobs: int | None = None
                    ) -> dict[str, Any]:
    """``citegraph workset prepare NAME --json``."""
    from citegraph.memory.worksets import workset as ws

    return ws.prepare(home, name, jobs=concurrency or jobs or ws.DEFAULT_PREPARE_JOBS)


def workset_status(home: Home, name: str) -> dict[str, Any]:
    """``citegraph workset status NAME --json`` (never builds)."""
    from citegraph.memory.worksets import workset as ws

    return ws.status(home, name)


def validate_workset(home: Home, name: str, *, memory_ids: list[str] | None = None,
                     project: str | None = None, source: StateSource | None = None,
                     dependency_depth: int = 1) -> ValidationReport:
    """``citegraph validate --workset NAME``: every citation routed to its member's
    exact-current snapshot; never builds."""
    from citegraph.memory.worksets import workset as ws

    with MemoryStore.open(home) as ms:
        scope = ws.load_scope(ms, name, source=source)
        mems = select_memories(ms, memory_ids, project)
        return validate_stored(home, ms, mems, scope, dependency_depth=dependency_depth)


def import_legacy(home: Home, path: str | os.PathLike[str]) -> dict[str, Any]:
    """``citegraph import-legacy FILE``: all or nothing, stored without citations."""
    from citegraph.memory.lifecycle.legacy_import import import_file

    return import_file(home, path)
