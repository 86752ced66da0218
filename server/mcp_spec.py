"""The MCP tools' contract: what a tool is (``ToolSpec``), what a handler gets
(``ToolContext``), how untrusted arguments are checked (``check_args``), how a call finds
its repository (``callerCwd``, the client's roots, or the one registered repository) and
how errors are worded for MCP (``mcp_wording``: tool arguments, never CLI flags).

The tool table itself is ``citegraph.server.mcp_tools``; dispatch and the stdio server
are ``citegraph.server.mcp_server`` (docs/mcp.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.limits import MAX_TEXT_BYTES

SERVER_NAME = "citegraph"
REMEMBER_WAIT_S = 2.0  # through the service: wait this long for the overlay of an edit
READ_WAIT_S = 2.0  # ... and reads as long for a build of a change it has seen (then racing, still indexing)

@dataclass(frozen=True)
class ToolContext:
    """What a tool handler works with: the data home and, when this process hosts the
    resident service (``citegraph mcp`` runs it in-process), that service — reads then
    sync with its watcher instead of scanning the worktree, and ``remember`` after an edit
    waits for the overlay. When another process runs the service, ``call`` asks it."""

    home: Home
    service: Any | None = None
    attached: bool = False  # another process's service answers for this home

    def source(self, wait_s: float = 0.0) -> Any:
        return self.service.source(wait_s) if self.service is not None else None

    def call(self, op: str, args: dict[str, Any], read_only: bool = True) -> Any:
        """The other process's service answer, or None (then the handler works itself)."""
        if not self.attached:
            return None
        from citegraph.server.client import call

        return call(self.home, op, args, read_only=read_only)


Handler = Callable[[ToolContext, dict[str, Any]], Any]
"""Returns the result (the command's ``--json`` structure), or ``(result, text)``; the
text part of a result is always the result as JSON."""


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool. ``properties`` are the arguments' JSON Schemas, each with a
    ``description``; ``output`` names the JSON Schema of the result (docs/schemas/,
    the CLI command's ``--json``; several when ``op`` chooses), published (its structure)
    as the tool's ``outputSchema``. The hints
    are MCP tool annotations (docs/mcp.md has the table)."""

    name: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    handler: Handler
    read_only: bool = True
    lanes: Callable[[dict[str, Any]], list[str]] | None = None
    """The lane keys of a call (default: the repository of ``callerCwd``); see ``Dispatcher``."""
    title: str = ""
    output: str | tuple[str, ...] | None = None
    destructive: bool = False
    idempotent: bool = False
    needs_cwd: Callable[[dict[str, Any]], bool] | None = None
    """Whether a call with these arguments works on callerCwd's repository (then a missing
    ``callerCwd`` is filled from the client's roots or the one registered repository)."""
    aliases: tuple[str, ...] = field(default=())
    listed: bool = True
    """Published by ``tools/list``. An alias (an older name) is callable but not listed:
    every listed tool costs each agent's context (issue 22, docs/mcp.md "Lean tools")."""

    def lane_keys(self, args: dict[str, Any]) -> list[str]:
        return (self.lanes or cwd_lanes)(args)

    def wants_cwd(self, args: dict[str, Any]) -> bool:
        if "callerCwd" not in self.properties:
            return False
        return self.needs_cwd(args) if self.needs_cwd is not None else True

    def input_schema(self) -> dict[str, Any]:
        """The arguments as ``tools/list`` publishes them. The memory text and the task
        carry their length limit (a limit of the data); the generic bounds every string
        and list gets against hostile input (``MAX_STRING_CHARS``, ``MAX_LIST_ITEMS``) are
        enforced by ``check_args`` and documented in docs/mcp.md, not repeated on every
        argument of every tool (issue 22: tools/list ≤ 30 KB)."""
        props: dict[str, dict[str, Any]] = {}
        for name, prop in self.properties.items():
            props[name] = {**prop, "maxLength": max_text_bytes()} if name in TEXT_ARGS else dict(prop)
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if self.required:
            schema["required"] = list(self.required)
        return {**schema, "additionalProperties": False}

    def outputs(self) -> tuple[str, ...]:
        """The schema names a result may follow (several when an ``op`` argument chooses)."""
        if self.output is None:
            return ()
        return (self.output,) if isinstance(self.output, str) else tuple(self.output)

    def output_schema(self) -> dict[str, Any] | None:
        """The structure of docs/schemas/<output>.schema.json, as small as it gets
        (``mcp_schema.output_schema``: value constraints and prose stay in the file)."""
        if self.output is None:
            return None
        from citegraph.server.mcp_schema import output_schema

        return output_schema(*self.outputs())


# --- argument checking ---------------------------------------------------------------------
# MCP arguments are untrusted (SPEC §12.1): any unicode, lone surrogates, NUL, huge numbers,
# deep JSON. Each bad value is one usage error (code 2) naming the argument, found before any work.

MAX_STRING_CHARS = 4096
"""Longest string argument other than the memory text (``text``) and the task (``task``)."""
MAX_LIST_ITEMS = 1000
TEXT_ARGS = frozenset({"text", "task"})
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


def max_text_bytes() -> int:
    """The memory text limit shared by capture, import and MCP (a module that imports nothing)."""
    return MAX_TEXT_BYTES


def usage_error(what: str, todo: str) -> CitegraphError:
    return CitegraphError(what, todo, code=2, kind="usage")


def invalid_argument(what: str, todo: str) -> CitegraphError:
    return CitegraphError(what, todo, code=2, kind="invalid-argument")


def shown(value: Any, limit: int = 60) -> str:
    """A short, printable rendering of an untrusted value for a message (valid UTF-8)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 18:
        digits = len(str(abs(value))) if value.bit_length() < 4000 else None
        return f"(a {digits}-digit number)" if digits else "(a number of more than 1200 digits)"
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + "…"  # repr escapes NUL, controls and lone surrogates
    text = repr(value) if isinstance(value, str) else type(value).__name__
    return text[:limit + 2]


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _check_string(tool: str, what: str, value: str, name: str) -> None:
    if name == "text" and len(value) > max_text_bytes():
        from citegraph.memory.lifecycle.store import check_text

        try:
            check_text(value)
        except CitegraphError as err:  # the memory-text limit: the very line the CLI gives
            raise invalid_argument(err.what, err.todo) from None
    limit_bytes = max_text_bytes() if name in TEXT_ARGS else None
    limit = limit_bytes if limit_bytes is not None else MAX_STRING_CHARS
    if len(value) > limit:  # a character is at least one byte: no need to encode
        unit = "bytes" if limit_bytes is not None else "characters"
        raise invalid_argument(f"{tool}: {what} is too long ({len(value)} characters; the limit is {limit} {unit})",
                       "pass a shorter value" + (" (cite the code instead of quoting it)" if name == "text" else ""))
    m = _BAD_CHAR.search(value)
    if m:
        ch = m.group()
        why = "NUL (U+0000)" if ch == "\x00" else f"a lone surrogate (U+{ord(ch):04X}: not valid UTF-8 text)"
        raise invalid_argument(f"{tool}: {what} contains {why} at character {m.start()}",
                       "pass valid UTF-8 text without NUL characters")
    if limit_bytes is not None and not value.isascii() and len(value.encode("utf-8")) > limit_bytes:
        raise invalid_argument(f"{tool}: {what} is too long ({len(value.encode('utf-8'))} bytes; the limit is "
                       f"{limit_bytes} bytes)", "pass a shorter value")


def check_args(spec: ToolSpec, args: dict[str, Any] | None) -> dict[str, Any]:
    """Validate ``args`` against the tool's schema; usage errors are exit code 2 (as the CLI).

    Unknown or missing arguments are kind ``usage``; a value of the wrong type, out of
    range, too long, or holding NUL or a lone surrogate (not UTF-8) is kind
    ``invalid-argument``. Lists are checked item by item, never recursively.
    """
    if args is not None and not isinstance(args, dict):
        raise invalid_argument(f"{spec.name}: arguments must be an object, not {_type_name(args)}",
                       "pass the arguments as a JSON object")
    args = dict(args or {})
    unknown = sorted((k for k in args if k not in spec.properties), key=lambda k: (not isinstance(k, str), str(k)))
    if unknown:
        raise usage_error(f"{spec.name}: unknown argument {shown(unknown[0])}",
                     f"the arguments of {spec.name} are {', '.join(sorted(spec.properties))}")
    for name in spec.required:
        if args.get(name) is None or args.get(name) == "":
            raise usage_error(f"{spec.name}: missing argument {name!r}", f"pass the `{name}` argument")
    for name, value in list(args.items()):
        if value is None:
            del args[name]
            continue
        prop = spec.properties[name]
        t = prop.get("type")
        ok = ((t == "string" and isinstance(value, str))
              or (t == "integer" and isinstance(value, int | float) and not isinstance(value, bool))
              or (t == "boolean" and isinstance(value, bool))
              or (t == "array" and isinstance(value, list)))
        if not ok:
            want = {"array": "a list of strings", "integer": "an integer"}.get(t, f"a {t}")
            raise invalid_argument(f"{spec.name}: argument {name!r} must be {want}, not {_type_name(value)}",
                                   f"pass the `{name}` argument as {want}")
        if t == "string":
            _check_string(spec.name, f"argument {name!r}", value, name)
        elif t == "array":
            if len(value) > MAX_LIST_ITEMS:
                raise invalid_argument(f"{spec.name}: argument {name!r} has {len(value)} items (the limit is "
                               f"{MAX_LIST_ITEMS})", "pass fewer items")
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    raise invalid_argument(f"{spec.name}: argument {name!r} must be a list of strings "
                                   f"(item {i} is {_type_name(item)})", f"pass the `{name}` argument as a list of strings")
                _check_string(spec.name, f"argument {name!r} item {i}", item, name)
        elif t == "integer":
            lo, hi = prop.get("minimum"), prop.get("maximum")
            if isinstance(value, float) and not value.is_integer():
                if value != value or value in (float("inf"), float("-inf")):
                    raise invalid_argument(f"{spec.name}: {name} {value} is out of range",
                                   f"pass {lo if lo is not None else '…'}–{hi if hi is not None else '…'}")
                raise invalid_argument(f"{spec.name}: argument {name!r} must be an integer, not {value!r}",
                               f"pass the `{name}` argument as an integer")
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise invalid_argument(f"{spec.name}: {name} {shown(value)} is out of range",
                               f"pass {lo if lo is not None else '…'}–{hi if hi is not None else '…'}")
            args[name] = int(value)
        if "enum" in prop and value not in prop["enum"]:
            raise invalid_argument(f"{spec.name}: invalid {name} {shown(value)}", f"use one of {', '.join(prop['enum'])}")
    return args


def caller_cwd(args: dict[str, Any], required: bool = True, tool: str = "") -> str | None:
    """The absolute working directory of the call (``callerCwd``, filled by the dispatcher
    from the client's roots, the server's own working directory or the one registered
    repository when the client omitted it)."""
    cwd = args.get("callerCwd")
    prefix = f"{tool}: " if tool else ""
    if cwd is None:
        if required:
            raise usage_error(f"{prefix}no working directory: the `callerCwd` argument is missing, the client declared "
                         "no root that is a git repository, the server was not started inside one, and the data "
                         "home does not hold exactly one repository",
                         "pass the `callerCwd` argument (the absolute path of your working directory)")
        return None
    if not os.path.isabs(cwd):
        raise usage_error(f"{prefix}callerCwd {shown(cwd, 200)} is not an absolute path",
                     "pass the absolute path of your working directory as the `callerCwd` argument")
    if not os.path.isdir(cwd):
        raise CitegraphError(f"{cwd}: no such directory",
                             "pass the absolute path of an existing directory as the `callerCwd` argument", code=3)
    return cwd


def registered_worktrees(home: Home) -> list[str]:
    """The worktrees this data home knows (indexed or watched) that still exist, deduplicated."""
    out: set[str] = set()
    try:
        ids = home.repo_ids()
    except OSError:
        return []
    for rid in ids:
        for wt in home.repo(rid).repo_info().get("worktrees") or []:
            if isinstance(wt, str) and os.path.isdir(wt):
                out.add(os.path.realpath(wt))
    return sorted(out)


def cwd_from_roots(roots: list[str], home: Home) -> str | None:
    """The working directory a client's roots give: the one root that is (inside) a git
    repository, or among several the one this data home knows; None when the roots do not
    decide. Several known ones are an error naming ``callerCwd``."""
    repos = sorted({repository_key(r) for r in roots if os.path.isdir(r)
                    and os.path.lexists(os.path.join(repository_key(r), ".git"))})
    if len(repos) <= 1:
        return repos[0] if repos else None
    known = set(registered_worktrees(home))
    chosen = [r for r in repos if os.path.realpath(r) in known]
    if len(chosen) == 1:
        return chosen[0]
    raise usage_error(f"the client's roots hold {len(repos)} git repositories ({', '.join(repos[:4])}"
                 f"{', …' if len(repos) > 4 else ''}) and none is the only one citegraph knows",
                 "pass the `callerCwd` argument to choose one")


# --- MCP wording: tool arguments, never CLI flags ----------------------------------------------

FLAG_ARGUMENTS = {
    "repo": "callerCwd", "code-ref": "codeRefs", "task": "task", "text": "text", "workset": "workset",
    "budget-tokens": "budgetTokens", "limit": "limit", "accept": "accept", "all": "all", "jobs": "concurrency",
    "topic": "topic", "rev": "rev", "memory": "memoryIds", "project": "project", "dry-run": "dryRun",
    "at": "at", "archived": "includeArchived",
}
"""CLI flags and the MCP tool argument that means the same (camelCase)."""
_COMMAND_TOOLS = [
    (re.compile(r"run citegraph inside a git worktree or pass its path"),
     "pass the `callerCwd` argument: a directory inside a git worktree"),
    (re.compile(r"(?:run )?`?citegraph index --rev [^\s,;`]+`?"), "call the `index` tool with the `rev` argument"),
    (re.compile(r"(?:run )?`?citegraph index`?(?: \(or `?citegraph (?:serve|watch)`?\))?"),
     "call the `index` tool"),
    (re.compile(r"(?:run )?`?citegraph workset prepare(?: NAME| \S+)?`?"), "call the `workset` tool with op prepare"),
    (re.compile(r"`?citegraph refresh`?"), "the `refresh` tool"),
    (re.compile(r"`?citegraph (status|validate|brief|remember|find|symbols|cited)`?"), r"the `\1` tool"),
]
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z-]*)(?: (?:PATH|REV|ID|NAME|N))?(?![\w-])")


def mcp_wording(line: str) -> str:
    """An error line as an MCP client should read it: ``run citegraph index`` becomes
    ``call the `index` tool`` and ``--repo PATH`` becomes ``the `callerCwd` argument``;
    flags with no tool argument (``--home``, ``--no-service``: how the server was started)
    are left as they are."""
    for pattern, tool in _COMMAND_TOOLS:
        line = pattern.sub(tool, line)

    def flag(m: re.Match[str]) -> str:
        arg = FLAG_ARGUMENTS.get(m.group(1))
        return f"the `{arg}` argument" if arg else m.group(0)

    return _FLAG.sub(flag, line)


def abs_paths(paths: list[str], cwd: str | None) -> list[str]:
    """``paths`` made absolute against ``cwd`` (a relative one needs a working directory)."""
    out = []
    for p in paths:
        if not os.path.isabs(p):
            if cwd is None:
                raise usage_error(f"path {p!r} is relative and there is no working directory",
                             "pass absolute paths, or the `callerCwd` argument")
            p = os.path.join(cwd, p)
        out.append(p)
    return out


# --- lanes: what a call may block ----------------------------------------------------------

def repository_key(path: str) -> str:
    """The lane key of a path: the nearest ancestor (itself included) that holds a ``.git``
    entry, else the path. Only stat-like calls, never a read of a worktree file, so a
    hostile worktree cannot stall the event loop that computes it."""
    start = os.path.realpath(path)
    p = start
    while True:
        if os.path.lexists(os.path.join(p, ".git")):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            return start
        p = parent


def cwd_lanes(a: dict[str, Any]) -> list[str]:
    cwd = a.get("callerCwd")
    return [repository_key(cwd)] if isinstance(cwd, str) and os.path.isabs(cwd) else []


def validate_lanes(a: dict[str, Any]) -> list[str]:
    cwd = a.get("callerCwd")
    base = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None
    keys = cwd_lanes(a)
    for p in a.get("repos") or []:
        if os.path.isabs(p) or base:
            keys.append(repository_key(os.path.join(base or "/", p)))
    return keys


def workset_lanes(a: dict[str, Any]) -> list[str]:
    return [f"workset:{a['workset']}"] if a.get("workset") else cwd_lanes(a)

