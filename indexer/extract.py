"""Symbol and edge extraction from one blob's bytes.

Facts here are path-independent (they depend only on the bytes, the language and the
extractor version), so they can be cached by blob id and reused for every path and every
snapshot holding the same blob. Handles, which include the path, are added by the graph
layer.

Query conventions (``queries/<language>.scm``):
- ``@definition.<kind>`` marks a definition node, ``@name`` its name token.
- ``@qualifier`` (optional, inside a definition match) replaces the nesting prefix of the
  qualified name, e.g. a Go method's receiver type; where the language says so
  (``qualifier_nests``) it nests under the enclosing prefix instead, and a qualifier node
  that holds the name stands for the written scope before it (C++ ``ns::Foo<T>::bar`` ->
  ``ns.Foo``).
- ``@definition.<kind>.rest`` marks a statement-form scope (C# ``namespace X;``): a symbol
  whose own fragment is the statement, and which qualifies every definition after it up
  to the end of its parent (or up to the next such statement, unless they chain).
- ``@scope`` with ``@name`` marks a naming scope that is not itself a symbol (a Rust
  ``impl Foo`` block): nested definitions are qualified by it.
- ``@reference.<call|import|inherit>`` with ``@name`` marks an outgoing reference.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from functools import cache

import blake3
from tree_sitter import Language, Node, Parser, Query, QueryCursor
from tree_sitter_language_pack import get_language

from citegraph.indexer.damage import Damage, damage_regions, named_construct
from citegraph.indexer.languages import LANGUAGES, query_source
from citegraph.indexer.preparse import (
    VARIANCE_LANGUAGES,
    blank_variance,
    call_signature_spots,
    repaired,
    separate,
    separated,
)

# Bump whenever extraction output for the same bytes can change (queries, rules, damage
# regions, partial reasons).
EXTRACTOR_VERSION = "cgx-6"

EDGE_KINDS = {"call": "calls", "import": "imports", "inherit": "inherits", "reference": "references"}


@dataclass(frozen=True, slots=True)
class SymbolFact:
    kind: str
    name: str
    qualified_name: str
    ordinal: int
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    parent: int  # index into the file's symbol list, -1 for top level
    fragment_hash: str
    body_hash: str


@dataclass(frozen=True, slots=True)
class EdgeFact:
    source: int  # index of the enclosing symbol, -1 for the file itself
    kind: str  # imports | calls | inherits | references
    target: str  # the referenced name as written
    line: int


@dataclass(slots=True)
class FileFacts:
    status: str  # indexed | partial | skipped
    # skipped: why (binary, too-large, …); partial: the construct of the first error
    reason: str | None = None
    symbols: list[SymbolFact] = field(default_factory=list)
    edges: list[EdgeFact] = field(default_factory=list)
    # partial: where the parse may be wrong (SPEC §6.4 refinement), merged and sorted
    damage: list[Damage] = field(default_factory=list)


class ParseTimeout(Exception):
    """The parse of one file exceeded its time bound."""


def blake3_hex(data: bytes, length: int = 16) -> str:
    return blake3.blake3(data).hexdigest(length)


@cache
def grammar(language: str) -> Language:
    """The tree-sitter grammar of ``language``: its grammar wheel where the registry names
    one, else the grammar bundled in tree-sitter-language-pack (both compiled, offline)."""
    spec = LANGUAGES[language]
    if spec.wheel:
        module, function = spec.wheel.split(":")
        return Language(getattr(importlib.import_module(module), function)())
    return get_language(spec.grammar)  # type: ignore[arg-type]


@cache
def _parser(language: str) -> Parser:
    return Parser(grammar(language))


@cache
def compiled_query(language: str) -> Query:
    return Query(grammar(language), query_source(language))


def parse(language: str, data: bytes, timeout_s: float):
    """Parse ``data``; raise ParseTimeout when the time bound is exceeded."""
    parser = _parser(language)
    if len(data) <= 65536:  # small files cannot blow the bound in any realistic way
        return parser.parse(data)
    deadline = time.perf_counter() + timeout_s
    expired = False
    chunk = 65536

    def read(offset: int, _point) -> bytes:
        nonlocal expired
        if time.perf_counter() > deadline:
            expired = True
            raise ParseTimeout()
        return data[offset : offset + chunk]

    try:
        tree = parser.parse(read)
    except Exception as exc:  # tree-sitter wraps callback errors in SystemError
        parser.reset()
        if expired:
            raise ParseTimeout() from exc
        raise
    if expired or tree is None:
        raise ParseTimeout()
    return tree


# Re-parse rounds at most per file (each repairs what the previous tree shows).
MAX_REPAIR_ROUNDS = 16


def parse_source(language: str, data: bytes, timeout_s: float, repair: bool = True):
    """The tree of ``data`` and the text it was parsed from: ``data`` itself, or ``data``
    repaired byte for byte where the TypeScript grammar fails on valid code
    (indexer/preparse.py: variance modifiers blanked, implied member separators written).
    Offsets and lines are the same in both; read names and fragments from ``data``.
    ``repair=False`` gives the grammar's own tree (bench/repair_check.py compares them)."""
    tree = parse(language, data, timeout_s)
    text = data
    if not repair:
        return tree, text
    for _ in range(MAX_REPAIR_ROUNDS):  # a repair can uncover the next (error recovery hid it)
        before = text
        blanking = blank_variance(language, tree.root_node, text)
        if blanking is not None:
            again = parse(language, blanking.text, timeout_s)
            if repaired(again.root_node, blanking):
                tree, text = again, blanking.text
        if language in VARIANCE_LANGUAGES and tree.root_node.has_error:
            tree, text = _separate_members(language, tree, text, timeout_s)
        if text == before or not tree.root_node.has_error:
            break
    return tree, text


def _separate_members(language: str, tree, text: bytes, timeout_s: float):
    """``text`` with the member separators TypeScript implies written where a re-parse
    confirms every one (first all candidates, then those the first re-parse confirmed)."""
    spots = call_signature_spots(tree.root_node, text)
    for _ in range(2):
        if not spots:
            break
        again = parse(language, separate(text, spots), timeout_s)
        good = separated(again.root_node, spots)
        if good == spots:
            return again, separate(text, spots)
        spots = good
    return tree, text


def _line_span(node: Node) -> tuple[int, int]:
    start = node.start_point[0] + 1
    end_row, end_col = node.end_point
    end = end_row if (end_col == 0 and end_row > node.start_point[0]) else end_row + 1
    return start, end


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


@dataclass(slots=True)
class _Def:
    node: Node  # the fragment node (wrapper included)
    kind: str
    name_node: Node
    qualifier: str | None
    is_scope: bool
    scope_end: int = -1  # where the names it qualifies end (a statement-form scope: later)


def _written_scope(text: str) -> str:
    """``ns::Foo<T>::`` -> ``ns.Foo``: template arguments dropped, ``::`` as ``.``."""
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return ".".join(p.strip() for p in "".join(out).split("::") if p.strip())


def extract(language: str, data: bytes, timeout_s: float = 5.0, repair: bool = True) -> FileFacts:
    """Extract symbols and edges from one file's bytes (pure apart from the clock)."""
    spec = LANGUAGES[language]
    try:
        tree, text = parse_source(language, data, timeout_s, repair)
    except ParseTimeout:
        return FileFacts(status="skipped", reason="parse-timeout")
    root = tree.root_node
    status = "partial" if root.has_error else "indexed"

    defs: dict[tuple[int, int], _Def] = {}
    def_pattern: dict[tuple[int, int], int] = {}
    refs: list[tuple[str, Node, Node]] = []
    for pattern, caps in QueryCursor(compiled_query(language)).matches(root):
        name_nodes = caps.get("name")
        if not name_nodes:
            continue
        name_node = name_nodes[0]
        for cap, nodes in caps.items():
            if cap.startswith("definition.") or cap == "scope":
                node = nodes[0]
                parent = node.parent
                if parent is not None and parent.type in spec.wrappers:
                    node = parent
                key = (node.start_byte, node.end_byte)
                if key in defs and def_pattern[key] <= pattern:
                    break  # two patterns capture one node: the earlier pattern wins
                def_pattern[key] = pattern
                qual = caps.get("qualifier")
                qualifier = None
                if qual:
                    q = qual[0]
                    if q.start_byte <= name_node.start_byte and name_node.end_byte <= q.end_byte:
                        qualifier = data[q.start_byte:name_node.start_byte].decode("utf-8", errors="replace")
                    else:
                        qualifier = _text(data, q)
                    if spec.qualifier_nests:
                        qualifier = _written_scope(qualifier)
                kind = "scope" if cap == "scope" else cap.split(".", 1)[1]
                rest = kind.endswith(".rest")
                defs[key] = _Def(
                    node=node,
                    kind=kind.removesuffix(".rest"),
                    name_node=name_node,
                    qualifier=qualifier,
                    is_scope=cap == "scope",
                    scope_end=(node.parent.end_byte if rest and node.parent is not None else node.end_byte),
                )
                break
            if cap.startswith("reference."):
                refs.append((cap.split(".", 1)[1], nodes[0], name_node))
                break

    ordered = sorted(defs.values(), key=lambda d: (d.node.start_byte, -d.node.end_byte))
    if not spec.statement_scopes_chain:
        # a statement-form scope ends where the next one of the same parent begins
        rest = [d for d in ordered if d.scope_end > d.node.end_byte]
        for a, b in zip(rest, rest[1:], strict=False):
            if a.node.parent == b.node.parent:
                a.scope_end = min(a.scope_end, b.node.start_byte)
    symbols: list[SymbolFact] = []
    # Stack of (end_byte, qualified name, symbol index or -1 for a scope, kind).
    stack: list[tuple[int, str, int, str]] = []
    span_index: dict[tuple[int, int], int] = {}
    for d in ordered:
        start, end = d.node.start_byte, d.node.end_byte
        while stack and stack[-1][0] < end:
            stack.pop()
        enclosing = stack[-1] if stack else None
        name = _text(data, d.name_node)
        outer = enclosing[1] if enclosing else ""
        if d.qualifier and spec.qualifier_nests:
            prefix = f"{outer}.{d.qualifier}" if outer else d.qualifier
        elif d.qualifier:
            prefix = d.qualifier
        else:
            prefix = outer
        qname = f"{prefix}.{name}" if prefix else name
        parent_idx = -1
        for entry in reversed(stack):
            if entry[2] >= 0:
                parent_idx = entry[2]
                break
        scope_end = max(end, d.scope_end)
        if d.is_scope:
            stack.append((scope_end, qname, -1, "scope"))
            continue
        kind = d.kind
        if kind == "function" and enclosing is not None and (
            enclosing[3] == "scope" or enclosing[3] in spec.class_kinds
        ):
            kind = "method"
        fragment = data[start:end]
        ns, ne = d.name_node.start_byte - start, d.name_node.end_byte - start
        body = fragment[:ns] + fragment[ne:] if 0 <= ns <= ne <= len(fragment) else fragment
        sl, el = _line_span(d.node)
        idx = len(symbols)
        symbols.append(
            SymbolFact(
                kind=kind,
                name=name,
                qualified_name=qname,
                ordinal=0,
                start_byte=start,
                end_byte=end,
                start_line=sl,
                end_line=el,
                parent=parent_idx,
                fragment_hash=blake3_hex(fragment),
                body_hash=blake3_hex(body),
            )
        )
        span_index[(start, end)] = idx
        stack.append((scope_end, qname, idx, kind))

    symbols = _with_ordinals(symbols)
    edges = _edges(refs, span_index, data)
    if status == "indexed":
        return FileFacts(status=status, symbols=symbols, edges=edges)
    # The damage of the tree's own text (a blanked modifier is no longer an error there).
    damage = damage_regions(language, root, text, [(d.node, d.name_node) for d in ordered],
                            [d.node for d in ordered if d.scope_end > d.node.end_byte],
                            spec.statement_scope_keyword)
    reason = named_construct(language, text, damage[0]) if damage else "ERROR in file"
    return FileFacts(status=status, reason=reason, symbols=symbols, edges=edges, damage=damage)


def name_offset(fragment: bytes, name: bytes, body_hash: str) -> int | None:
    """Where a symbol's name token starts in its fragment: the occurrence whose removal
    gives the body hash (the fragment alone does not say which occurrence is the name)."""
    if not name:
        return None
    i = fragment.find(name)
    while i >= 0:
        if blake3_hex(fragment[:i] + fragment[i + len(name):]) == body_hash:
            return i
        i = fragment.find(name, i + 1)
    return None


def _with_ordinals(symbols: list[SymbolFact]) -> list[SymbolFact]:
    """Ordinal 0 when (kind, qualified name) is unique in the file, else 1-based."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(symbols):
        groups.setdefault((s.kind, s.qualified_name), []).append(i)
    out = list(symbols)
    for members in groups.values():
        if len(members) > 1:
            for pos, i in enumerate(members, start=1):
                s = out[i]
                out[i] = SymbolFact(
                    s.kind, s.name, s.qualified_name, pos, s.start_byte, s.end_byte,
                    s.start_line, s.end_line, s.parent, s.fragment_hash, s.body_hash,
                )
    return out


def _edges(
    refs: list[tuple[str, Node, Node]], span_index: dict[tuple[int, int], int], data: bytes
) -> list[EdgeFact]:
    """Attach each reference to the innermost symbol containing it (one sweep over
    nested intervals), one edge per (source, kind, target) at its first line."""
    if not refs:
        return []
    defs = sorted(span_index.items(), key=lambda kv: (kv[0][0], -kv[0][1]))
    order = sorted(range(len(refs)), key=lambda i: refs[i][1].start_byte)
    first: dict[tuple[int, str, str], int] = {}
    stack: list[tuple[int, int]] = []  # (end_byte, symbol index)
    d = 0
    for i in order:
        kind, node, name_node = refs[i]
        pos = node.start_byte
        while d < len(defs) and defs[d][0][0] <= pos:
            (start, end), idx = defs[d]
            while stack and stack[-1][0] <= start:
                stack.pop()
            stack.append((end, idx))
            d += 1
        while stack and stack[-1][0] <= pos:
            stack.pop()
        owner = stack[-1][1] if stack else -1
        key = (owner, EDGE_KINDS.get(kind, "references"), _text(data, name_node))
        line = node.start_point[0] + 1
        if key not in first or line < first[key]:
            first[key] = line
    edges = [EdgeFact(src, kind, target, line) for (src, kind, target), line in first.items()]
    return sorted(edges, key=lambda e: (e.line, e.source, e.kind, e.target))
