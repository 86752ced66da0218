"""remember, show, list, history, archive, forget, validate: thin wrappers over
citegraph.memory.api."""

from __future__ import annotations

import json
import os
import sys

import click

from citegraph.cli.common import (
    abspath,
    dependency_depth_option,
    emit_json,
    get_home,
    handle_errors,
    json_flag,
    no_service_option,
    outputs,
    via_service,
)
from citegraph.cli.conventions import SpreadCommand, echo, paint, say, spread_option, text_or_stdin
from citegraph.validator.model import CHANGE_TEXT

# The heavy layers (git, DuckDB) are imported inside the commands: a read answered by the
# resident service needs none of them.


@outputs("remember")
@click.command(cls=SpreadCommand)
@click.option("--text", required=True, help="The claim to remember (stored and shown as quoted data; - reads stdin).")
@click.option("--kind", type=click.Choice(["durable", "handoff"]), default="durable", show_default=True)
@click.option("--project", default="default", show_default=True)
@click.option("--topic", help="Stable topic: writing the same (project, topic) again makes a new revision.")
@spread_option("--code-ref", "refs", help="File, path#L10-L24, path::Qualified.name, cgs_… or cgr_… (≤ 8; "
               "repeat it or list several; cwd-relative, ./, absolute and GitHub blob URLs accepted).")
@click.option("--repo", "repo", default=".", type=click.Path(file_okay=False), show_default=True)
@click.option("--supersedes", help="Id of the memory this one replaces.")
@click.option("--source-commit", help="Legacy provenance: the commit the claim was made at.")
@click.option("--author")
@click.option("--agent-id")
@click.option("--session-id")
@click.option("--json", "as_json", is_flag=True)
@no_service_option
@click.pass_context
@handle_errors
def remember(ctx: click.Context, text: str, kind: str, project: str, topic: str | None, refs: tuple[str, ...],
             repo: str, supersedes: str | None, source_commit: str | None, author: str | None,
             agent_id: str | None, session_id: str | None, as_json: bool, no_service: bool) -> None:
    """Store a memory with code citations resolved against the exact-current snapshot.

    Through the resident service, a capture right after an edit waits (at most 2 s) for
    the overlay of the new state instead of failing."""
    text = text_or_stdin(text, "--text")
    args = {"text": text, "repo": abspath(repo), "cwd": os.getcwd(), "refs": list(refs), "kind": kind, "project": project,
            "topic": topic, "author": author, "agent_id": agent_id, "session_id": session_id,
            "supersedes": supersedes, "source_commit": source_commit}
    res = via_service(ctx, "remember", args, no_service=no_service, read_only=False)
    if res is None:
        from citegraph.memory import api

        res = api.remember(get_home(ctx), text, repo=repo, refs=list(refs), kind=kind, project=project,
                           topic=topic, author=author, agent_id=agent_id, session_id=session_id,
                           supersedes=supersedes, source_commit=source_commit, cwd=os.getcwd())
    if as_json:
        emit_json(res)
        return
    echo(f"{res['id']} revision {res['revision']} ({len(res['citations'])} citation(s))")
    for c in res["citations"]:
        echo(f"  {c['id']} {c['kind']:6} {c['locator']}{'  [dirty]' if c['dirty'] else ''}")
    for note in res.get("notes", []):
        echo(f"  note: {note}")
    if res["cleared_citations"]:
        echo(f"  cleared {res['cleared_citations']} citation(s) of the previous revision "
                   "(new text, no refs: evidence is not inherited)")


@outputs("show")
@click.command()
@click.argument("memory_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def show(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """Show one memory and its citations (receipts)."""
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(get_home(ctx), read_only=True) as ms:
        mem = ms.require(memory_id)
    if as_json:
        emit_json(mem.to_json())
        return
    echo(f"{mem.id} [{mem.kind}, {mem.status}] {mem.project}/{mem.topic} revision {mem.revision}")
    echo(f"  text: {json.dumps(mem.text, ensure_ascii=False)}")
    for r in mem.citations:
        echo(f"  {r.id} {r.kind:6} {r.locator}  @ {r.commit[:12]}{' dirty' if r.dirty else ''}")


@outputs("list")
@click.command(name="list")
@click.option("--project")
@click.option("--all", "include_archived", is_flag=True, help="Include archived memories.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def list_(ctx: click.Context, project: str | None, include_archived: bool, as_json: bool) -> None:
    """List memories."""
    from citegraph.memory import api
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(get_home(ctx), read_only=True) as ms:
        mems = api.select_memories(ms, None, project, include_archived)
    if as_json:
        emit_json({"memories": [m.to_json() for m in mems]})
        return
    for m in mems:
        echo(f"{m.id} {m.kind:8} {m.project}/{m.topic} r{m.revision} {len(m.citations)} cit. "
                   f"{json.dumps(m.text[:60], ensure_ascii=False)}")


@outputs("history")
@click.command()
@click.argument("memory_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def history(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """All revisions of a memory (append-only)."""
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(get_home(ctx), read_only=True) as ms:
        revs = ms.history(memory_id)
    if as_json:
        emit_json({"id": memory_id, "revisions": revs})
        return
    for r in revs:
        echo(f"r{r['revision']} {len(r['citation_ids'])} cit. {json.dumps(r['text'], ensure_ascii=False)}")
        replaced = {e["old_citation_id"]: e for e in (r["refresh"] or [])}
        for c in r["citations"]:
            echo(f"  {c['id']} {c['kind']:6} {c['locator']}  @ {c['commit'][:12]}")
        for e in replaced.values():
            o = e.get("observation") or {}
            echo(f"  refreshed {e['old_citation_id']} → {e['new_citation_id']} ({e['accepted']}; observed "
                       f"{o.get('outcome')} in {e['snapshot_id']} at commit {e['commit'][:12]})")


@outputs("show")
@click.command()
@click.argument("memory_id")
@json_flag
@click.pass_context
@handle_errors
def archive(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """Archive a memory (kept, no longer recalled). --json prints the memory as stored."""
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(get_home(ctx)) as ms:
        mem = ms.set_status(memory_id, "archived")
    if as_json:
        emit_json(mem.to_json())
        return
    echo(f"{mem.id} archived")


@outputs("forget")
@click.command()
@click.argument("memory_id")
@click.option("--yes", is_flag=True, help="Confirm the deletion.")
@json_flag
@click.pass_context
@handle_errors
def forget(ctx: click.Context, memory_id: str, yes: bool, as_json: bool) -> None:
    """Delete a memory and all its revisions (the only way anything is deleted)."""
    from citegraph.memory.lifecycle.store import MemoryStore

    if not yes:
        echo("citegraph: forget deletes every revision — pass --yes to confirm", err=True)
        sys.exit(2)
    with MemoryStore.open(get_home(ctx)) as ms:
        mem = ms.require(memory_id)
        ms.forget(mem.id)
    if as_json:
        emit_json({"id": mem.id, "forgotten": True})
        return
    echo(f"{mem.id} forgotten")


FAIL_ON = {"stale": {"stale"}, "unknown": {"stale", "unknown"}}


@outputs("validate")
@click.command(cls=SpreadCommand)
@click.option("--all", "all_", is_flag=True, help="Every active memory (the default).")
@spread_option("--memory", "memory_ids", help="Only these memories (--memory A B, or --memory A --memory B).")
@click.option("--project")
@spread_option("--repo", "repos", type=click.Path(file_okay=False),
               help="Repositories in scope (default: the one at the current directory).")
@click.option("--at", "at", help="Validate against the snapshot of this indexed commit (offline/CI).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "jsonl"]), default="text", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json (docs/schemas/validate.schema.json).")
@click.option("--fail-on", type=click.Choice(["stale", "unknown"]))
@click.option("--workset", help="Validate against the members of this workset (never builds; see docs/worksets.md).")
@dependency_depth_option
@no_service_option
@click.pass_context
@handle_errors
def validate(ctx: click.Context, all_: bool, memory_ids: tuple[str, ...], project: str | None,
             repos: tuple[str, ...], at: str | None, fmt: str, fail_on: str | None,
             workset: str | None = None, no_service: bool = False, as_json: bool = False,
             dependency_depth: int = 1) -> None:
    """Check every citation against the exact current code: exact, relocated, changed,
    deleted or unknown."""
    if as_json:
        if fmt not in ("text", "json"):
            raise click.UsageError("--json and --format jsonl are exclusive")
        fmt = "json"
    if all_ and memory_ids:
        raise click.UsageError("--all and --memory are exclusive")
    if workset and (repos or at):
        raise click.UsageError("--workset cannot be combined with --repo or --at")
    args = {"memory_ids": list(memory_ids) or None, "project": project, "workset": workset, "at": at,
            "repo_paths": [abspath(r) for r in repos] if repos else ([] if workset else [abspath(".")]),
            "dependency_depth": dependency_depth}
    data = via_service(ctx, "validate", args, no_service=no_service)
    if data is None:
        from citegraph.memory import api

        if workset:
            report = api.validate_workset(get_home(ctx), workset, memory_ids=list(memory_ids) or None,
                                          project=project, dependency_depth=dependency_depth)
        else:
            report = api.validate_memories(get_home(ctx), memory_ids=list(memory_ids) or None, project=project,
                                           repo_paths=list(repos) or None, at=at, dependency_depth=dependency_depth)
        data = report.to_json()
    if fmt == "json":
        emit_json(data)
    elif fmt == "jsonl":
        for m in data["memories"]:
            emit_json(m)
    else:
        print_validation(data)
    if at and data["memories"] and all(c.get("reason") == "not-current" for m in data["memories"]
                                       for c in m["citations"]) and any(m["citations"] for m in data["memories"]):
        say(paint(f"citegraph: commit {at} is not indexed — every citation is unknown/not-current; run "
                  f"`citegraph index --rev {at}`, then validate again", "unknown"), err=True)
    if fail_on and any(m["freshness"] in FAIL_ON[fail_on] for m in data["memories"]):
        sys.exit(1)


def _line(*parts: str) -> str:
    return " ".join(p for p in parts if p).rstrip()


def print_validation(data: dict) -> None:
    """``validate``'s text: per memory its id, freshness, status, topic and an excerpt, its
    citations with outcome and reason, the next step for what is unknown (validator/
    next_steps.py, the same words as the JSON ``next_step``); then memories by freshness
    and citations by outcome."""
    for m in data["memories"]:
        fresh = paint(f"{m['freshness']:7}", m["freshness"])
        status = paint(f"{m['status'] or '-':9}", m["status"] or "")
        where = f"{m.get('project', '?')}/{m.get('topic', '?')}" if m.get("topic") else ""
        quote = json.dumps(m["excerpt"], ensure_ascii=False) if m.get("excerpt") is not None else ""
        why = f"({m['reason']})" if m.get("reason") else ""
        say(_line(m["id"], fresh, status, where, quote, why))
        steps: dict[str, None] = {}
        for c in m["citations"]:
            loc = ""
            if c["observed"] and (c["outcome"] == "relocated" or c["observed"]["path"] != c["path"]
                                  or c["observed"]["handle"] not in (None, c["handle"])):  # a successor
                o = c["observed"]
                loc = f"→ {o['path']}" + (f"#L{o['start_line']}-L{o['end_line']}" if o["start_line"] else "")
            reason = f"({c['reason']})" if c["reason"] else ""
            if c.get("change"):
                reason = f"({CHANGE_TEXT.get(c['change'], c['change'])})"
            say("  " + _line(paint(f"{c['outcome']:9}", c["outcome"]), c.get("locator") or c["ref"], reason, loc))
            for adv in c.get("advisories", ()):
                now = adv["now"]
                where = f"→ {now['path']}#L{now['start_line']}-L{now['end_line']}" \
                    if now and adv["change"] != "deleted" else ""
                say("    " + _line("dependency-changed:", adv["dependency"]["locator"], adv["change"], where))
            if c.get("next_step"):
                steps[c["next_step"]] = None
        if m.get("next_step"):
            steps[m["next_step"]] = None
        for step in steps:
            say(f"  next: {step}")
    fs = data.get("freshness_summary") or {}
    s = data["summary"]
    n_cit = sum(s.values())
    mem_part = f"{len(data['memories'])} memor{'y' if len(data['memories']) == 1 else 'ies'}"
    if fs:
        mem_part += " (" + ", ".join(paint(f"{k} {v}", k) for k, v in fs.items()) + ")"
    cit_part = f"{n_cit} citation{'' if n_cit == 1 else 's'} (" + ", ".join(
        paint(f"{k} {v}", k) for k, v in s.items()) + ")"
    say(f"summary: {mem_part}; {cit_part}")


COMMANDS = [remember, show, list_, history, archive, forget, validate]
