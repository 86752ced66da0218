"""``citegraph graph callers|callees|deps|dependents REF`` (SPEC §21): what a change to a
symbol touches, or what it rests on, read from the exact-current snapshot's resolved
edges (graph/graph_view.py; networkx holds the bounded subgraph).

- ``callees``: the symbols it calls; ``deps``: everything it calls, references or inherits;
- ``callers``: who calls it; ``dependents``: who calls, references or inherits it.
Depth 1 = direct; at most ``MAX_TRAVERSAL_DEPTH``, at most ``MAX_TRAVERSAL_NODES`` nodes
(``truncated`` says the bound cut it). Only edges whose target resolved to a handle
(tiers ``resolved`` and ``name-only``, each edge says which) are followed.
"""

from __future__ import annotations

import os
from typing import Any

from citegraph.graph import graph_view
from citegraph.graph.current import ScanSource, StateSource
from citegraph.graph.queries import require_current
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.validator.capture import find_symbol
from citegraph.validator.refs import parse_ref

OPS = {"callees": ("out", ("calls",)), "deps": ("out", None),
       "callers": ("in", ("calls",)), "dependents": ("in", None)}
NODE_FIELDS = ("handle", "path", "language", "kind", "qualified_name", "start_line", "end_line")


def graph_query(home: Home, repo_path: str | os.PathLike[str], op: str, ref: str, depth: int = 1,
                source: StateSource | None = None) -> dict[str, Any]:
    """The bounded neighbourhood of the symbol ``ref`` names (docs/schemas/graph.schema.json)."""
    if op not in OPS:
        raise CitegraphError(f"unknown graph query {op!r}", f"use one of {', '.join(sorted(OPS))}", code=2)
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= graph_view.MAX_TRAVERSAL_DEPTH:
        raise CitegraphError(f"--depth {depth} is out of range", f"use 1..{graph_view.MAX_TRAVERSAL_DEPTH}", code=2)
    parsed = parse_ref(ref)
    if parsed.kind != "symbol":
        raise CitegraphError(f"{ref!r} does not name a symbol", "pass path::Qualified.name or a cgs_/cgr_ handle",
                             code=2, kind="invalid-ref")
    cur = (source or ScanSource()).read(repo_path, home)
    require_current(cur)
    direction, kinds = OPS[op]
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        root = find_symbol(parsed, cur, snap)
        g, truncated = graph_view.subgraph(snap, [root["handle"]], direction, depth, kinds=kinds)
        info = graph_view.symbol_info(snap, list(g.nodes))
    hops = graph_view.distances(g, [root["handle"]], direction)
    nodes = sorted((n for n in g.nodes if n != root["handle"] and n in info),
                   key=lambda n: (hops.get(n, depth + 1), info[n]["path"], info[n]["start_line"], n))
    return {
        "version": 1, "op": op, "depth": depth, "snapshot_id": cur.snapshot_id,
        "root": {k: root[k] for k in NODE_FIELDS},
        "nodes": [{**{k: info[n][k] for k in NODE_FIELDS}, "distance": hops.get(n)} for n in nodes],
        "edges": sorted(({"from": a, "to": b, **d} for a, b, d in g.edges(data=True)),
                        key=lambda e: (e["from"], e["line"], e["to"])),
        "truncated": truncated,
    }
