"""Citation ref syntax (SPEC §2): file, ``path#L10-L24`` span, ``path::Qualified.name``
(optionally ``path::Qualified.name[N]``: the definition of that name with ordinal N, SPEC
§18), ``cgs_…`` and ``cgr_…`` symbol handles. Parsing is pure; resolution happens in
capture."""

from __future__ import annotations

import re
from dataclasses import dataclass

from citegraph.graph.handles import CGR_RE, CGS_RE
from citegraph.indexer.errors import CitegraphError

# ASCII digits only: Python's \d would accept Arabic-Indic and other digits ("#L١-L٢").
SPAN_RE = re.compile(r"^(?P<path>.+)#L(?P<start>[0-9]+)(?:-L?(?P<end>[0-9]+))?$")
ORDINAL_RE = re.compile(r"^(?P<name>.*)\[(?P<ordinal>[0-9]{1,6})\]$")
MAX_CITATIONS = 8
MAX_LINE = 10_000_000  # no source file has more lines; larger numbers are input errors
MAX_REF_CHARS = 4096 + 2 + 1024  # a path of PATH_MAX, "::" and a qualified name (memory/exchange/receipt_checks.py)


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
    ordinal: int | None = None  # path::Name[N]: the definition with ordinal N


def bad_ref(ref: str, why: str, todo: str = "use a repository-relative path, path#L10-L24, "
            "path::Qualified.name, cgs_… or cgr_…") -> CitegraphError:
    return CitegraphError(f"invalid code ref {ref!r}: {why}", todo, code=2, kind="invalid-ref")


def check_path(ref: str, path: str) -> str:
    """Repository-relative only: no absolute paths, backslashes, empty/./.. segments."""
    if not path:
        raise bad_ref(ref, "empty path")
    if re.search(r"\\x[0-9a-f]{2}", path):
        raise bad_ref(ref, "this names a file whose name is not UTF-8 (shown escaped); such a file is "
                      "inventoried but cannot be cited exactly", "rename the file to a UTF-8 name to cite it")
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
    """Parse one ref exactly as given: nothing is stripped or guessed."""
    if not isinstance(ref, str):
        raise bad_ref(repr(ref), "a ref is a string")
    if not ref.strip():
        raise bad_ref(ref, "empty ref" if not ref else "empty ref (only whitespace)")
    if len(ref) > MAX_REF_CHARS:
        raise bad_ref(ref[:60] + "…", f"longer than {MAX_REF_CHARS} characters")
    if ref != ref.strip():
        raise bad_ref(ref, "leading or trailing whitespace (refs are taken exactly as written)",
                      "remove the spaces around the ref")
    if any(ch in ref for ch in "\r\n\t\0") or not _utf8(ref):
        raise bad_ref(ref.encode("utf-8", "backslashreplace").decode(), "control characters, NUL or bytes "
                      "that are not UTF-8", "pass the ref as plain UTF-8 text")
    text = ref
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
        ordinal = None
        om = ORDINAL_RE.match(qname)
        if om:
            qname, ordinal = om.group("name"), int(om.group("ordinal"))
            if ordinal < 1:
                raise bad_ref(ref, "an ordinal is 1-based: path::Name[1] is the first of several "
                              "definitions of that name")
        if not qname or any(not part for part in qname.split(".")):
            raise bad_ref(ref, "symbol name after :: is empty or malformed")
        return ParsedRef(text, "symbol", path=check_path(ref, path), qualified_name=qname, ordinal=ordinal)
    m = SPAN_RE.match(text)
    if m:
        if len(m.group("start")) > 9 or len(m.group("end") or "") > 9:
            raise bad_ref(ref, f"line numbers above {MAX_LINE}", "cite lines inside the file")
        start = int(m.group("start"))
        end = int(m.group("end") or start)
        if start < 1 or end < start:
            raise bad_ref(ref, "line range must be 1-based with start ≤ end")
        if end > MAX_LINE:
            raise bad_ref(ref, f"line numbers above {MAX_LINE}", "cite lines inside the file")
        return ParsedRef(text, "span", path=check_path(ref, m.group("path")), start_line=start, end_line=end)
    if "#" in text:
        raise bad_ref(ref, "a span is path#L<start>-L<end> (ASCII digits)")
    return ParsedRef(text, "file", path=check_path(ref, text))


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def evidence_key(p: ParsedRef) -> tuple:
    """Refs with the same key name the same evidence before resolution (``a.py#L2`` and
    ``a.py#L2-L2``); symbol locators and handles are compared after resolution."""
    if p.kind == "span":
        return ("span", p.path, p.start_line, p.end_line)
    if p.kind == "file":
        return ("file", p.path)
    if p.handle:
        return ("symbol", p.handle)
    return ("locator", p.path, p.qualified_name, p.ordinal)


def parse_refs(refs: list[str], notes: list[str] | None = None) -> list[ParsedRef]:
    """Parse, collapse refs of the same evidence (keeping the first spelling, in order;
    each collapse is told in ``notes``), and enforce the citation bound."""
    seen: dict[tuple, ParsedRef] = {}
    for r in refs:
        p = parse_ref(r)
        first = seen.setdefault(evidence_key(p), p)
        if first is not p and notes is not None:
            notes.append(same_evidence_note(p.ref, first.ref))
    if len(seen) > MAX_CITATIONS:
        raise CitegraphError(f"{len(seen)} code refs given; at most {MAX_CITATIONS} citations per memory",
                             "cite fewer, more specific places", code=2, kind="too-many-refs")
    return list(seen.values())


def same_evidence_note(ref: str, kept: str) -> str:
    if ref == kept:
        return f"ref {ref!r} was given twice; stored once"
    return f"ref {ref!r} names the same evidence as {kept!r}; stored once"
