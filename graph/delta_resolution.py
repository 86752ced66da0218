"""Edge resolution of a delta in O(change) (issue 21; docs/design.md "A delta's resolution
costs its change").

Why a module of its own: the rules are graph/edge_resolution.py's; this is how a delta
finds, without reading the repository, the few edges whose resolution its change can
move and the few rows those edges' resolution reads. A full snapshot stores its
*resolution keys* (``write_keys``): per (family, name, edge kind) how many symbols fit
and which one when one does — the repository level — the paths whose edges name a
symbol so, and its source files under the keys import mapping and the package level look
them up by. A delta over it then reads, through the base's indexes:

- the base's symbols of the changed paths (what the change removed) and the key rows of
  the names they and the new symbols carry: so "was this name unique, is it still" is a
  lookup plus the change's own rows, never a count over the repository;
- the files its imports could name (by file-name stem and directory name), the files
  importing a changed path, the files of a changed path's directory (Go, Java) and the
  files whose edges name a symbol whose uniqueness moved;
- the edges and symbols of those files only.

What readers see is the same function of the union rows as a full computation: the
incremental == clean property test (tests/test_incremental.py) compares every delta's
resolved edges and import targets with a clean build's. A delta that adds or removes a
path (any file's import mapping may change) or changes a path's language falls back to
the whole-union computation of graph/edge_resolution.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import duckdb
import pyarrow as pa

from citegraph.graph import edge_resolution as er
from citegraph.graph.base_rows import BASE_ROWS, BaseRows
from citegraph.graph.schema import (
    IMPORT_TARGETS_LAYOUT,
    LAYOUT_CHANGED_PATHS,
    RESOLUTION_KEY_INDEXES,
)
from citegraph.graph.snapshot_writer import sql_str

# What a test may inject (graph/build_hooks.py ``BuildHooks.statement``): called after each
# statement of a delta's resolution with a label and DuckDB's profile of it (rows scanned).
StatementHook = Callable[[str, dict], None]

FAMILY_SQL = er.FAMILY_SQL
EDGE_NAME_SQL = "regexp_extract({t}, '([^.:]+)$', 1)"
PKG_KEY = er.PKG_KEY_SQL
# The columns the resolution reads (graph/edge_resolution.py ``resolution_steps``): a base
# row read through an index costs DuckDB a fetch per column, most for the hash-like strings
# (handle, fragment and body hash: ≈ 40 µs per row and column on ruff), so no other column
# is read from the base.
SYMBOL_COLS = "handle, path, language, kind, name, parent_handle"
EDGE_COLS = "path, source_handle, kind, target, line"
NAMED_KINDS = er.RESOLVED_KINDS[:3]  # the kinds resolved by a name (imports are by path)
EDGE_KINDS = "(VALUES ('references'), ('calls'), ('inherits')) k(ek)"
PACKAGE_LANGS = er.kinds_sql(er.PACKAGE_IS_DIRECTORY)


def _fits(kind: str = "s.kind") -> str:
    """Which edge kinds a symbol of ``kind`` can be the target of (as ``k.ek``)."""
    return (f"(k.ek = 'references' OR (k.ek = 'calls' AND {kind} IN {er.kinds_sql(er.CALLABLE)}) "
            f"OR (k.ek = 'inherits' AND {kind} IN {er.kinds_sql(er.TYPES)}))")


def write_keys(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the resolution keys of the full snapshot on ``con`` from its own rows, sorted by
    key and indexed (a build, a compaction and a checkpoint import call this)."""
    con.execute(f"""INSERT INTO main.name_stats
        SELECT {FAMILY_SQL.format(l='s.language')} AS fam, s.name, k.ek, count(*), min(s.handle), min(s.path)
        FROM main.symbols s, {EDGE_KINDS} WHERE {_fits()} GROUP BY ALL ORDER BY 2, 1, 3""")
    con.execute(f"""INSERT INTO main.edge_names SELECT DISTINCT {EDGE_NAME_SQL.format(t='target')} AS name, path
        FROM main.edges WHERE kind IN {er.kinds_sql(NAMED_KINDS)} ORDER BY ALL""")
    con.execute(f"INSERT INTO main.file_keys SELECT * FROM ({er.file_keys_sql('main.files')}) ORDER BY ALL")
    con.execute(RESOLUTION_KEY_INDEXES)


class _Runner:
    """Runs the statements of one delta's resolution; with a hook, profiles each.

    How the statements are written so DuckDB reads the base through its indexes: a scan of
    a base table carries one predicate, on its indexed column, against a list (a parameter
    or a small temp table) — another filter on the same scan makes DuckDB scan the whole
    table — and anything else is applied to the materialised result (or through a join).
    Few statements: each costs DuckDB 0.3-3 ms whatever its size, which at this size is
    most of the cost (docs/design.md)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, hook: StatementHook | None, base: str,
                 base_path: str, rows: BaseRows) -> None:
        self.con, self.hook = con, hook
        self.alias, self.base_path, self.rows = base, base_path, rows
        self.over: list[str] = []  # the changed paths
        self.temps: list[str] = []  # temp tables made, dropped at the end
        self.views: list[str] = []  # Arrow tables registered, unregistered at the end
        if hook is not None:
            con.execute("PRAGMA enable_profiling = 'no_output'")
            con.execute("SET profiling_coverage = 'ALL'")

    def __call__(self, label: str, sql: str, params: object = None) -> None:
        self.fetch(label, sql, params)

    def table(self, label: str, name: str, sql: str, params: object = None) -> None:
        """Materialise ``sql`` as temp table ``name``."""
        self.fetch(label, f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}", params)
        self.temps.append(name)

    def base(self, label: str, table: str, cols: str, key_col: str, keys: list) -> str:
        """A relation of the base's ``table`` rows (columns ``cols``) whose ``key_col`` is in
        ``keys``, read through ``BaseRows`` (graph/base_rows.py): the keys an earlier delta
        over the same base read come from memory."""
        name = f"_b_{len(self.views)}"
        self.con.register(name, self.rows.lookup(self.fetch_arrow, self.base_path, self.alias, table, cols,
                                                 key_col, keys, label))
        self.views.append(name)
        return name

    def fetch(self, label: str, sql: str, params: object = None) -> list[tuple]:
        rows = self.con.execute(sql, params).fetchall()
        self._profiled(label)
        return rows

    def fetch_arrow(self, label: str, sql: str, params: object = None) -> pa.Table:
        rows = self.con.sql(sql, params=params).to_arrow_table()
        self._profiled(label)
        return rows

    def _profiled(self, label: str) -> None:
        if self.hook is not None:
            self.hook(label, json.loads(self.con.get_profiling_information(format="json")).get("query", {}))

    def close(self) -> None:
        if self.hook is not None:
            self.con.execute("PRAGMA disable_profiling")
        for name in dict.fromkeys(self.temps):
            try:
                self.con.execute(f"DROP TABLE IF EXISTS {name}")
            except duckdb.Error:
                pass
        for name in self.views:
            try:
                self.con.unregister(name)
            except duckdb.Error:
                pass


def resolve_snapshot(con: duckdb.DuckDBPyConnection, base_path: str | os.PathLike[str] | None = None,
                     hook: StatementHook | None = None, rows: BaseRows | None = BASE_ROWS) -> int:
    """Fill the derived rows of the snapshot being built on ``con``: for a full snapshot its
    resolution (graph/edge_resolution.py) and its keys; for a delta over the full snapshot at
    ``base_path``, its resolution in O(change) where ``resolve`` covers it, else over the
    union, reading the base's rows through ``rows`` (None: none kept after it). Returns
    the number of resolved-edge rows written."""
    if base_path is None:
        n = er.write_resolution(con, None)
        write_keys(con)
        return n
    con.execute(f"ATTACH {sql_str(str(base_path))} AS _delta_base (READ_ONLY)")
    try:
        done = resolve(con, "_delta_base", hook, base_path=str(base_path), rows=rows)
    finally:
        con.execute("DETACH _delta_base")
    if done:
        return int(con.execute("SELECT count(*) FROM main.resolved_edges").fetchall()[0][0])
    return er.write_resolution(con, base_path)


def resolve(con: duckdb.DuckDBPyConnection, base: str, hook: StatementHook | None = None, *,
            base_path: str, rows: BaseRows | None = None) -> bool:
    """Write the delta's ``resolved_edges`` and ``import_targets`` (its changed paths' rows,
    marked) from its own rows and the base attached as ``base``; False (nothing written)
    when the delta adds or removes a path or changes a path's language, which this path
    does not cover. ``base_path``: the file attached as ``base``; ``rows``: the base rows
    kept between deltas over it (graph/base_rows.py; None: none kept past this call)."""
    run = _Runner(con, hook, base, base_path, rows if rows is not None else BaseRows())
    try:
        run.table("overrides", "_d_over", "SELECT DISTINCT path FROM main.overrides")
        run.over = [r[0] for r in run.fetch("read overrides", "SELECT path FROM _d_over ORDER BY path")]
        # The changed paths' files, before and after, with their package keys (Go, Java).
        had = run.base("changed files", "files", "path, language", "path", run.over)
        files = run.fetch("changed files", f"""
            SELECT path, language, 'own' AS side, {PKG_KEY.format(p='path', l='language')} FROM main.files
            UNION ALL SELECT path, language, 'had', {PKG_KEY.format(p='path', l='language')} FROM {had}""")
        if {f[:2] for f in files if f[2] == "own"} != {f[:2] for f in files if f[2] == "had"}:
            return False
        pkgs = sorted({f[3] for f in files if f[1] in er.PACKAGE_IS_DIRECTORY})
        _mapping(run)
        _affected(run, pkgs)
        _resolve(run)
        run("import targets", "INSERT INTO main.import_targets SELECT * FROM _imports")
        run("layout", "INSERT INTO main.meta VALUES (?, ?)", [IMPORT_TARGETS_LAYOUT, LAYOUT_CHANGED_PATHS])
        return True
    finally:
        run.close()
        for name in er.STEP_TABLES:
            try:
                con.execute(f"DROP TABLE IF EXISTS {name}")
            except duckdb.Error:
                pass


NO_FILES = "SELECT NULL::VARCHAR AS path, NULL::VARCHAR AS language WHERE false"


def _by_key(run: _Runner, label: str, given: list[str]) -> str:
    """The base's files (not changed) under the file keys ``given`` (none, no lookup —
    DuckDB scans a vector of rows for an empty list)."""
    if not given:
        return NO_FILES
    rel = run.base(label, "file_keys", "key, path, language", "key", given)
    return f"SELECT path, language FROM {rel} WHERE path NOT IN (SELECT path FROM _d_over)"


def _mapping(run: _Runner) -> None:
    """``_imports``: the changed paths' import mapping, against the union's files those
    imports could name (graph/edge_resolution.py ``lookup_keys``,
    looked up by key in the base and read from the delta's own few files).

    This path runs only when the delta keeps the base's paths and their languages, so the
    union's files are the base's and an import maps as it did in an earlier delta over the
    same base: each (path, language, target) is mapped once per base and kept with its rows
    (graph/base_rows.py) — a delta holds every path changed since its base, most of them
    mapped already by the delta before."""
    imports = run.fetch("own imports", "SELECT DISTINCT e.path, f.language, e.target FROM main.edges e "
                        "JOIN main.files f ON f.path = e.path WHERE e.kind = 'imports' ORDER BY ALL")
    memo = run.rows.memo(run.base_path, "import mapping")
    todo = [i for i in imports if i not in memo]
    if todo:
        keys = er.lookup_keys(todo)
        rel = run.base("files imports could name", "file_keys", "key, path, language", "key", keys)
        rows = run.fetch("files imports could name", f"""
            SELECT DISTINCT key, path, language FROM ({er.file_keys_sql('main.files')})
              WHERE key IN (SELECT unnest($keys))
            UNION SELECT key, path, language FROM {rel} WHERE path NOT IN (SELECT path FROM _d_over)""",
                         {"keys": keys})
        index = er.FileIndex(er.index_rows(rows, todo))
        for imp in todo:
            memo[imp] = er.import_files(index, *imp)
        run.rows.note(run.base_path, len(todo))
    cols: er.Mapping = {"path": [], "target": [], "target_path": [], "item": []}
    for path, lang, target in imports:
        for tp, item in memo[(path, lang, target)]:
            for c, v in zip(cols, (path, target, tp, item), strict=True):
                cols[c].append(v)
    run.temps.append("_imports")
    er.register_imports(run.con, cols)


def _stats(run: _Runner) -> None:
    """``_d_stats``: for each (family, name, edge kind) of the names the delta's affected
    edges can use (``_d_names``: the changed symbols' before and after, and the names the
    changed paths' edges use — an unchanged file's affected edge is named like a changed
    symbol), the repository level before (the base's key: ``n0``, ``h0`` when unique) and
    after the change (``n1``; ``h1``/``p1`` the one symbol when ``n1`` is 1): the base's
    count minus the changed paths' base rows plus their new rows, with the one remaining
    base symbol looked up by name where the others went with the change."""
    names = [r[0] for r in run.fetch("names", "SELECT name FROM _d_names")]
    stats = run.base("keys", "name_stats", "fam, name, ek, n, handle, path", "name", names)
    run.table("keys", "_d_stats", f"""
        WITH f AS (SELECT {FAMILY_SQL.format(l='s.language')} AS fam, s.name, k.ek, s.side, s.handle, s.path
          FROM (SELECT language, name, kind, handle, path, -1 AS side FROM _d_removed
                UNION ALL SELECT language, name, kind, handle, path, 1 FROM main.symbols) s, {EDGE_KINDS}
          WHERE {_fits()}),
        d AS (SELECT fam, name, ek, count(*) FILTER (WHERE side = 1) AS added,
                     count(*) FILTER (WHERE side = -1) AS removed,
                     min(handle) FILTER (WHERE side = 1) AS ah, min(path) FILTER (WHERE side = 1) AS ap
              FROM f GROUP BY ALL),
        b AS (SELECT * FROM {stats})
        SELECT coalesce(b.fam, d.fam) AS fam, coalesce(b.name, d.name) AS name, coalesce(b.ek, d.ek) AS ek,
               coalesce(b.n, 0) AS n0, CASE WHEN b.n = 1 THEN b.handle END AS h0,
               coalesce(b.n, 0) - coalesce(d.removed, 0) + coalesce(d.added, 0) AS n1,
               coalesce(d.added, 0) AS added, coalesce(d.removed, 0) AS removed,
               CASE WHEN coalesce(d.added, 0) = 1 THEN d.ah WHEN coalesce(d.removed, 0) = 0 THEN b.handle END AS h1,
               CASE WHEN coalesce(d.added, 0) = 1 THEN d.ap WHEN coalesce(d.removed, 0) = 0 THEN b.path END AS p1
        FROM b FULL JOIN d ON b.fam = d.fam AND b.name = d.name AND b.ek = d.ek""")
    # Unique after the change because the other base symbols of the name went with it: which
    # one is left is looked up by name — a scan of the base's symbol names, the one read here
    # that is not O(change): a name index would cost a full snapshot 3.2 MB of 41 MB on ruff
    # for a case that needs a duplicate definition removed (docs/design.md).
    left = [r[0] for r in run.fetch("names left to one", "SELECT DISTINCT name FROM _d_stats "
                                    "WHERE n1 = 1 AND added = 0 AND removed > 0")]
    if left:
        run("the one left", f"""UPDATE _d_stats SET h1 = r.h, p1 = r.p FROM (
              SELECT {FAMILY_SQL.format(l='s.language')} AS fam, s.name, k.ek, min(s.handle) AS h, min(s.path) AS p
              FROM (SELECT * FROM {run.alias}.symbols WHERE name IN (SELECT unnest($names))) s, {EDGE_KINDS}
              WHERE s.path NOT IN (SELECT path FROM _d_over) AND {_fits()} GROUP BY ALL) r
            WHERE _d_stats.n1 = 1 AND _d_stats.added = 0 AND _d_stats.removed > 0
              AND r.fam = _d_stats.fam AND r.name = _d_stats.name AND r.ek = _d_stats.ek""", {"names": left})


def _affected(run: _Runner, pkgs: list[str]) -> None:
    """``_aff_edges``: the union's edges whose resolution can differ from the base's — the
    set graph/edge_resolution.py ``_affected`` finds for a delta that keeps its paths: the
    changed paths' edges; the import edges of files importing a changed path; and the edges
    named like a changed symbol (before or after) whose file imports a changed path, is in
    its package (Go, Java: same directory and language — ``pkgs``; the package level reaches
    no other language) or whose name's uniqueness moved."""
    removed = run.base("changed paths' base symbols", "symbols", SYMBOL_COLS, "path", run.over)
    run.table("changed paths' base symbols", "_d_removed", f"SELECT {SYMBOL_COLS} FROM {removed}")
    run.table("names", "_d_names", f"""SELECT name, bool_or(changed) AS changed FROM (
          SELECT name, true AS changed FROM main.symbols UNION ALL SELECT name, true FROM _d_removed
          UNION ALL SELECT {EDGE_NAME_SQL.format(t='target')}, false FROM main.edges
            WHERE kind IN {er.kinds_sql(NAMED_KINDS)}) GROUP BY name""")
    _stats(run)
    run.table("moved names", "_d_moved", """SELECT DISTINCT s.name FROM _d_stats s SEMI JOIN _d_names n
        ON n.name = s.name AND n.changed WHERE s.h0 IS DISTINCT FROM (CASE WHEN s.n1 = 1 THEN s.h1 END)""")
    moved = [r[0] for r in run.fetch("moved names", "SELECT name FROM _d_moved")]
    naming = (f"""SELECT path, 'moved' FROM {run.base('near files', 'edge_names', 'name, path', 'name', moved)}
                  WHERE path NOT IN (SELECT path FROM _d_over)""") if moved else NO_FILES
    importing = run.base("near files", "import_targets", "path, target_path", "target_path", run.over)
    near = run.fetch("near files", f"""
        SELECT path, 'import' AS why FROM {importing} WHERE path NOT IN (SELECT path FROM _d_over)
        UNION {naming}
        UNION SELECT path, 'package' FROM ({_by_key(run, 'near files', pkgs)})""")
    run.table("near files", "_d_near", "SELECT unnest($p) AS path, unnest($w) AS why",
              {"p": [r[0] for r in near], "w": [r[1] for r in near]})
    near_edges = (f"""UNION ALL
        SELECT {EDGE_COLS} FROM (
          SELECT *, CASE WHEN kind <> 'imports' THEN {EDGE_NAME_SQL.format(t='target')} END AS name
          FROM {run.base('affected edges', 'edges', EDGE_COLS, 'path', sorted({r[0] for r in near}))}
          WHERE kind IN {er.kinds_sql(er.RESOLVED_KINDS)}) e
        WHERE (e.kind = 'imports' AND e.path IN (SELECT path FROM _d_near WHERE why = 'import'))
           OR (e.kind <> 'imports' AND e.name IN (SELECT name FROM _d_names WHERE changed)
               AND (e.path IN (SELECT path FROM _d_near WHERE why <> 'moved')
                    OR e.name IN (SELECT name FROM _d_moved)))""" if near else "")
    run.table("affected edges", "_aff_edges", f"""
        SELECT {EDGE_COLS} FROM main.edges
          WHERE kind IN {er.kinds_sql(er.RESOLVED_KINDS)} {near_edges}""")


def _resolve(run: _Runner) -> None:
    """The resolution steps over ``_aff_edges``, reading the symbols of the files those
    edges' levels can reach (their own, the files they import, their package's for Go and
    Java) and the repository level from the keys (``_stats``)."""
    aff = [r[0] for r in run.fetch("edge files", "SELECT DISTINCT path FROM _aff_edges ORDER BY path")]
    files = run.base("edge files", "files", "path, language", "path", aff)
    run.table("edge files", "_d_files", f"""SELECT path, language FROM main.files UNION ALL
        SELECT path, language FROM {files} WHERE path NOT IN (SELECT path FROM _d_over)""")
    imps = run.base("their imports", "import_targets", "path, target, target_path, item", "path", aff)
    run.table("their imports", "_d_imp", f"""SELECT * FROM _imports UNION ALL
        SELECT path, target, target_path, item FROM {imps} WHERE path NOT IN (SELECT path FROM _d_over)""")
    pkgs = [r[0] for r in run.fetch("edge packages", f"SELECT DISTINCT {PKG_KEY.format(p='path', l='language')} "
                                    f"FROM _d_files WHERE language IN {PACKAGE_LANGS}")]
    reach = [r[0] for r in run.fetch("reachable symbols", f"""SELECT path FROM _d_files
        UNION SELECT target_path FROM _d_imp UNION SELECT path FROM ({_by_key(run, 'reachable symbols', pkgs)})
        ORDER BY 1""")]
    syms = run.base("reachable symbols", "symbols", SYMBOL_COLS, "path", reach)
    run.table("reachable symbols", "_d_sym", f"""SELECT {SYMBOL_COLS} FROM main.symbols UNION ALL
        SELECT {SYMBOL_COLS} FROM {syms} WHERE path NOT IN (SELECT path FROM _d_over)""")
    for name, sql in er.resolution_steps("_d_sym", "_aff_edges", "_d_files", "_d_imp"):
        if name == "_r_uniq":  # the repository level from the keys, not from the rows read
            sql = "SELECT fam, name, ek, n1 AS n, h1 AS h, p1 AS p FROM _d_stats WHERE n1 > 0"
        run(name, f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
    run("resolved edges", "INSERT INTO main.resolved_edges " + er.FINAL_SQL)
