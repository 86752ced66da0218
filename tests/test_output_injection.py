"""Output injection (issue 20, item 6): file paths and memory text are untrusted data.

A real tracked file whose name holds escape sequences (set the terminal title, clear the
screen) and a backtick, and a memory whose text holds ``@octocat``, ESC, BEL and backspace:
``validate``, ``check`` (text and Markdown), ``find``, ``cited`` and ``report --format
markdown`` show them as data — piped and on a real terminal (a pty) — and the Markdown,
rendered by a CommonMark parser, holds the path whole in one code span and no mention.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from html import unescape

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from citegraph.memory.escape import ZWSP, md_code, md_text, terminal, visible

TIMEOUT = 120
EVIL = "evil\x1b]0;pwned\x07\x1b[2J\x1b]8;;mailto:x@example\x07ln\x1b]8;;\x07`tick`.py"
TEXT = "ask @octocat and @acme/team \x1b]0;title\x07 bell\x07 back\x08space <b>x</b> [l](http://x.example)"
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # our own colours, on a terminal only
MD = MarkdownIt("commonmark")


def no_raw_controls(out: str) -> None:
    assert not CONTROLS.search(SGR.sub("", out)), repr(out)


@pytest.fixture
def world(make_repo, run_cli):
    r = make_repo()
    r.write(EVIL, "def f():\n    return 1\n")
    r.write("ok.py", "def g():\n    return 2\n")
    base = r.commit("c1")
    assert EVIL in r.git("ls-files", "-z").split("\0")  # really tracked under that name
    assert run_cli("index", cwd=r.root, timeout=TIMEOUT).returncode == 0
    mem = run_cli("remember", "--text", TEXT, "--repo", str(r.root), "--code-ref", f"{EVIL}::f",
                  "--code-ref", "ok.py::g", "--json", timeout=TIMEOUT)
    assert mem.returncode == 0, mem.stderr
    r.git("checkout", "-q", "-b", "pr")
    r.write(EVIL, "def f():\n    return 3\n")
    r.commit("edit the evil file")
    assert run_cli("index", cwd=r.root, timeout=TIMEOUT).returncode == 0
    return r, base


COMMANDS = {
    "validate": ("validate",),
    "check": ("check", "--base", "main"),
    "find": ("find", "f"),
    "cited": ("cited", EVIL),
    "report-md": ("report", "--format", "markdown"),
    "check-md": ("check", "--base", "main", "--format", "markdown"),
}


def test_piped_output_shows_controls_as_data(world, run_cli):
    r, _ = world
    for name, args in COMMANDS.items():
        p = run_cli(*args, cwd=r.root, timeout=TIMEOUT)
        assert p.returncode in (0, 1), (name, p.stderr)
        out = p.stdout + p.stderr
        no_raw_controls(out)
        assert "Traceback" not in out
        assert "\\x1b]0;pwned\\x07" in out, (name, out)  # shown, not dropped: the reader sees the name


def test_markdown_renders_the_path_in_one_code_span_and_no_mention(world, run_cli):
    r, _ = world
    for args in (COMMANDS["check-md"], COMMANDS["report-md"]):
        p = run_cli(*args, cwd=r.root, timeout=TIMEOUT)
        html = MD.render(p.stdout)
        assert "@octocat" not in p.stdout and "@acme" not in p.stdout
        assert f"@{ZWSP}octocat" in p.stdout
        assert "<a " not in html and "<b>" not in html  # no link, no HTML from the data
        codes = re.findall(r"<code>(.*?)</code>", html, re.S)
        assert any(c.startswith(visible(EVIL)) for c in codes), codes  # the whole path, backticks included


def run_on_a_terminal(args: list[str], cwd, env: dict) -> str:
    """Run the CLI with stdout and stderr on a pseudo-terminal; what it wrote."""
    leader, follower = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=env,
                         stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif p.poll() is not None:
                break
    finally:
        os.close(leader)
        if p.poll() is None:
            p.kill()
        p.wait(TIMEOUT)
    return b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_only_our_colours_pass(world, home):
    r, _ = world
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    coloured = False
    for name in ("validate", "check", "find", "cited"):
        out = run_on_a_terminal(list(COMMANDS[name]), r.root, env)
        assert "\\x1b]0;pwned\\x07" in out, (name, out)
        coloured = coloured or bool(SGR.search(out))
        no_raw_controls(out.replace("\r\n", "\n"))
        assert "\x1b]" not in out and "\x07" not in out and "\x1b[2J" not in out
    assert coloured  # a terminal still gets colour: only the data is escaped


# --- the helpers, on generated text ----------------------------------------------------------


@given(st.text(min_size=1, max_size=60))
def test_md_code_is_one_literal_code_span(text):
    """Whatever the text (backtick runs, leading backticks, spaces, controls), the span
    renders as one code element holding exactly the visible text."""
    html = MD.renderInline(md_code(text))
    assert html.startswith("<code>") and html.endswith("</code>") and html.count("<code>") == 1, html
    assert unescape(html[len("<code>"):-len("</code>")]) == visible(text)


@given(st.text(max_size=80))
def test_md_text_is_inert(text):
    out = md_text(text)
    html = MD.renderInline(out)
    assert "<a " not in html and "<code>" not in html and "<em>" not in html and "<strong>" not in html
    assert not re.search(r"@(?!\u200b)", out)
    no_raw_controls(out)


@given(st.text())
def test_terminal_keeps_printable_text_and_shows_the_rest(text):
    out = terminal(text)
    no_raw_controls(out.replace("\n", "").replace("\t", ""))
    if text.isprintable():
        assert out == text
