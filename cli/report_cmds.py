"""report: memory health as one self-contained HTML page (or Markdown) — a thin wrapper
over citegraph.memory.review.report."""

from __future__ import annotations

import click

from citegraph.cli.check_cmds import write_output
from citegraph.cli.common import emit_json, get_home, handle_errors, outputs
from citegraph.cli.conventions import echo


@outputs("report")
@click.command()
@click.option("--out", type=click.Path(dir_okay=False, allow_dash=True),
              help="The file to write (e.g. report.html; - or omitted: stdout).")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown", "json"]), default="html", show_default=True,
              help="json: the report's data (docs/schemas/report.schema.json).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--project", help="Only memories of this project.")
@click.option("--repo", "repos", multiple=True, type=click.Path(file_okay=False),
              help="Repositories in scope (default: the one at the current directory).")
@click.option("--at", "at", help="Validate against the snapshot of this indexed commit.")
@click.pass_context
@handle_errors
def report(ctx: click.Context, out: str | None, fmt: str, project: str | None, repos: tuple[str, ...],
           at: str | None, as_json: bool = False) -> None:
    """Memory health for people: counts by freshness and outcome (a chart), memories grouped
    by freshness with their citations, where the evidence is now and, for changed
    citations, the cited code beside the current code. Filter by project, outcome and path.
    One HTML file with nothing to download (works offline). Never indexes."""
    from citegraph.memory.review import report as rp

    data = rp.build(get_home(ctx), repo_paths=list(repos) or None, project=project, at=at)
    if as_json or fmt == "json":
        if out in (None, "-"):
            emit_json(data)
            return
        import json

        from citegraph.schemas import to_output

        text = json.dumps(to_output(data)) + "\n"
    elif fmt == "markdown":
        text = rp.to_markdown(data)
    else:
        from citegraph.memory.review.report_html import render

        text = render(data)
    write_output(out, text)
    if out not in (None, "-"):
        c = data["counts"]["freshness"]
        echo(f"report: {len(data['memories'])} memories ({c['stale']} stale, {c['unknown']} unknown, "
                   f"{c['fresh']} fresh) written to {out}", err=True)


COMMANDS = [report]
