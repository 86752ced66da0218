"""cited, refresh and repo (identity): thin wrappers over citegraph.memory.agent.cited,
citegraph.memory.agent.refresh and citegraph.graph.identity (docs/agent-loop.md)."""

from __future__ import annotations

import json
import os
import sys

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
from citegraph.validator.model import CHANGE_TEXT

# The heavy layers are imported inside the commands: a read answered by the resident
# service needs none of them.


def _loc(o: dict | None) -> str:
    if not o:
        return ""
    return o["path"] + (f"#L{o['start_line']}-L{o['end_line']}" if o.get("start_line") else "")


@outputs("cited")
@click.command()
@click.argument("refs", nargs=-1, required=True)
@click.option("--repo", "repo", default=".", type=click.Path(file_okay=False), show_default=True)
@click.option("--limit", type=int, default=24, show_default=True, help="Memories validated and shown (1–200).")
@click.option("--archived", "include_archived", is_flag=True, help="Include archived memories.")
@click.option("--json", "as_json", is_flag=True, help="The full structure (docs/schemas/cited.schema.json).")
@no_service_option
@click.pass_context
@handle_errors
def cited(ctx: click.Context, refs: tuple[str, ...], repo: str, limit: int, include_archived: bool, as_json: bool,
          no_service: bool) -> None:
    """The memories whose citations touch the given code — a file, path#L10-L24 (lines
    overlapping), path::Name[N], a cgs_/cgr_ handle (a moved copy found by its fragment
    hash) — each with its current freshness. Exit 1 when none."""
    args = {"refs": list(refs), "repo": abspath(repo), "cwd": os.getcwd(), "limit": limit,
            "include_archived": include_archived}
    data = via_service(ctx, "cited", args, no_service=no_service)
    if data is None:
        from citegraph.memory.agent.cited import cited as run

        data = run(get_home(ctx), list(refs), repo=repo, limit=limit, include_archived=include_archived,
                   cwd=os.getcwd())
    if as_json:
        emit_json(data)
    else:
        for t in data["refs"]:
            extra = f" {t['handle']}" if t["handle"] else ""
            note = f" ({t['note']})" if t["note"] else ""
            echo(f"{t['locator']}{extra}{note}")
        for m in data["memories"]:
            reason = f" ({m['reason']})" if m["reason"] and m["freshness"] != "fresh" else ""
            echo(f"{m['id']} {m['kind']} {m['project']}/{m['topic']} {m['freshness']}/{m['status'] or '-'}"
                       f"{reason}: {json.dumps(m['text'][:120], ensure_ascii=False)}")
            hows = {x["citation_id"]: x["how"] for x in m["matches"]}
            for c in m["citations"]:
                mark = f"  ← {hows[c['id']]}" if c["id"] in hows else ""
                moved = f" → {_loc(c['observed'])}" if c["outcome"] == "relocated" else ""
                why = f" ({c['reason']})" if c["reason"] else ""
                if c.get("change"):
                    why = f" ({CHANGE_TEXT.get(c['change'], c['change'])})"
                echo(f"  {c['outcome']:9} {c['locator']}{why}{moved}{mark}")
        if data["truncated"]:
            echo(f"… {data['truncated']} more memories (raise --limit)")
        if not data["memories"]:
            echo("no memory cites this code")
    if not data["memories"]:
        sys.exit(1)


@outputs("refresh")
@click.command()
@click.argument("memory_ids", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every active memory with citations.")
@click.option("--accept", default="relocated", show_default=True,
              help="What may be re-anchored, comma-separated: relocated, successor (a changed symbol's unique "
                   "successor), cosmetic (a change of comments/formatting only).")
@click.option("--dry-run", is_flag=True, help="Show exactly what would change; write nothing.")
@click.option("--project")
@click.option("--repo", "repo", default=".", type=click.Path(file_okay=False), show_default=True)
@click.option("--json", "as_json", is_flag=True, help="The full structure (docs/schemas/refresh.schema.json).")
@no_service_option
@click.pass_context
@handle_errors
def refresh(ctx: click.Context, memory_ids: tuple[str, ...], all_: bool, accept: str, dry_run: bool,
            project: str | None, repo: str, as_json: bool, no_service: bool) -> None:
    """Re-capture moved citations at their observed place (a reviewed step, never
    automatic): a new revision whose history keeps the old receipts and the observations
    that justified the move. Never for a change without a successor, a deletion or an
    unknown."""
    args = {"memory_ids": list(memory_ids), "all": all_, "accept": accept, "dry_run": dry_run,
            "project": project, "repo": abspath(repo)}
    data = via_service(ctx, "refresh", args, no_service=no_service, read_only=dry_run)
    if data is None:
        from citegraph.memory.agent.refresh import refresh as run

        data = run(get_home(ctx), list(memory_ids), all_memories=all_, accept=accept, dry_run=dry_run,
                   repo=repo, project=project)
    if as_json:
        emit_json(data)
        return
    for m in data["memories"]:
        n = sum(c["action"] == "refresh" for c in m["citations"])
        if n:
            verb = "would get" if data["dry_run"] else "got"
            echo(f"{m['id']} {m['project']}/{m['topic']} r{m['from_revision']}: {verb} revision "
                       f"{m['revision']} with {n} citation(s) re-anchored")
        else:
            echo(f"{m['id']} {m['project']}/{m['topic']} r{m['from_revision']}: unchanged")
        for c in m["citations"]:
            if c["action"] == "refresh":
                echo(f"  {c['outcome']:9} {c['locator']} → {c['new']['locator']} ({c['why']})")
            elif c["action"] == "refuse":
                echo(f"  {c['outcome']:9} {c['locator']} — not refreshed: {c['why']}")
    s = data["summary"]
    echo(f"summary: {s['refreshed']} refreshed, {s['kept']} kept, {s['refused']} refused, "
               f"{s['changed']} of {s['memories']} memories {'would change' if data['dry_run'] else 'changed'}"
               + (" (dry run: nothing written)" if data["dry_run"] else ""))


@click.group()
def repo() -> None:
    """Repository identity: its id, its identity history, and explicit moves."""


@outputs("repo")
@repo.command()
@click.argument("old_url")
@click.argument("new_url")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def move(ctx: click.Context, old_url: str, new_url: str, as_json: bool) -> None:
    """Record that the repository once at OLD_URL is the one at NEW_URL: memories captured
    under the old identity validate in clones of the new one."""
    from citegraph.graph.identity import identity_for_url, record_move
    from citegraph.indexer.errors import CitegraphError
    from citegraph.memory.lifecycle.store import MemoryStore

    old, new = identity_for_url(old_url), identity_for_url(new_url)
    if old.repository_id == new.repository_id:
        raise CitegraphError(f"{old_url} and {new_url} are the same repository identity ({old.source})",
                             "nothing to move", code=2, kind="usage")
    home = get_home(ctx)
    res = record_move(home, old_url, new_url)
    with MemoryStore.open(home, read_only=True) as ms:
        res["memories"] = ms.memories_by_repository([old.repository_id])
    if as_json:
        emit_json(res)
        return
    echo(f"{res['from']['source']} ({res['from']['repository_id'][:16]}…) → {res['to']['source']} "
          f"({res['to']['repository_id'][:16]}…): {res['memories']} "
          + ("memory cites" if res["memories"] == 1 else "memories cite")
          + " the old identity" + ("" if res["added"] else " (already recorded)"))


@outputs("repo")
@repo.command()
@click.argument("path", default=".", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def show(ctx: click.Context, path: str, as_json: bool) -> None:
    """The identity of the repository at PATH and its identity history."""
    from citegraph.graph.identity import history
    from citegraph.indexer import gitrepo

    ident = gitrepo.repository_identity(gitrepo.open_repository(path))
    hist = history(get_home(ctx).repo(ident.repository_id))
    data = {"repository_id": ident.repository_id, "kind": ident.kind, "source": ident.source,
            "identity_history": hist}
    if as_json:
        emit_json(data)
        return
    echo(f"{ident.repository_id} {ident.kind} {ident.source}")
    for e in hist:
        echo(f"  was {e['repository_id']} {e.get('kind') or '?'} {e.get('source') or '?'} ({e.get('how')})")


COMMANDS = [cited, refresh, repo]
