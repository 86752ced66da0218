"""graph callers|callees|deps|dependents: a thin wrapper over citegraph.validator.impact."""

from __future__ import annotations

import click

from citegraph.cli.common import (
    abspath,
    emit_json,
    get_home,
    handle_errors,
    no_service_option,
    outputs,
    via_service,
)
from citegraph.cli.conventions import echo

MAX_DEPTH = 5  # graph/graph_view.py MAX_TRAVERSAL_DEPTH (not imported: keeps the CLI start light)


def _query(op: str, doc: str) -> click.Command:
    @outputs("graph")
    @click.command(name=op, help=doc)
    @click.argument("ref")
    @click.option("--depth", type=click.IntRange(1, MAX_DEPTH), default=1, show_default=True,
                  help="Hops to follow (1 = direct).")
    @click.option("--repo", "repo_path", default=".", type=click.Path(file_okay=False))
    @click.option("--json", "as_json", is_flag=True, help="docs/schemas/graph.schema.json")
    @no_service_option
    @click.pass_context
    @handle_errors
    def cmd(ctx: click.Context, ref: str, depth: int, repo_path: str, as_json: bool, no_service: bool) -> None:
        args = {"op": op, "ref": ref, "depth": depth, "repo": abspath(repo_path)}
        data = via_service(ctx, "graph", args, no_service=no_service)
        if data is None:
            from citegraph.validator.impact import graph_query

            data = graph_query(get_home(ctx), repo_path, op, ref, depth)
        if as_json:
            emit_json(data)
            return
        r = data["root"]
        echo(f"{op} of {r['path']}::{r['qualified_name']} (depth {depth}): {len(data['nodes'])} symbol(s)"
                   + (" — truncated at the node bound" if data["truncated"] else ""))
        tiers = {}
        for e in data["edges"]:
            tiers.setdefault(e["to"] if op in ("callees", "deps") else e["from"], e["tier"])
        for n in data["nodes"]:
            guess = " (name-only)" if tiers.get(n["handle"]) == "name-only" else ""
            echo(f"  {n['distance']}  {n['path']}::{n['qualified_name']}  {n['kind']}  "
                       f"L{n['start_line']}-{n['end_line']}{guess}")

    return cmd


@click.group()
def graph() -> None:
    """What a symbol rests on, or what a change to it touches, from the resolved edges of
    the exact-current snapshot (docs/graph.md)."""


graph.add_command(_query("callees", "The symbols REF calls."))
graph.add_command(_query("callers", "The symbols that call REF."))
graph.add_command(_query("deps", "Everything REF calls, references or inherits."))
graph.add_command(_query("dependents", "Everything that calls, references or inherits REF."))

COMMANDS = [graph]
