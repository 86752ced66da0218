"""Turn one blob's extracted facts into snapshot rows for each path holding the blob.

Runs inside the extraction workers, so handle hashing and row building use both cores
and cross the process boundary as compact column lists.
"""

from __future__ import annotations

from citegraph.graph.handles import symbol_handle
from citegraph.graph.schema import DAMAGE_COLUMNS, EDGE_COLUMNS, SYMBOL_COLUMNS
from citegraph.indexer.extract import FileFacts

Columns = dict[str, list]


def empty_columns(names: tuple[str, ...]) -> Columns:
    return {c: [] for c in names}


def add_rows(facts: FileFacts, language: str, blob_id: str, path: str, syms: Columns, edges: Columns,
             damage: Columns | None = None) -> None:
    """Append the symbol, edge (and damage) rows of ``facts`` at ``path`` to column buffers."""
    if damage is not None:
        for d in facts.damage:
            vals = (path, d.start_byte, d.end_byte, d.error_line, d.construct, blob_id)
            for c, v in zip(DAMAGE_COLUMNS, vals, strict=True):
                damage[c].append(v)
    if not facts.symbols and not facts.edges:
        return
    handles = [symbol_handle(path, language, s.kind, s.qualified_name, s.ordinal) for s in facts.symbols]
    for s, h in zip(facts.symbols, handles, strict=True):
        vals = (h, path, language, s.kind, s.name, s.qualified_name, s.ordinal, s.start_byte, s.end_byte,
                s.start_line, s.end_line, handles[s.parent] if s.parent >= 0 else None, s.fragment_hash,
                s.body_hash, blob_id)
        for c, v in zip(SYMBOL_COLUMNS, vals, strict=True):
            syms[c].append(v)
    for e in facts.edges:
        vals = (path, handles[e.source] if e.source >= 0 else None, e.kind, e.target, e.line, blob_id)
        for c, v in zip(EDGE_COLUMNS, vals, strict=True):
            edges[c].append(v)


def rehome(rows: list[tuple], path: str) -> list[tuple]:
    """Cached symbol rows of a blob seen at another path, with handles for ``path``."""
    idx = {c: i for i, c in enumerate(SYMBOL_COLUMNS)}
    mapping: dict[str, str] = {}
    out = []
    for r in rows:
        new = symbol_handle(path, r[idx["language"]], r[idx["kind"]], r[idx["qualified_name"]], r[idx["ordinal"]])
        mapping[r[idx["handle"]]] = new
    for r in rows:
        lst = list(r)
        lst[idx["handle"]] = mapping[r[idx["handle"]]]
        lst[idx["path"]] = path
        ph = r[idx["parent_handle"]]
        lst[idx["parent_handle"]] = mapping.get(ph) if ph else None
        out.append(tuple(lst))
    return out, mapping  # type: ignore[return-value]
