"""The Python API behind the CLI: remember (capture + store) and validate memories.

Every function here does exactly what the matching command does and returns the same
JSON-shaped data (SPEC §16); the CLI and the MCP server only format it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.store import Memory, MemoryStore
from citegraph.validator.capture import capture
from citegraph.validator.validate import (
    MemoryInput,
    ScopeMember,
    ValidationReport,
    resolve_scope,
    validate,
)


def remember(home: Home, text: str, *, repo: str | os.PathLike[str] = ".", refs: list[str] | None = None,
             kind: str = "durable", project: str = "default", topic: str | None = None,
             author: str | None = None, agent_id: str | None = None, session_id: str | None = None,
             supersedes: str | None = None, source_commit: str | None = None,
             _after_resolve: Callable[[], None] | None = None) -> dict[str, Any]:
    """Capture ``refs`` (atomic; never indexes) and store the memory as a new revision."""
    refs = list(refs or [])
    receipts = capture(home, repo, refs, _after_resolve=_after_resolve) if refs else []
    with MemoryStore.open(home) as ms:
        if supersedes:
            ms.require(supersedes)
        mem, cleared = ms.remember(text, kind=kind, project=project, topic=topic, receipts=receipts,
                                   author=author, agent_id=agent_id, session_id=session_id,
                                   supersedes=supersedes, source_commit=source_commit)
    return {
        "id": mem.id, "project": mem.project, "topic": mem.topic, "kind": mem.kind, "revision": mem.revision,
        "citations": [{"id": r.id, "ref": r.ref, "kind": r.kind, "path": r.path, "handle": r.handle,
                       "dirty": r.dirty} for r in mem.citations],
        "cleared_citations": cleared,
    }


def select_memories(ms: MemoryStore, memory_ids: list[str] | None = None, project: str | None = None,
                    include_archived: bool = False) -> list[Memory]:
    if memory_ids:
        mems = [ms.require(m) for m in memory_ids]
        return [m for m in mems if project is None or m.project == project]
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
                      scope: list[ScopeMember] | None = None,
                      _before_recheck: Callable[[], None] | None = None) -> ValidationReport:
    """Validate the selected memories against the exact-current snapshots of the scope."""
    members = scope if scope is not None else resolve_scope(home, default_scope(repo_paths), at)
    if scope is None and not repo_paths and members and members[0].cur is None:
        raise CitegraphError(f"{os.getcwd()}: {members[0].error}",
                             "run inside a repository or pass --repo PATH", code=3)
    with MemoryStore.open(home) as ms:
        mems = select_memories(ms, memory_ids, project)
        return validate(home, to_inputs(mems), members, at=at, cache=ms, _before_recheck=_before_recheck)
