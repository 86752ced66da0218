"""mcp: the stdio MCP server (thin wrapper over citegraph.server.mcp_server)."""

from __future__ import annotations

import click

from citegraph.cli.common import get_home, handle_errors


@click.command()
@click.pass_context
@handle_errors
def mcp(ctx: click.Context) -> None:
    """Run the MCP server on stdin/stdout (tools: remember, brief, validate, index_status,
    workset_prepare). Register it with your agent client: see docs/mcp.md."""
    from citegraph.server.mcp_server import serve

    serve(get_home(ctx))


COMMANDS = [mcp]
