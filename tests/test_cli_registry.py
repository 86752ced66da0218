"""The lazy command map lists exactly the commands the CLI modules define."""

from __future__ import annotations

import importlib

from click.testing import CliRunner

from citegraph.cli.main import LAZY_COMMANDS, cli

MODULES = ("index_cmds", "memory_cmds", "brief_cmds", "workset_cmds", "share_cmds", "watch_cmds", "mcp_cmds",
           "check_cmds", "report_cmds", "agent_cmds", "hook_cmds", "graph_cmds", "batch_cmds")


def test_lazy_map_matches_the_modules():
    defined = {}
    for m in MODULES:
        mod = importlib.import_module(f"citegraph.cli.{m}")
        for cmd in mod.COMMANDS:
            defined[cmd.name] = m
    assert set(defined) == set(LAZY_COMMANDS)
    for name, (module, _attr) in LAZY_COMMANDS.items():
        assert defined[name] == module
        assert cli.get_command(None, name).name == name  # type: ignore[arg-type]


def test_help_lists_every_command():
    out = CliRunner().invoke(cli, ["--help"]).output
    for name in LAZY_COMMANDS:
        assert f"  {name} " in out
    assert CliRunner().invoke(cli, ["nonsense"]).exit_code == 2


def test_help_lines_match_the_commands():
    """`--help` lists the commands from SHORT_HELP (no command module imported): each line
    is what the command itself would give, at any width."""
    import click

    from citegraph.cli.main import SHORT_HELP

    assert set(SHORT_HELP) == set(LAZY_COMMANDS)
    for name in LAZY_COMMANDS:
        cmd = cli.get_command(click.Context(cli), name)
        assert not cmd.hidden
        for limit in (30, 45, 60, 200, 10_000):
            shown = click.Command(name, help=SHORT_HELP[name]).get_short_help_str(limit)
            assert shown == cmd.get_short_help_str(limit), (name, limit)


def test_help_imports_no_command_module():
    """Issue 22: `citegraph --help` imported every command module (2.7 s on a loaded
    machine against 0.2 s for --version)."""
    import subprocess
    import sys

    code = ("import sys\nfrom click.testing import CliRunner\nfrom citegraph.cli.main import cli\n"
            "r = CliRunner().invoke(cli, ['--help'])\nassert r.exit_code == 0 and 'workset' in r.output\n"
            "print(sorted(m for m in sys.modules if m.startswith('citegraph.cli.') and m.endswith('_cmds')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
