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
from citegraph.graph.symbol_search import search
from citegraph.indexer.errors import CitegraphError
from citegraph.validator.capture import find_symbol
from citegraph.validator.refs import parse_ref

OPS = {"callees": ("out", ("calls",)), "deps": ("out", None),
       "callers": ("in", ("calls",)), "dependents": ("in", None)}
NODE_FIELDS = ("handle", "path", "language", "kind", "qualified_name", "start_line", "end_line")
MAX_NAME_MATCHES = 8  # candidates listed when a bare name is ambiguous


def graph_query(home: Home, repo_path: str | os.PathLike[str], op: str, ref: str, depth: int = 1,
                source: StateSource | None = None) -> dict[str, Any]:
    """The bounded neighbourhood of the symbol ``ref`` names (docs/schemas/graph.schema.json)."""
    if op not in OPS:
        raise CitegraphError(f"unknown graph query {op!r}", f"use one of {', '.join(sorted(OPS))}", code=2)
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= graph_view.MAX_TRAVERSAL_DEPTH:
        raise CitegraphError(f"--depth {depth} is out of range", f"use 1..{graph_view.MAX_TRAVERSAL_DEPTH}", code=2)
    parsed = parse_ref(ref)
    bare = parsed.kind != "symbol" and _bare_name(ref)
    if parsed.kind != "symbol" and not bare:
        raise CitegraphError(f"{ref!r} does not name a symbol", "pass path::Qualified.name or a cgs_/cgr_ handle",
                             code=2, kind="invalid-ref")
    cur = (source or ScanSource()).read(repo_path, home)
    require_current(cur)
    direction, kinds = OPS[op]
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        root = _by_name(snap, ref) if bare else find_symbol(parsed, cur, snap)
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


def _bare_name(ref: str) -> bool:
    """A name without a path (``make_str``, ``Context.invoke``): what ``find`` takes."""
    return bool(ref) and not any(c in ref for c in "/:#\\") and not ref.endswith(".py") and ref.strip() == ref


def _by_name(snap: Snapshot, name: str) -> dict[str, Any]:
    """The one symbol a bare name means, as ``find`` ranks it: the only exact match, else
    the only qualified-suffix match (issue 22: ``graph callers make_str`` was refused
    though ``find make_str`` names one symbol). Several are refused with their citable
    forms; none is the ref error it always was."""
    rows = search(snap, name, limit=MAX_NAME_MATCHES + 1)
    for tier in ("exact", "qualified-suffix"):
        hits = [r for r in rows if r["match"] == tier]
        if len(hits) == 1:
            return hits[0]
        if hits:
            shown = ", ".join(f"{r['path']}::{r['qualified_name']}" + (f"[{r['ordinal']}]" if r["ordinal"] else "")
                              for r in hits[:MAX_NAME_MATCHES])
            more = " …" if len(hits) > MAX_NAME_MATCHES else ""
            raise CitegraphError(f"{len(hits)} symbols are named {name!r}: {shown}{more}",
                                 "pass one as path::Qualified.name (with [N] where shown) or its cgs_ handle",
                                 code=2, kind="invalid-ref")
    raise CitegraphError(f"{name!r} names no symbol of the current snapshot",
                         "look it up with citegraph find NAME, then pass path::Qualified.name or a cgs_ handle",
                         code=2, kind="invalid-ref")
