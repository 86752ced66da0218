"""Typing overload stubs: which of several same-name definitions only declare a signature.

A ref ``path::Name`` that matches several definitions names the implementation when every
other match is a typing overload stub (SPEC §18; docs/languages.md "Overloads"). Stubs are
recognised syntactically, from the definition node at the symbol's byte range:

- Python (``.py``, ``.pyi``): a ``decorated_definition`` with a decorator that is exactly
  ``@overload``, ``@typing.overload`` or ``@typing_extensions.overload`` (an aliased
  import such as ``import typing as t`` / ``@t.overload`` is not recognised);
- TypeScript and TSX: an overload signature — a ``function_signature`` (a function
  declared without a body, ``declare function`` included) or a ``method_signature`` in a
  class body. An interface's method signatures are members, not overloads of an
  implementation, and are never stubs.

Other languages have no typing overload stubs (Java, C#, C++ overloads are separate
implementations): there every match counts, and a ref must name one by ordinal.
"""

from __future__ import annotations

from tree_sitter import Node

from citegraph.indexer.extract import parse

PY_OVERLOAD_DECORATORS = frozenset({"overload", "typing.overload", "typing_extensions.overload"})
TS_SIGNATURES = frozenset({"function_signature", "method_signature"})
STUB_LANGUAGES = frozenset({"python", "typescript", "tsx"})


def _python_stub(node: Node, data: bytes) -> bool:
    if node.type != "decorated_definition":
        return False
    for child in node.children:
        if child.type != "decorator":
            continue
        expr = [c for c in child.children if c.type != "@"]
        text = data[expr[0].start_byte:expr[0].end_byte].decode("utf-8", "replace") if expr else ""
        if "".join(text.split()) in PY_OVERLOAD_DECORATORS:
            return True
    return False


def _typescript_stub(node: Node, data: bytes) -> bool:
    if node.type not in TS_SIGNATURES:
        return False
    if node.type == "method_signature":
        return node.parent is not None and node.parent.type == "class_body"
    return True


RULES = {"python": _python_stub, "typescript": _typescript_stub, "tsx": _typescript_stub}


def overload_stubs(language: str, data: bytes, spans: list[tuple[int, int]], timeout_s: float = 5.0) -> list[bool]:
    """For each (start byte, end byte) of a definition in ``data``: is it a typing
    overload stub? Languages without stubs (and a parse that times out) answer False."""
    rule = RULES.get(language)
    if rule is None or not spans:
        return [False] * len(spans)
    try:
        tree = parse(language, data, timeout_s)
    except Exception:  # noqa: BLE001 - no verdict: without a parse nothing is a stub
        return [False] * len(spans)
    out = []
    for start, end in spans:
        node: Node | None = tree.root_node.descendant_for_byte_range(start, end)
        stub = False
        while node is not None and node.start_byte == start and node.end_byte == end:
            if rule(node, data):
                stub = True
                break
            node = node.parent
        out.append(stub)
    return out
