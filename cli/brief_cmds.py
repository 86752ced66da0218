"""brief and import-legacy: thin wrappers over citegraph.memory.api."""

from __future__ import annotations

import os

import click

from citegraph.cli.common import (
    abspath,
    dependency_depth_option,
    emit_json,
    get_home,
    handle_errors,
    no_service_option,
    outputs,
    via_service,
)
from citegraph.cli.conventions import SpreadCommand, echo, spread_option, text_or_stdin
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.brief.bounds import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET


@outputs("brief")
@click.command(cls=SpreadCommand)
@click.option("--task", required=True, help="What you are about to do (drives recall; - reads stdin).")
@click.option("--project", help="Only memories of this project.")
@click.option("--workset", help="Validate against the members of this prepared workset.")
@spread_option("--code-ref", "refs",
               help="A path, path::Qualified.name, cgs_… or cgr_… you are working on (boosts recall).")
@click.option("--budget-tokens", type=int, default=DEFAULT_BUDGET, show_default=True,
              help=f"Size bound of the whole response ({MIN_BUDGET}–{MAX_BUDGET}; ceil(utf8 bytes/4)).")
@spread_option("--repo", "repos", type=click.Path(file_okay=False),
               help="Repositories in scope (default: the one at the current directory).")
@click.option("--json", "as_json", is_flag=True, help="The full structure (docs/schemas/brief.schema.json).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text, or json (the same as --json).")
@dependency_depth_option
@no_service_option
@click.pass_context
@handle_errors
def brief(ctx: click.Context, task: str, project: str | None, workset: str | None, refs: tuple[str, ...],
          budget_tokens: int, repos: tuple[str, ...], as_json: bool, fmt: str, no_service: bool,
          dependency_depth: int = 1) -> None:
    """Context Brief: the memories relevant to a task, each with its validated freshness,
    stale ones apart — bounded in work and in size; never indexes."""
    as_json = as_json or fmt == "json"
    if workset and repos:
        raise CitegraphError("--workset and --repo are exclusive",
                                 "a workset names its repositories; drop --repo", code=2)
    task = text_or_stdin(task, "--task")
    args = {"task": task, "project": project, "workset": workset, "code_refs": list(refs), "cwd": os.getcwd(),
            "budget_tokens": budget_tokens, "dependency_depth": dependency_depth,
            "repo_paths": None if workset else ([abspath(r) for r in repos] or [abspath(".")])}
    served = via_service(ctx, "brief", args, no_service=no_service)
    if served is not None:
        if as_json:
            click.echo(served["json_text"])
        else:
            echo(served["text"])
        return
    from citegraph.memory import api

    res = api.brief(get_home(ctx), task, project=project, workset=workset, code_refs=list(refs),
                    budget_tokens=budget_tokens, repo_paths=list(repos) or None, cwd=os.getcwd(),
                    dependency_depth=dependency_depth)
    if as_json:
        click.echo(res.json_text)
    else:
        echo(res.text)


@outputs("import-legacy")
@click.command(name="import-legacy")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def import_legacy(ctx: click.Context, file: str, as_json: bool) -> None:
    """Import legacy memory records (JSON array or JSONL with text, project, topic, kind,
    source_commit, author, created_at) from FILE (- for stdin): all or nothing, stored
    without citations."""
    from citegraph.memory import api

    res = api.import_legacy(get_home(ctx), file)
    if as_json:
        emit_json(res)
        return
    echo(f"imported {res['imported']} legacy memor{'y' if res['imported'] == 1 else 'ies'}"
               + (f", skipped {res['skipped']} already present" if res["skipped"] else ""))


COMMANDS = [brief, import_legacy]
