"""check (CI: which memories a change makes stale) and report (a page people read): thin
wrappers over citegraph.memory.review.check and citegraph.memory.review.report."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile

import click

from citegraph.cli.common import dependency_depth_option, get_home, handle_errors, outputs
from citegraph.cli.conventions import echo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.escape import terminal


def write_output(out: str | None, text: str) -> None:
    """stdout, or ``out`` written aside and renamed (never a half-written file)."""
    if out is None or out == "-":
        click.echo(text, nl=not text.endswith("\n"))  # escaped per format by the caller
        return
    target = os.path.abspath(out)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise CitegraphError(f"{out}: no such directory", "create it or pass another --out", code=2)
    fd, tmp = tempfile.mkstemp(prefix=".citegraph-", dir=folder)
    try:
        # mkstemp creates 0600; the output is an ordinary file: the mode a plain open()
        # would give (0666 less the umask), or the mode of the file it replaces (issue 22)
        os.fchmod(fd, _output_mode(target))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _output_mode(target: str) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)  # read it: os has no getter (one-shot CLI, no threads here)
        os.umask(mask)
        return 0o666 & ~mask


@outputs("check")
@click.command()
@click.option("--base", required=True, help="The commit the change starts from (e.g. origin/main, a PR's base sha).")
@click.option("--head", default="HEAD", show_default=True, help="The commit the change ends at.")
@click.option("--repo", "repo", default=".", type=click.Path(file_okay=False), show_default=True)
@click.option("--project", help="Only memories of this project.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "markdown"]), default="text",
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json (docs/schemas/check.schema.json).")
@click.option("--fail-on", type=click.Choice(["stale", "unknown"]), default="stale", show_default=True,
              help="Exit 1 for a stale finding (stale), or also for an unknown one (unknown).")
@click.option("--out", type=click.Path(dir_okay=False, allow_dash=True), help="Write the output here (- for stdout).")
@dependency_depth_option
@click.pass_context
@handle_errors
def check(ctx: click.Context, base: str, head: str, repo: str, project: str | None, fmt: str, fail_on: str,
          out: str | None, as_json: bool = False, dependency_depth: int = 1) -> None:
    """Which memories does the change BASE..HEAD make stale? Validates only the citations the
    diff can affect, against HEAD, with the same tables as validate.

    Exit codes: 0 nothing reaches --fail-on; 1 a finding does; 2 the check is unknown (a
    revision cannot be read or indexed — e.g. a shallow clone lacking BASE) or a usage error;
    3 environment error. Commit snapshots that are missing are built from the object
    database first (said on stderr). See docs/ci.md."""
    from citegraph.memory.review import check_formats
    from citegraph.memory.review.check import run_check
    from citegraph.schemas import to_output

    if as_json:
        if fmt not in ("text", "json"):
            raise click.UsageError(f"--json and --format {fmt} are exclusive")
        fmt = "json"

    rep = run_check(get_home(ctx), base=base, head=head, repo_path=repo, project=project, fail_on=fail_on,
                    notify=lambda m: echo(m, err=True), dependency_depth=dependency_depth)
    if fmt == "json":
        text = json.dumps(to_output(rep.to_json()), indent=1) + "\n"
    elif fmt == "sarif":
        text = json.dumps(check_formats.to_sarif(rep), indent=1) + "\n"
    elif fmt == "markdown":
        text = check_formats.to_markdown(rep)
    else:  # paths and memory text are untrusted: controls shown, never obeyed (also in a file)
        text = terminal(check_formats.to_text(rep))
    write_output(out, text)
    if out not in (None, "-"):
        echo(check_formats.headline(rep), err=True)  # the output went to a file: say what it holds
    if rep.status == "unknown":
        echo(f"citegraph: the check is unknown: {rep.reason} — {rep.next_step}", err=True)
    sys.exit(rep.exit_code())


COMMANDS = [check]
