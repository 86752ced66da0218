"""The requests the resident service answers: the same library calls as the CLI's one-shot
path, with the service's state source (reads synced with the watcher, no worktree scan).

Each handler takes the request's ``args`` (the CLI's options; paths absolute) and returns
the command's ``--json`` structure. ``remember`` and the reads wait (bounded: the
service's ``read_wait_s``, default 2 s, or a request's ``wait_s``) for the build of a
change the service has seen (or sees when it syncs) and answer for the new state; past the
bound the answer is unknown/racing, "still indexing" (graph/live_source.py).
"""

from __future__ import annotations

from typing import Any

from citegraph.indexer.errors import CitegraphError
from citegraph.server.service import Service

HOOK_WAIT_S = 0.1  # before an edit: answer fast; an edit made just now may still be building


def _str(args: dict[str, Any], key: str, default: str | None = None) -> str | None:
    v = args.get(key, default)
    if v is not None and not isinstance(v, str):
        raise CitegraphError(f"request argument {key} is not a string", "", code=2, kind="usage")
    return v


def _strs(args: dict[str, Any], key: str) -> list[str] | None:
    v = args.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise CitegraphError(f"request argument {key} is not a list of strings", "", code=2, kind="usage")
    return v


def _wait(args: dict[str, Any], default: float) -> float:
    """The request's bound on waiting for a build (its ``wait_s``, else ``default``)."""
    v = args.get("wait_s", default)
    if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v <= 60:
        raise CitegraphError("request argument wait_s must be 0–60 seconds", "", code=2, kind="usage")
    return float(v)


def ping(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    return svc.status()


def register(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    roots = [str(svc.register(p).live.root) for p in (_strs(args, "paths") or [])]
    return {"roots": roots}


def status(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.graph import queries

    path = _str(args, "path") or "."
    data = queries.status(path, svc.home, source=svc.source(wait_s=_wait(args, 0.0)))
    w = svc.register(path)
    data["service"] = {"used": True, "pid": svc.status()["pid"], "watching": w.live.watching(),
                       "generation": w.live.generation, "version": w.live.version}
    return data


def index(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.graph.snapshot_builder import build_snapshot

    path = _str(args, "path") or "."
    rev = _str(args, "rev")
    if rev is not None:
        return build_snapshot(path, svc.home, rev=rev, pool_context=svc.pool_context).to_json()
    w = svc.register(path)
    w.live.sync()
    res = svc.build(w)
    if res is None:
        raise CitegraphError(w.live.root.as_posix() + ": " + (w.last_error or "the build failed"),
                             "see the service log; retry", code=1, retryable=True)
    return {k: v for k, v in res.items() if k != "repo"}


def symbols(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from pathlib import Path

    from citegraph.graph import queries

    file = _str(args, "file")
    if not file:
        raise CitegraphError("request argument file is missing", "", code=2, kind="usage")
    target = file if file.startswith(("https://", "http://")) else Path(file)
    return {"symbols": queries.symbols_of_file(target, svc.home, source=svc.source(wait_s=svc.read_wait_s),
                                               cwd=_str(args, "cwd"))}


def find(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.graph import queries

    limit = args.get("limit", 50)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        raise CitegraphError("request argument limit must be 1–10000", "", code=2, kind="usage")
    return queries.find_symbols(_str(args, "repo") or ".", svc.home, _str(args, "name") or "", limit,
                                source=svc.source(wait_s=svc.read_wait_s), kinds=_strs(args, "kinds"),
                                path=_str(args, "path"), cwd=_str(args, "cwd"))


def graph(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.validator.impact import graph_query

    depth = args.get("depth", 1)
    if not isinstance(depth, int) or isinstance(depth, bool):
        raise CitegraphError("request argument depth is not an integer", "", code=2, kind="usage")
    return graph_query(svc.home, _str(args, "repo") or ".", _str(args, "op") or "", _str(args, "ref") or "",
                       depth, source=svc.source(wait_s=svc.read_wait_s))


def remember(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api
    from citegraph.memory.lifecycle.store import MemoryStore

    text = _str(args, "text")
    if text is None:
        raise CitegraphError("request argument text is missing", "", code=2, kind="usage")
    with MemoryStore.kept_open(svc.home):  # capture, then the write: one connection
        return api.remember(svc.home, text, repo=_str(args, "repo") or ".", refs=_strs(args, "refs") or [],
                            kind=_str(args, "kind") or "durable", project=_str(args, "project") or "default",
                            topic=_str(args, "topic"), author=_str(args, "author"),
                            agent_id=_str(args, "agent_id"), session_id=_str(args, "session_id"),
                            supersedes=_str(args, "supersedes"), source_commit=_str(args, "source_commit"),
                            cwd=_str(args, "cwd"), source=svc.source(wait_s=_wait(args, svc.read_wait_s)))


def _depth(args: dict[str, Any]) -> int:
    """``dependency_depth`` of a request (default 1; the pipeline checks its range)."""
    v = args.get("dependency_depth", 1)
    if v is None:
        return 1
    if not isinstance(v, int) or isinstance(v, bool):
        raise CitegraphError("request argument dependency_depth is not an integer", "", code=2, kind="usage")
    return v


def validate(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api

    source = svc.source(wait_s=_wait(args, svc.read_wait_s))
    workset = _str(args, "workset")
    if workset:
        report = api.validate_workset(svc.home, workset, memory_ids=_strs(args, "memory_ids"),
                                      project=_str(args, "project"), source=source,
                                      dependency_depth=_depth(args))
    else:
        report = api.validate_memories(svc.home, memory_ids=_strs(args, "memory_ids"), project=_str(args, "project"),
                                       repo_paths=_strs(args, "repo_paths"), at=_str(args, "at"), source=source,
                                       dependency_depth=_depth(args))
    return report.to_json()


def brief(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory import api

    budget = args.get("budget_tokens", 1250)
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise CitegraphError("request argument budget_tokens is not an integer", "", code=2, kind="usage")
    res = api.brief(svc.home, _str(args, "task") or "", project=_str(args, "project"), workset=_str(args, "workset"),
                    code_refs=_strs(args, "code_refs") or [], budget_tokens=budget,
                    repo_paths=_strs(args, "repo_paths"), cwd=_str(args, "cwd"),
                    source=svc.source(wait_s=_wait(args, svc.read_wait_s)), dependency_depth=_depth(args))
    return {"json_text": res.json_text, "text": res.text}


def _int(args: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    v = args.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise CitegraphError(f"request argument {key} must be an integer {lo}–{hi}", "", code=2, kind="usage")
    return v


def cited(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.agent.cited import DEFAULT_LIMIT, MAX_LIMIT
    from citegraph.memory.agent.cited import cited as run

    return run(svc.home, _strs(args, "refs") or [], repo=_str(args, "repo") or ".",
               limit=_int(args, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
               include_archived=bool(args.get("include_archived")), cwd=_str(args, "cwd"),
               source=svc.source(wait_s=_wait(args, svc.read_wait_s)))


def refresh(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.agent.refresh import refresh as run

    return run(svc.home, _strs(args, "memory_ids") or [], all_memories=bool(args.get("all")),
               accept=_str(args, "accept"), dry_run=bool(args.get("dry_run")), repo=_str(args, "repo") or ".",
               project=_str(args, "project"), source=svc.source(wait_s=_wait(args, svc.read_wait_s)))


def hook_pre_edit(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.agent.hooks import pre_edit

    file = _str(args, "file")
    if not file:
        raise CitegraphError("request argument file is missing", "", code=2, kind="usage")
    return {"output": pre_edit(svc.home, file, source=svc.source(wait_s=_wait(args, HOOK_WAIT_S)))}


def hook_session_start(svc: Service, args: dict[str, Any]) -> dict[str, Any]:
    from citegraph.memory.agent.hooks import SESSION_BUDGET, session_start

    return {"output": session_start(svc.home, _str(args, "cwd") or ".",
                                    budget_tokens=_int(args, "budget_tokens", SESSION_BUDGET, 800, 1500),
                                    source=svc.source(wait_s=_wait(args, svc.read_wait_s)))}


HANDLERS = {"ping": ping, "register": register, "status": status, "index": index, "symbols": symbols,
            "find": find, "graph": graph, "remember": remember, "validate": validate, "brief": brief, "cited": cited,
            "refresh": refresh, "hook_pre_edit": hook_pre_edit, "hook_session_start": hook_session_start}
