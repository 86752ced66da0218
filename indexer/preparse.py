"""Byte-preserving pre-parse: valid TypeScript the grammar fails on, repaired byte for byte.

Two repairs, each replacing bytes by as many other bytes (never a line break), so every
byte offset, line and column of the repaired text's tree is one of the original bytes;
everything stored (names, fragments, hashes) is read from the original bytes. Each is
tried only on a TypeScript/TSX tree with errors and kept only where the re-parse confirms
it (docs/languages.md); otherwise the original tree stands and the file stays `partial`.

1. **Variance annotations.** No released tree-sitter-typescript grammar parses TS 4.7
   `interface Box<out T>`, `<in T>`, `<in out T>`, `<const in T>` (issue #370): the parser
   reads `in`/`out` as the parameter's name and the real name as an ERROR. In a
   type-parameter list holding an error, the `in`/`out` modifiers are blanked (spaces). A
   modifier is recognised on the list's own tokens, exactly as TypeScript reads a type
   parameter: at the list's top level, after `<` or `,`, a run of words before the first
   other token (or `extends`); the last word is the name, the words before it its
   modifiers, and the run counts only when every modifier is `const`, `in` or `out`, none
   twice. So `<out>` (a parameter named `out`), `<in out>` (`in` on a parameter named
   `out`), a string `"in"`, a nested list's tokens (its own list decides) and
   `for (x in y)` are never touched. Kept when each blanked list re-parses cleanly.
2. **A generic call signature starting a line** in an object type or interface whose
   members are separated by line breaks alone (below): the `;` TypeScript implies is
   written over the last indentation byte. Kept where the re-parse reads it as a member
   separator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from citegraph.indexer.tree_walk import leaves

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
    return [n for n in leaves(node) if not n.is_missing and n.end_byte > n.start_byte]


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
        if run is not None and _is_word(leaf, data):  # a run is opened at depth 1 only
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


def _node_at(root: Node, start: int, end: int, kind: str) -> Node | None:
    """The node of type ``kind`` spanning exactly [start, end), if any."""
    n = root.descendant_for_byte_range(start, max(start, end - 1))
    while n is not None and n.start_byte >= start and n.end_byte <= end:
        if n.type == kind and n.start_byte == start and n.end_byte == end:
            return n
        n = n.parent
    return None


def repaired(root: Node, blanking: Blanking) -> bool:
    """Does the tree of the blanked text parse every touched list cleanly: a
    `type_parameters` node of the same span with no ERROR or MISSING node inside? (An
    error elsewhere, even one enclosing the list, is another gap's: it keeps its damage.)"""
    for start, end in blanking.lists:
        node = _node_at(root, start, end, "type_parameters")
        if node is None or node.has_error:
            return False
    return True


# --- A generic call signature starting a line in an object type ------------------------------
#
# TypeScript never reads a `<` after a line break as type arguments of a type reference
# (`parseTypeArgumentsOfTypeReference` requires no preceding line break), so in an object
# type or interface whose members are separated by line breaks alone,
#     (a: A): (b: B) => C
#     <T>(x: T): T
# the second line is a new member. The grammar reads `C<T>` and fails. The repair turns the
# last indentation byte before such a `<` into the `;` TypeScript implies: same length,
# same lines and columns.

# A member cannot end on these (its type goes on): no separator is implied after them.
_CONTINUES = frozenset({":", "|", "&", "=>", ",", ";", "{", "(", "[", "<", "?", "=", ".", "...", "extends",
                        "keyof", "typeof", "new", "readonly", "infer", "is", "asserts", "unique", "?:", "-", "+"})
_MEMBER_LISTS = frozenset({"object_type", "interface_body"})
# Ancestors that mean the `<` is not in a type (an expression, a statement, JSX).
_NOT_TYPE = frozenset({"arguments", "class_body", "program", "statement_block"})
_NOT_TYPE_SUFFIXES = ("_statement", "expression", "_declaration", "_definition")


def _in_member_list(leaf: Node) -> bool:
    """Is the nearest enclosing member list reached through type nodes only? Inside
    nothing but ERROR nodes (the grammar gave up on the whole context) the answer is left
    to the re-parse, which keeps only a `;` that lands in a member list."""
    n = leaf.parent
    while n is not None:
        if n.type in _MEMBER_LISTS:
            return True
        if n.is_error:
            n = n.parent
            continue
        if n.type in _NOT_TYPE or n.type.endswith(_NOT_TYPE_SUFFIXES) or n.type.startswith("jsx"):
            return False
        n = n.parent
    return True


# Leaves that can end a type, for a context the grammar gave up on (ERROR nodes only): a
# member name (`method` ⏎ `<T>(x: T): T` is one generic method to TypeScript) is not one;
# an identifier is a type's end only right after a token that a type name follows.
_BEFORE_TYPE_NAME = frozenset({":", "|", "&", "=>", ".", "keyof", "typeof", "is", "extends", "?", "infer",
                               "readonly", "unique", "asserts"})
_TYPE_END_LEAVES = frozenset({"type_identifier", ">", ">>", ">>>", ")", "]", "}", '"', "'", "`", "this", "void", "never",
                              "unknown", "any", "boolean", "bigint", "symbol", "object", "string", "number",
                              "undefined", "null", "true", "false"})


def ends_a_type(prev: Node, before: Node | None) -> bool:
    """Does ``prev`` (after ``before``) end a member's type, not name a member? Inside a type
    node before its member list is reached (an object type's own `}` ends a type: it goes on
    up); where no member list or type node is above it (ERROR nodes only), by the tokens:
    a leaf that can end a type, or an identifier after a token a type name follows."""
    n = prev.parent
    while n is not None:
        if n.type in _MEMBER_LISTS and not (prev.type == "}" and prev.parent == n):
            return False
        if n.type == "type_annotation" or n.type.endswith("_type"):
            return True
        n = n.parent
    if prev.type == "identifier":
        return before is not None and before.type in _BEFORE_TYPE_NAME
    return prev.type in _TYPE_END_LEAVES


def call_signature_spots(root: Node, data: bytes) -> list[int]:
    """Byte offsets (the last indentation byte before a line-initial `<`) where TypeScript
    implies a member separator the grammar does not see."""
    out: list[int] = []
    prev: Node | None = None
    before: Node | None = None
    for leaf in _leaves(root):
        if leaf.type == "comment":
            continue
        if leaf.type == "<" and prev is not None and prev.type not in _CONTINUES:
            line_start = data.rfind(b"\n", 0, leaf.start_byte) + 1
            indent = data[line_start:leaf.start_byte]
            # in a member list, or right after one's last token (the grammar may have
            # closed the list early with a MISSING `}` to read the `<` as something else)
            if (indent and not indent.strip(b" \t") and prev.end_byte < line_start and ends_a_type(prev, before)
                    and (_in_member_list(leaf) or _in_member_list(prev))):
                out.append(leaf.start_byte - 1)
        prev, before = leaf, prev
    return out


def separate(data: bytes, spots: list[int]) -> bytes:
    text = bytearray(data)
    for at in spots:
        text[at:at + 1] = b";"
    return bytes(text)


def separated(root: Node, spots: list[int]) -> list[int]:
    """The spots the re-parsed tree reads as a member separator: a `;` token whose parent
    is an object type or interface body, no ERROR or MISSING node of that body touching it
    (an error enclosing the body is another gap's)."""
    good = []
    for at in spots:
        node = root.descendant_for_byte_range(at, at + 1)
        body = node.parent if node is not None else None
        if (node is None or node.type != ";" or node.start_byte != at or body is None
                or body.type not in _MEMBER_LISTS):
            continue
        if not _error_touches(body, at, at + 1):
            good.append(at)
    return good


def _error_touches(node: Node, start: int, end: int) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.end_byte < start or n.start_byte > end:
            continue
        if n.is_error or n.is_missing:
            return True
        if n.has_error:
            stack.extend(n.children)
    return False
