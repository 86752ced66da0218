"""The ``citegraph`` command: a thin Click layer over the library."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

# Every command and the module that defines it: modules are imported only when their
# command runs (a cold `citegraph index` should not pay for the MCP SDK's import).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "index": ("index_cmds", "index"), "status": ("index_cmds", "status"),
    "symbols": ("index_cmds", "symbols"), "find": ("index_cmds", "find"), "gc": ("index_cmds", "gc"),
    "remember": ("memory_cmds", "remember"), "show": ("memory_cmds", "show"),
    "list": ("memory_cmds", "list_"), "history": ("memory_cmds", "history"),
    "archive": ("memory_cmds", "archive"), "forget": ("memory_cmds", "forget"),
    "validate": ("memory_cmds", "validate"), "brief": ("brief_cmds", "brief"),
    "import-legacy": ("brief_cmds", "import_legacy"), "workset": ("workset_cmds", "workset"),
    "publish": ("share_cmds", "publish"), "import": ("share_cmds", "import_"), "export": ("share_cmds", "export"),
    "check": ("check_cmds", "check"), "report": ("report_cmds", "report"),
    "watch": ("watch_cmds", "watch"), "serve": ("watch_cmds", "serve"), "mcp": ("mcp_cmds", "mcp"),
    "cited": ("agent_cmds", "cited"), "refresh": ("agent_cmds", "refresh"), "repo": ("agent_cmds", "repo"),
    "hook": ("hook_cmds", "hook"), "graph": ("graph_cmds", "graph"), "batch": ("batch_cmds", "batch"),
}


def _build() -> Any:
    """The Click group (built on first use: ``hook pre-edit`` runs without Click)."""
    import click

    class LazyGroup(click.Group):
        """A click group whose subcommands are imported on first use."""

        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(LAZY_COMMANDS)

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            target = LAZY_COMMANDS.get(cmd_name)
            if target is None:
                return None
            module = importlib.import_module(f"citegraph.cli.{target[0]}")
            from citegraph.cli.conventions import accept_home_anywhere

            return accept_home_anywhere(getattr(module, target[1]))

    @click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.option("--home", envvar="CITEGRAPH_HOME", type=click.Path(file_okay=False),
                  help="Data home (default $CITEGRAPH_HOME or ~/.citegraph).")
    @click.version_option(package_name="citegraph")
    def cli(home: str | None) -> None:
        """citegraph: code-graph snapshots and validated code citations for agent memory."""

    return cli


def __getattr__(name: str) -> Any:
    if name == "cli":
        value = globals()["cli"] = _build()
        return value
    raise AttributeError(name)


def undecodable_argument(args: list[str]) -> str | None:
    """The one-line complaint about the first argument that is not valid UTF-8 (Python
    hands such bytes over as lone surrogates), or None."""
    for i, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return (f"citegraph: argument {i} (\"{shown}\") is not valid UTF-8 — pass UTF-8 text; "
                    "citegraph never guesses an encoding")
    home = os.environ.get("CITEGRAPH_HOME")
    if home is not None:
        try:
            home.encode("utf-8")
        except UnicodeEncodeError:
            return "citegraph: CITEGRAPH_HOME is not valid UTF-8 — set it to a UTF-8 path"
    return None


def main() -> None:
    problem = undecodable_argument(sys.argv[1:])
    if problem:
        sys.stderr.write(problem + "\n")
        sys.exit(2)
    from citegraph.cli.hook_fast import fast_argv, run_pre_edit

    fast = fast_argv(sys.argv[1:])
    if fast is not None:  # Claude Code runs this before every edit: no Click
        sys.exit(run_pre_edit(*fast))
    __getattr__("cli")(prog_name="citegraph")


if __name__ == "__main__":
    main()
