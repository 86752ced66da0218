"""The MCP tool table (SPEC §11, §19; docs/mcp.md): one ``ToolSpec`` per tool, each with
a title, a one-line description of what it does and when to use it, every argument
described in a line, its annotations, and ``output``: the JSON Schema (docs/schemas/) of
its result, which is exactly the matching CLI command's ``--json`` output. Every byte of
it is in each agent's context (tools/list ≤ 30 KB: tests/test_mcp_schemas.py).

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
# One line each: tools/list is read into every agent's context (issue 22, docs/mcp.md "Lean tools").

CWD = {"type": "string", "description": "Your working directory, absolute (default: client root or server cwd)."}
PROJECT = {"type": "string", "description": "Only this project's memories."}
WORKSET = {"type": "string", "description": "The workset's name."}
MEMORY_ID = {"type": "string", "description": "The memory's id (cgm_…)."}
MEMORY_IDS = {"type": "array", "items": {"type": "string"}, "description": "Only these memories (default: all active)."}
CODE_REFS = {"type": "array", "items": {"type": "string"}, "description":
             "What it rests on (≤8): path, path#L10-L24, path::Qualified.name or a handle from find."}
PATHS = {"type": "array", "items": {"type": "string"}, "description": "Repositories (absolute or relative to callerCwd)."}


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

WRITE = {"read_only": False, "destructive": False}
WORKSET_OPS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], dict[str, bool]]] = {
    # op: (output schema, its arguments, the required ones, its hints) — `citegraph workset OP`
    "create": ("workset", ("workset", "paths", "callerCwd"), ("workset",), {**WRITE, "idempotent": False}),
    "add": ("workset", ("workset", "paths", "callerCwd"), ("workset", "paths"), {**WRITE, "idempotent": True}),
    "remove": ("workset", ("workset", "paths", "callerCwd"), ("workset", "paths"),
               {**WRITE, "destructive": True, "idempotent": True}),
    "list": ("workset-list", (), (), {"read_only": True, "destructive": False, "idempotent": True}),
    "show": ("workset", ("workset",), ("workset",), {"read_only": True, "destructive": False, "idempotent": True}),
    "prepare": ("workset-prepare", ("workset", "callerCwd", "concurrency"), ("workset",),
                {**WRITE, "idempotent": True}),
    "status": ("workset-status", ("workset",), ("workset",),
               {"read_only": True, "destructive": False, "idempotent": True}),
}
"""The operations of the ``workset`` tool; each is also callable under its older name
``workset_<op>`` (unlisted)."""


def _workset(op: str | None) -> Callable[[ToolContext, dict[str, Any]], dict[str, Any]]:
    """The handler of the ``workset`` tool (``op`` from the arguments), or of an older
    ``workset_<op>`` name (``citegraph workset <op> --json``)."""

    def handler(ctx: ToolContext, a: dict[str, Any]) -> dict[str, Any]:
        from citegraph.memory import api
        from citegraph.memory.worksets import workset as ws

        which = op or a["op"]
        tool = "workset" if op is None else f"workset_{op}"
        _, allowed, required, _ = WORKSET_OPS[which]
        if op is None:  # the one tool takes every op's arguments: say which this op does not
            extra = sorted(set(a) - {"op", "callerCwd", *allowed})  # callerCwd: any op (agents pass it always)
            if extra:
                raise usage_error(f"workset: op {which} takes no `{extra[0]}` argument",
                                  f"the arguments of op {which} are {', '.join(('op', *allowed))}")
            missing = [n for n in required if not a.get(n)]
            if missing:
                raise usage_error(f"workset: op {which} needs the `{missing[0]}` argument",
                                  f"pass the `{missing[0]}` argument")
        if which == "list":
            return ws.list_worksets(ctx.home)
        name = a["workset"]
        if which == "prepare":
            return _to_json(api.workset_prepare(ctx.home, name, concurrency=a.get("concurrency")))
        if which in ("show", "status"):
            return ws.show(ctx.home, name) if which == "show" else ws.status(ctx.home, name)
        paths = list(a.get("paths") or [])
        cwd = caller_cwd(a, required=any(not os.path.isabs(p) for p in paths), tool=tool)
        edit = {"create": ws.create, "add": ws.add, "remove": ws.remove}[which]
        return edit(ctx.home, name, abs_paths(paths, cwd))

    return handler


def _paths_need_cwd(a: dict[str, Any]) -> bool:
    return any(isinstance(p, str) and not os.path.isabs(p) for p in a.get("paths") or [])


def _file_lanes(a: dict[str, Any]) -> list[str]:
    from citegraph.server.mcp_spec import repository_key

    f = a.get("file")
    return [repository_key(os.path.dirname(f))] if isinstance(f, str) and os.path.isabs(f) else cwd_lanes(a)


# --- the table -----------------------------------------------------------------------------
# Descriptions are one line, what and when (the CLI equivalents are in docs/mcp.md).

READ = {"read_only": True, "destructive": False, "idempotent": True}
DEPENDENCY_DEPTH = _i("Dependency hops for dependency-changed advisories (0: off; default 1).", 0, 3)
GRAPH_ARGS = {"callerCwd": CWD,
              "ref": _s("The symbol: path::Qualified.name or a handle from find."),
              "depth": _i("Hops (default 1).", 1, 5)}
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
WORKSET_ARGS = {
    "op": {"type": "string", "enum": list(WORKSET_OPS), "description":
           "create/add/remove (paths), show, list, prepare (index all; before brief or validate), status."},
    "workset": {**WORKSET, "description": "The workset's name (every op but list)."},
    "paths": {**PATHS, "description": "create/add/remove: repositories (absolute or relative to callerCwd)."},
    "concurrency": _i("prepare: members built at once (default 2).", 1, 64),
    "callerCwd": CWD,
}

TOOLS: dict[str, ToolSpec] = {t.name: t for t in (
    ToolSpec(
        "find", "Find symbols by name: handles, paths and lines. Use it to locate code or get the ref to cite.",
        {"callerCwd": CWD, "name": _s("Name, qualified name, prefix or glob (e.g. Policy.next_delay, 'invok*')."),
         "limit": _i("Most symbols returned (default 50).", 1, 500),
         "kinds": {"type": "array", "items": {"type": "string"}, "description": "Only these kinds (function, class…)."},
         "path": _s("Only under this file, directory or glob.")},
        ("name",), _find, title="Find symbols", output="find", **READ),
    ToolSpec(
        "symbols", "Every symbol of one file with handles and lines. Use it to pick what to cite.",
        {"callerCwd": CWD, "file": _s("The file (absolute or relative to callerCwd).")},
        ("file",), _symbols, title="Symbols of a file", output="symbols", lanes=_file_lanes,
        needs_cwd=lambda a: not (isinstance(a.get("file"), str) and os.path.isabs(a["file"])), **READ),
    ToolSpec(
        "index", "Build or reuse the snapshot of the worktree (or commit rev). Call it when status has no "
        "exact-current one.",
        {"callerCwd": CWD, "rev": _s("Index this commit instead of the worktree.")},
        (), _index, title="Index the repository", output="index", read_only=False, destructive=False,
        idempotent=True),
    ToolSpec(
        "status", "HEAD, dirty state, snapshots and whether an exact-current one is ready (remember needs it).",
        {"callerCwd": CWD}, (), _status, title="Repository status", output="status",
        aliases=("index_status",), **READ),
    ToolSpec(
        "remember", "Store a claim about the code, its citations checked against the exact current code. Use it "
        "for what rests on specific code.",
        {"callerCwd": CWD, "text": _s("The claim (stored and shown as quoted data)."),
         "kind": {"type": "string", "enum": ["durable", "handoff"],
                  "description": "durable (default) or handoff (a note for the next session)."},
         "project": _s("Project (default: default)."),
         "topic": _s("Stable topic: the same project and topic make a new revision."),
         "codeRefs": CODE_REFS,
         "supersedes": _s("Id of the memory this one replaces."),
         "sourceCommit": _s("Commit the claim was made at (legacy: no codeRefs)."),
         "author": _s("Author (provenance)."), "agentId": _s("Agent id (provenance)."),
         "sessionId": _s("Session id (provenance).")},
        ("text",), _remember, title="Remember a claim", output="remember", read_only=False,
        destructive=False, idempotent=False),
    ToolSpec(
        "cited", "Memories citing this code, with their freshness. Use it before changing the code.",
        {"callerCwd": CWD, "codeRefs": {**CODE_REFS, "description": "The code: path, path#L10-L24, "
                                        "path::Qualified.name or a handle."},
         "limit": _i("Most memories (default 24).", 1, 200),
         "includeArchived": _b("Include archived memories.")},
        ("codeRefs",), _cited, title="Memories citing code", output="cited", **READ),
    ToolSpec(
        "refresh", "Re-anchor memories whose cited code moved (a new revision). Use it when validate or brief "
        "reports relocated.",
        {"callerCwd": CWD, "memoryIds": {**MEMORY_IDS, "description": "The memories to refresh."},
         "all": _b("Every active memory (instead of memoryIds)."),
         "accept": _s("Comma-separated: relocated (default), successor, cosmetic."),
         "dryRun": _b("Only report what would change."), "project": PROJECT},
        (), _refresh, title="Refresh moved citations", output="refresh", read_only=False, destructive=False,
        idempotent=True),
    ToolSpec(
        "brief", "Memories relevant to a task, validated against the current code. Use it when a task starts.",
        {"callerCwd": CWD, "task": _s("What you are about to do (drives recall)."), "project": PROJECT,
         "workset": {**WORKSET, "description": "Read this prepared workset instead of callerCwd's repository."},
         "codeRefs": {**CODE_REFS, "description": "Code you work on: memories citing it rank first."},
         "budgetTokens": _i("Size bound of the answer in tokens (default 1250).", 800, 1500),
         "dependencyDepth": DEPENDENCY_DEPTH},
        ("task",), _brief, title="Brief for a task", output="brief", lanes=workset_lanes,
        needs_cwd=lambda a: not a.get("workset"), **READ),
    ToolSpec(
        "validate", "Check memories against the current code: fresh, stale or unknown, and why. Use it before "
        "relying on them.",
        {"callerCwd": CWD, "memoryIds": MEMORY_IDS, "project": PROJECT,
         "at": _s("Validate at this indexed commit instead of the current state."),
         "repos": {**PATHS, "description": "Repositories (default: callerCwd's)."},
         "workset": {**WORKSET, "description": "Validate across this prepared workset (not with repos or at)."},
         "dependencyDepth": DEPENDENCY_DEPTH},
        (), _validate, title="Validate memories", output="validate", lanes=validate_lanes,
        needs_cwd=lambda a: not a.get("repos") and not a.get("workset"), **READ),
    ToolSpec(
        "list", "Stored memories with their citations, not validated. Use it to browse or find an id.",
        {"project": PROJECT, "includeArchived": _b("Include archived memories.")},
        (), _list, title="List memories", output="list", lanes=lambda a: [], **READ),
    ToolSpec(
        "show", "One stored memory with its text and citations, not validated (validate says if it holds).",
        {"memoryId": MEMORY_ID}, ("memoryId",), _show, title="Show a memory", output="show",
        lanes=lambda a: [], **READ),
    ToolSpec(
        "history", "Every revision of a memory, with its citations and what refresh replaced.",
        {"memoryId": MEMORY_ID}, ("memoryId",), _history, title="History of a memory", output="history",
        lanes=lambda a: [], **READ),
    ToolSpec(
        "workset", "Named sets of repositories to brief and validate across; op chooses what to do.",
        WORKSET_ARGS, ("op",), _workset(None), title="Worksets",
        output=tuple(dict.fromkeys(o for o, *_ in WORKSET_OPS.values())), lanes=workset_lanes,
        needs_cwd=_paths_need_cwd, read_only=False, destructive=True, idempotent=False),
    ToolSpec(
        "graph", "Symbols around ref through resolved edges: callers, callees, deps or dependents. Use it before "
        "changing a symbol.",
        {"op": {"type": "string", "enum": list(GRAPH_OPS),
                "description": "callers, callees, deps (what it uses) or dependents (what uses it)."},
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
for _op, (_out, _args, _required, _hints) in WORKSET_OPS.items():  # before `workset` took op (issue 22)
    TOOLS[f"workset_{_op}"] = ToolSpec(
        f"workset_{_op}", f"`workset` with op {_op} (kept for older clients).",
        {n: WORKSET_ARGS[n] for n in _args}, _required, _workset(_op), title=f"Workset {_op}", output=_out,
        lanes=workset_lanes, needs_cwd=_paths_need_cwd, listed=False, **_hints)
