"""The token-sequence hash of a code fragment (SPEC §6.3a; docs/outcomes.md, "Cosmetic change").

Two fragments with the same hash have the same grammar leaf tokens (type and text), in the
same tree shape, comments excluded — the code did not change, only comments or layout
did. The hash is computed where the parser lives (here) and handed to the validator as a
plain string; ``validator/decisions.py`` ``change_kind`` compares it. ``None`` means "not
decidable by tokens": a language whose grammar is not token-exact, a parse with ERROR or
MISSING nodes, JSX, or a fragment whose edges cut a token. Every choice leans one way: when
unsure, the hash is None or carries more than the tokens, never less (a false "cosmetic"
would hide a real change).
"""

from __future__ import annotations

import hashlib
import re

from tree_sitter import Node

from citegraph.indexer.extract import ParseTimeout, parse

# The form of the canonical sequence below; part of every hash, so a change of the form (or
# of the grammar versions, via a new value here) never makes two different fragments equal.
TOKEN_FORM = "cgtok1"

# Languages whose grammar gives every token that matters and where layout between tokens
# means nothing beyond what the markers below record. Others (C and C++: preprocessor lines
# end at a newline; Ruby, Kotlin, Swift, Scala, PHP, C#: not argued) are never cosmetic.
TOKEN_EXACT = frozenset({"python", "typescript", "tsx", "javascript", "go", "rust", "java"})

# Extras that are layout, not code: dropped. Any other extra node is kept as a token.
_DROPPED_EXTRAS = frozenset({"comment", "line_comment", "block_comment", "html_comment", "line_continuation"})

# Comments that are code to a compiler or runtime (a Go directive, a TypeScript triple-slash
# reference or ts-ignore, a Python encoding or type comment) are kept as tokens.
_MEANINGFUL_COMMENT = {
    "go": re.compile(rb"^(//go:|//line |/\*line |//export |// ?\+build|//extern |#cgo)"),
    "python": re.compile(rb"^#.*(coding[:=]|type:)"),
    "typescript": re.compile(rb"^(///|//\s*@ts-|/\*\s*@ts-|//\s*@jsx|/\*\*?\s*@jsx)"),
    "tsx": re.compile(rb"^(///|//\s*@ts-|/\*\s*@ts-|//\s*@jsx|/\*\*?\s*@jsx)"),
    "javascript": re.compile(rb"^(///|//\s*@ts-|/\*\s*@ts-|//\s*@jsx|/\*\*?\s*@jsx|//\s*@flow|/\*\s*@flow)"),
}

# Go inserts a semicolon at a newline after these tokens (the Go spec, "Semicolons"); a named
# leaf (identifier, literal) counts too. A line break after one is recorded.
_GO_SEMICOLON_AFTER = frozenset({"break", "continue", "fallthrough", "return", "++", "--", ")", "]", "}"})
# JavaScript's restricted productions: no line break after these keywords, none before these
# tokens (ECMAScript, "Rules of Automatic Semicolon Insertion"). Every line break after an
# alphabetic keyword is recorded (more than the rules need: never less).
_JS_BREAK_BEFORE = frozenset({"++", "--", "=>"})
_JS = frozenset({"typescript", "tsx", "javascript"})

_OPEN = frozenset({"(", "[", "{"})
_CLOSE = frozenset({")", "]", "}"})


def _atomic(node: Node) -> bool:
    """A literal compared as its whole text, whitespace included: any change inside a
    string, template, regex or character literal is a change of code."""
    t = node.type
    return ("string" in t or "regex" in t or "template" in t or t in (
        "char_literal", "character_literal", "rune_literal", "text_block", "heredoc_body"))


class _NotExact(Exception):
    """The fragment cannot be judged by its tokens."""


def token_hash(language: str | None, data: bytes, start_byte: int, end_byte: int,
               timeout_s: float = 5.0) -> str | None:
    """The token-sequence hash of ``data[start_byte:end_byte]`` parsed as part of the whole
    file, or None when tokens cannot decide (see the module docstring)."""
    return token_hashes(language, data, [(start_byte, end_byte)], timeout_s)[0]


def token_hashes(language: str | None, data: bytes, spans: list[tuple[int, int]],
                 timeout_s: float = 5.0) -> list[str | None]:
    """``token_hash`` of each (start byte, end byte) of one file, the file parsed once (a
    parse per fragment cost a validation or capture citing several symbols of a file one
    whole-file parse each)."""
    out: list[str | None] = [None] * len(spans)
    wanted = [i for i, (start, end) in enumerate(spans) if 0 <= start <= end <= len(data)]
    if language not in TOKEN_EXACT or not wanted:
        return out
    try:
        tree = parse(language, data, timeout_s)
    except (ParseTimeout, ValueError):
        return out
    root = tree.root_node
    if root.has_error:
        return out  # ERROR or MISSING anywhere: the parse may not be the code's meaning
    for i in wanted:
        try:
            items = _canonical(language, data, root, *spans[i])
        except _NotExact:
            continue
        h = hashlib.sha256()
        h.update(f"{TOKEN_FORM}\0{language}\0".encode())
        for item in items:
            h.update(item)
            h.update(b"\0")
        out[i] = h.hexdigest()[:32]
    return out


def _canonical(language: str, data: bytes, root: Node, start: int, end: int) -> list[bytes]:
    """The canonical sequence: the types of the enclosing nodes, then the fragment's tree
    with ``(type`` / ``)`` for inner nodes and ``type\\x1ftext`` for tokens, plus the layout
    markers of the language (module docstring of docs/outcomes.md)."""
    cover = root.descendant_for_byte_range(start, end) or root
    items: list[bytes] = []
    ancestors = []
    n = cover.parent
    while n is not None:
        ancestors.append(n.type)
        n = n.parent
    items.extend(b"^" + t.encode() for t in reversed(ancestors))
    leaves: list[tuple[Node, int]] = []  # (leaf, index in items)

    def walk(node: Node) -> None:
        if (node.end_byte <= start or node.start_byte >= end) and node.start_byte != node.end_byte:
            return  # wholly outside the fragment
        if node.type.startswith("jsx_"):
            raise _NotExact  # JSX text: whitespace between elements renders
        if node.is_extra and node.type in _DROPPED_EXTRAS and not _kept_comment(language, data, node):
            return
        inside = start <= node.start_byte and node.end_byte <= end
        if node.child_count == 0 or _atomic(node):
            if not inside:
                raise _NotExact  # the fragment's edge cuts a token
            leaves.append((node, len(items)))
            items.append(node.type.encode() + b"\x1f" + data[node.start_byte:node.end_byte])
            return
        items.append(b"(" + node.type.encode())
        for child in node.children:
            walk(child)
        items.append(b")")

    walk(cover)
    return _with_layout(language, data, items, leaves)


def _kept_comment(language: str, data: bytes, node: Node) -> bool:
    pattern = _MEANINGFUL_COMMENT.get(language)
    return pattern is not None and pattern.match(data[node.start_byte:node.end_byte]) is not None


def _with_layout(language: str, data: bytes, items: list[bytes], leaves: list[tuple[Node, int]]) -> list[bytes]:
    """Insert the layout markers: where a line break is code (Go's semicolons, JavaScript's
    restricted productions) and, in Python, the indentation of every logical line."""
    marks: dict[int, bytes] = {}  # items index -> marker inserted before it
    after: dict[int, bytes] = {}  # items index -> marker inserted after it
    if language == "go":
        for (leaf, at), (nxt, _) in zip(leaves, leaves[1:], strict=False):
            # (a semicolon may be omitted before a closing ")" or "}": no mark there)
            if nxt.start_point[0] > leaf.end_point[0] and (leaf.is_named or leaf.type in _GO_SEMICOLON_AFTER) \
                    and nxt.type not in (")", "}"):
                after[at] = b"\n;"
    elif language in _JS:
        for (leaf, at), (nxt, nat) in zip(leaves, leaves[1:], strict=False):
            if nxt.start_point[0] > leaf.end_point[0]:
                if not leaf.is_named and leaf.type.isalpha():
                    after[at] = b"\n"
                if nxt.type in _JS_BREAK_BEFORE:
                    marks[nat] = b"\n"
    elif language == "python":
        depth = 0
        base: int | None = None
        last_row = -1
        for leaf, at in leaves:
            row, col = leaf.start_point
            if row > last_row and depth == 0:  # the first token of a logical line
                base = col if base is None else base
                marks[at] = b"\tindent " + str(col - base).encode()
            if leaf.type in _OPEN:
                depth += 1
            elif leaf.type in _CLOSE:
                depth = max(0, depth - 1)
            last_row = leaf.end_point[0]
    if not marks and not after:
        return items
    out: list[bytes] = []
    for i, item in enumerate(items):
        if i in marks:
            out.append(marks[i])
        out.append(item)
        if i in after:
            out.append(after[i])
    return out
