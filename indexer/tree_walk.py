"""One walk over a tree-sitter subtree, shared by the modules that look at every node
(damage regions, the TypeScript pre-parse): iterative, so a deep tree cannot exhaust
Python's recursion limit."""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node


def descendants(node: Node) -> Iterator[Node]:
    """``node`` and every node under it, in document order (pre-order)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if n.child_count:
            stack.extend(reversed(n.children))


def leaves(node: Node) -> Iterator[Node]:
    """The leaves under ``node`` (tokens, MISSING nodes included), in document order."""
    return (n for n in descendants(node) if n.child_count == 0)
