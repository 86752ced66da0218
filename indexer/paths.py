"""Repository paths as citegraph stores them: git paths are bytes, DuckDB needs UTF-8.

pygit2 and ``os`` hand paths around as *filesystem strings* (bytes that are not UTF-8
appear as lone surrogates U+DC80–U+DCFF, Python's ``surrogateescape``). A stored path is
the same text where that is valid UTF-8 without a backslash — every ordinary path is
unchanged — and otherwise a reversible escape:

- a backslash is written ``\\\\`` (two backslashes);
- a byte that is not part of valid UTF-8 is written ``\\xNN`` (two lowercase hex digits).

``fs_path(stored_path(p)) == p`` for every filesystem string decoded from bytes, and two
different paths never share a stored form. A stored path with an escape is an *undecodable* path: it is
inventoried (blob id, content hash) with status ``skipped/undecodable-path`` and cannot
be cited, because no valid UTF-8 ref names it exactly (docs/security.md).
"""

from __future__ import annotations

import re

_ESCAPE_RE = re.compile(r"\\(\\|x[0-9a-f]{2})")


def stored_path(fs: str) -> str:
    """The stored (UTF-8, escaped) form of a filesystem string."""
    if fs.isascii() and "\\" not in fs:
        return fs
    out = []
    for ch in fs:
        if ch == "\\":
            out.append("\\\\")
        elif "\udc80" <= ch <= "\udcff":
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif "\ud800" <= ch <= "\udfff":
            # Not produced by surrogateescape decoding; escape its UTF-8-ish bytes so the
            # stored form stays valid UTF-8 (and distinct).
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "".join(out)


def fs_path(stored: str) -> str:
    """The filesystem string (for git and ``os``) of a stored path."""
    if "\\" not in stored:
        return stored

    def unescape(m: re.Match[str]) -> str:
        token = m.group(1)
        if token == "\\":
            return "\\"
        return chr(0xDC00 + int(token[1:], 16))

    return _ESCAPE_RE.sub(unescape, stored)


def is_undecodable(stored: str) -> bool:
    """True when the stored path holds bytes that are not UTF-8 (an ``\\xNN`` escape)."""
    return "\\x" in stored and bool(re.search(r"(?<!\\)(?:\\\\)*\\x[0-9a-f]{2}", stored))
