"""Bounded recall for Context Brief (SPEC §8): BM25 in SQL plus citation boosts.

Score of an active, not superseded memory ``d`` for a task (see docs/brief.md)::

    bm25(d) = Σ_{t ∈ Q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))
    idf(t)  = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))
    boost(d) = Σ_{c ∈ citations(d)} w(c)
    w(c)    = 3.0 if c matches a --code-ref (path, path::name, cgs_/cgr_ handle)
              1.5 else if c matches a path, symbol name/qualified name or handle named
                  in the task text
              0   otherwise
    score(d) = bm25(d) + boost(d)

``Q`` is the set of distinct tokens of the task (``store.tokenize``); documents are the
terms of text + topic + project (the ``terms`` table written by ``remember``); ``N`` and
``avgdl`` are taken over the memories in scope (active, not superseded, the project when
one is given); k1 = 1.2, b = 0.75. A memory without citations has boost 0, so its score —
and its order relative to every other uncited memory — is exactly the pure BM25 one
(legacy parity). Candidates are memories with score > 0, ordered by score, then most
recently updated, then id; at most ``limit`` (24) of them.

``pinned`` memories (brief ``--code-ref``: the memories whose citations touch the code
named, found in the code index; the session-start hook: the memories citing the
repository) are candidates whatever their score and rank before every other candidate,
among themselves by the same order. Pinning never changes the score or the order of
uncited memories relative to each other.

Everything is one SQL statement over indexed tables: no Python loop over memories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from citegraph.graph.handles import CGR_RE, CGS_RE
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle.store import NOT_SUPERSEDED, MemoryStore, tokenize
from citegraph.validator.refs import parse_ref

K1 = 1.2
B = 0.75
MAX_CANDIDATES = 24
W_CODE_REF = 3.0
W_TASK = 1.5
# A memory citing a symbol within two hops of a ``--code-ref`` symbol (calls, references,
# inherits, either way; memory/agent/cited.py ``nearby_handles``): below a direct hit, above a
# task word. Uncited memories cite nothing, so their scores never move (legacy parity).
W_NEAR = 1.0
MAX_PATTERNS = 64  # task-derived patterns considered (bounds the boost join)

_HANDLE_RE = re.compile(r"cg[sr]_[0-9a-f_]+")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_PATHISH_RE = re.compile(r"^[\w.@+-]+(?:/[\w.@+-]+)*$")
_STRIP = "\"'`()[]{}<>,;!?"


@dataclass
class Candidate:
    memory_id: str
    score: float
    bm25: float
    boost: float


@dataclass
class Patterns:
    """What the boost looks for in citations: (kind, value, extra, weight) rows."""

    rows: list[tuple[str, str, str | None, float]] = field(default_factory=list)
    invalid_refs: list[tuple[str, str]] = field(default_factory=list)  # (ref, why)

    def add(self, kind: str, value: str, extra: str | None, weight: float) -> None:
        row = (kind, value, extra, weight)
        if value and row not in self.rows:
            self.rows.append(row)


def task_patterns(task: str, code_refs: list[str] | tuple[str, ...] = ()) -> Patterns:
    """Paths, symbol names and handles named by the task text and the --code-ref values."""
    pats = Patterns()
    for ref in code_refs:
        try:
            p = parse_ref(ref)
        except CitegraphError as err:
            pats.invalid_refs.append((ref, err.what))
            continue
        if p.handle:
            pats.add("handle", p.handle, p.repository_prefix, W_CODE_REF)
        elif p.kind == "symbol" and p.path and p.qualified_name:
            pats.add("qname", p.qualified_name, p.path, W_CODE_REF)
        elif p.path:
            pats.add("path", p.path, None, W_CODE_REF)
    task_rows: list[tuple[str, str, str | None]] = []
    for m in _HANDLE_RE.finditer(task):
        h = m.group(0)
        if CGS_RE.match(h):
            task_rows.append(("handle", h, None))
        elif CGR_RE.match(h):
            cm = CGR_RE.match(h)
            assert cm is not None
            task_rows.append(("handle", "cgs_" + cm.group(2), cm.group(1)))
    for raw in task.split():
        word = raw.strip(_STRIP).rstrip(".:")
        if not word or word.startswith(("cgs_", "cgr_")):
            continue
        path, _, qname = word.partition("::")
        path = re.sub(r"#L\d+(?:-L?\d+)?$", "", path)
        if ("/" in path or re.search(r"\.[A-Za-z0-9]{1,8}$", path)) and _PATHISH_RE.match(path) \
                and ".." not in path.split("/") and not path.startswith("/"):
            task_rows.append(("path", path, None))
        if qname and _NAME_RE.fullmatch(qname):
            task_rows.append(("name", qname, None))
    for m in _NAME_RE.finditer(task):
        name = m.group(0)
        if len(name) >= 3 and not name.startswith(("cgs_", "cgr_")):
            task_rows.append(("name", name, None))
    for kind, value, extra in task_rows[:MAX_PATTERNS]:
        pats.add(kind, value, extra, W_TASK)
    return pats


_RECALL_SQL = """
WITH docs AS (
  SELECT id, doc_len, updated_at FROM memories m
  WHERE status = 'active' AND {not_superseded} {project_filter}
),
stats AS (SELECT count(*)::DOUBLE AS n, coalesce(avg(doc_len), 0)::DOUBLE AS avgdl FROM docs),
hits AS (
  SELECT t.memory_id, t.term, t.tf::DOUBLE AS tf, d.doc_len::DOUBLE AS dl
  FROM terms t JOIN docs d ON d.id = t.memory_id WHERE list_contains($terms::VARCHAR[], t.term)
),
df AS (SELECT term, count(*)::DOUBLE AS df FROM hits GROUP BY term),
bm AS (
  SELECT h.memory_id,
         sum(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
             * (h.tf * ($k1 + 1)) / (h.tf + $k1 * (1 - $b + $b * h.dl / greatest(s.avgdl, 1e-9)))) AS bm25
  FROM hits h JOIN df ON df.term = h.term CROSS JOIN stats s
  GROUP BY h.memory_id
),
cm AS (
  SELECT c.memory_id, c.id, max(p.weight) AS w
  FROM citations c
  JOIN memories m ON m.id = c.memory_id AND m.revision = c.revision
  JOIN docs d ON d.id = c.memory_id
  JOIN _p p ON
       (p.kind = 'path' AND (c.path = p.value OR ends_with(c.path, '/' || p.value)))
    OR (p.kind = 'qname' AND c.kind = 'symbol' AND c.path = p.extra AND c.qualified_name = p.value)
    OR (p.kind = 'name' AND c.kind = 'symbol' AND (c.qualified_name = p.value OR c.name = p.value))
    OR (p.kind = 'handle' AND c.handle = p.value
        AND (p.extra IS NULL OR starts_with(c.repository_id, p.extra)))
  GROUP BY c.memory_id, c.id
),
bo AS (SELECT memory_id, sum(w) AS boost FROM cm GROUP BY memory_id),
ids AS (SELECT memory_id FROM bm UNION SELECT memory_id FROM bo UNION SELECT id AS memory_id FROM _pin)
SELECT i.memory_id, coalesce(bm.bm25, 0) AS bm25, coalesce(bo.boost, 0) AS boost,
       coalesce(bm.bm25, 0) + coalesce(bo.boost, 0) AS score
FROM ids i JOIN docs d ON d.id = i.memory_id
LEFT JOIN bm ON bm.memory_id = i.memory_id LEFT JOIN bo ON bo.memory_id = i.memory_id
WHERE coalesce(bm.bm25, 0) + coalesce(bo.boost, 0) > 0 OR i.memory_id IN (SELECT id FROM _pin)
ORDER BY (i.memory_id IN (SELECT id FROM _pin)) DESC, score DESC, d.updated_at DESC, i.memory_id
LIMIT $limit
"""


def recall(ms: MemoryStore, task: str, *, project: str | None = None,
           code_refs: list[str] | tuple[str, ...] = (), limit: int = MAX_CANDIDATES,
           boosts: bool = True, patterns: Patterns | None = None,
           pinned: list[str] | tuple[str, ...] = ()) -> list[Candidate]:
    """The at most ``limit`` best memories for ``task`` (see the module docstring)."""
    terms = sorted(set(tokenize(task)))
    pats = patterns if patterns is not None else task_patterns(task, code_refs)
    rows = pats.rows if boosts else []
    if not terms and not rows and not pinned:
        return []
    pt = pa.table({"kind": pa.array([r[0] for r in rows], pa.string()),
                   "value": pa.array([r[1] for r in rows], pa.string()),
                   "extra": pa.array([r[2] for r in rows], pa.string()),
                   "weight": pa.array([r[3] for r in rows], pa.float64())})
    params: dict[str, object] = {"k1": K1, "b": B, "limit": int(limit), "terms": terms}
    project_filter = ""
    if project is not None:
        project_filter = "AND project = $project"
        params["project"] = project
    con = ms.con
    con.register("_p", pt)
    con.register("_pin", pa.table({"id": pa.array(list(dict.fromkeys(pinned)), pa.string())}))
    try:
        out = con.execute(_RECALL_SQL.format(project_filter=project_filter, not_superseded=NOT_SUPERSEDED), params).fetchall()
    finally:
        con.unregister("_p")
        con.unregister("_pin")
    return [Candidate(r[0], float(r[3]), float(r[1]), float(r[2])) for r in out]
