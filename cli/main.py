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

# Each command's help line for `citegraph --help`, so listing the commands imports none of
# them (issue 22: `--help` imported every command module, 2.7 s against 0.2 s for
# `--version`). tests/test_cli_registry.py checks it against the commands themselves.
SHORT_HELP: dict[str, str] = {
    'archive': 'Archive a memory (kept, no longer recalled). --json prints the memory as stored.',
    'batch': 'Jobs over checkpoints across many repositories (docs/checkpoints.md).',
    'brief': (
        'Context Brief: the memories relevant to a task, each with its validated freshness, '
        'stale ones apart — bounded in work and in size; never indexes.'
    ),
    'check': (
        'Which memories does the change BASE..HEAD make stale? Validates only the citations '
        'the diff can affect, against HEAD, with the same tables as validate.'
    ),
    'cited': (
        'The memories whose citations touch the given code — a file, path#L10-L24 (lines '
        'overlapping), path::Name[N], a cgs_/cgr_ handle (a moved copy found by its fragment '
        'hash) — each with its current freshness. Exit 1 when none.'
    ),
    'export': (
        "Write a portable checkpoint (docs/checkpoints.md): each repository's ready commit "
        'snapshot and the publishable memories citing it, as Parquet partitioned by '
        'repository id, with a manifest of blake3 digests and versions. ``citegraph import '
        '--parquet`` loads it elsewhere, ready at once. Exit 1 when a memory was refused by '
        'the publish gate (the checkpoint then holds the others).'
    ),
    'find': (
        'Search symbols in the exact-current snapshot: exact name, qualified-suffix '
        "(next_delay → RetryPolicy.next_delay), prefix (Context.inv), glob ('invok*'), then "
        'substring; ranked in that order, shorter names first. Exit 1 when nothing matches.'
    ),
    'forget': 'Delete a memory and all its revisions (the only way anything is deleted).',
    'gc': (
        'Retire snapshots that are not exact-current, among the last N, or pinned by a '
        'workset.'
    ),
    'graph': (
        'What a symbol rests on, or what a change to it touches, from the resolved edges of '
        'the exact-current snapshot (docs/graph.md).'
    ),
    'history': 'All revisions of a memory (append-only).',
    'hook': 'Hooks for coding agents (Claude Code command hooks; docs/agents.md).',
    'import': (
        'Load a file written by citegraph publish (legacy records: citegraph import-legacy), '
        'or with --parquet a checkpoint written by citegraph export --parquet.'
    ),
    'import-legacy': (
        'Import legacy memory records (JSON array or JSONL with text, project, topic, kind, '
        'source_commit, author, created_at) from FILE (- for stdin): all or nothing, stored '
        'without citations.'
    ),
    'index': (
        "Build (or reuse) the snapshot of the worktree's current state, or of --rev. The "
        '.citegraph.toml used is always the committed one (docs/config.md).'
    ),
    'list': 'List memories.',
    'mcp': (
        'Run the MCP server on stdin/stdout (tools: find, symbols, index, status, remember, '
        'cited, refresh, brief, validate, list, show, history, graph, workset). It runs the '
        'resident service in-process (or uses the one already running for this data home), so'
        " the agent's graph is always current. Register it with your agent client: see "
        'docs/mcp.md.'
    ),
    'publish': 'Export durable memories with their receipts for a team (portable JSONL).',
    'refresh': (
        'Re-capture moved citations at their observed place (a reviewed step, never '
        'automatic): a new revision whose history keeps the old receipts and the observations'
        ' that justified the move. Never for a change without a successor, a deletion or an '
        'unknown.'
    ),
    'remember': 'Store a memory with code citations resolved against the exact-current snapshot.',
    'repo': 'Repository identity: its id, its identity history, and explicit moves.',
    'report': (
        'Memory health for people: counts by freshness and outcome (a chart), memories '
        'grouped by freshness with their citations, where the evidence is now and, for '
        'changed citations, the cited code beside the current code. Filter by project, '
        'outcome and path. One HTML file with nothing to download (works offline). Never '
        'indexes.'
    ),
    'serve': 'Run the resident service of this data home in the foreground.',
    'show': 'Show one memory and its citations (receipts).',
    'status': (
        'Repository identity, HEAD, dirty state, snapshots and exact-current readiness (and '
        'whether the resident service answered). With --check, exit 1 when not ready.'
    ),
    'symbols': (
        'List the symbols of FILE in the exact-current snapshot (handles to cite). Exit 1 '
        'when the file has none.'
    ),
    'validate': (
        'Check every citation against the exact current code: exact, relocated, changed, '
        'deleted or unknown.'
    ),
    'watch': (
        'Keep the exact-current snapshot of each repository ready as HEAD moves and files '
        'change: the resident service in the foreground, watching PATHS (default: .).'
    ),
    'workset': 'Named sets of repositories: prepare them once, brief and validate across them.',
}


def _build() -> Any:
    """The Click group (built on first use: ``hook pre-edit`` runs without Click)."""
    import click

    class LazyGroup(click.Group):
        """A click group whose subcommands are imported on first use."""

        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(LAZY_COMMANDS)

        def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            """The command list of ``--help`` from ``SHORT_HELP``: no command module imported."""
            names = self.list_commands(ctx)
            if not names:
                return
            limit = formatter.width - 6 - max(len(n) for n in names)
            rows = [(n, click.Command(n, help=SHORT_HELP[n]).get_short_help_str(limit)) for n in names]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

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
