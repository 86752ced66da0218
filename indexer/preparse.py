"""Byte-preserving pre-parse: TypeScript variance modifiers blanked where the grammar fails.

No released tree-sitter-typescript grammar parses TS 4.7 variance annotations
(`interface Box<out T>`, `<in T>`, `<in out T>`, `<const in T>`; tree-sitter-typescript
issue #370): the parser reads `in`/`out` as the parameter's name and the real name as an
ERROR. When a parse of TypeScript or TSX shows an error inside a type-parameter list, the
`in`/`out` modifier tokens of that list are replaced by as many spaces and the text is parsed
again. Every byte offset, line and column stays what it was, so the tree of the blanked text
is a tree of the original bytes; everything stored (names, fragments, hashes) is read from
the original bytes. The re-parse is used only when it repairs every list it touched
(docs/languages.md); otherwise the original tree stands and the file stays `partial`.

A modifier is recognised on the list's own tokens, exactly as TypeScript reads a type
parameter: at the list's top level, after `<` or `,`, a run of words before the first other
token (or `extends`); the last word is the name, the words before it its modifiers, and the
run counts only when every modifier is `const`, `in` or `out`, none twice. So `<out>` (a
parameter named `out`), `<in out>` (`in` on a parameter named `out`), a string `"in"`, a
nested list's tokens (its own list decides) and `for (x in y)` are never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

# Languages whose grammar lacks variance annotations (TSX = TypeScript + JSX).
VARIANCE_LANGUAGES = frozenset({"typescript", "tsx"})
MODIFIERS = frozenset({b"const", b"in", b"out"})
BLANKED = frozenset({b"in", b"out"})
# Leaf tokens that are words in a parameter head (a keyword token's type is its text).
_WORD_TYPES = frozenset({"identifier", "type_identifier", "const", "in", "out"})
_WORD = re.compile(rb"[A-Za-z_$][\w$]*")
_OPEN = frozenset({"<", "(", "[", "{", "${"})
_CLOSE = frozenset({">", ")", "]", "}"})


@dataclass(frozen=True, slots=True)
class Blanking:
    """The blanked text and what it changed."""

    text: bytes
    lists: tuple[tuple[int, int], ...]  # (start, end) of each type-parameter list touched
    tokens: tuple[tuple[int, int], ...]  # (start, end) of each blanked modifier


def _leaves(node: Node) -> list[Node]:
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.child_count == 0:
            if not n.is_missing and n.end_byte > n.start_byte:
                out.append(n)
        else:
            stack.extend(reversed(n.children))
    return out


def _is_word(leaf: Node, data: bytes) -> bool:
    return leaf.type in _WORD_TYPES and _WORD.fullmatch(data[leaf.start_byte:leaf.end_byte]) is not None


def list_modifiers(node: Node, data: bytes) -> list[tuple[int, int]]:
    """The `in`/`out` modifier tokens of one `type_parameters` node, by its own top-level
    tokens (a nested list's tokens are left to that list)."""
    out: list[tuple[int, int]] = []
    depth = 0
    run: list[Node] | None = None  # the words of the current parameter head, while open
    for leaf in _leaves(node):
        t = leaf.type
        if t == "comment":
            continue
        if depth == 1 and run is not None and _is_word(leaf, data):
            run.append(leaf)
            continue
        if run is not None:
            out.extend(_modifiers_of(run, data))
            run = None
        if t in _OPEN:
            depth += 1
        elif t in _CLOSE:
            depth -= 1
        if depth == 1 and t in ("<", ","):
            run = []
    return out


def _modifiers_of(run: list[Node], data: bytes) -> list[tuple[int, int]]:
    """A parameter head's `in`/`out` modifiers: every word but the last (the name), when
    each is a distinct modifier; else none (not a head TypeScript reads as modified)."""
    words = [data[w.start_byte:w.end_byte] for w in run]
    mods = words[:-1]
    if not mods or len(set(mods)) != len(mods) or not all(m in MODIFIERS for m in mods):
        return []
    return [(w.start_byte, w.end_byte) for w, m in zip(run, mods, strict=False) if m in BLANKED]


def _type_parameter_lists_with_errors(root: Node) -> list[Node]:
    out: list[Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if not n.has_error:
            continue
        if n.type == "type_parameters":
            out.append(n)
        stack.extend(n.children)
    return out


def blank_variance(language: str, root: Node, data: bytes) -> Blanking | None:
    """The text with the variance modifiers of every erroneous type-parameter list blanked
    (same length), or None when there is nothing to blank."""
    if language not in VARIANCE_LANGUAGES or not root.has_error:
        return None
    lists: list[tuple[int, int]] = []
    tokens: list[tuple[int, int]] = []
    for node in _type_parameter_lists_with_errors(root):
        found = list_modifiers(node, data)
        if found:
            lists.append((node.start_byte, node.end_byte))
            tokens.extend(found)
    if not tokens:
        return None
    text = bytearray(data)
    for start, end in tokens:
        text[start:end] = b" " * (end - start)
    return Blanking(bytes(text), tuple(sorted(lists)), tuple(sorted(set(tokens))))


def repaired(root: Node, blanking: Blanking) -> bool:
    """Does the tree of the blanked text parse every touched list cleanly? No error or
    MISSING node may lie within or touch one (a list inside a larger error counts too)."""
    stack = [root]
    while stack:
        n = stack.pop()
        if n.is_error or n.is_missing:
            if any(n.start_byte <= end and start <= n.end_byte for start, end in blanking.lists):
                return False
        elif n.has_error:
            stack.extend(n.children)
    return True
