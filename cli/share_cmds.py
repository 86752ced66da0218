"""publish, import, export: thin wrappers over citegraph.memory.exchange (share: JSONL
memories; checkpoints: Parquet checkpoints, docs/checkpoints.md)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from citegraph.cli.common import emit_json, get_home, handle_errors, outputs
from citegraph.cli.conventions import echo
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
        echo(f"published {len(report.published)} memor{'y' if len(report.published) == 1 else 'ies'} "
                   f"to {where}", err=out == "-")
        for r in report.refused:
            echo(f"  refused {r.id} ({r.reason}): {r.message}", err=True)
        skipped = {k: v for k, v in report.skipped.items() if v}
        if skipped:
            echo("  not exported: " + ", ".join(f"{v} {k}" for k, v in skipped.items()), err=out == "-")
    if report.refused:
        sys.exit(1)


@outputs("import")
@click.command(name="import")
@click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--parquet", "checkpoint", type=click.Path(),
              help="Import a checkpoint instead (DIR or FILE.tar written by citegraph export --parquet).")
@click.option("--repo", "repos", multiple=True, type=click.Path(file_okay=False),
              help="A clone whose object database verifies the receipts (repeatable; default: the "
                   "current directory; worktrees indexed in this home are consulted too).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@handle_errors
def import_(ctx: click.Context, file: str | None, checkpoint: str | None, repos: tuple[str, ...],
            as_json: bool) -> None:
    """Load a file written by citegraph publish (legacy records: citegraph import-legacy),
    or with --parquet a checkpoint written by citegraph export --parquet.

    The whole input is checked first — every receipt with capture's rules, and recomputed
    from its capture commit where a clone of its repository has that commit; a checkpoint's
    every file digest, version, snapshot and memory too — and nothing is loaded if anything
    is wrong. Re-importing the same input changes nothing. Imported citations validate
    against this home's own snapshots of the same repositories (same origin URL); a
    checkpoint's snapshots are such snapshots, ready at once.
    """
    if (file is None) == (checkpoint is None):
        raise click.UsageError("pass a FILE written by citegraph publish, or --parquet DIR|FILE.tar")
    if checkpoint is not None:
        _import_checkpoint(ctx, checkpoint, list(repos) or None, as_json)
        return
    from citegraph.memory.exchange.share import import_file

    assert file is not None
    report = import_file(get_home(ctx), file, list(repos) or None)
    if as_json:
        emit_json(report.to_json())
        return
    echo(f"imported {len(report.imported)} new, {len(report.updated)} updated, "
               f"{len(report.unchanged)} unchanged memor{'y' if len(report.unchanged) == 1 else 'ies'} "
               f"from {file} ({report.format}"
               f"{' v' + str(report.format_version) if report.format_version else ''})")
    _receipt_lines(report)


def _receipt_lines(report: Any) -> None:
    for k in report.kept_local:
        echo(f"  kept local {k['id']}: {k['reason']}")
    if report.verified or report.unverified:
        echo(f"  {len(report.verified)} citation(s) verified against their capture commit, "
                   f"{len(report.unverified)} not fully verifiable here")
    for u in report.unverified:
        echo(f"  unverified {u['id']} of {u['memory_id']}: {u['reason']}")


def _import_checkpoint(ctx: click.Context, checkpoint: str, repos: list[str] | None, as_json: bool) -> None:
    from citegraph.memory.exchange.checkpoints import import_checkpoint

    report = import_checkpoint(get_home(ctx), checkpoint, repos)
    if as_json:
        emit_json(report.to_json())
        return
    for r in report.repositories:
        echo(f"{r['state']:8} {r['snapshot_id']} repository {r['repository_id']} commit {r['commit'][:12]}")
    m = report.memories
    if m is not None:
        echo(f"memories: {len(m.imported)} new, {len(m.updated)} updated, {len(m.unchanged)} unchanged")
        _receipt_lines(m)


@outputs("export")
@click.command()
@click.option("--parquet", "out", required=True, type=click.Path(),
              help="Where to write the checkpoint: a new (or empty) directory, or FILE.tar.")
@click.option("--repo", "repos", multiple=True, type=click.Path(file_okay=False),
              help="Repositories to export (repeatable; default: the current directory).")
@click.option("--all", "all_", is_flag=True, help="Every repository of this home (its newest commit snapshot).")
@click.option("--rev", help="The commit whose snapshot is exported (default HEAD; it must be indexed).")
@click.option("--no-memories", is_flag=True, help="Snapshots only: leave the memories out.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@handle_errors
def export(ctx: click.Context, out: str, repos: tuple[str, ...], all_: bool, rev: str | None, no_memories: bool,
           as_json: bool) -> None:
    """Write a portable checkpoint (docs/checkpoints.md): each repository's ready commit
    snapshot and the publishable memories citing it, as Parquet partitioned by repository
    id, with a manifest of blake3 digests and versions. ``citegraph import --parquet``
    loads it elsewhere, ready at once. Exit 1 when a memory was refused by the publish
    gate (the checkpoint then holds the others)."""
    from citegraph.memory.exchange.checkpoints import export_checkpoint

    report = export_checkpoint(get_home(ctx), out, repo_paths=list(repos) or None, all_repos=all_,
                               rev=rev, memories=not no_memories)
    if as_json:
        emit_json(report.to_json())
    else:
        for r in report.repositories:
            echo(f"exported {r['snapshot_id']} (commit {r['commit'][:12]}, {r['files']} files, "
                       f"{r['symbols']} symbols, {r['memories']} memories) {r['bytes']} bytes")
        echo(f"checkpoint {out}: {len(report.repositories)} repositor"
                   f"{'y' if len(report.repositories) == 1 else 'ies'}, {report.bytes} bytes")
        for r in report.refused:
            echo(f"  refused {r.id} ({r.reason}): {r.message}", err=True)
    if report.refused:
        sys.exit(1)


COMMANDS = [publish, import_, export]
