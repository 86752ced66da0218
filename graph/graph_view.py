"""Reading the resolved graph of one snapshot (SPEC §21): a symbol's direct dependencies
(set-based SQL over ``resolved_edges``), and bounded subgraphs held in networkx for the
traversals of ``citegraph graph`` and recall by proximity.

A symbol's *outgoing* edges are those of the symbol and of every symbol nested in it (its
fragment holds their bytes), to targets outside it (a target inside is covered by the
fragment hash already). Only targets with a handle count: tier ``resolved`` or
``name-only`` (graph/edge_resolution.py); ``imports`` edges are file-level and left out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from citegraph.graph.snapshot_reader import Snapshot

if TYPE_CHECKING:  # networkx is imported where a graph is built: validating never builds one
    import networkx as nx

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

# Lookups by key lists (``IN (SELECT unnest($k))``), not joins with a registered table:
# resolved_edges of a delta is a layered view, and a semi join against it does not push
# down into the base's rows (4x slower on ruff); an IN list does, and up to 50 keys DuckDB
# reads it through the table's index. A symbol's edges are read by its file — the symbols
# nested in it are in that file, and so are their edges (resolved_edges.path is the source's
# file; resolved_edges_path, graph/schema.py, indexes it) — and kept by handle here: on the
# 250k-file monorepo (6M resolved edges) the edges of 8 symbols by handle cost 213-307 ms a
# query, by their files 7 ms.
_SPANS_SQL = "SELECT handle, path, start_byte, end_byte FROM symbols WHERE handle IN (SELECT unnest($k))"
_IN_FILES_SQL = "SELECT handle, path, start_byte, end_byte FROM symbols WHERE path IN (SELECT unnest($k))"
# (tier and kind are filtered here, in Python: any further predicate turns DuckDB's index
# scan into a scan of the table — 13 -> 163 ms for 8 files on the monorepo)
_EDGES_SQL = "SELECT {near}, {far}, kind, tier, line FROM resolved_edges WHERE {near_path} IN (SELECT unnest($k))"
_INDEX_KEYS = 48  # keys per lookup: DuckDB scans the whole table for a longer IN list
_MAX_LOOKUPS = 20  # more keys than 20 lookups hold are read in one scan
_OUT_SQL = _EDGES_SQL.format(near="source_handle", far="target_handle", near_path="path")
_IN_SQL = _EDGES_SQL.format(near="target_handle", far="source_handle", near_path="target_path")


def _by_keys(snap: Snapshot, sql: str, keys: Iterable[str | None], indexed: bool = True) -> list[tuple]:
    """The rows of ``sql`` for the key list ``$k`` (the distinct non-null ``keys``), in
    index-sized lookups when the key column is ``indexed`` (80 files' edges on the monorepo:
    one 286 ms scan, two lookups ≈ 50 ms); else in one scan."""
    ks = sorted({k for k in keys if k is not None})
    step = _INDEX_KEYS if indexed and len(ks) <= _INDEX_KEYS * _MAX_LOOKUPS else max(len(ks), 1)
    return [row for i in range(0, len(ks), step) for row in snap.con.execute(sql, {"k": ks[i:i + step]}).fetchall()]


def _edges(snap: Snapshot, sql: str, paths: Iterable[str], near: Collection[str], indexed: bool) -> list[tuple]:
    """The resolved or name-only edges (not imports) read by file whose near end is in ``near``."""
    return [e for e in _by_keys(snap, sql, paths, indexed)
            if e[0] in near and e[3] in TARGET_TIERS and e[2] != "imports"]


def _spans(snap: Snapshot, handles: Iterable[str | None]) -> dict[str, tuple[str, int, int]]:
    return {r[0]: (r[1], r[2], r[3]) for r in _by_keys(snap, _SPANS_SQL, handles)}


def _inside(span: tuple[str, int, int] | None, root: tuple[str, int, int]) -> bool:
    return span is not None and span[0] == root[0] and span[1] >= root[1] and span[2] <= root[2]


def _grouped(rows: list[tuple[str, str, str, str, int]]) -> dict[str, list[tuple[str, str, str, int]]]:
    """{root: [(other, kind, tier, first line)]}, one entry per (root, other) with the
    least kind, tier and line (as SQL's min would), in (line, other) order."""
    best: dict[tuple[str, str], list] = {}
    for root, other, kind, tier, line in rows:
        cur = best.get((root, other))
        if cur is None:
            best[(root, other)] = [kind, tier, line]
        else:
            cur[0], cur[1], cur[2] = min(cur[0], kind), min(cur[1], tier), min(cur[2], line)
    out: dict[str, list[tuple[str, str, str, int]]] = {}
    for (root, other), (kind, tier, line) in sorted(best.items(), key=lambda kv: (kv[0][0], kv[1][2], kv[0][1])):
        out.setdefault(root, []).append((other, kind, tier, line))
    return out


def out_edges(snap: Snapshot, handles: Iterable[str]) -> dict[str, list[tuple[str, str, str, int]]]:
    """{handle: [(target handle, edge kind, tier, first line)]} in source order: the edges
    of each symbol and of the symbols nested in it, to targets outside it."""
    roots = _spans(snap, handles)
    if not roots:
        return {}
    by_path: dict[str, list[tuple[str, int, int]]] = {}
    for root, (path, start, end) in roots.items():
        by_path.setdefault(path, []).append((root, start, end))
    owner: dict[str, list[str]] = {}  # each symbol of the roots' files -> the roots holding it
    for src, path, start, end in _by_keys(snap, _IN_FILES_SQL, by_path):
        for root, r0, r1 in by_path[path]:
            if start >= r0 and end <= r1:
                owner.setdefault(src, []).append(root)
    edges = _edges(snap, _OUT_SQL, by_path, owner, indexed=True)
    spans = _spans(snap, (e[1] for e in edges))
    rows = [(root, t, k, tier, line) for src, t, k, tier, line in edges if t in spans
            for root in owner[src] if not _inside(spans[t], roots[root])]
    return _grouped(rows)


def in_edges(snap: Snapshot, handles: Iterable[str]) -> dict[str, list[tuple[str, str, str, int]]]:
    """{handle: [(source handle, edge kind, tier, first line)]}: who calls/references/
    inherits each symbol directly (from outside it)."""
    roots = _spans(snap, handles)
    if not roots:
        return {}
    # (target_path has no index: the callers' side is one scan, not lookups that each scan)
    edges = _edges(snap, _IN_SQL, (r[0] for r in roots.values()), roots, indexed=False)
    spans = _spans(snap, (e[1] for e in edges))
    rows = [(t, src, k, tier, line) for t, src, k, tier, line in edges
            if src in spans and not _inside(spans[src], roots[t])]
    return _grouped(rows)


def symbol_info(snap: Snapshot, handles: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The locator fields of each handle present in the snapshot."""
    rows = _by_keys(snap, f"SELECT {', '.join(SYMBOL_INFO)} FROM symbols WHERE handle IN (SELECT unnest($k))",
                    handles)
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
    import networkx as nx

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
    import networkx as nx

    view = g.reverse(copy=False) if direction == "in" else (g.to_undirected(as_view=True) if direction == "both" else g)
    out: dict[str, int] = {}
    for s in start:
        if s in view:
            for n, d in nx.single_source_shortest_path_length(view, s).items():
                if d < out.get(n, 1 << 30):
                    out[n] = d
    return out
