"""Reading the resolved graph of one snapshot (SPEC §21): a symbol's direct dependencies
(set-based SQL over ``resolved_edges``), and bounded subgraphs held in networkx for the
traversals of ``citegraph graph`` and recall by proximity.

A symbol's *outgoing* edges are those of the symbol and of every symbol nested in it (its
fragment holds their bytes), to targets outside it (a target inside is covered by the
fragment hash already). Only targets with a handle count: tier ``resolved`` or
``name-only`` (graph/edge_resolution.py); ``imports`` edges are file-level and left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx
import pyarrow as pa

from citegraph.graph.snapshot_reader import Snapshot

# Capture records at most this many dependencies per symbol citation, breadth first to
# this depth (docs/graph.md): a receipt stays small, validation's work stays bounded.
MAX_DEPS = 16
MAX_DEP_DEPTH = 3
# Traversals (``citegraph graph``, proximity recall) stop at these bounds.
MAX_TRAVERSAL_DEPTH = 5
MAX_TRAVERSAL_NODES = 500

TARGET_TIERS = ("resolved", "name-only")
SYMBOL_INFO = ("handle", "path", "language", "kind", "name", "qualified_name", "ordinal", "start_line",
               "end_line", "fragment_hash")

_OUT_SQL = """
SELECT c.h AS root, r.target_handle, min(r.kind) AS kind, min(r.tier) AS tier, min(r.line) AS line
FROM _roots c JOIN symbols root ON root.handle = c.h
JOIN symbols src ON src.path = root.path AND src.start_byte >= root.start_byte AND src.end_byte <= root.end_byte
JOIN resolved_edges r ON r.source_handle = src.handle
JOIN symbols t ON t.handle = r.target_handle
WHERE r.tier IN ('resolved', 'name-only') AND r.kind <> 'imports'
  AND NOT (t.path = root.path AND t.start_byte >= root.start_byte AND t.end_byte <= root.end_byte)
GROUP BY c.h, r.target_handle
ORDER BY c.h, line, r.target_handle
"""

_IN_SQL = """
SELECT c.h AS root, r.source_handle, min(r.kind) AS kind, min(r.tier) AS tier, min(r.line) AS line
FROM _roots c JOIN symbols root ON root.handle = c.h
JOIN resolved_edges r ON r.target_handle = c.h
JOIN symbols src ON src.handle = r.source_handle
WHERE r.tier IN ('resolved', 'name-only') AND r.kind <> 'imports'
  AND NOT (src.path = root.path AND src.start_byte >= root.start_byte AND src.end_byte <= root.end_byte)
GROUP BY c.h, r.source_handle
ORDER BY c.h, line, r.source_handle
"""


def _with_roots(snap: Snapshot, handles: Iterable[str], sql: str) -> list[tuple]:
    snap.con.register("_roots", pa.table({"h": pa.array(sorted(set(handles)), pa.string())}))
    try:
        return snap.con.execute(sql).fetchall()
    finally:
        snap.con.unregister("_roots")


def out_edges(snap: Snapshot, handles: Iterable[str]) -> dict[str, list[tuple[str, str, str, int]]]:
    """{handle: [(target handle, edge kind, tier, first line)]} in source order."""
    out: dict[str, list[tuple[str, str, str, int]]] = {}
    for root, target, kind, tier, line in _with_roots(snap, handles, _OUT_SQL):
        out.setdefault(root, []).append((target, kind, tier, line))
    return out


def in_edges(snap: Snapshot, handles: Iterable[str]) -> dict[str, list[tuple[str, str, str, int]]]:
    """{handle: [(source handle, edge kind, tier, first line)]}: who calls/references/
    inherits each symbol directly."""
    out: dict[str, list[tuple[str, str, str, int]]] = {}
    for root, source, kind, tier, line in _with_roots(snap, handles, _IN_SQL):
        out.setdefault(root, []).append((source, kind, tier, line))
    return out


def symbol_info(snap: Snapshot, handles: Iterable[str]) -> dict[str, dict[str, Any]]:
    rows = _with_roots(snap, handles, f"SELECT {', '.join('s.' + c for c in SYMBOL_INFO)} FROM symbols s "
                                      "SEMI JOIN _roots c ON s.handle = c.h")
    return {r[0]: dict(zip(SYMBOL_INFO, r, strict=True)) for r in rows}


def dependency_records(snap: Snapshot, handles: list[str], *, limit: int = MAX_DEPS,
                       depth: int = MAX_DEP_DEPTH) -> dict[str, list[dict[str, Any]]]:
    """For each symbol handle, its resolved dependencies breadth first up to ``depth``, at
    most ``limit`` (what capture stores in a receipt): handle, locator fields, fragment
    hash, the edge that reaches it, its tier, its depth and ``via`` (the index of the
    dependency it is reached through, -1 for a direct one). Set-based: one query per level."""
    records: dict[str, list[dict[str, Any]]] = {h: [] for h in handles}
    seen: dict[str, set[str]] = {h: {h} for h in handles}
    frontier: dict[str, list[tuple[str, int]]] = {h: [(h, -1)] for h in handles}  # root -> (node, its index)
    for level in range(1, depth + 1):
        nodes = {n for fr in frontier.values() for n, _ in fr}
        if not nodes:
            break
        edges = out_edges(snap, nodes)
        nxt: dict[str, list[tuple[str, int]]] = {}
        new_targets: set[str] = set()
        pending: list[tuple[str, str, str, str, int]] = []
        for root, fr in frontier.items():
            room = limit - len(records[root])
            for node, idx in fr:
                for target, kind, tier, _line in edges.get(node, ()):
                    if target in seen[root] or room <= 0:
                        continue
                    seen[root].add(target)
                    room -= 1
                    pending.append((root, target, kind, tier, idx))
                    new_targets.add(target)
        info = symbol_info(snap, new_targets)
        for root, target, kind, tier, idx in pending:
            s = info.get(target)
            if s is None:
                continue
            records[root].append({"handle": target, "path": s["path"], "qualified_name": s["qualified_name"],
                                  "ordinal": s["ordinal"], "symbol_kind": s["kind"],
                                  "fragment_hash": s["fragment_hash"], "edge": kind, "tier": tier,
                                  "depth": level, "via": idx})
            nxt.setdefault(root, []).append((target, len(records[root]) - 1))
        frontier = nxt
    return records


def subgraph(snap: Snapshot, start: list[str], direction: str, depth: int,
             max_nodes: int = MAX_TRAVERSAL_NODES, kinds: tuple[str, ...] | None = None
             ) -> tuple[nx.DiGraph, bool]:
    """The bounded subgraph around ``start``: edges out of (``out``), into (``in``) or both
    ways of each node, breadth first to ``depth`` (at most ``max_nodes`` nodes), of the
    edge ``kinds`` (None: calls, references, inherits). Edges point from the dependent to
    the dependency. Returns (graph, truncated)."""
    g: nx.DiGraph = nx.DiGraph()
    g.add_nodes_from(start, depth=0)
    frontier = list(dict.fromkeys(start))
    truncated = False
    for level in range(1, depth + 1):
        if not frontier:
            break
        found: list[tuple[str, str, str, str, int]] = []  # (from, to, kind, tier, line)
        if direction in ("out", "both"):
            for src, lst in out_edges(snap, frontier).items():
                found += [(src, t, k, tier, line) for t, k, tier, line in lst]
        if direction in ("in", "both"):
            for dst, lst in in_edges(snap, frontier).items():
                found += [(s, dst, k, tier, line) for s, k, tier, line in lst]
        if kinds is not None:
            found = [x for x in found if x[2] in kinds]
        nxt: list[str] = []
        for a, b, kind, tier, line in found:
            for n in (a, b):
                if n not in g:
                    if g.number_of_nodes() >= max_nodes:
                        truncated = True
                        break
                    g.add_node(n, depth=level)
                    nxt.append(n)
            if a in g and b in g and not g.has_edge(a, b):
                g.add_edge(a, b, kind=kind, tier=tier, line=line)
        frontier = nxt
    return g, truncated


def distances(g: nx.DiGraph, start: list[str], direction: str) -> dict[str, int]:
    """Hops from ``start`` to every node of ``g`` along the traversal's direction."""
    view = g.reverse(copy=False) if direction == "in" else (g.to_undirected(as_view=True) if direction == "both" else g)
    out: dict[str, int] = {}
    for s in start:
        if s in view:
            for n, d in nx.single_source_shortest_path_length(view, s).items():
                if d < out.get(n, 1 << 30):
                    out[n] = d
    return out
