"""One CLI convention (SPEC §19, issue 12 "Flags and exit codes"): --home anywhere,
repeated and space-separated ids, - for stdin, exit codes like git/grep, colour on a
terminal honouring NO_COLOR, brief --format."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from citegraph.cli.conventions import color_choice, spread_args, text_or_stdin
from citegraph.cli.main import cli
from citegraph.indexer.errors import CitegraphError

CODE = """\
class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 30)


def helper():
    return 1
"""


def run(home: Path, *args: str, cwd: Path | None = None, stdin: str | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("CITEGRAPH_HOME", "NO_COLOR")}
    full.update({"CITEGRAPH_HOME": str(home)}, **(env or {}))
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=full,
                          input=stdin, capture_output=True, text=True, timeout=120)


@pytest.fixture
def indexed(repo, home):
    repo.write("src/payments/retry.py", CODE)
    repo.commit("c1")
    r = run(home.root, "index", str(repo.root), "--no-service")
    assert r.returncode == 0, r.stderr
    return repo


def remember(home, repo, topic: str, *refs: str) -> str:
    args = ["remember", "--repo", str(repo.root), "--topic", topic, "--text", f"claim {topic}", "--json"]
    for ref in refs:
        args += ["--code-ref", ref]
    r = run(home.root, *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["id"]


# --- --home anywhere -----------------------------------------------------------------------------

def test_home_before_or_after_the_subcommand_and_from_the_environment(indexed, tmp_path):
    other = tmp_path / "other-home"
    mid = None
    for where in ("after", "before"):
        args = ["remember", "--repo", str(indexed.root), "--topic", f"t-{where}", "--text", "x", "--json"]
        args = [*args, "--home", str(other)] if where == "after" else ["--home", str(other), *args]
        r = run(tmp_path / "unused-env-home", *args)
        assert r.returncode == 0, r.stderr
        mid = json.loads(r.stdout)["id"]
    # both writes went to the --home store, none to CITEGRAPH_HOME's
    listed = json.loads(run(other, "list", "--json").stdout)["memories"]
    assert {m["topic"] for m in listed} == {"t-after", "t-before"}
    assert json.loads(run(tmp_path / "unused-env-home", "list", "--json").stdout)["memories"] == []
    # after a group's subcommand too, and CITEGRAPH_HOME is still honoured alone
    assert json.loads(run(tmp_path / "x", "workset", "list", "--json", "--home", str(other)).stdout) \
        == json.loads(run(other, "workset", "list", "--json").stdout)
    assert run(tmp_path / "x", "show", mid, "--home", str(other)).returncode == 0
    assert run(other, "show", mid).returncode == 0


def test_home_after_the_subcommand_wins_over_the_one_before(indexed, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    r = run(tmp_path / "env", "--home", str(a), "remember", "--repo", str(indexed.root), "--topic", "t",
            "--text", "x", "--home", str(b))
    assert r.returncode == 0, r.stderr
    assert len(json.loads(run(b, "list", "--json").stdout)["memories"]) == 1
    assert json.loads(run(a, "list", "--json").stdout)["memories"] == []


# --- several ids after one option --------------------------------------------------------------

def test_spread_args_rewrites_only_the_named_options():
    names = {"--memory"}
    assert spread_args(["--memory", "A", "B", "--project", "p"], names) == \
        ["--memory", "A", "--memory", "B", "--project", "p"]
    assert spread_args(["--memory=A", "B"], names) == ["--memory=A", "--memory", "B"]
    assert spread_args(["--memory", "A", "--", "B"], names) == ["--memory", "A", "--", "B"]
    assert spread_args(["--project", "A", "B"], names) == ["--project", "A", "B"]


def test_validate_memory_space_separated_equals_repeated(indexed, home):
    ids = [remember(home, indexed, t, "src/payments/retry.py") for t in ("a", "b", "c")]
    spread = run(home.root, "validate", "--repo", str(indexed.root), "--format", "json", "--memory", ids[0], ids[1])
    repeated = run(home.root, "validate", "--repo", str(indexed.root), "--format", "json",
                   "--memory", ids[0], "--memory", ids[1])
    assert spread.returncode == 0, spread.stderr
    got = [m["id"] for m in json.loads(spread.stdout)["memories"]]
    assert sorted(got) == sorted(ids[:2])
    assert json.loads(spread.stdout) == json.loads(repeated.stdout)


def test_remember_code_refs_space_separated(indexed, home):
    r = run(home.root, "remember", "--repo", str(indexed.root), "--topic", "t", "--text", "x", "--json",
            "--code-ref", "src/payments/retry.py::RetryPolicy.next_delay", "src/payments/retry.py#L1-L2")
    assert r.returncode == 0, r.stderr
    assert [c["kind"] for c in json.loads(r.stdout)["citations"]] == ["symbol", "span"]


# --- - for stdin ---------------------------------------------------------------------------------

def test_text_and_task_from_stdin(indexed, home):
    r = run(home.root, "remember", "--repo", str(indexed.root), "--topic", "piped", "--text", "-", "--json",
            stdin="Retries keep the key.\n")
    assert r.returncode == 0, r.stderr
    shown = json.loads(run(home.root, "show", json.loads(r.stdout)["id"], "--json").stdout)
    assert shown["text"] == "Retries keep the key."  # not "-", and echo's newline removed
    b = run(home.root, "brief", "--repo", str(indexed.root), "--task", "-", "--json", stdin="retries keep key\n")
    assert b.returncode == 0, b.stderr
    assert [m["topic"] for m in json.loads(b.stdout)["memories"]] == ["piped"]


def test_empty_stdin_is_an_input_error(indexed, home):
    r = run(home.root, "remember", "--repo", str(indexed.root), "--text", "-", stdin="")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "stdin is empty" in r.stderr
    with pytest.raises(CitegraphError):
        text_or_stdin("-", "--text", stream=_Stream(b"  \n"))
    assert text_or_stdin("-", "--text", stream=_Stream(b"a\r\n")) == "a"
    assert text_or_stdin("literal", "--text") == "literal"


class _Stream:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data


def test_import_legacy_from_stdin(home):
    rec = json.dumps([{"text": "Old rule.", "project": "p", "topic": "old"}])
    r = run(home.root, "import-legacy", "-", "--json", stdin=rec)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["imported"] == 1
    assert [m["topic"] for m in json.loads(run(home.root, "list", "--json").stdout)["memories"]] == ["old"]


# --- exit codes like grep / git ------------------------------------------------------------------

def test_search_without_a_match_exits_1(indexed, home):
    assert run(home.root, "find", "no_such_name", "--repo", str(indexed.root)).returncode == 1
    assert run(home.root, "find", "next_delay", "--repo", str(indexed.root)).returncode == 0
    indexed.write("src/empty.py", "# nothing\n")
    indexed.commit("c2")
    assert run(home.root, "index", str(indexed.root), "--no-service").returncode == 0
    assert run(home.root, "symbols", str(indexed.root / "src/empty.py")).returncode == 1
    assert run(home.root, "symbols", str(indexed.root / "src/payments/retry.py")).returncode == 0
    assert run(home.root, "cited", "src/empty.py", "--repo", str(indexed.root)).returncode == 1


def test_status_check_exits_nonzero_when_not_ready(indexed, home):
    ok = run(home.root, "status", str(indexed.root), "--check", "--no-service")
    assert ok.returncode == 0, ok.stderr
    indexed.write("src/payments/retry.py", CODE + "\n# edit\n")  # dirty, not indexed
    assert run(home.root, "status", str(indexed.root), "--no-service").returncode == 0  # no --check: 0
    nr = run(home.root, "status", str(indexed.root), "--check", "--no-service")
    assert nr.returncode == 1
    assert "none" in nr.stdout
    assert run(home.root, "status", str(indexed.root), "--check", "--json", "--no-service").returncode == 1


def test_workset_status_check(indexed, home):
    assert run(home.root, "workset", "create", "w", str(indexed.root)).returncode == 0
    indexed.write("src/payments/retry.py", CODE + "\n# edit\n")  # dirty, not indexed: not ready
    assert run(home.root, "workset", "status", "w").returncode == 0  # not ready, but no --check
    r = run(home.root, "workset", "status", "w", "--check")
    assert r.returncode == 1 and "not ready" in r.stdout
    assert run(home.root, "workset", "prepare", "w").returncode == 0
    assert run(home.root, "workset", "status", "w", "--check").returncode == 0


# --- brief --format -------------------------------------------------------------------------------

def test_brief_format_json_is_json(indexed, home):
    remember(home, indexed, "retry", "src/payments/retry.py")
    a = run(home.root, "brief", "--repo", str(indexed.root), "--task", "claim retry", "--format", "json")
    b = run(home.root, "brief", "--repo", str(indexed.root), "--task", "claim retry", "--json")
    t = run(home.root, "brief", "--repo", str(indexed.root), "--task", "claim retry", "--format", "text")
    assert a.returncode == b.returncode == t.returncode == 0, a.stderr
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert [m["id"] for m in ja["memories"]] == [m["id"] for m in jb["memories"]]
    with pytest.raises(ValueError):
        json.loads(t.stdout)
    assert run(home.root, "brief", "--task", "x", "--format", "yaml").returncode == 2


# --- colour ---------------------------------------------------------------------------------------

def test_color_choice_honours_no_color():
    assert color_choice({"NO_COLOR": "1"}) is False
    assert color_choice({"NO_COLOR": ""}) is None  # empty: not set (no-color.org)
    assert color_choice({}) is None


def _on_a_tty(home: Path, *args: str, env: dict | None = None) -> str:
    """Run the CLI with stdout and stderr on a pseudo-terminal; what it wrote."""
    master, slave = pty.openpty()
    full = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full.update({"CITEGRAPH_HOME": str(home), "TERM": "xterm"}, **(env or {}))
    p = subprocess.Popen([sys.executable, "-m", "citegraph.cli.main", *args], stdout=slave, stderr=slave,
                         stdin=subprocess.DEVNULL, env=full)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(60)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_on_a_terminal_plain_when_piped_or_no_color(indexed, home):
    remember(home, indexed, "retry", "src/payments/retry.py::RetryPolicy.next_delay")
    args = ("validate", "--repo", str(indexed.root), "--no-service")
    tty = _on_a_tty(home.root, *args)
    assert "\x1b[32m" in tty and "exact" in tty  # green outcome on a terminal
    assert "\x1b[" not in _on_a_tty(home.root, *args, env={"NO_COLOR": "1"})
    piped = run(home.root, *args)
    assert piped.returncode == 0 and "exact" in piped.stdout and "\x1b[" not in piped.stdout
    # errors too: red on a terminal, plain when piped
    assert "\x1b[" in _on_a_tty(home.root, "show", "cgm_0000000000000000")
    bad = run(home.root, "show", "cgm_0000000000000000")
    assert bad.returncode == 2 and "\x1b[" not in bad.stderr


def test_in_process_runner_sees_colour_only_when_asked(indexed, home):
    remember(home, indexed, "retry", "src/payments/retry.py")
    args = ["--home", str(home.root), "validate", "--repo", str(indexed.root), "--no-service"]
    plain = CliRunner().invoke(cli, args)
    coloured = CliRunner().invoke(cli, args, color=True)
    assert plain.exit_code == coloured.exit_code == 0, plain.output
    assert "\x1b[" not in plain.output and "\x1b[32m" in coloured.output
    assert "\x1b[" not in CliRunner().invoke(cli, args, color=True, env={"NO_COLOR": "1"}).output
