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
    # Column by column (one extend per column, not one append per value): this runs for
    # every symbol and edge of a cold build. The orders are checked against the specs.
    if damage is not None and facts.damage:
        ds = facts.damage
        for c, vals in zip(DAMAGE_COLUMNS, (
                [path] * len(ds), [d.start_byte for d in ds], [d.end_byte for d in ds],
                [d.error_line for d in ds], [d.construct for d in ds], [blob_id] * len(ds)), strict=True):
            damage[c].extend(vals)
    if not facts.symbols and not facts.edges:
        return
    ss = facts.symbols
    handles = [symbol_handle(path, language, s.kind, s.qualified_name, s.ordinal) for s in ss]
    if ss:
        n = len(ss)
        for c, vals in zip(SYMBOL_COLUMNS, (
                handles, [path] * n, [language] * n, [s.kind for s in ss], [s.name for s in ss],
                [s.qualified_name for s in ss], [s.ordinal for s in ss], [s.start_byte for s in ss],
                [s.end_byte for s in ss], [s.start_line for s in ss], [s.end_line for s in ss],
                [handles[s.parent] if s.parent >= 0 else None for s in ss], [s.fragment_hash for s in ss],
                [s.body_hash for s in ss], [blob_id] * n), strict=True):
            syms[c].extend(vals)
    es = facts.edges
    if es:
        n = len(es)
        for c, vals in zip(EDGE_COLUMNS, (
                [path] * n, [handles[e.source] if e.source >= 0 else None for e in es], [e.kind for e in es],
                [e.target for e in es], [e.line for e in es], [blob_id] * n), strict=True):
            edges[c].extend(vals)


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
