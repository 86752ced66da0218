"""The ``citegraph`` command: a thin Click layer over the library."""

from __future__ import annotations

import importlib

import click

from citegraph.cli import index_cmds


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="CITEGRAPH_HOME", type=click.Path(file_okay=False),
              help="Data home (default $CITEGRAPH_HOME or ~/.citegraph).")
@click.version_option(package_name="citegraph")
def cli(home: str | None) -> None:
    """citegraph: code-graph snapshots and validated code citations for agent memory."""


for _cmd in index_cmds.COMMANDS:
    cli.add_command(_cmd)

# Command modules of later layers; each exposes COMMANDS. A module not written yet is
# simply absent (only that exact module missing is tolerated).
_MODULES = ("memory_cmds", "brief_cmds", "workset_cmds", "share_cmds", "watch_cmds", "mcp_cmds",
            "corpus_cmds")
for _name in _MODULES:
    try:
        _mod = importlib.import_module(f"citegraph.cli.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"citegraph.cli.{_name}":
            raise
        continue
    for _cmd in _mod.COMMANDS:
        cli.add_command(_cmd)


def main() -> None:
    cli(prog_name="citegraph")


if __name__ == "__main__":
    main()
