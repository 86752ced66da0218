"""watch: the background indexer (thin wrapper over citegraph.server.watcher)."""

from __future__ import annotations

import sys

import click

from citegraph.cli.common import get_home, handle_errors


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option("--debounce-ms", default=100, show_default=True, type=click.IntRange(min=1),
              help="Quiet period: build once no event has arrived for this long.")
@click.option("--max-wait-ms", type=click.IntRange(min=1),
              help="Build at the latest this long after the first event of a busy period "
                   "(default 10 × debounce, at least 1000).")
@click.option("--exclude", "excludes", multiple=True,
              help="Extra glob of paths whose changes are ignored (besides [index] exclude).")
@click.option("--once", is_flag=True, help="Build (or reuse) the current state once and exit.")
@click.option("--gc-keep", default=20, show_default=True, type=click.IntRange(min=0),
              help="After publishing, retire snapshots beyond the last N (at most once a minute; 0: never).")
@click.option("--jobs", type=click.IntRange(min=1), help="Worker processes for cold builds.")
@click.option("--json", "as_json", is_flag=True, help="Log one JSON object per line on stdout.")
@click.pass_context
@handle_errors
def watch(ctx: click.Context, paths: tuple[str, ...], debounce_ms: int, max_wait_ms: int | None,
          excludes: tuple[str, ...], once: bool, gc_keep: int, jobs: int | None, as_json: bool) -> None:
    """Keep the exact-current snapshot of each repository ready as HEAD moves and files change.

    Stops cleanly on SIGINT/SIGTERM (exit 0); a restart reuses every snapshot already built.
    """
    from citegraph.server.watcher import Logger, Watcher

    w = Watcher(list(paths) or ["."], get_home(ctx), debounce_ms=debounce_ms, max_wait_ms=max_wait_ms,
                excludes=tuple(excludes), log=Logger(as_json), gc_keep=0 if once else gc_keep, jobs=jobs)
    code = w.run_once() if once else w.run()
    sys.exit(code)


COMMANDS = [watch]
