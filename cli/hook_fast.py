"""``citegraph hook pre-edit`` without Click: Claude Code runs it before every edit, so
the process must start fast (SPEC §14: ≤ 200 ms through the service). ``cli/main.py``
routes ``citegraph [--home H] hook pre-edit [--no-service]`` here before importing Click;
the Click command (``cli/hook_cmds.py``) runs the same code. Without the service, a file
no memory can cite is answered before DuckDB is imported (memory/agent/hook_gate.py: the
code-keys sidecar, issue 22).

The hook never blocks the edit: it sets no permission decision and never exits 2 (which
would block it) — a bad event or a failure is one line on stderr and exit 1, a
non-blocking error for Claude Code. The input and output are those of Claude Code's
command hooks (https://code.claude.com/docs/en/hooks; docs/agents.md).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

HOOK_TIMEOUT_S = 10.0  # the service's answer; the one-shot path is bounded by its own reads
MAX_EVENT_BYTES = 64 << 20  # a Write event carries the whole new file
FILE_KEYS = ("file_path", "notebook_path")  # Edit, MultiEdit, Write (file_path); NotebookEdit
MAX_PATH_BYTES = 4096  # Linux's PATH_MAX


class BadEvent(Exception):
    pass


def read_event(stream: Any = None) -> dict[str, Any]:
    """The hook event on stdin (an empty stdin, or a terminal, is an empty event)."""
    stream = stream if stream is not None else sys.stdin
    if stream is None or stream.isatty():
        return {}
    raw = stream.buffer.read(MAX_EVENT_BYTES + 1)
    if len(raw) > MAX_EVENT_BYTES:
        raise BadEvent(f"the hook event on stdin is larger than {MAX_EVENT_BYTES >> 20} MiB; nothing was checked")
    if not raw.strip():
        return {}
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError):
        raise BadEvent("the hook event on stdin is not JSON — configure this command as a Claude Code "
                       "command hook (docs/agents.md)") from None
    if not isinstance(event, dict):
        raise BadEvent("the hook event on stdin is not a JSON object — configure this command as a Claude "
                       "Code command hook (docs/agents.md)")
    return event


def edited_file(event: dict[str, Any]) -> str | None:
    """The absolute path of the file a ``PreToolUse`` event's tool is about to touch
    (``tool_input.file_path`` — absolute in Claude Code — or ``notebook_path``), or None."""
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    for key in FILE_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value and "\0" not in value:
            check_path(key, value)
            if os.path.isabs(value):
                return value
            cwd = event.get("cwd")
            base = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else os.getcwd()
            return os.path.join(base, value)
    return None


def check_path(key: str, value: str) -> None:
    """A path no file can have is a bad event (one line, nothing checked), never an
    exception from deep inside: JSON can spell a lone surrogate, and a path may be longer
    than any the system accepts."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadEvent(f"the hook event's tool_input.{key} is not valid UTF-8 (it holds a lone surrogate); "
                       "nothing was checked") from None
    if size > MAX_PATH_BYTES:
        raise BadEvent(f"the hook event's tool_input.{key} is {size} bytes long, more than a path can be "
                       f"({MAX_PATH_BYTES}); nothing was checked")


def emit(out: dict[str, Any] | None) -> None:
    if out:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        sys.stdout.flush()


def run_pre_edit(home_root: str | None, no_service: bool) -> int:
    """Read the event, answer it (through the service when one answers, else one-shot);
    the exit code (0, or 1 for a non-blocking error)."""
    from citegraph.indexer.errors import CitegraphError

    try:
        file = edited_file(read_event())
        if file is None:
            return 0
        from citegraph.graph.store import Home

        home = Home.open(home_root)
        if not no_service:
            from citegraph.server.client import call

            data = call(home, "hook_pre_edit", {"file": os.path.abspath(file)}, read_only=True,
                        timeout_s=HOOK_TIMEOUT_S)
            if data is not None:
                emit(data.get("output"))
                return 0
        from citegraph.memory.agent.hook_gate import certainly_silent

        if certainly_silent(home.memory_db, file):
            return 0  # proven from the code-keys sidecar, before DuckDB is imported (issue 22)
        from citegraph.memory.agent.hooks import pre_edit

        emit(pre_edit(home, file))
        return 0
    except BadEvent as exc:
        sys.stderr.write(f"citegraph: {exc}\n")
        return 1
    except CitegraphError as err:
        sys.stderr.write(err.line() + "\n")
        return 1
    except (KeyboardInterrupt, BrokenPipeError):
        return 1
    except OSError as exc:
        name = os.fsdecode(exc.filename) if exc.filename else ""
        name = name if len(name) <= 160 else f"{name[:160]}… ({len(name)} characters)"
        sys.stderr.write(f"citegraph hook: {name + ': ' if name else ''}{exc.strerror or exc} — nothing was "
                         "checked; the edit goes on\n")
        return 1
    except Exception as exc:  # noqa: BLE001 - a hook must not break the agent's edit
        if os.environ.get("CITEGRAPH_DEBUG"):
            raise
        sys.stderr.write(f"citegraph hook: {type(exc).__name__}: {exc} — the edit goes on; set CITEGRAPH_DEBUG=1 "
                         "and run the hook by hand to see more\n")
        return 1


def fast_argv(argv: list[str]) -> tuple[str | None, bool] | None:
    """(home, no_service) when ``argv`` is exactly ``[--home H] hook pre-edit
    [--no-service]``; None for anything else (Click parses it)."""
    args = list(argv)
    home = None
    if args and args[0].startswith("--home="):
        home = args.pop(0).split("=", 1)[1]
    elif len(args) >= 2 and args[0] == "--home":
        home = args[1]
        args = args[2:]
    if args[:2] != ["hook", "pre-edit"]:
        return None
    rest = args[2:]
    if rest not in ([], ["--no-service"]):
        return None
    return home or os.environ.get("CITEGRAPH_HOME") or None, rest == ["--no-service"]
