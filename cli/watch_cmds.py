"""serve, watch: the resident service in the foreground (thin wrappers over
citegraph.server.foreground)."""

from __future__ import annotations

import os
import sys

import click

from citegraph.cli.common import get_home, handle_errors, outputs


def _common(fn):  # the options serve and watch share
    fn = click.option("--json", "as_json", is_flag=True, help="Log one JSON object per line on stdout.")(fn)
    fn = click.option("--jobs", type=click.IntRange(min=1), help="Worker processes for cold builds.")(fn)
    fn = click.option("--gc-keep", default=20, show_default=True, type=click.IntRange(min=0),
                      help="After publishing, retire snapshots beyond the last N (at most once a minute; 0: never).")(fn)
    fn = click.option("--max-wait-ms", type=click.IntRange(min=1),
                      help="Build at the latest this long after the first change of a busy period "
                           "(default 10 × debounce, at least 1000).")(fn)
    fn = click.option("--read-wait-ms", type=click.IntRange(min=0, max=60_000), default=2000, show_default=True,
                      help="A read waits this long for the build of a change the service has seen; "
                           "past it the answer is unknown/racing (still indexing).")(fn)
    fn = click.option("--debounce-ms", default=20, show_default=True, type=click.IntRange(min=0),
                      help="Quiet period: build once no change has arrived for this long.")(fn)
    return click.argument("paths", nargs=-1, type=click.Path(file_okay=False))(fn)


@outputs("watch-event")
@click.command()
@_common
@click.pass_context
@handle_errors
def serve(ctx: click.Context, paths: tuple[str, ...], debounce_ms: int, max_wait_ms: int | None, gc_keep: int,
          jobs: int | None, as_json: bool, read_wait_ms: int = 2000) -> None:
    """Run the resident service of this data home in the foreground.

    It watches PATHS (and every repository a read through it names), keeps each
    worktree's state from file-system events, publishes the exact-current snapshot after
    each change, and answers `remember`, `validate`, `brief`, `status`, `symbols`, `find`
    and `index` over a local socket — the CLI uses it automatically (`--no-service` to
    bypass). One service per data home. Stops cleanly on SIGINT/SIGTERM. See docs/service.md."""
    from citegraph.server.foreground import run
    from citegraph.server.service import Logger

    sys.exit(run(get_home(ctx), list(paths), log=Logger("serve", as_json), debounce_ms=debounce_ms,
                 max_wait_ms=max_wait_ms, jobs=jobs, gc_keep=gc_keep, read_wait_ms=read_wait_ms, exit_now=os._exit))


@outputs("watch-event")
@click.command()
@_common
@click.option("--once", is_flag=True, help="Build (or reuse) the current state once and exit.")
@click.pass_context
@handle_errors
def watch(ctx: click.Context, paths: tuple[str, ...], debounce_ms: int, max_wait_ms: int | None, gc_keep: int,
          jobs: int | None, as_json: bool, once: bool, read_wait_ms: int = 2000) -> None:
    """Keep the exact-current snapshot of each repository ready as HEAD moves and files
    change: the resident service in the foreground, watching PATHS (default: .).

    Stops cleanly on SIGINT/SIGTERM (exit 0); a restart reuses every snapshot already built."""
    from citegraph.server.foreground import once as build_once
    from citegraph.server.foreground import run
    from citegraph.server.service import Logger

    log = Logger("watch", as_json)
    targets = list(paths) or ["."]
    if once:
        sys.exit(build_once(get_home(ctx), targets, log=log, jobs=jobs))
    sys.exit(run(get_home(ctx), targets, log=log, debounce_ms=debounce_ms, max_wait_ms=max_wait_ms, jobs=jobs,
                 gc_keep=gc_keep, read_wait_ms=read_wait_ms, exit_now=os._exit))


COMMANDS = [serve, watch]
