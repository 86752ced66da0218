"""Escaping at the edge, one helper per output format (issue 20, item 6).

File paths, refs and memory text are untrusted: a tracked file may be named
``x\\x1b]0;pwned\\x07.py`` (an escape sequence that sets the terminal title), a path may
hold a backtick, a memory may say ``@octocat``. Each format shows them as data:

- ``visible`` — every character that is not printable (C0/C1 controls, DEL, ESC, BEL,
  backspace, bidirectional overrides, …) as a Python-style escape (``\\x1b``, ``\\u202e``),
  so nothing reaches a terminal or a renderer as a control.
- terminal: ``visible`` (the CLI's ``echo``/``say`` apply it to every line, piped or not).
- Markdown: ``md_text`` (inert prose: controls visible, HTML and punctuation escaped,
  ``@mentions`` neutralised with a zero-width space) and ``md_code`` (a code span whose
  fence is longer than any run of backticks inside, so a path cannot close it).
- JSON and SARIF need nothing here: the encoder escapes controls.
"""

from __future__ import annotations

import html
import re

ZWSP = "\u200b"  # after "@": GitHub no longer sees a mention, the reader still reads "@name"
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")
_BACKTICKS = re.compile(r"`+")


def _escape_char(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else (f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")


def visible(text: str, keep: str = "") -> str:
    """``text`` with every non-printable character (other than those in ``keep``) shown
    as an escape: nothing in it can act on a terminal or a renderer."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else _escape_char(c) for c in text)


def terminal(text: str) -> str:
    """Text for a terminal: lines and tabs kept, every other control shown visibly."""
    return visible(text, keep="\n\t")


def no_mentions(text: str) -> str:
    """``@name`` as text that GitHub does not turn into a mention (nor a team ping)."""
    return text.replace("@", "@" + ZWSP)


def md_text(text: str) -> str:
    """Untrusted text as inert Markdown prose: one line, controls visible, HTML-escaped,
    Markdown punctuation escaped, mentions neutralised."""
    one = visible(" ".join(text.split()))
    return no_mentions(_MD_SPECIAL.sub(r"\\\1", html.escape(one, quote=False)))


def md_code(text: str) -> str:
    """Untrusted text as a Markdown code span (literal: no HTML, links or mentions inside):
    one line, controls visible, fenced by one backtick more than the longest run inside."""
    body = visible(text)
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(body)), default=0) + 1)
    if body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ") and body.strip()):
        body = f" {body} "  # CommonMark strips one space each side, so a fence never merges with content
    return f"{fence}{body}{fence}"
