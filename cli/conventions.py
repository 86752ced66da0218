"""One CLI convention (SPEC §19) in one place: ``--home`` accepted before or after the
subcommand, id options that take several space-separated values, ``-`` for stdin, and
colour on a terminal that honours ``NO_COLOR``, and every human line escaped for the
terminal (``echo``: control characters in paths and texts shown, never obeyed).

Why here and not in each command: every command gets the same behaviour by construction
(the lazy group applies ``accept_home_anywhere`` to each command it loads), so a new
command cannot forget it.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from typing import Any

import click

from citegraph.indexer.errors import CitegraphError
from citegraph.memory.escape import terminal

HOME_KEY = "citegraph.home"


# --- --home anywhere -----------------------------------------------------------------------

def _remember_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[HOME_KEY] = value  # ctx.meta is shared by the whole context chain


def home_option() -> click.Option:
    """The ``--home`` a subcommand accepts after its name (no envvar: CITEGRAPH_HOME is
    read once, by the group's own ``--home``, so an explicit ``--home`` before the
    subcommand is never overridden by the environment)."""
    return click.Option(["--home"], type=click.Path(file_okay=False), expose_value=False,
                        callback=_remember_home, is_eager=True,
                        help="Data home (also accepted before the command; default $CITEGRAPH_HOME or ~/.citegraph).")


def accept_home_anywhere(cmd: click.Command) -> click.Command:
    """Give ``cmd`` (and, for a group, each of its subcommands) a ``--home`` option."""
    if not any("--home" in p.opts for p in cmd.params if isinstance(p, click.Option)):
        cmd.params.append(home_option())
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            accept_home_anywhere(sub)
    return cmd


def home_root(ctx: click.Context) -> str | None:
    """The data home the user named: ``--home`` after the subcommand, else before it (or
    CITEGRAPH_HOME), else None (the default home)."""
    return ctx.meta.get(HOME_KEY) or ctx.find_root().params.get("home")


# --- several values after one option --------------------------------------------------------

class SpreadCommand(click.Command):
    """A command whose options marked ``spread`` take every following word up to the next
    option: ``--memory A B`` is ``--memory A --memory B`` (the README writes ``--memory
    ID…``). Only for commands without positional arguments, where nothing else could
    claim those words."""

    spread: tuple[str, ...] = ()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        names = {o for p in self.params if isinstance(p, click.Option) and getattr(p, "spread", False)
                 for o in p.opts}
        return super().parse_args(ctx, spread_args(args, names))


def spread_args(args: list[str], names: set[str]) -> list[str]:
    """Rewrite ``--opt A B`` into ``--opt A --opt B`` for the options in ``names`` (also
    after ``--opt=A``); a word starting with ``-`` (other than ``-`` itself) or ``--``
    ends the run."""
    out: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            out.extend(args[i:])
            break
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if name in names:
            out.append(word)
            i += 1
            if "=" not in word and i < len(args):  # the option's own value
                out.append(args[i])
                i += 1
            while i < len(args) and not (args[i].startswith("-") and args[i] != "-"):
                out.extend([name, args[i]])
                i += 1
            continue
        out.append(word)
        i += 1
    return out


def spread_option(*decls: str, **kwargs: Any) -> Any:
    """``click.option(..., multiple=True)`` that also takes several space-separated values."""
    def decorate(fn: Any) -> Any:
        fn = click.option(*decls, multiple=True, **kwargs)(fn)
        fn.__click_params__[-1].spread = True  # type: ignore[attr-defined]
        return fn
    return decorate


# --- "-" for stdin --------------------------------------------------------------------------

def text_or_stdin(value: str, what: str, stream: Any = None) -> str:
    """``value``, or when it is ``-`` the text on stdin (UTF-8; one trailing newline, as
    ``echo`` writes, removed). An empty stdin is an input error, never an empty claim."""
    if value != "-":
        return value
    stream = stream if stream is not None else sys.stdin
    raw = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise CitegraphError(f"{what} on stdin is not UTF-8 text", "pass UTF-8 text", code=2,
                             kind="usage") from None
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if not text.strip():
        raise CitegraphError(f"{what} -: stdin is empty", f"pipe the {what.lstrip('-')} in, or pass it as an argument",
                             code=2, kind="usage")
    return text


# --- colour -----------------------------------------------------------------------------------

ROLES = {
    "exact": "green", "fresh": "green", "ready": "green",
    "relocated": "yellow", "changed": "red", "deleted": "red", "stale": "red",
    "unknown": "magenta", "not ready": "magenta", "error": "red",
}


def color_choice(env: dict[str, str] | None = None) -> bool | None:
    """False when ``NO_COLOR`` is set (https://no-color.org: any non-empty value), else
    None: Click colours a terminal and strips the codes when the output is piped."""
    env = os.environ if env is None else env
    return False if env.get("NO_COLOR") else None


# A painted span is marked with a per-process random nonce, turned into colour codes only
# by ``echo``: every other character of a line (paths, refs, memory text — untrusted) goes
# through ``terminal`` first, so a control character from the data is shown, never obeyed,
# and data cannot forge a painted span (it does not know the nonce).
_NONCE = secrets.token_hex(8)
_OPEN, _MID, _CLOSE = f"\ue000{_NONCE}", "\ue001", f"\ue002{_NONCE}\ue003"
_PAINTED = re.compile(re.escape(_OPEN) + r"([a-z ]+)" + _MID + "(.*?)" + re.escape(_CLOSE), re.S)


def paint(text: str, role: str) -> str:
    """``text`` marked for ``role`` (an outcome, a freshness, ``error``…); ``echo`` styles it
    (or not: piped, NO_COLOR); unknown roles stay plain."""
    return f"{_OPEN}{role}{_MID}{text}{_CLOSE}" if role in ROLES else text


def render(line: str) -> str:
    """A line for the terminal: control characters shown visibly (``memory/escape.py``),
    painted spans styled."""
    out, pos = [], 0
    for m in _PAINTED.finditer(line):
        role = m.group(1)
        out.append(terminal(line[pos:m.start()]))
        out.append(click.style(terminal(m.group(2)), fg=ROLES[role], bold=role == "error"))
        pos = m.end()
    out.append(terminal(line[pos:]))
    return "".join(out)


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Human text out: every line escaped for the terminal (piped or not), coloured on a
    terminal, plain when piped or under NO_COLOR. JSON goes through ``emit_json`` instead."""
    click.echo(render(text), err=err, nl=nl, color=color_choice())


def say(line: str = "", *, err: bool = False) -> None:
    """One output line (``echo``)."""
    echo(line, err=err)
