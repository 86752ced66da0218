"""publish, import: thin wrappers over citegraph.memory.exchange.share."""

from __future__ import annotations

import json
import sys

import click

from citegraph.cli.common import emit_json, get_home, handle_errors, outputs
from citegraph.schemas import to_output


@outputs("publish")
@click.command()
@click.option("--project", help="Only memories of this project.")
@click.option("--out", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="The JSONL file to write (- for stdout).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@handle_errors
def publish(ctx: click.Context, project: str | None, out: str, as_json: bool) -> None:
    """Export durable memories with their receipts for a team (portable JSONL).

    Only memories whose every citation is clean and from a remote repository identity are
    written; any other memory is refused as a whole, with its reason. Exit code 1 when a
    memory was refused (the file then holds the publishable ones).
    """
    from citegraph.memory.exchange.share import publish as do_publish

    report = do_publish(get_home(ctx), out, project)
    data = report.to_json()
    if as_json:
        if out == "-":
            click.echo(json.dumps(to_output(data)), err=True)
        else:
            emit_json(data)
    else:
        where = "stdout" if out == "-" else out
        click.echo(f"published {len(report.published)} memor{'y' if len(report.published) == 1 else 'ies'} "
                   f"to {where}", err=out == "-")
        for r in report.refused:
            click.echo(f"  refused {r.id} ({r.reason}): {r.message}", err=True)
        skipped = {k: v for k, v in report.skipped.items() if v}
        if skipped:
            click.echo("  not exported: " + ", ".join(f"{v} {k}" for k, v in skipped.items()), err=out == "-")
    if report.refused:
        sys.exit(1)


@outputs("import")
@click.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--repo", "repos", multiple=True, type=click.Path(file_okay=False),
              help="A clone whose object database verifies the receipts (repeatable; default: the "
                   "current directory; worktrees indexed in this home are consulted too).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@handle_errors
def import_(ctx: click.Context, file: str, repos: tuple[str, ...], as_json: bool) -> None:
    """Load a file written by citegraph publish (legacy records: citegraph import-legacy).

    The whole file is checked first — every receipt with capture's rules, and recomputed
    from its capture commit where a clone of its repository has that commit; nothing is
    loaded if anything is wrong. Re-importing the same file changes nothing. Imported
    citations validate against this home's own snapshots of the same repositories (same
    origin URL).
    """
    from citegraph.memory.exchange.share import import_file

    report = import_file(get_home(ctx), file, list(repos) or None)
    if as_json:
        emit_json(report.to_json())
        return
    click.echo(f"imported {len(report.imported)} new, {len(report.updated)} updated, "
               f"{len(report.unchanged)} unchanged memor{'y' if len(report.unchanged) == 1 else 'ies'} "
               f"from {file} ({report.format}"
               f"{' v' + str(report.format_version) if report.format_version else ''})")
    for k in report.kept_local:
        click.echo(f"  kept local {k['id']}: {k['reason']}")
    if report.verified or report.unverified:
        click.echo(f"  {len(report.verified)} citation(s) verified against their capture commit, "
                   f"{len(report.unverified)} not fully verifiable here")
    for u in report.unverified:
        click.echo(f"  unverified {u['id']} of {u['memory_id']}: {u['reason']}")


COMMANDS = [publish, import_]
