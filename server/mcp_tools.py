"""The MCP tool table (SPEC §11, §19; docs/mcp.md): one ``ToolSpec`` per tool, each with
a title, a description of what it does and when to use it, every argument described,
its annotations, and ``output``: the JSON Schema (docs/schemas/) of its result, which
is exactly the matching CLI command's ``--json`` output.

Adding a tool is one entry in ``TOOLS`` (and its handler): name, title, description,
arguments, handler, ``output=`` a schema name in docs/schemas/, and the hints.
tests/test_mcp_schemas.py then checks its descriptions and validates its results.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from citegraph.server.mcp_spec import (
    READ_WAIT_S,
    REMEMBER_WAIT_S,
    ToolContext,
    ToolSpec,
    abs_paths,
    caller_cwd,
    cwd_lanes,
    usage_error,
    validate_lanes,
    workset_lanes,
)

# --- argument schemas ---------------------------------------------------------------------

CWD = {"type": "string", "description":
       "Absolute path of your working directory: selects the repository. Optional: default the client's git "
       "root, else the server's own directory, else the only repository known."}
PROJECT = {"type": "string", "description": "Only memories of this project (a name: letters, digits, _ - .)."}
WORKSET = {"type": "string", "description": "The workset's name (a named set of repositories; see workset_create)."}
MEMORY_ID = {"type": "string", "description": "The memory's id (cgm_…), as remember, list or brief return it."}
MEMORY_IDS = {"type": "array", "items": {"type": "string"},
              "description": "Only these memories (ids cgm_…); default: every active memory."}
CODE_REFS = {"type": "array", "items": {"type": "string"}, "description":
             "Code to cite, at most 8: a file path, path#L10-L24 (a span), path::Qualified.name (a symbol, "
             "optionally [N] for the N-th definition of that name), or a cgs_/cgr_ handle from find or symbols. "
             "Paths may be repository-relative, relative to callerCwd, absolute inside the repository, or a GitHub blob URL of "
             "the same repository."}
PATHS = {"type": "array", "items": {"type": "string"},
         "description": "Repository paths (absolute, or relative to callerCwd)."}


def _s(description: str, **kw: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **kw}


def _i(description: str, lo: int, hi: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi, "description": description}


def _b(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


# --- helpers -------------------------------------------------------------------------------

def _served(ctx: ToolContext, op: str, args: dict[str, Any], read_only: bool = True) -> Any:
    """The resident service's answer to ``op`` — another process's (attached) or this
    process's (hosted) — or None (the handler then works one-shot)."""
    res = ctx.call(op, args, read_only=read_only)
    if res is None and ctx.service is not None:
        from citegraph.server.service_ops import HANDLERS

        if op in HANDLERS:
            res = HANDLERS[op](ctx.service, args)
    return res


def _to_json(res: Any) -> dict[str, Any]:
    if hasattr(res, "to_json"):
        res = res.to_json()
    if not isinstance(res, dict):
        raise TypeError(f"unexpected result type {type(res).__name__}")
    return res


def _cwd(a: dict[str, Any], tool: str) -> str:
    cwd = caller_cwd(a, tool=tool)
    assert cwd is not None
    return cwd


# --- repository and code -----------------------------------------------------------------------

def _status(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.graph import queries

    cwd = _cwd(a, "status")
    data = _served(ctx, "status", {"path": cwd})
    if data is None:
        data = queries.status(cwd, ctx.home)
        data["service"] = {"used": False, "reason": "citegraph mcp --no-service"}
    return data


def _index(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    cwd = _cwd(a, "index")
    data = _served(ctx, "index", {"path": cwd, "rev": a.get("rev")})
    if data is None:
        from citegraph.graph.snapshot_builder import build_snapshot

        data = build_snapshot(cwd, ctx.home, rev=a.get("rev")).to_json()
    return data


def _symbols(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from pathlib import Path

    from citegraph.graph import queries

    cwd = caller_cwd(a, required=not os.path.isabs(a["file"]), tool="symbols")
    file = abs_paths([a["file"]], cwd)[0]
    data = _served(ctx, "symbols", {"file": file})
    if data is None:
        data = {"symbols": queries.symbols_of_file(Path(file), ctx.home)}
    return {"symbols": data["symbols"]}


def _find(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.graph import queries

    cwd = _cwd(a, "find")
    limit = a.get("limit", 50)
    kinds, path = list(a.get("kinds") or []) or None, a.get("path")
    data = _served(ctx, "find", {"repo": cwd, "name": a["name"], "limit": limit, "kinds": kinds,
                                 "path": path, "cwd": cwd})
    if data is None:
        data = queries.find_symbols(cwd, ctx.home, a["name"], limit, kinds=kinds, path=path, cwd=cwd)
    return data


# --- memories ----------------------------------------------------------------------------

def _remember(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api

    cwd = _cwd(a, "remember")
    res = ctx.call("remember", {
        "text": a["text"], "repo": cwd, "refs": list(a.get("codeRefs") or []),
        "kind": a.get("kind", "durable"), "project": a.get("project", "default"), "topic": a.get("topic"),
        "author": a.get("author"), "agent_id": a.get("agentId"), "session_id": a.get("sessionId"),
        "supersedes": a.get("supersedes"), "source_commit": a.get("sourceCommit")}, read_only=False)
    if res is None:
        res = api.remember(ctx.home, a["text"], repo=cwd, refs=list(a.get("codeRefs") or []),
                           kind=a.get("kind", "durable"), project=a.get("project", "default"),
                           topic=a.get("topic"), author=a.get("author"), agent_id=a.get("agentId"),
                           session_id=a.get("sessionId"), supersedes=a.get("supersedes"),
                           source_commit=a.get("sourceCommit"), source=ctx.source(REMEMBER_WAIT_S))
    return res


def _validate(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api

    ids = list(a.get("memoryIds") or []) or None
    workset = a.get("workset")
    depth = a.get("dependencyDepth", 1)
    if workset:
        if a.get("repos") or a.get("at"):
            raise usage_error("validate: the `workset` argument cannot be combined with `repos` or `at`",
                              "a workset names its repositories; drop `repos` and `at`")
        data = ctx.call("validate", {"memory_ids": ids, "project": a.get("project"), "workset": workset,
                                     "dependency_depth": depth})
        if data is None:
            data = api.validate_workset(ctx.home, workset, memory_ids=ids, project=a.get("project"),
                                        source=ctx.source(READ_WAIT_S), dependency_depth=depth).to_json()
        return data
    cwd = caller_cwd(a, required=not a.get("repos"), tool="validate")
    repos = abs_paths(list(a.get("repos") or []), cwd) or [cwd]
    data = ctx.call("validate", {"memory_ids": ids, "project": a.get("project"), "repo_paths": repos,
                                 "at": a.get("at"), "dependency_depth": depth})
    if data is None:
        data = api.validate_memories(ctx.home, memory_ids=ids, project=a.get("project"), repo_paths=repos,
                                     at=a.get("at"), source=ctx.source(READ_WAIT_S),
                                     dependency_depth=depth).to_json()
    return data


def _brief(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api

    workset = a.get("workset")
    kwargs: dict[str, Any] = {"project": a.get("project"), "workset": workset,
                              "code_refs": list(a.get("codeRefs") or []),
                              "dependency_depth": a.get("dependencyDepth", 1)}
    if a.get("budgetTokens") is not None:
        kwargs["budget_tokens"] = a["budgetTokens"]
    if not workset:  # a workset names its repositories; otherwise callerCwd's repository
        kwargs["repo_paths"] = [_cwd(a, "brief")]
    served = ctx.call("brief", {"task": a["task"], **kwargs})
    if served is not None:
        return json.loads(served["json_text"])
    return _to_json(api.brief(ctx.home, a["task"], **kwargs, source=ctx.source(READ_WAIT_S)))


def _graph(op: str | None) -> Callable[[ToolContext, dict[str, Any]], dict[str, Any]]:
    """The handler of the ``graph`` tool (``op`` from the arguments), or of an older
    ``graph_<op>`` name (``citegraph graph <op> REF --json``)."""

    def handler(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
        from citegraph.validator.impact import graph_query

        which = op or a["op"]
        cwd = _cwd(a, "graph" if op is None else f"graph_{op}")
        depth = a.get("depth", 1)
        data = _served(ctx, "graph", {"op": which, "ref": a["ref"], "depth": depth, "repo": cwd})
        if data is None:
            data = graph_query(ctx.home, cwd, which, a["ref"], depth, source=ctx.source(READ_WAIT_S))
        return data

    return handler


def _cited(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    cwd = _cwd(a, "cited")
    args = {"refs": list(a["codeRefs"]), "repo": cwd, "limit": a.get("limit", 24),
            "include_archived": bool(a.get("includeArchived"))}
    data = _served(ctx, "cited", args)
    if data is None:
        from citegraph.memory.agent.cited import cited as run

        data = run(ctx.home, args["refs"], repo=cwd, limit=args["limit"], include_archived=args["include_archived"])
    return data


def _refresh(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    cwd = _cwd(a, "refresh")
    args = {"memory_ids": list(a.get("memoryIds") or []), "all": bool(a.get("all")),
            "accept": a.get("accept", "relocated"), "dry_run": bool(a.get("dryRun")), "project": a.get("project"),
            "repo": cwd}
    if bool(args["memory_ids"]) == args["all"]:
        raise usage_error("refresh: name the memories to refresh in `memoryIds`, or pass `all: true` (not both)",
                          "pass the `memoryIds` argument or the `all` argument")
    data = _served(ctx, "refresh", args, read_only=args["dry_run"])
    if data is None:
        from citegraph.memory.agent.refresh import refresh as run

        data = run(ctx.home, args["memory_ids"], all_memories=args["all"], accept=args["accept"],
                   dry_run=args["dry_run"], repo=cwd, project=args["project"])
    return data


def _list(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(ctx.home, read_only=True) as ms:
        mems = api.select_memories(ms, None, a.get("project"), bool(a.get("includeArchived")))
        return {"memories": [m.to_json() for m in mems]}


def _show(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(ctx.home, read_only=True) as ms:
        return ms.require(a["memoryId"]).to_json()


def _history(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(ctx.home, read_only=True) as ms:
        mem = ms.require(a["memoryId"])
        return {"id": mem.id, "revisions": ms.history(mem.id)}


# --- worksets ----------------------------------------------------------------------------

def _ws_paths(a: dict[str, Any], tool: str) -> list[str]:
    paths = list(a.get("paths") or [])
    cwd = caller_cwd(a, required=any(not os.path.isabs(p) for p in paths), tool=tool)
    return abs_paths(paths, cwd)


def _workset_create(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.worksets import workset as ws

    return ws.create(ctx.home, a["workset"], _ws_paths(a, "workset_create"))


def _workset_add(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.worksets import workset as ws

    return ws.add(ctx.home, a["workset"], _ws_paths(a, "workset_add"))


def _workset_remove(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.worksets import workset as ws

    return ws.remove(ctx.home, a["workset"], _ws_paths(a, "workset_remove"))


def _workset_list(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.worksets import workset as ws

    return ws.list_worksets(ctx.home)


def _workset_show(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.worksets import workset as ws

    return ws.show(ctx.home, a["workset"])


def _workset_prepare(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api

    return _to_json(api.workset_prepare(ctx.home, a["workset"], concurrency=a.get("concurrency")))


def _workset_status(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.worksets import workset as ws

    return ws.status(ctx.home, a["workset"])


def _no_cwd(_a: dict[str, Any]) -> bool:
    return False


def _paths_need_cwd(a: dict[str, Any]) -> bool:
    return any(isinstance(p, str) and not os.path.isabs(p) for p in a.get("paths") or [])


def _file_lanes(a: dict[str, Any]) -> list[str]:
    from citegraph.server.mcp_spec import repository_key

    f = a.get("file")
    return [repository_key(os.path.dirname(f))] if isinstance(f, str) and os.path.isabs(f) else cwd_lanes(a)


# --- the table -----------------------------------------------------------------------------

READ = {"read_only": True, "destructive": False, "idempotent": True}
DEPENDENCY_DEPTH = _i("How far to follow an exact symbol citation's recorded dependencies for dependency-changed "
                      "advisories (0: off; default 1; docs/graph.md).", 0, 3)
GRAPH_ARGS = {"callerCwd": CWD,
              "ref": _s("The symbol: path::Qualified.name (optionally [N]), a cgs_/cgr_ handle from find or "
                        "symbols, or a GitHub blob URL of a line in the repository."),
              "depth": _i("How many hops to follow (default 1).", 1, 5)}
GRAPH_OPS = ("callers", "callees", "deps", "dependents")
GRAPH_TOOLS = (
    ("callers", "Who calls this symbol", "The symbols that call REF, through the resolved call edges of the "
     "exact-current snapshot. Use it before changing a function's behaviour or signature, to see who relies "
     "on it."),
    ("callees", "What this symbol calls", "The symbols REF calls (resolved call edges). Use it to see what a "
     "function relies on before trusting a memory about it."),
    ("deps", "What this symbol depends on", "Everything REF calls, references or inherits (resolved edges). "
     "Use it to judge what a change elsewhere can do to REF."),
    ("dependents", "What depends on this symbol", "Everything that calls, references or inherits REF: what a "
     "change to it touches. Use it to find the code (and, with cited, the memories) a change can affect."),
)

TOOLS: dict[str, ToolSpec] = {t.name: t for t in (
    ToolSpec(
        "find",
        "Search the symbols of the repository's exact-current snapshot by name or qualified name and return "
        "their handles (cgs_…), paths and lines. Use it to find the handle or path::Name to cite in remember, "
        "or to look up where a function or class is defined now. Same as `citegraph find NAME --json`.",
        {"callerCwd": CWD, "name": _s("The symbol's name, qualified name, prefix or glob, e.g. next_delay, RetryPolicy.next_delay, Context.inv or 'invok*'; best matches first."),
         "limit": _i("At most this many symbols (default 50; truncated says when more match).", 1, 500),
         "kinds": {"type": "array", "items": {"type": "string"},
                   "description": "Only symbols of these kinds (e.g. function, method, class)."},
         "path": _s("Only symbols under this file or directory, or matching this glob (relative to callerCwd, "
                    "repository-relative, or absolute inside the repository).")},
        ("name",), _find, title="Find symbols", output="find", **READ),
    ToolSpec(
        "symbols",
        "List every symbol of one file in the exact-current snapshot, with handles (cgs_…) and lines. Use it "
        "before remember to pick what to cite in a file you have read. Same as `citegraph symbols FILE --json`.",
        {"callerCwd": CWD, "file": _s("The file: absolute, or relative to callerCwd.")},
        ("file",), _symbols, title="Symbols of a file", output="symbols", lanes=_file_lanes,
        needs_cwd=lambda a: not (isinstance(a.get("file"), str) and os.path.isabs(a["file"])), **READ),
    ToolSpec(
        "index",
        "Build (or reuse) the snapshot of the repository's current state — the worktree with its uncommitted "
        "edits, or the commit `rev` — so remember can capture and validate can judge against it. Call it when "
        "status says no exact-current snapshot exists, or when a remember or validate error tells you to; with "
        "the resident service running the snapshot is usually current already. Same as `citegraph index --json`.",
        {"callerCwd": CWD, "rev": _s("Index this commit (read from the object database) instead of the worktree.")},
        (), _index, title="Index the repository", output="index", read_only=False, destructive=False,
        idempotent=True),
    ToolSpec(
        "status",
        "The repository's identity, HEAD, dirty state, snapshots and whether an exact-current snapshot is "
        "ready (needed by remember and for verdicts). Use it to see whether to call index, or why citations "
        "come back unknown/not-current. Same as `citegraph status --json`.",
        {"callerCwd": CWD}, (), _status, title="Repository and snapshot status", output="status",
        aliases=("index_status",), **READ),
    ToolSpec(
        "remember",
        "Store a memory — a claim about the code — with code citations resolved against the exact-current "
        "snapshot, so later readers can tell whether it still holds. Use it when you learned something worth "
        "keeping that rests on specific code; cite what it rests on (codeRefs). Writing the same (project, "
        "topic) again makes a new revision. Fails, retryably, when no exact-current snapshot exists (call "
        "index). Same as `citegraph remember --json`.",
        {"callerCwd": CWD, "text": _s("The claim to remember (stored and always shown as quoted data)."),
         "kind": {"type": "string", "enum": ["durable", "handoff"],
                  "description": "durable: a lasting fact (default); handoff: a note for the next session."},
         "project": _s("The memory's project (default: default)."),
         "topic": _s("Stable topic; writing the same (project, topic) again makes a new revision."),
         "codeRefs": CODE_REFS,
         "supersedes": _s("Id of the memory (cgm_…) this one replaces."),
         "sourceCommit": _s("Legacy provenance: the commit the claim was made at (for a claim without codeRefs)."),
         "author": _s("Who wrote the claim (provenance)."),
         "agentId": _s("The agent's id (provenance)."), "sessionId": _s("The session's id (provenance).")},
        ("text",), _remember, title="Remember a claim about the code", output="remember", read_only=False,
        destructive=False, idempotent=False),
    ToolSpec(
        "cited",
        "The memories whose citations touch the given code — a file, overlapping lines, a symbol or a moved "
        "copy of it — each with its current freshness. Use it before changing code to learn what is known "
        "about it and which claims the change may make stale. Same as `citegraph cited REF… --json`.",
        {"callerCwd": CWD, "codeRefs": {**CODE_REFS, "description": "The code: a path, path#L10-L24, "
                                        "path::Qualified.name or a cgs_ handle (relative to the repository root)."},
         "limit": _i("Memories validated and returned (default 24).", 1, 200),
         "includeArchived": _b("Include archived memories.")},
        ("codeRefs",), _cited, title="Memories citing this code", output="cited", **READ),
    ToolSpec(
        "refresh",
        "Re-anchor memories whose cited code moved: a new revision with receipts re-captured at the observed "
        "place, the old receipts kept in history. Use it after validate or brief reports relocated citations "
        "(or, with accept successor, a renamed symbol; with accept cosmetic, code whose comments or formatting "
        "alone changed); never for other changed, deleted or unknown ones. Pass "
        "dryRun to see what would change. Same as `citegraph refresh --json`.",
        {"callerCwd": CWD, "memoryIds": {**MEMORY_IDS, "description": "The memories to refresh (ids cgm_…)."},
         "all": _b("Every active memory with citations (instead of memoryIds)."),
         "accept": _s("What may be re-anchored, comma-separated: relocated (default), successor (a changed "
                      "symbol's unique successor), cosmetic (a change of comments/formatting only)."),
         "dryRun": _b("Report what would change; write nothing."), "project": PROJECT},
        (), _refresh, title="Refresh moved citations", output="refresh", read_only=False, destructive=False,
        idempotent=True),
    ToolSpec(
        "brief",
        "A context brief for a task: the relevant memories, each with its freshness validated against the "
        "current code, stale ones apart — bounded in work and size, never indexing. Use it at the start of a "
        "task (and when you change focus) to recall what is known. Same as `citegraph brief --json`.",
        {"callerCwd": CWD, "task": _s("What you are about to do, in words (drives recall)."), "project": PROJECT,
         "workset": {**WORKSET, "description": "Validate against the members of this prepared workset instead "
                     "of callerCwd's repository."},
         "codeRefs": {**CODE_REFS, "description": "Code you are working on (paths, path::Name, handles): "
                      "memories citing it rank first."},
         "budgetTokens": _i("Size bound of the whole answer in tokens (ceil(utf8 bytes / 4); default 1250).",
                            800, 1500),
         "dependencyDepth": DEPENDENCY_DEPTH},
        ("task",), _brief, title="Context brief for a task", output="brief", lanes=workset_lanes,
        needs_cwd=lambda a: not a.get("workset"), **READ),
    ToolSpec(
        "validate",
        "Check memories' citations against the exact current code: each is exact, relocated, changed, "
        "deleted or unknown (with a reason), and each memory fresh, stale or unknown. Use it to audit "
        "memories before relying on them or after a change. Same as `citegraph validate --json`.",
        {"callerCwd": CWD, "memoryIds": MEMORY_IDS, "project": PROJECT,
         "at": _s("Validate against the snapshot of this indexed commit (e.g. a branch or sha) instead of the "
                  "current state."),
         "repos": {**PATHS, "description": "Repositories in scope (absolute, or relative to callerCwd); default: "
                   "callerCwd's."},
         "workset": {**WORKSET, "description": "Validate against the members of this prepared workset "
                     "(not with repos or at)."},
         "dependencyDepth": DEPENDENCY_DEPTH},
        (), _validate, title="Validate memories", output="validate", lanes=validate_lanes,
        needs_cwd=lambda a: not a.get("repos") and not a.get("workset"), **READ),
    ToolSpec(
        "list",
        "List stored memories with their receipts (no validation). Use it to browse what is remembered, or "
        "to find a memory's id. Same as `citegraph list --json`.",
        {"project": PROJECT, "includeArchived": _b("Include archived memories.")},
        (), _list, title="List memories", output="list", lanes=lambda a: [], **READ),
    ToolSpec(
        "show",
        "One stored memory with its text and receipts (no validation; validate says whether it holds). Use it "
        "to read a memory named by brief, cited or list. Same as `citegraph show ID --json`.",
        {"memoryId": MEMORY_ID}, ("memoryId",), _show, title="Show a memory", output="show",
        lanes=lambda a: [], **READ),
    ToolSpec(
        "history",
        "Every revision of a memory, oldest first, with the receipts each held and what refresh replaced. Use "
        "it to see how a claim and its evidence changed. Same as `citegraph history ID --json`.",
        {"memoryId": MEMORY_ID}, ("memoryId",), _history, title="History of a memory", output="history",
        lanes=lambda a: [], **READ),
    ToolSpec(
        "workset_create",
        "Create a workset: a named set of repositories (a monorepo family, the services of a product) to "
        "prepare once and then brief and validate across. Use it when a task spans several repositories. "
        "Same as `citegraph workset create NAME PATH… --json`.",
        {"workset": WORKSET, "paths": PATHS, "callerCwd": CWD},
        ("workset",), _workset_create, title="Create a workset", output="workset", lanes=workset_lanes,
        needs_cwd=_paths_need_cwd, read_only=False, destructive=False, idempotent=False),
    ToolSpec(
        "workset_add",
        "Add repositories to a workset. Same as `citegraph workset add NAME PATH… --json`.",
        {"workset": WORKSET, "paths": {**PATHS, "description": "The repositories to add (absolute, or relative "
                                       "to callerCwd)."}, "callerCwd": CWD},
        ("workset", "paths"), _workset_add, title="Add repositories to a workset", output="workset",
        lanes=workset_lanes, needs_cwd=_paths_need_cwd, read_only=False, destructive=False, idempotent=True),
    ToolSpec(
        "workset_remove",
        "Remove repositories from a workset (their snapshots are unpinned; nothing else is deleted). Same as "
        "`citegraph workset remove NAME PATH… --json`.",
        {"workset": WORKSET, "paths": {**PATHS, "description": "The members to remove (as listed by "
                                       "workset_show, or relative to callerCwd)."}, "callerCwd": CWD},
        ("workset", "paths"), _workset_remove, title="Remove repositories from a workset", output="workset",
        lanes=workset_lanes, needs_cwd=_paths_need_cwd, read_only=False, destructive=True, idempotent=True),
    ToolSpec(
        "workset_list",
        "List the worksets with their member counts. Use it to find a workset's name. Same as "
        "`citegraph workset list --json`.",
        {}, (), _workset_list, title="List worksets", output="workset-list", lanes=lambda a: [], **READ),
    ToolSpec(
        "workset_show",
        "A workset's members and what the last prepare found for each. Same as "
        "`citegraph workset show NAME --json`.",
        {"workset": WORKSET}, ("workset",), _workset_show, title="Show a workset", output="workset",
        lanes=workset_lanes, **READ),
    ToolSpec(
        "workset_prepare",
        "Index every member of a workset to exact-current and pin those snapshots, reporting each member "
        "ready, missing or failed with a reason. Call it before brief or validate with a workset (they never "
        "build). Same as `citegraph workset prepare NAME --json`.",
        {"workset": WORKSET, "callerCwd": {**CWD, "description": "Not needed (the workset names its "
                                           "repositories); accepted for uniformity."},
         "concurrency": _i("Members built at once (default 2).", 1, 64)},
        ("workset",), _workset_prepare, title="Prepare a workset", output="workset-prepare", read_only=False,
        destructive=False, idempotent=True, lanes=workset_lanes, needs_cwd=_no_cwd),
    ToolSpec(
        "workset_status",
        "Whether every member of a workset has an exact-current snapshot that prepare pinned (never builds). "
        "Use it to decide whether to call workset_prepare. Same as `citegraph workset status NAME --json`.",
        {"workset": WORKSET}, ("workset",), _workset_status, title="Workset readiness",
        output="workset-status", lanes=workset_lanes, **READ),
    ToolSpec(
        "graph",
        "The symbol graph around REF in the exact-current snapshot (resolved edges): op callers = who calls "
        "it, callees = what it calls, deps = everything it calls, references or inherits, dependents = "
        "everything that does so to it. Use it before changing a symbol (callers, dependents) or trusting a "
        "memory about it (callees, deps). Same as `citegraph graph OP REF --json`.",
        {"op": {"type": "string", "enum": list(GRAPH_OPS), "description": "callers, callees, deps or dependents."},
         **GRAPH_ARGS}, ("op", "ref"), _graph(None), title="Symbol graph", output="graph", **READ),
)}

for _spec in list(TOOLS.values()):
    for _alias in _spec.aliases:  # older names keep working, unlisted (docs/mcp.md)
        TOOLS[_alias] = ToolSpec(
            _alias, f"Alias of `{_spec.name}` (kept for older clients). " + _spec.description, _spec.properties,
            _spec.required, _spec.handler, read_only=_spec.read_only, lanes=_spec.lanes,
            title=f"{_spec.title} (alias of {_spec.name})", output=_spec.output, destructive=_spec.destructive,
            idempotent=_spec.idempotent, needs_cwd=_spec.needs_cwd, listed=False)
for _op, _title, _text in GRAPH_TOOLS:  # the graph_* tools before `graph` took op (issue 22)
    TOOLS[f"graph_{_op}"] = ToolSpec(
        f"graph_{_op}", f"{_text} Same as `graph` with op {_op}.", GRAPH_ARGS, ("ref",), _graph(_op),
        title=_title, output="graph", listed=False, **READ)


