"""mcp: the stdio MCP server (thin wrapper over citegraph.server.mcp_server)."""

from __future__ import annotations

import click

from citegraph.cli.common import get_home, handle_errors
from citegraph.server.mcp_server import DEFAULT_CALL_TIMEOUT_S, DEFAULT_MAX_THREADS, serve


@click.command()
@click.option("--call-timeout", type=click.FloatRange(min=0.1, max=86400), default=DEFAULT_CALL_TIMEOUT_S,
              show_default=True, metavar="SECONDS",
              help="Answer every tool call within this many seconds; a call still running then gets a "
                   "retryable timeout error (and keeps its repository busy until it ends).")
@click.option("--max-calls", type=click.IntRange(min=1, max=256), default=DEFAULT_MAX_THREADS, show_default=True,
              help="Most tool calls running at once across all repositories (calls past their timeout "
                   "included); one call at a time per repository.")
@click.option("--no-service", "no_service", is_flag=True,
              help="Do not run (or attach to) the resident service: every call scans the worktree.")
@click.pass_context
@handle_errors
def mcp(ctx: click.Context, call_timeout: float, max_calls: int, no_service: bool) -> None:
    """Run the MCP server on stdin/stdout (tools: find, symbols, index, status, remember,
    cited, refresh, brief, validate, list, show, history, graph, workset). It runs the resident service in-process (or uses the one already
    running for this data home), so the agent's graph is always current. Register it with
    your agent client: see docs/mcp.md."""
    serve(get_home(ctx), call_timeout=call_timeout, max_threads=max_calls, host_service=not no_service)


COMMANDS = [mcp]
