"""``citegraph hook pre-edit`` and ``citegraph hook session-start``: Claude Code command
hooks (docs/agents.md; the input and output JSON of
https://code.claude.com/docs/en/hooks).

A hook reads its event as JSON on stdin and answers on stdout. These never block: they
never set a permission decision, and never exit 2 (which would block the edit) — a bad
event or a failure is one line on stderr and exit 1, which Claude Code reports as a
non-blocking error. Silence (no output, exit 0) when nothing cites the file.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from citegraph.cli.common import get_home, no_service_option, via_service
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.brief_bounds import MAX_BUDGET, MIN_BUDGET

HOOK_TIMEOUT_S = 10.0  # a hook must answer; the service gets this long before the one-shot path is moot
MAX_EVENT_BYTES = 64 << 20  # a Write event carries the whole new file
FILE_KEYS = ("file_path", "notebook_path")  # Edit, MultiEdit, Write (file_path); NotebookEdit


def never_blocks(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every failure is one line on stderr and exit 1 (a non-blocking hook error); never
    exit 2, which blocks the tool call, and never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CitegraphError as err:
            click.echo(err.line(), err=True)
            sys.exit(1)
        except (KeyboardInterrupt, BrokenPipeError):
            sys.exit(1)
        except Exception as exc:  # noqa: BLE001 - a hook must not break the agent's edit
            click.echo(f"citegraph hook: {type(exc).__name__}: {exc} — the edit goes on; "
                       "set CITEGRAPH_DEBUG=1 and run `citegraph hook` by hand to see more", err=True)
            if os.environ.get("CITEGRAPH_DEBUG"):
                raise
            sys.exit(1)

    return wrapper


def read_event() -> dict[str, Any]:
    """The hook event on stdin (an empty stdin is an empty event)."""
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    raw = sys.stdin.buffer.read(MAX_EVENT_BYTES + 1)
    if len(raw) > MAX_EVENT_BYTES:
        raise CitegraphError(f"the hook event on stdin is larger than {MAX_EVENT_BYTES >> 20} MiB",
                             "nothing was checked; the edit goes on", code=1, kind="bad-event")
    if not raw.strip():
        return {}
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError):
        raise CitegraphError("the hook event on stdin is not JSON",
                             "configure this command as a Claude Code command hook (docs/agents.md)", code=1,
                             kind="bad-event") from None
    if not isinstance(event, dict):
        raise CitegraphError("the hook event on stdin is not a JSON object",
                             "configure this command as a Claude Code command hook (docs/agents.md)", code=1,
                             kind="bad-event")
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
            if os.path.isabs(value):
                return value
            cwd = event.get("cwd")
            base = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else os.getcwd()
            return os.path.join(base, value)
    return None


def emit(out: dict[str, Any] | None) -> None:
    if out:
        click.echo(json.dumps(out, ensure_ascii=False))


@click.group()
def hook() -> None:
    """Hooks for coding agents (Claude Code command hooks; docs/agents.md)."""


@hook.command("pre-edit")
@no_service_option
@click.pass_context
@never_blocks
def pre_edit(ctx: click.Context, no_service: bool) -> None:
    """PreToolUse: the memories citing the file about to be edited — fresh ones as context,
    stale ones as warnings. Silent when nothing cites the file; never blocks the edit."""
    file = edited_file(read_event())
    if file is None:
        return
    data = via_service(ctx, "hook_pre_edit", {"file": os.path.abspath(file)}, no_service=no_service,
                       timeout_s=HOOK_TIMEOUT_S)
    if data is None:
        from citegraph.memory.hooks import pre_edit as run

        emit(run(get_home(ctx), file))
        return
    emit(data.get("output"))


@hook.command("session-start")
@click.option("--budget-tokens", type=click.IntRange(MIN_BUDGET, MAX_BUDGET), default=1000, show_default=True,
              help="Size bound of the brief (the brief's estimator).")
@no_service_option
@click.pass_context
@never_blocks
def session_start(ctx: click.Context, budget_tokens: int, no_service: bool) -> None:
    """SessionStart: a bounded brief of the memories citing this repository, most recently
    updated first (silent when none)."""
    event = read_event()
    cwd = event.get("cwd")
    cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else os.getcwd()
    data = via_service(ctx, "hook_session_start", {"cwd": cwd, "budget_tokens": budget_tokens},
                       no_service=no_service, timeout_s=HOOK_TIMEOUT_S)
    if data is None:
        from citegraph.memory.hooks import session_start as run

        emit(run(get_home(ctx), cwd, budget_tokens=budget_tokens))
        return
    emit(data.get("output"))


COMMANDS = [hook]
