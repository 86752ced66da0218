"""Where a partial parse may be wrong: the damage regions of a tree with error nodes.

A file is `partial` when its tree holds ERROR or MISSING nodes. Outside the bytes where
the parser could not build the tree, and outside the definitions whose extraction such a
node could have changed, the extracted facts are those of an error-free parse. This
module finds those bytes (SPEC §6.4 refinement); docs/coverage.md argues why the regions
are large enough, and tests/test_coverage_regions.py tries to break them.

Rules, per error node (a maximal ERROR node, or a MISSING node outside every ERROR):

1. **Structural errors spoil the whole file.** A MISSING hidden token (indentation, an
   automatic semicolon: it has no position), an ERROR whose bytes hold a quote or
   brackets that do not pair among themselves (or a bracket byte that is not a bracket
   token), an empty ERROR, an ERROR holding a MISSING node, or a MISSING bracket, quote,
   keyword-closer or hidden token can re-pair brackets or strings: it can close a
   definition early or open one that swallows the rest, so every later context is in
   doubt. The region is then the whole file (the plain byte search of §6.4 decides).
2. **Inside a definition delimited by braces**: the innermost extracted definition that
   contains the error and whose last part is a `{ … }` body with real braces, the error
   strictly inside it. Brackets are paired as in an error-free parse (rule 1), so the
   damage cannot leave that body; the region is the definition plus its previous and
   next sibling (a neighbour the parser may have grown into the error, or an unknown
   construct that begins just before it), and every bare `{ … }` statement after them
   (the body may be a stray balanced group, the real body following as a block).
3. **Otherwise** (top level, a header, or only undelimited definitions around it:
   Python, Ruby, `const f = () => …`): the top-level statement holding the error out to
   the nearest statement on each side that holds a definition, every adjacent top-level
   statement that does not start at column 0 (in real code top-level statements start at
   column 0; one that does not is the body of something the parser closed early, as
   tree-sitter-python does after a bad dedent) and then the block owner before them.
4. **Named construct**: a TypeScript variance annotation leaves an ERROR of identifiers
   in a well-formed `type_parameters` node after a name; the region is that node.
6. **Ambiguous TypeScript**: in a file with any error, every `<T>expr` type assertion's
   top-level statement (the grammar may have read a generic arrow function so).

A region touching a statement-form scope (C# `namespace X;`), or holding its keyword (one
the error may have swallowed), runs on to the end of the file.

Regions are merged and sorted. A cited name, fragment or body lying within or touching a
region makes the file unable to clear the citation (validator/decisions.py).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from tree_sitter import Node

from citegraph.indexer.tree_walk import descendants, leaves

# A file with more errors than this is damaged whole (refining it is not worth the time).
MAX_LOCAL_ERRORS = 2000
# Bytes that make an ERROR structural: brackets and string delimiters.
STRUCTURAL_BYTES = b"{}()[]\"'`"
# MISSING tokens that close or open structure (besides any with those bytes in their type).
STRUCTURAL_TOKENS = frozenset({"end", "fi", "done", "esac", "then", "do", "begin"})


@dataclass(frozen=True, slots=True)
class Damage:
    """One damage region and the error that caused it (the first one, if merged)."""

    start_byte: int
    end_byte: int
    error_byte: int
    error_line: int  # 1-based line of the error
    construct: str  # e.g. "ERROR in type_parameters", "MISSING \";\" in lexical_declaration"


def error_nodes(root: Node) -> list[Node]:
    """Maximal ERROR nodes and the MISSING nodes outside them, in source order (visible
    ones: a MISSING *hidden* token is in no node's children, see has_hidden_missing)."""
    out: list[Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.is_error or n.is_missing:
            out.append(n)
        elif n.has_error:
            stack.extend(reversed(n.children))
    return out


_HIDDEN_MISSING = re.compile(r'\(MISSING "?_')


def has_hidden_missing(root: Node) -> bool:
    """A MISSING hidden token (an external `_newline`, `_dedent`, automatic semicolon …)
    appears in no node's children and has no position; only the tree's S-expression shows
    it. It stands for indentation or statement structure the parser made up: structural."""
    return bool(_HIDDEN_MISSING.search(str(root)))


def _has_missing(node: Node) -> bool:
    stack = list(node.children)
    while stack:
        n = stack.pop()
        if n.is_missing:
            return True
        if n.has_error:
            stack.extend(n.children)
    return False


def is_structural(node: Node, data: bytes) -> bool:
    """Rule 1: can this error have re-paired brackets or strings? A MISSING bracket, quote,
    closing keyword or hidden token can; an ERROR can unless it holds no quote and its
    brackets pair among themselves, every bracket byte being a bracket token (none hidden
    in a comment or other token) — then no bracket outside it can pair with one inside."""
    if node.is_missing:
        t = node.type
        return (t.startswith("_") or t in STRUCTURAL_TOKENS or not t.strip()
                or any(ch in t for ch in STRUCTURAL_BYTES.decode()))
    seg = data[node.start_byte:node.end_byte]
    if not seg or _has_missing(node):
        return True
    if len(seg.translate(None, QUOTE_BYTES)) != len(seg):
        return True
    brackets = [chr(b) for b in seg if b in BRACKET_BYTES]
    if not brackets:
        return False
    return brackets != _bracket_tokens(node) or not _balanced(brackets)


QUOTE_BYTES = b"\"'`"
BRACKET_BYTES = b"{}()[]"
_PAIRS = {")": "(", "]": "[", "}": "{"}


def _bracket_tokens(node: Node) -> list[str]:
    """The bracket tokens among the leaves under ``node``, in order."""
    return [n.type for n in leaves(node) if n.type in ("(", ")", "[", "]", "{", "}")]


def _balanced(brackets: list[str]) -> bool:
    open_: list[str] = []
    for ch in brackets:
        if ch in "([{":
            open_.append(ch)
        elif not open_ or open_.pop() != _PAIRS[ch]:
            return False
    return not open_


def construct_of(node: Node) -> str:
    """The grammar's name for where an error sits (shown in coverage summaries)."""
    parent = node.parent
    where = parent.type if parent is not None else "file"
    if node.is_missing:
        return f'MISSING "{node.type}" in {where}'
    return f"ERROR in {where}"


def _body(node: Node) -> Node | None:
    """The `{ … }` body that ends a definition node (real braces), or None."""
    children = node.children
    i = len(children) - 1
    while i >= 0 and children[i].type == ";":
        i -= 1
    if i < 0:
        return None
    last = children[i]
    inner = last.children
    if (len(inner) >= 2 and inner[0].type == "{" and inner[-1].type == "}"
            and not inner[0].is_missing and not inner[-1].is_missing):
        return last
    return None


def _known_region(language: str, e: Node, data: bytes) -> tuple[int, int] | None:
    """A named construct whose damage is known to stay inside one delimited node: a
    TypeScript variance annotation (`<in T>`, `<out T>`, `<in out T>`) leaves an ERROR of
    identifiers inside a well-formed `type_parameters` node; nothing outside it changes."""
    p = e.parent
    if language not in ("typescript", "tsx") or p is None or p.type != "type_parameters" or not e.is_error:
        return None
    if p.parent is None or p.prev_sibling is None:
        return None  # type parameters that begin a node: that node's extent depends on them
    kids = p.children
    if not (kids and kids[0].type == "<" and kids[-1].type == ">" and not kids[-1].is_missing):
        return None
    seg = data[p.start_byte:p.end_byte]
    if not _VARIANCE.fullmatch(seg):
        return None
    return p.start_byte, p.end_byte


_VARIANCE = re.compile(rb"<\s*((in|out|in\s+out)\s+)?[A-Za-z_$][\w$]*(\s*,\s*((in|out|in\s+out)\s+)?[A-Za-z_$][\w$]*)*\s*>")


def _outermost_wrapper(node: Node) -> Node:
    """``node`` or the ancestors that wrap only it (``export`` …): where its siblings are."""
    cur = node
    while cur.parent is not None and cur.parent.parent is not None and all(
            c == cur or any(w in c.type for w in _ATTACHED) for c in cur.parent.named_children):
        cur = cur.parent
    return cur


_ATTACHED = ("decorator", "comment", "annotation", "attribute", "modifier")


def _root_child(root: Node, node: Node) -> Node:
    cur = node
    while cur.parent is not None and cur.parent != root:
        cur = cur.parent
    return cur


def _off_column_0(data: bytes, pos: int) -> bool:
    """True when the node at ``pos`` does not start a line at column 0: indented, or
    after something else on its line."""
    return pos > 0 and data[pos - 1:pos] != b"\n"


def _top_level_region(root: Node, node: Node, data: bytes, def_starts: list[int], tops: list[Node],
                      top_index: dict[tuple[int, int], int]) -> tuple[int, int]:
    """Rule 3: the top-level statement around ``node`` and its neighbours out to the
    nearest statement on each side that holds a definition (statements between may be
    definitions the error made the parser read as something else), the statements off
    column 0 next to them and, when there are such, the block owner before them."""
    top = node if node.parent == root else _root_child(root, node)
    if top == root:
        return 0, len(data)
    idx = top_index.get((top.start_byte, top.end_byte))
    if idx is None:
        return 0, len(data)

    def holds_def(c: Node) -> bool:
        i = bisect.bisect_left(def_starts, c.start_byte)
        return i < len(def_starts) and def_starts[i] < c.end_byte

    lo, hi = max(0, idx - 1), min(len(tops) - 1, idx + 1)
    while lo > 0 and not holds_def(tops[lo]):
        lo -= 1
    while hi + 1 < len(tops) and not holds_def(tops[hi]):
        hi += 1
    while lo > 0 and _off_column_0(data, tops[lo].start_byte):
        lo -= 1
    while hi + 1 < len(tops) and _off_column_0(data, tops[hi + 1].start_byte):
        hi += 1
    if any(_off_column_0(data, tops[i].start_byte) for i in range(lo, hi + 1)):
        # Indented statements at top level are the rest of a block the parser closed
        # early: reach back to (and include) a statement that can own a block.
        while lo > 0 and not _owns_block(tops[lo], data):
            lo -= 1
    start = min(tops[lo].start_byte, node.start_byte)
    end = max(tops[hi].end_byte, node.end_byte)
    return start, end


def _owns_block(node: Node, data: bytes) -> bool:
    """A multi-line statement (a definition, a compound statement) could have held the
    indented lines after it."""
    return not _off_column_0(data, node.start_byte) and node.start_point[0] != node.end_point[0]


def damage_regions(language: str, root: Node, data: bytes, defs: list[tuple[Node, Node]],
                   statement_scopes: list[Node] = (), scope_keyword: str | None = None) -> list[Damage]:
    """The damage regions of a tree that has errors (``root.has_error``).

    ``defs`` are the extracted definitions as (fragment node, name node), any order;
    ``statement_scopes`` the statement-form scopes among them (C# ``namespace X;``) and
    ``scope_keyword`` their keyword: a region that touches one, or holds the keyword (a
    scope the error may have swallowed), runs on to the end of the file, since the
    qualified name of everything after such a statement depends on it."""
    errors = error_nodes(root)
    if not errors:
        return [Damage(0, len(data), 0, 1, "MISSING hidden token")]
    first = errors[0]
    if (len(errors) > MAX_LOCAL_ERRORS or has_hidden_missing(root)
            or any(is_structural(e, data) for e in errors)):
        return [Damage(0, len(data), first.start_byte, first.start_point[0] + 1, construct_of(first))]
    ordered = sorted((d[0] for d in defs), key=lambda n: (n.start_byte, -n.end_byte))
    def_starts = [n.start_byte for n in ordered]
    tops = root.children
    top_index = {(c.start_byte, c.end_byte): i for i, c in enumerate(tops)}
    raw: list[Damage] = []
    for e in errors:
        es, ee = e.start_byte, e.end_byte
        region = _known_region(language, e, data)
        # innermost first: the latest-starting definition whose braces body holds the error
        last = bisect.bisect_right(def_starts, es)
        for node in () if region else (ordered[i] for i in range(last - 1, -1, -1)):
            if not (node.start_byte <= es and ee <= node.end_byte):
                continue
            body = _body(node)
            if body is None or not (body.start_byte < es and ee < body.end_byte):
                continue  # undelimited, or the error is in its header: look further out
            outer = _outermost_wrapper(node)
            lo = outer.prev_named_sibling or outer
            hi = outer.next_named_sibling or outer
            # A bare `{ … }` right after it may be its real body, the braces it got being a
            # balanced stray group (`impl Store { a } { fn load … }`): include every such.
            while hi.next_named_sibling is not None and data[hi.next_named_sibling.start_byte:][:1] == b"{":
                hi = hi.next_named_sibling
            region = (min(lo.start_byte, outer.start_byte), max(hi.end_byte, outer.end_byte))
            break
        if region is None:
            region = _top_level_region(root, e, data, def_starts, tops, top_index)
        if scope_keyword and _may_rescope(region, data, statement_scopes, scope_keyword):
            region = (region[0], len(data))
        raw.append(Damage(region[0], region[1], es, e.start_point[0] + 1, construct_of(e)))
    if language in AMBIGUOUS_ASSERTION_LANGUAGES:
        raw += _ambiguous_assertions(root)
    return merge(raw)


AMBIGUOUS_ASSERTION_LANGUAGES = ("typescript", "tsx")
ASSERTION_CONSTRUCT = "type assertion (may be a generic arrow function misread after an error)"


def _ambiguous_assertions(root: Node) -> list[Damage]:
    """Rule 6: with an error anywhere in a TypeScript file, the grammar can read a later
    generic arrow function (``const f = <A>(x: A) => …``) as a ``<A>(x)`` type assertion,
    outside every other region — the declaration is then a ``constant``, not a
    ``function``. Each type assertion's top-level statement is a region (docs/coverage.md,
    "A counter-example found")."""
    out = []
    for n in descendants(root):
        if n.type == "type_assertion":
            top = _root_child(root, n)
            out.append(Damage(top.start_byte, top.end_byte, n.start_byte, n.start_point[0] + 1, ASSERTION_CONSTRUCT))
    return out


def _may_rescope(region: tuple[int, int], data: bytes, scopes: list[Node], keyword: str) -> bool:
    start, end = region
    if any(s.start_byte <= end and s.end_byte >= start for s in scopes):
        return True
    return data.find(keyword.encode(), start, end) >= 0


def merge(regions: list[Damage]) -> list[Damage]:
    """Overlapping or touching regions become one (keeping the first error's details)."""
    out: list[Damage] = []
    for d in sorted(regions, key=lambda d: (d.start_byte, d.end_byte)):
        if out and d.start_byte <= out[-1].end_byte:
            last = out[-1]
            if d.end_byte > last.end_byte:
                out[-1] = Damage(last.start_byte, d.end_byte, last.error_byte, last.error_line, last.construct)
        else:
            out.append(d)
    return out


# Constructs a bundled grammar is known not to parse, recognised on the first error's line
# (docs/languages.md lists them): (languages, pattern, name).
KNOWN_CONSTRUCTS: tuple[tuple[frozenset[str], re.Pattern[bytes], str], ...] = (
    (frozenset({"typescript", "tsx"}), re.compile(rb"[<,]\s*(in|out)\s+(out\s+)?[A-Za-z_$][\w$]*\s*[,>=]"),
     "variance annotation (TS 4.7 in/out type parameter)"),
    (frozenset({"typescript", "tsx"}), re.compile(rb"^\s*<[^>]*>\s*\("),
     "generic call signature starting a line after a function type (object type member without ; or ,)"),
    (frozenset({"python"}), re.compile(rb"^\s*(def|class|type)\b[^\[]*\[[^\]]*\w\s*=[^=]"),
     "type parameter default (PEP 696, Python 3.13)"),
    (frozenset({"rust"}), re.compile(rb"\bunsafe\s+extern\b"), "unsafe extern block (Rust 1.82)"),
)


def named_construct(language: str, data: bytes, first: Damage) -> str:
    """The reason a partial file records: a known construct's name (recognised on the first
    error's line or the next), else where the first error sits in the grammar's terms."""
    start = data.rfind(b"\n", 0, first.error_byte) + 1
    lines = data[start:].split(b"\n", 2)[:2]  # the error's line and the next one
    for langs, pattern, name in KNOWN_CONSTRUCTS:
        if language in langs and any(pattern.search(line) for line in lines):
            return f"{name}: {first.construct}"
    return first.construct
