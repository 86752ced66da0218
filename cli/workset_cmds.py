"""workset create|add|remove|list|show|prepare|status|delete: thin wrappers over
citegraph.memory.worksets.workset."""

from __future__ import annotations

import sys

import click

from citegraph.cli.common import emit_json, get_home, handle_errors, json_flag, outputs
from citegraph.cli.conventions import echo, paint, say
from citegraph.memory.worksets import workset as ws


@click.group()
def workset() -> None:
    """Named sets of repositories: prepare them once, brief and validate across them."""


def _members(data: dict) -> None:
    echo(f"workset {data['name']}: {len(data['members'])} member(s)")
    for m in data["members"]:
        prep = m.get("prepared") or {}
        state = prep.get("state") or "not prepared"
        echo(f"  {m['path']}  {(m['repository_id'] or '?')[:16]}  {state}")


@outputs("workset")
@workset.command()
@click.argument("name")
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def create(ctx: click.Context, name: str, paths: tuple[str, ...], as_json: bool) -> None:
    """Create workset NAME with the repositories at PATHS."""
    data = ws.create(get_home(ctx), name, paths)
    emit_json(data) if as_json else _members(data)


@outputs("workset")
@workset.command()
@click.argument("name")
@click.argument("paths", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def add(ctx: click.Context, name: str, paths: tuple[str, ...], as_json: bool) -> None:
    """Add repositories to workset NAME."""
    data = ws.add(get_home(ctx), name, paths)
    emit_json(data) if as_json else _members(data)


@outputs("workset")
@workset.command()
@click.argument("name")
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def remove(ctx: click.Context, name: str, paths: tuple[str, ...], as_json: bool) -> None:
    """Remove repositories from workset NAME (their snapshots are unpinned)."""
    data = ws.remove(get_home(ctx), name, paths)
    emit_json(data) if as_json else _members(data)


@outputs("workset-list")
@workset.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def list_(ctx: click.Context, as_json: bool) -> None:
    """List worksets."""
    data = ws.list_worksets(get_home(ctx))
    if as_json:
        emit_json(data)
        return
    for w in data["worksets"]:
        echo(f"{w['name']}  {w['members']} member(s)")


@outputs("workset")
@workset.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Members of workset NAME and what the last prepare found."""
    data = ws.show(get_home(ctx), name)
    emit_json(data) if as_json else _members(data)


@outputs("workset-prepare")
@workset.command()
@click.argument("name")
@click.option("--jobs", "--concurrency", "jobs", type=int, default=ws.DEFAULT_PREPARE_JOBS, show_default=True,
              help="Members built at once.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def prepare(ctx: click.Context, name: str, jobs: int, as_json: bool) -> None:
    """Index every member to exact-current and pin those snapshots. Exit 1 when a member
    is missing or failed."""
    data = ws.prepare(get_home(ctx), name, jobs=jobs)
    if as_json:
        emit_json(data)
    else:
        for m in data["members"]:
            what = m["snapshot_id"] + (" (reused)" if m.get("reused") else "") if m["state"] == "ready" else m["reason"]
            echo(f"  {m['state']:7} {m['path']}  {what}")
        c = data["counts"]
        echo(f"workset {name}: ready {c['ready']}, missing {c['missing']}, failed {c['failed']}; "
                   f"pinned {len(data['pinned'])} snapshot(s) in {data['seconds']:.2f}s")
    if not data["ready"]:
        sys.exit(1)


@outputs("workset-status")
@workset.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.option("--check", is_flag=True, help="Exit 1 when the workset is not ready.")
@click.pass_context
@handle_errors
def status(ctx: click.Context, name: str, as_json: bool, check: bool) -> None:
    """Whether every member has an exact-current ready snapshot (never builds). With
    --check, exit 1 when not ready."""
    data = ws.status(get_home(ctx), name)
    if as_json:
        emit_json(data)
    else:
        for m in data["members"]:
            extra = f"  {m['reason']}" if m.get("reason") else ""
            echo(f"  {m['state']:12} {m['path']}{extra}")
        verdict = paint("ready", "ready") if data["ready"] else \
            paint("not ready", "not ready") + " — run citegraph workset prepare " + name
        say(f"workset {name}: {verdict}")
    if check and not data["ready"]:
        sys.exit(1)


@outputs("workset-delete")
@workset.command()
@click.argument("name")
@json_flag
@click.pass_context
@handle_errors
def delete(ctx: click.Context, name: str, as_json: bool) -> None:
    """Delete workset NAME (repositories and snapshots are untouched; pins are released)."""
    ws.delete(get_home(ctx), name)
    if as_json:
        emit_json({"name": name, "deleted": True})
        return
    echo(f"workset {name} deleted")


COMMANDS = [workset]
