"""index, status, symbols, find, gc: thin wrappers over citegraph.graph."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

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
from citegraph.cli.conventions import echo, paint, say

# The graph layer (git, DuckDB, tree-sitter) is imported inside the commands: a read
# answered by the resident service needs none of it.


@outputs("index")
@click.command()
@click.argument("path", default=".", type=click.Path(file_okay=False))
@click.option("--rev", help="Index this commit (read from the object database) instead of the worktree.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@no_service_option
@click.pass_context
@handle_errors
def index(ctx: click.Context, path: str, rev: str | None, as_json: bool, quiet: bool, no_service: bool) -> None:
    """Build (or reuse) the snapshot of the worktree's current state, or of --rev. The
    .citegraph.toml used is always the committed one (docs/config.md)."""
    home = get_home(ctx)
    if rev is None and not quiet and not as_json:
        from citegraph.indexer.config import uncommitted_change

        note = uncommitted_change(path)
        if note:
            echo(note, err=True)
    served = via_service(ctx, "index", {"path": abspath(path), "rev": rev}, no_service=no_service)
    if served is not None:
        _print_index(served, as_json, quiet)
        return
    show = not quiet and not as_json and sys.stderr.isatty()
    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if not show or total < 200:
            return
        if bar is None:
            bar = click.progressbar(length=total, label="indexing", file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    def waiting() -> None:
        if not quiet and not as_json:
            echo("citegraph: waiting for another build of this repository…", err=True)

    def terminated(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # the builder marks the build failed and cleans up

    previous = signal.signal(signal.SIGTERM, terminated)
    from citegraph.graph.snapshot_builder import build_snapshot

    try:
        res = build_snapshot(path, home, rev=rev, progress=progress, on_wait=waiting)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if bar is not None:
            bar.__exit__(None, None, None)
    _print_index(res.to_json(), as_json, quiet)


def _print_index(data: dict, as_json: bool, quiet: bool) -> None:
    if as_json:
        emit_json(data)
    elif not quiet:
        how = "reused" if data["reused"] else f"built in {data['seconds']:.2f}s"
        state = "overlay (dirty worktree)" if data["dirty"] else "commit"
        echo(f"{data['snapshot_id']} {state} {data['commit'][:12]}: {data['files']} files, "
                   f"{data['symbols']} symbols, {how}")


@outputs("status")
@click.command()
@click.argument("path", default=".", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.option("--check", is_flag=True, help="Exit 1 when there is no exact-current snapshot (not ready).")
@no_service_option
@click.pass_context
@handle_errors
def status(ctx: click.Context, path: str, as_json: bool, check: bool, no_service: bool) -> None:
    """Repository identity, HEAD, dirty state, snapshots and exact-current readiness (and
    whether the resident service answered). With --check, exit 1 when not ready."""
    data = via_service(ctx, "status", {"path": abspath(path)}, no_service=no_service)
    if data is None:
        from citegraph.graph import queries

        data = queries.status(path, get_home(ctx))
        data["service"] = {"used": False, "reason": "--no-service" if no_service else _service_reason(ctx)}
    if as_json:
        emit_json(data)
    else:
        _print_status(data)
    if check and not data["exact_current"]:
        sys.exit(1)


def _print_status(data: dict) -> None:
    echo(f"repository {data['repository_id']} ({data['repository_kind']})")
    echo(f"head       {data['head']}{' + dirty worktree' if data['dirty'] else ''}")
    cur = paint(data["snapshot_id"], "ready") if data["snapshot_id"] else \
        paint("none", "not ready") + " — run citegraph index (or citegraph serve)"
    say(f"exact-current snapshot: {cur}")
    svc = data.get("service") or {}
    echo(f"read through: {'the service (pid ' + str(svc.get('pid')) + ')' if svc.get('used') else 'a one-shot scan (' + str(svc.get('reason')) + ')'}")
    for s in data["snapshots"][-10:]:
        echo(f"  {s['snapshot_id']} {s['state']:8} {s['kind']:7} {s['commit'][:12]}"
                   f"{' files=' + str(s.get('files')) if s.get('files') is not None else ''}")
    if data.get("coverage"):
        for lang, c in data["coverage"].items():
            echo(f"  {lang:12} indexed={c['indexed']} partial={c['partial']} skipped={c['skipped']}")
            for cause, n in (c.get("partial_causes") or {}).items():
                echo(f"  {'':12}   partial ×{n}: {cause}")
    for f in data.get("partial_files") or []:
        echo(f"  partial {f['path']}:{f['line']}: {f['construct']}")


@outputs("symbols")
@click.command()
@click.argument("file", type=click.Path())
@click.option("--json", "as_json", is_flag=True)
@no_service_option
@click.pass_context
@handle_errors
def symbols(ctx: click.Context, file: str, as_json: bool, no_service: bool) -> None:
    """List the symbols of FILE in the exact-current snapshot (handles to cite). Exit 1
    when the file has none."""
    url = file.startswith(("https://", "http://"))
    full = file if url else os.path.abspath(file)  # lexical: never through a symlink (docs/security.md)
    served = via_service(ctx, "symbols", {"file": full, "cwd": os.getcwd()}, no_service=no_service)
    if served is not None:
        rows = served["symbols"]
    else:
        from citegraph.graph import queries

        rows = queries.symbols_of_file(full if url else Path(full), get_home(ctx), cwd=os.getcwd())
    if as_json:
        emit_json({"symbols": rows})
    else:
        for s in rows:
            name = s["qualified_name"] + (f"[{s['ordinal']}]" if s.get("ordinal") else "")  # citable as path::name
            echo(f"{s['start_line']:>5}-{s['end_line']:<5} {s['kind']:10} {name}  {s['handle']}")
        if not rows:
            echo(f"no symbols in {file}", err=True)
    if not rows:  # like grep: nothing found is exit 1
        sys.exit(1)


@outputs("find")
@click.command()
@click.argument("name")
@click.option("--repo", "repo_path", default=".", type=click.Path(file_okay=False))
@click.option("--kind", "kinds", multiple=True, help="Only symbols of this kind (function, method, class…; repeatable).")
@click.option("--path", "path", help="Only under this file or directory (cwd-relative, ./, absolute) or glob.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True)
@no_service_option
@click.pass_context
@handle_errors
def find(ctx: click.Context, name: str, repo_path: str, kinds: tuple[str, ...], path: str | None, limit: int,
         as_json: bool, no_service: bool) -> None:
    """Search symbols in the exact-current snapshot: exact name, qualified-suffix
    (next_delay → RetryPolicy.next_delay), prefix (Context.inv), glob ('invok*'), then
    substring; ranked in that order, shorter names first. Exit 1 when nothing matches."""
    args = {"repo": abspath(repo_path), "name": name, "limit": limit, "kinds": list(kinds) or None,
            "path": path, "cwd": os.getcwd()}
    data = via_service(ctx, "find", args, no_service=no_service)
    if data is None:
        from citegraph.graph import queries

        data = queries.find_symbols(repo_path, get_home(ctx), name, limit, kinds=list(kinds) or None, path=path,
                                    cwd=os.getcwd())
    rows = data["symbols"]
    if as_json:
        emit_json(data)
    else:
        if not rows:
            echo(f"no symbol matches {name!r}", err=True)
        for s in rows:
            echo(f"{s['locator']}  {s['kind']}  L{s['start_line']}-{s['end_line']}  "
                       f"{s['handle']}  ({s.get('match', 'exact')})")
        if data.get("truncated"):
            echo(f"… more symbols match: showing the best {len(rows)}; narrow it (--kind, --path) or "
                 f"raise --limit", err=True)
    if not rows:  # like grep: no match is exit 1
        sys.exit(1)


@outputs("gc")
@click.command()
@click.option("--keep-last", default=5, show_default=True)
@click.option("--dry-run", is_flag=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def gc(ctx: click.Context, keep_last: int, dry_run: bool, as_json: bool) -> None:
    """Retire snapshots that are not exact-current, among the last N, or pinned by a workset."""
    from citegraph.graph.retention import collect

    res = collect(get_home(ctx), keep_last=keep_last, dry_run=dry_run)
    if as_json:
        emit_json({"dry_run": dry_run, **res})
    else:
        echo(f"{'would retire' if dry_run else 'retired'} {len(res['retired'])} snapshot(s), "
                   f"kept {len(res['kept'])}")


def _service_reason(ctx: click.Context) -> str:
    from citegraph.server.client import Unavailable, connect

    try:
        sock, _ = connect(get_home(ctx))
    except Unavailable as why:
        return str(why)
    sock.close()
    return "the service did not answer"


COMMANDS = [index, status, symbols, find, gc]
