"""batch validate: a thin wrapper over citegraph.memory.batch.run (docs/checkpoints.md)."""

from __future__ import annotations

import sys

import click

from citegraph.cli.common import dependency_depth_option, emit_json, handle_errors, outputs
from citegraph.cli.conventions import echo


@click.group()
def batch() -> None:
    """Jobs over checkpoints across many repositories (docs/checkpoints.md)."""


@outputs("batch-validate")
@batch.command(name="validate")
@click.option("--parquet", "checkpoint", required=True, type=click.Path(file_okay=False),
              help="The checkpoint directory (citegraph export --parquet), readable where the tasks run.")
@click.option("--scheduler", default="local", show_default=True,
              help="local[:N]: a Dask LocalCluster of N worker processes; an address: your Dask scheduler; "
                   "inline: no Dask, one partition after another in this process.")
@click.option("--out", default="citegraph-batch", show_default=True, type=click.Path(file_okay=False),
              help="Where citations.parquet, memories.jsonl and summary.json are written.")
@click.option("--repo", "repos", multiple=True, type=click.Path(file_okay=False),
              help="A clone of a checkpoint's repository (repeatable): evidence that needs file bytes is read "
                   "from it; without one, that evidence is unknown.")
@click.option("--retries", type=click.IntRange(0, 10), default=2, show_default=True,
              help="How often a failed partition is retried before it is reported.")
@dependency_depth_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (docs/schemas/).")
@handle_errors
def validate(checkpoint: str, scheduler: str, out: str, repos: tuple[str, ...], retries: int,
             dependency_depth: int, as_json: bool) -> None:
    """Validate every memory of a checkpoint against the snapshot its manifest names for
    each repository: one task per repository partition, the same pipeline and decisions as
    validate --at. Exit 1 when a repository could not be validated (listed under failed)."""
    from citegraph.memory.batch.run import run_batch

    report = run_batch(checkpoint, scheduler=scheduler, out=out, repos=list(repos) or None, retries=retries,
                       progress=sys.stderr.isatty(), dependency_depth=dependency_depth)
    summary = report.summary()
    if as_json:
        emit_json(summary)
    else:
        for r in summary["by_repository"]:
            if r["error"]:
                echo(f"failed    {r['repository_id']}: {r['error']}", err=True)
            else:
                counts = ", ".join(f"{k} {v}" for k, v in r["freshness_summary"].items())
                echo(f"validated {r['repository_id']} at {r['commit'][:12]}: {r['memories']} memories ({counts})")
        fs = ", ".join(f"{k} {v}" for k, v in summary["freshness_summary"].items())
        cs = ", ".join(f"{k} {v}" for k, v in summary["summary"].items())
        echo(f"summary: {summary['validated']}/{summary['repositories']} repositories, "
                   f"{summary['memories']} memories ({fs}); {summary['citations']} citations ({cs}); "
                   f"results in {out}")
    if report.failed:
        sys.exit(1)


COMMANDS = [batch]
