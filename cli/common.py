"""Shared CLI plumbing: the data home option, JSON output and one-line errors."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.schemas import to_output


def get_home(ctx: click.Context) -> Home:
    from citegraph.cli.conventions import home_root

    return Home.open(home_root(ctx))


def emit_json(data: Any) -> None:
    """One JSON document on stdout, times as ISO 8601 (``citegraph.schemas.to_output``)."""
    click.echo(json.dumps(to_output(data), indent=None, sort_keys=False, default=str))


def outputs(schema: str) -> Callable[[click.Command], click.Command]:
    """Mark a command with the JSON Schema of its ``--json`` output
    (``docs/schemas/<schema>.schema.json``; ``citegraph.schemas``). Put it above
    ``@click.command()``. tests/test_output_schemas.py walks every command and runs it:
    a command without a mark fails that test."""

    def mark(cmd: click.Command) -> click.Command:
        cmd.output_schema = schema  # type: ignore[attr-defined]
        return cmd

    return mark


def json_flag(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``: print the machine-readable result (its schema: ``@outputs``)."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the result as JSON (docs/schemas/; times in ISO 8601 UTC).")(fn)


def fail(err: CitegraphError) -> None:
    from citegraph.cli.conventions import paint, say

    say(paint(err.line(), "error"), err=True)
    sys.exit(err.code)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Expected errors → one line and an exit code; Ctrl-C → 130; bugs → one line too."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CitegraphError as err:
            fail(err)
        except KeyboardInterrupt:
            click.echo("citegraph: interrupted — nothing was published; run the command again", err=True)
            sys.exit(130)
        except BrokenPipeError:
            sys.exit(0)
        except OSError as exc:
            if os.environ.get("CITEGRAPH_DEBUG"):
                traceback.print_exc()
            msg = exc.strerror or str(exc)
            fname = f"{exc.filename}: " if exc.filename else ""
            from citegraph.cli.conventions import echo

            echo(f"citegraph: {fname}{msg} — check disk space and permissions, then retry", err=True)
            sys.exit(3)

    return wrapper


def no_service_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--no-service``: take the one-shot path even when a service runs for the home."""
    return click.option("--no-service", "no_service", is_flag=True,
                        help="Do not ask the resident service; read the worktree directly (one-shot).")(fn)


def dependency_depth_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--dependency-depth N``: how deep recorded dependencies are checked for
    ``dependency-changed`` advisories (SPEC §21; 1 = direct, at most 3, 0 = off)."""
    return click.option("--dependency-depth", "dependency_depth", type=click.IntRange(0, 3), default=1,
                        show_default=True,
                        help="Check recorded dependencies this deep for dependency-changed advisories (0-3).")(fn)


def via_service(ctx: click.Context, op: str, args: dict[str, Any], *, no_service: bool = False,
                read_only: bool = True, timeout_s: float | None = None) -> Any:
    """The resident service's answer to ``op``, or None when none answers for this data
    home (the caller takes the one-shot path). Paths in ``args`` must be absolute."""
    if no_service:
        return None
    from citegraph.server.client import ANSWER_TIMEOUT_S, call

    return call(get_home(ctx), op, args, read_only=read_only, timeout_s=timeout_s or ANSWER_TIMEOUT_S)


def abspath(path: str) -> str:
    return os.path.abspath(path)
