"""The README's commands table is complete (issue 12 "README"): every command of the
Click tree has a row, and every option of the command appears in its row — a generated
check, so the table stays true when a command or flag is added."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click

from citegraph.cli.main import LAZY_COMMANDS, cli

README = Path(__file__).resolve().parents[1] / "README.md"
GLOBAL = {"--home", "--help", "-h", "--version"}  # documented once, above the table


def leaf_commands() -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            names = sorted(LAZY_COMMANDS) if not path else cmd.list_commands(click.Context(cmd))
            for n in names:
                walk(cmd.get_command(click.Context(cmd), n), [*path, n])
        else:
            out[" ".join(path)] = cmd

    walk(cli, [])
    return out


def table_rows() -> dict[str, str]:
    """Command path → its table row (the row's first cell starts with the command)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    known = sorted(leaf_commands(), key=len, reverse=True)
    rows: dict[str, str] = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+)`", line)
        if not m:
            continue
        cell = m.group(1)
        cmd = next((k for k in known if cell == k or cell.startswith(k + " ")), None)
        assert cmd is not None, f"README row names no command: {line}"
        assert cmd not in rows, f"two README rows for {cmd}"
        rows[cmd] = line
    return rows


def test_every_command_has_a_row_with_every_option():
    rows = table_rows()
    missing = []
    for path, cmd in leaf_commands().items():
        row = rows.get(path)
        if row is None:
            missing.append(f"{path}: no row in README's commands table")
            continue
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.hidden:
                continue
            for opt in p.opts + p.secondary_opts:
                if opt in GLOBAL:
                    continue
                if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", row):
                    missing.append(f"{path}: {opt} not in its README row")
    assert not missing, "\n".join(missing)


def test_global_options_are_documented_and_no_row_is_stale():
    text = README.read_text(encoding="utf-8")
    for opt in ("--home", "--help", "--version", "NO_COLOR", "_CITEGRAPH_COMPLETE=bash_source citegraph"):
        assert opt in text, opt
    assert set(table_rows()) == set(leaf_commands())


def test_the_documented_completion_works():
    env = {**os.environ, "_CITEGRAPH_COMPLETE": "bash_complete", "COMP_WORDS": "citegraph work", "COMP_CWORD": "1"}
    r = subprocess.run([sys.executable, "-m", "citegraph.cli.main"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "plain,workset" in r.stdout.splitlines()
    src = subprocess.run([sys.executable, "-m", "citegraph.cli.main"], env={**os.environ,
                         "_CITEGRAPH_COMPLETE": "bash_source"}, capture_output=True, text=True, timeout=60)
    assert "complete -o nosort -F _citegraph_completion citegraph" in src.stdout
