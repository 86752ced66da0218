"""Line spans over raw bytes: exact bytes, no normalisation (CRLF stays CRLF)."""

from __future__ import annotations

import difflib
import functools

import blake3


@functools.lru_cache(maxsize=256)
def line_starts(data: bytes) -> list[int]:
    """Offsets of the lines of ``data`` (cached per content: validation reads the same
    changed files for many citations). The list is shared: callers never modify it."""
    starts = [0]
    i = data.find(b"\n")
    while i != -1:
        starts.append(i + 1)
        i = data.find(b"\n", i + 1)
    if starts[-1] == len(data) and len(starts) > 1:
        starts.pop()  # a final newline does not open another line
    return starts


def line_count(data: bytes) -> int:
    return 0 if not data else len(line_starts(data))


def _line_end(data: bytes, starts: list[int], idx: int) -> int:
    """End (exclusive, without the newline) of 0-based line ``idx``."""
    nxt = starts[idx + 1] - 1 if idx + 1 < len(starts) else len(data)
    if idx + 1 >= len(starts) and data.endswith(b"\n"):
        nxt = len(data) - 1
    return nxt


def span_bytes(data: bytes, start: int, end: int, starts: list[int] | None = None) -> bytes:
    """Bytes of 1-based lines start..end inclusive, without the last line's newline."""
    a, b = span_range(data, start, end, starts)
    return data[a:b]


def span_range(data: bytes, start: int, end: int, starts: list[int] | None = None) -> tuple[int, int]:
    """The byte range ``span_bytes`` returns, as (start, end) offsets."""
    starts = starts if starts is not None else line_starts(data)
    return starts[start - 1], _line_end(data, starts, end - 1)


MAX_MAP_LINES = 50_000  # beyond this, a span is not mapped (difflib is quadratic at worst)


def map_span(old: bytes, new: bytes, start: int, end: int) -> tuple[int, int] | None:
    """Where 1-based lines start..end of ``old`` are in ``new``, by a line diff (difflib,
    no junk heuristic): an unchanged end line maps to itself; a first line inside a changed
    hunk maps to the hunk's first new line, a last line to its last (the region can only
    grow). None when nothing is left or the files are too large. It only picks the
    counterpart of a changed span; whether that is the same code is decided by exact token
    equality (a region grown over other code has other tokens)."""
    a, b = old.split(b"\n"), new.split(b"\n")
    if max(len(a), len(b)) > MAX_MAP_LINES or not 1 <= start <= end <= len(a):
        return None
    first = last = None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if i1 <= start - 1 < i2:
            first = j1 + (start - 1 - i1) if tag == "equal" else j1
        if i1 <= end - 1 < i2:
            last = j1 + (end - 1 - i1) if tag == "equal" else j2 - 1
    if first is None or last is None or not 0 <= first <= last < len(b):
        return None
    return first + 1, last + 1


def hash_bytes(b: bytes) -> str:
    return blake3.blake3(b).hexdigest(16)


@functools.lru_cache(maxsize=256)
def _line_index(data: bytes) -> tuple[list[int], dict[str, list[int]]]:
    """Line starts and {first-line hash: 0-based line indexes} of one file's bytes, computed
    once per content (validation searches many spans in the same changed file). Line ``i``
    is ``data.split(b"\\n")[i]`` — exactly ``span_bytes(data, i + 1, i + 1)``."""
    starts = line_starts(data)
    lines = data.split(b"\n")
    del lines[len(starts):]  # a final newline opens no line
    # Equal lines first (a dict of bytes), then one digest per distinct line: source files
    # repeat blank lines, braces and imports, and the digest is the cost (2.1x on ruff's
    # rule files; the 100-commit check hashed 715k lines).
    at: dict[bytes, list[int]] = {}
    for i, line in enumerate(lines):
        seen = at.get(line)
        if seen is None:
            at[line] = [i]
        else:
            seen.append(i)
    new = blake3.blake3
    return starts, {new(line).hexdigest(16): where for line, where in at.items()}


def find_span(data: bytes, first_line_hash: str, span_hash: str, n: int) -> list[int]:
    """1-based start lines where the cited span's exact bytes occur."""
    if not data:
        return []
    starts, index = _line_index(data)
    hits = []
    for i in index.get(first_line_hash, ()):
        if i + n <= len(starts) and hash_bytes(span_bytes(data, i + 1, i + n, starts)) == span_hash:
            hits.append(i + 1)
    return hits


def clear_caches() -> None:
    """Drop the per-content caches (the pipeline calls this after each run, so that a
    long-running process keeps no file contents between validations)."""
    line_starts.cache_clear()
    _line_index.cache_clear()
