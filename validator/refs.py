"""Citation ref syntax (SPEC §2): file, ``path#L10-L24`` span, ``path::Qualified.name``,
``cgs_…`` and ``cgr_…`` symbol handles. Parsing is pure; resolution happens in capture."""

from __future__ import annotations

import re
from dataclasses import dataclass

from citegraph.graph.handles import CGR_RE, CGS_RE
from citegraph.indexer.errors import CitegraphError

SPAN_RE = re.compile(r"^(?P<path>.+)#L(?P<start>\d+)(?:-L?(?P<end>\d+))?$")
MAX_CITATIONS = 8


@dataclass(frozen=True)
class ParsedRef:
    ref: str
    kind: str  # file | span | symbol
    path: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    qualified_name: str | None = None
    handle: str | None = None  # cgs_ handle
    repository_prefix: str | None = None  # from a cgr_ handle


def bad_ref(ref: str, why: str, todo: str = "use a repository-relative path, path#L10-L24, "
            "path::Qualified.name, cgs_… or cgr_…") -> CitegraphError:
    return CitegraphError(f"invalid code ref {ref!r}: {why}", todo, code=2, kind="invalid-ref")


def check_path(ref: str, path: str) -> str:
    """Repository-relative only: no absolute paths, backslashes, empty/./.. segments."""
    if not path:
        raise bad_ref(ref, "empty path")
    if "\\" in path:
        raise bad_ref(ref, "backslashes are not allowed; use / separators")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise bad_ref(ref, "absolute paths are not allowed")
    if "\0" in path:
        raise bad_ref(ref, "NUL in path")
    for seg in path.split("/"):
        if seg in ("", ".", ".."):
            raise bad_ref(ref, "empty, '.' or '..' path segments are not allowed")
    return path


def parse_ref(ref: str) -> ParsedRef:
    text = ref.strip()
    if not text:
        raise bad_ref(ref, "empty ref")
    if text.startswith("cgs_"):
        if not CGS_RE.match(text):
            raise bad_ref(ref, "a cgs_ handle is cgs_ followed by 32 lowercase hex digits")
        return ParsedRef(text, "symbol", handle=text)
    if text.startswith("cgr_"):
        m = CGR_RE.match(text)
        if not m:
            raise bad_ref(ref, "a cgr_ handle is cgr_<16 hex>_<32 hex>")
        return ParsedRef(text, "symbol", handle="cgs_" + m.group(2), repository_prefix=m.group(1))
    if "::" in text:
        path, _, qname = text.partition("::")
        if not qname or any(not part for part in qname.split(".")):
            raise bad_ref(ref, "symbol name after :: is empty or malformed")
        return ParsedRef(text, "symbol", path=check_path(ref, path), qualified_name=qname)
    m = SPAN_RE.match(text)
    if m:
        start = int(m.group("start"))
        end = int(m.group("end") or start)
        if start < 1 or end < start:
            raise bad_ref(ref, "line range must be 1-based with start ≤ end")
        return ParsedRef(text, "span", path=check_path(ref, m.group("path")), start_line=start, end_line=end)
    if "#" in text:
        raise bad_ref(ref, "a span is path#L<start>-L<end>")
    return ParsedRef(text, "file", path=check_path(ref, text))


def parse_refs(refs: list[str]) -> list[ParsedRef]:
    """Parse, de-duplicate (keeping order), and enforce the citation bound."""
    seen: dict[str, ParsedRef] = {}
    for r in refs:
        p = parse_ref(r)
        seen.setdefault(p.ref, p)
    if len(seen) > MAX_CITATIONS:
        raise CitegraphError(f"{len(seen)} code refs given; at most {MAX_CITATIONS} citations per memory",
                             "cite fewer, more specific places", code=2, kind="too-many-refs")
    return list(seen.values())
