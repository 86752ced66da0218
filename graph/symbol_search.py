"""Finding symbols by name (``citegraph find``) and suggesting names for a ref that names
no symbol (SPEC §19).

Matching, best first (the ``match`` field of each result):

0. ``exact`` — the qualified name is the query (``RetryPolicy.next_delay``, or
   ``helper`` for a top-level ``helper``);
1. ``qualified-suffix`` — the query is the qualified name's tail at a dot
   (``next_delay`` finds ``RetryPolicy.next_delay``);
2. ``prefix`` — the qualified name, or one of its dotted tails, starts with the query
   (``Context.inv`` finds ``Context.invoke``; ``Retry`` finds ``RetryPolicy``);
3. ``glob`` — the query has ``*``, ``?`` or ``[`` and matches the name, the qualified
   name or a dotted tail of it (``invok*``, ``*.next_*``);
4. ``substring`` — the query occurs in the qualified name, ignoring case.

Within a tier, shorter qualified names first, then path and line: the most direct
definition leads. The ranking is one SQL statement (a snapshot may hold millions of
symbols; only ``limit`` rows come back).

Suggestions (``close_symbols``) rank by closeness of names (difflib's ratio), never by
file order: a typo such as ``Contxt`` suggests ``Context``.
"""

from __future__ import annotations

import difflib
from typing import Any

MATCH_NAMES = ("exact", "qualified-suffix", "prefix", "glob", "substring")
GLOB_CHARS = ("*", "?", "[")

_TIER_SQL = """
CASE
  WHEN qualified_name = $q THEN 0
  WHEN ends_with(qualified_name, '.' || $q) THEN 1
  WHEN starts_with(qualified_name, $q) OR contains('.' || qualified_name, '.' || $q) THEN 2
  WHEN $is_glob AND (name GLOB $q OR qualified_name GLOB $q OR qualified_name GLOB ('*.' || $q)) THEN 3
  WHEN contains(lower(qualified_name), lower($q)) THEN 4
END"""


def is_glob(query: str) -> bool:
    return any(ch in query for ch in GLOB_CHARS)


def path_filter_sql(path: str) -> tuple[str, dict[str, Any]]:
    """``--path``: a file, a directory (everything under it) or a glob over paths."""
    if is_glob(path):
        return "path GLOB $p", {"p": path}
    p = path.rstrip("/")
    if not p:
        return "TRUE", {}
    return "(path = $p OR starts_with(path, $p || '/'))", {"p": p}


def search(snap: Any, query: str, *, kinds: list[str] | None = None, path: str | None = None,
           limit: int = 50) -> list[dict[str, Any]]:
    """Rows of ``snap``'s symbols matching ``query``, ranked; each has ``match``."""
    if not query:
        return []
    where = ["tier IS NOT NULL"]
    params: dict[str, Any] = {"q": query, "is_glob": is_glob(query), "limit": int(limit)}
    if kinds:
        where.append("list_contains($kinds, kind)")
        params["kinds"] = list(kinds)
    if path is not None:
        clause, extra = path_filter_sql(path)
        where.append(clause)
        params.update(extra)
    sql = (f"SELECT * FROM (SELECT *, {_TIER_SQL} AS tier FROM symbols) WHERE {' AND '.join(where)} "
           "ORDER BY tier, length(qualified_name), qualified_name, path, start_line LIMIT $limit")
    rows = snap.dicts(sql, params)
    for r in rows:
        r["match"] = MATCH_NAMES[r.pop("tier")]
    return rows


def close_symbols(wanted: str, rows: list[dict[str, Any]], n: int = 5, cutoff: float = 0.6, *,
                  fallback: bool = True) -> list[dict[str, Any]]:
    """The symbols of ``rows`` whose names are closest to ``wanted`` (a qualified name), at
    most ``n``, best first; compared on the whole qualified name and on its last part, so
    ``Contxt`` finds ``Context`` and ``Context.invok`` finds ``Context.invoke``. When none
    reaches ``cutoff`` (and ``fallback``), the ``n`` nearest anyway — still by closeness."""
    last = wanted.rsplit(".", 1)[-1]
    scored = []
    for r in rows:
        q = r["qualified_name"]
        score = max(difflib.SequenceMatcher(None, wanted, q).ratio(),
                    difflib.SequenceMatcher(None, last, r["name"]).ratio() - (0.0 if "." not in wanted else 0.05))
        if score >= cutoff:
            scored.append((-score, len(q), q, r.get("start_line") or 0, r))
    if not scored and fallback:  # nothing close: still the nearest few, by the same score
        return close_symbols(wanted, rows, n, 0.0, fallback=False)
    scored.sort(key=lambda t: t[:4])
    return [t[4] for t in scored[:n]]


def close_paths(wanted: str, paths: list[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The paths closest to ``wanted``: by the whole path and by the file name (so a file
    cited from the wrong directory is found), best first."""
    base = wanted.rsplit("/", 1)[-1]
    scored = []
    for p in paths:
        score = max(difflib.SequenceMatcher(None, wanted, p).ratio(),
                    difflib.SequenceMatcher(None, base, p.rsplit("/", 1)[-1]).ratio() - 0.05)
        if score >= cutoff:
            scored.append((-score, len(p), p))
    scored.sort()
    return [p for _, _, p in scored[:n]]
