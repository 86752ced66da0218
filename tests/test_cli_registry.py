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
