"""``citegraph hook pre-edit`` and ``citegraph hook session-start``: Claude Code command
hooks (docs/agents.md; the input and output JSON of
https://code.claude.com/docs/en/hooks).

A hook reads its event as JSON on stdin and answers on stdout. These never block: they
never set a permission decision, and never exit 2 (which would block the edit) — a bad
event or a failure is one line on stderr and exit 1, which Claude Code reports as a
non-blocking error. Silence (no output, exit 0) when nothing cites the file. The pre-edit
hook's code is ``cli/hook_fast.py`` (also run without Click, for speed).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from citegraph.cli.common import get_home, no_service_option, outputs, via_service
from citegraph.cli.conventions import echo
from citegraph.cli.hook_fast import BadEvent, emit, read_event, run_pre_edit
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.brief.bounds import MAX_BUDGET, MIN_BUDGET

HOOK_TIMEOUT_S = 10.0


def never_blocks(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every failure is one line on stderr and exit 1 (a non-blocking hook error); never
    exit 2, which blocks the tool call, and never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BadEvent as exc:
            echo(f"citegraph: {exc}", err=True)
            sys.exit(1)
        except CitegraphError as err:
            echo(err.line(), err=True)
            sys.exit(1)
        except (KeyboardInterrupt, BrokenPipeError):
            sys.exit(1)
        except Exception as exc:  # noqa: BLE001 - a hook must not break the agent's session
            if os.environ.get("CITEGRAPH_DEBUG"):
                raise
            echo(f"citegraph hook: {type(exc).__name__}: {exc} — the session goes on", err=True)
            sys.exit(1)

    return wrapper


@click.group()
def hook() -> None:
    """Hooks for coding agents (Claude Code command hooks; docs/agents.md)."""


@outputs("hook")
@hook.command("pre-edit")
@no_service_option
@click.pass_context
def pre_edit(ctx: click.Context, no_service: bool) -> None:
    """PreToolUse: the memories citing the file about to be edited — fresh ones as context,
    stale ones as warnings. Silent when nothing cites the file; never blocks the edit."""
    from citegraph.cli.conventions import home_root

    sys.exit(run_pre_edit(home_root(ctx), no_service))


@outputs("hook")
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
        from citegraph.memory.agent.hooks import session_start as run

        emit(run(get_home(ctx), cwd, budget_tokens=budget_tokens))
        return
    emit(data.get("output"))


COMMANDS = [hook]
