"""Typing overload stubs: which of several same-name definitions only declare a signature.

A ref ``path::Name`` that matches several definitions names the implementation when every
other match is a typing overload stub (SPEC §18; docs/languages.md "Overloads"). Stubs are
recognised syntactically, from the definition node at the symbol's byte range:

- Python (``.py``, ``.pyi``): a ``decorated_definition`` with a decorator that is
  ``@overload``, ``@typing.overload`` or ``@typing_extensions.overload``, or the same
  through an alias the file imports (issue 22: click writes ``import typing as t`` and
  ``@t.overload``): ``import typing as t`` → ``@t.overload``, ``from typing import
  overload as ov`` → ``@ov``, and the same for ``typing_extensions``. The aliases are read
  from the file's import statements (anywhere in it: ``if TYPE_CHECKING:`` blocks too);
  a name bound otherwise (an assignment ``ov = typing.overload``) is not followed;
- TypeScript and TSX: an overload signature — a ``function_signature`` (a function
  declared without a body, ``declare function`` included) or a ``method_signature`` in a
  class body. An interface's method signatures are members, not overloads of an
  implementation, and are never stubs.

Other languages have no typing overload stubs (Java, C#, C++ overloads are separate
implementations): there every match counts, and a ref must name one by ordinal.
"""

from __future__ import annotations

from tree_sitter import Node

from citegraph.indexer.extract import parse_source

PY_OVERLOAD_DECORATORS = frozenset({"overload", "typing.overload", "typing_extensions.overload"})
TS_SIGNATURES = frozenset({"function_signature", "method_signature"})
STUB_LANGUAGES = frozenset({"python", "typescript", "tsx"})


TYPING_MODULES = frozenset({"typing", "typing_extensions"})


def _text(node: Node | None, data: bytes) -> str:
    return "" if node is None else "".join(data[node.start_byte:node.end_byte].decode("utf-8", "replace").split())


def python_overload_decorators(root: Node, data: bytes) -> frozenset[str]:
    """The decorator texts that mean ``typing.overload`` in this file: the plain names, and
    those its imports bind (``import typing as t`` → ``t.overload``; ``from typing import
    overload as ov`` → ``ov``)."""
    out = set(PY_OVERLOAD_DECORATORS)
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "import_statement":
            for child in node.named_children:
                if child.type == "aliased_import" and _text(child.child_by_field_name("name"), data) in TYPING_MODULES:
                    out.add(_text(child.child_by_field_name("alias"), data) + ".overload")
        elif node.type == "import_from_statement":
            if _text(node.child_by_field_name("module_name"), data) in TYPING_MODULES:
                for child in node.children_by_field_name("name"):
                    if child.type == "aliased_import" and _text(child.child_by_field_name("name"), data) == "overload":
                        out.add(_text(child.child_by_field_name("alias"), data))
        elif node.type in ("module", "block", "if_statement", "else_clause", "elif_clause", "try_statement",
                           "except_clause", "finally_clause", "expression_statement"):
            stack.extend(node.named_children)
    return frozenset(out)


def _python_stub(node: Node, data: bytes, decorators: frozenset[str] = PY_OVERLOAD_DECORATORS) -> bool:
    if node.type != "decorated_definition":
        return False
    for child in node.children:
        if child.type != "decorator":
            continue
        expr = [c for c in child.children if c.type != "@"]
        if expr and _text(expr[0], data) in decorators:
            return True
    return False


def _typescript_stub(node: Node, data: bytes, _decorators: frozenset[str] = frozenset()) -> bool:
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
        tree, _ = parse_source(language, data, timeout_s)
    except Exception:  # noqa: BLE001 - no verdict: without a parse nothing is a stub
        return [False] * len(spans)
    decorators = python_overload_decorators(tree.root_node, data) if language == "python" else frozenset()
    out = []
    for start, end in spans:
        node: Node | None = tree.root_node.descendant_for_byte_range(start, end)
        stub = False
        while node is not None and node.start_byte == start and node.end_byte == end:
            if rule(node, data, decorators):
                stub = True
                break
            node = node.parent
        out.append(stub)
    return out
