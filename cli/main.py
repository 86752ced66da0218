"""The ``citegraph`` command: a thin Click layer over the library."""

from __future__ import annotations

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

try:  # commands of later layers register themselves here
    from citegraph.cli import memory_cmds

    for _cmd in memory_cmds.COMMANDS:
        cli.add_command(_cmd)
except ImportError as _exc:  # pragma: no cover - only while a layer is absent
    if "memory_cmds" not in str(_exc):
        raise


def main() -> None:
    cli(prog_name="citegraph")


if __name__ == "__main__":
    main()
