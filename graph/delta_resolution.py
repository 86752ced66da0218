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

from citegraph.graph import edge_resolution as er
from citegraph.graph.schema import IMPORT_TARGETS_LAYOUT, LAYOUT_CHANGED_PATHS
from citegraph.graph.snapshot_writer import sql_str

# What a test may inject (graph/build_hooks.py ``BuildHooks.statement``): called after each
# statement of a delta's resolution with a label and DuckDB's profile of it (rows scanned).
StatementHook = Callable[[str, dict], None]

FAMILY_SQL = ("coalesce(CASE {l} WHEN 'typescript' THEN 'js' WHEN 'tsx' THEN 'js' WHEN 'javascript' "
              "THEN 'js' END, {l})")
EDGE_NAME_SQL = "regexp_extract({t}, '([^.:]+)$', 1)"
# The file keys (graph/schema.py FILE_KEYS), by the expressions edge_resolution.py's
# whole-union computation uses.
STEM_KEY = "'stem:' || split_part(ltrim(parse_filename({p}), '.'), '.', 1)"
DIRNAME_KEY = "'dirname:' || parse_filename(parse_dirpath({p}))"
PKG_KEY = "'pkg:' || parse_dirpath({p}) || '/' || {l}"
NAMED_KINDS = er.RESOLVED_KINDS[:3]  # the kinds resolved by a name (imports are by path)
KEY_INDEXES = """
CREATE INDEX import_targets_path ON import_targets(path);
CREATE INDEX import_targets_target ON import_targets(target_path);
CREATE INDEX name_stats_name ON name_stats(name);
CREATE INDEX edge_names_name ON edge_names(name);
CREATE INDEX file_keys_key ON file_keys(key);
"""
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
    con.execute(f"""INSERT INTO main.file_keys SELECT * FROM (
          SELECT {STEM_KEY.format(p='path')} AS key, path, language FROM main.files WHERE language IS NOT NULL
          UNION ALL SELECT {DIRNAME_KEY.format(p='path')}, path, language FROM main.files WHERE language IS NOT NULL
          UNION ALL SELECT {PKG_KEY.format(p='path', l='language')}, path, language FROM main.files
            WHERE language IN {PACKAGE_LANGS}) ORDER BY ALL""")
    con.execute(KEY_INDEXES)


class _Runner:
    """Runs the statements of one delta's resolution; with a hook, profiles each.

    How the statements are written so DuckDB reads the base through its indexes: a scan of
    a base table carries one predicate, on its indexed column, against a list (a parameter
    or a small temp table) — another filter on the same scan makes DuckDB scan the whole
    table — and anything else is applied to the materialised result."""

    def __init__(self, con: duckdb.DuckDBPyConnection, hook: StatementHook | None) -> None:
        self.con, self.hook = con, hook
        self.over: list[str] = []  # the changed paths
        if hook is not None:
            con.execute("PRAGMA enable_profiling = 'no_output'")
            con.execute("SET profiling_coverage = 'ALL'")

    def __call__(self, label: str, sql: str, params: object = None) -> None:
        self.fetch(label, sql, params)

    def fetch(self, label: str, sql: str, params: object = None) -> list[tuple]:
        rows = self.con.execute(sql, params).fetchall()
        if self.hook is not None:
            self.hook(label, json.loads(self.con.get_profiling_information(format="json")).get("query", {}))
        return rows

    def empty(self, table: str, like: str) -> None:
        """``table`` as an empty table of ``like``'s columns (a lookup skipped: no keys)."""
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM ({like}) WHERE false")

    def close(self) -> None:
        if self.hook is not None:
            self.con.execute("PRAGMA disable_profiling")


TEMP_TABLES = ("_d_over", "_d_removed", "_d_names", "_d_fit", "_d_stats", "_d_rest", "_d_moved", "_d_importers",
               "_d_moved_paths", "_d_dir_paths", "_d_near", "_d_near_edges", "_aff_edges", "_d_files", "_d_imp",
               "_d_sym", "_d_edge_names", "_d_uniq", "_d_pkg_paths", "_d_rest_syms", "_d_changed", "_imports")


def resolve_snapshot(con: duckdb.DuckDBPyConnection, base_path: str | os.PathLike[str] | None = None,
                     hook: StatementHook | None = None) -> int:
    """Fill the derived rows of the snapshot being built on ``con``: for a full snapshot its
    resolution (graph/edge_resolution.py) and its keys; for a delta over the full snapshot at
    ``base_path``, its resolution in O(change) where ``resolve`` covers it, else over the
    union. Returns the number of resolved-edge rows written."""
    if base_path is None:
        n = er.write_resolution(con, None)
        write_keys(con)
        return n
    con.execute(f"ATTACH {sql_str(str(base_path))} AS _delta_base (READ_ONLY)")
    try:
        done = resolve(con, "_delta_base", hook)
    finally:
        con.execute("DETACH _delta_base")
    if done:
        return int(con.execute("SELECT count(*) FROM main.resolved_edges").fetchall()[0][0])
    return er.write_resolution(con, base_path)


def resolve(con: duckdb.DuckDBPyConnection, base: str, hook: StatementHook | None = None) -> bool:
    """Write the delta's ``resolved_edges`` and ``import_targets`` (its changed paths' rows,
    marked) from its own rows and the base attached as ``base``; False (nothing written)
    when the delta adds or removes a path or changes a path's language, which this path
    does not cover."""
    run = _Runner(con, hook)
    try:
        run("overrides", "CREATE OR REPLACE TEMP TABLE _d_over AS SELECT DISTINCT path FROM main.overrides")
        run.over = [r[0] for r in run.fetch("read overrides", "SELECT path FROM _d_over ORDER BY path")]
        own = set(run.fetch("own files", "SELECT path, language FROM main.files"))
        had = set(run.fetch("base files of the changed paths", f"SELECT path, language FROM {base}.files "
                            "WHERE path IN (SELECT unnest($p))", {"p": run.over}))
        if own != had:
            return False
        _mapping(run, base)
        _affected(run, base)
        _resolve(run, base)
        run("import targets", "INSERT INTO main.import_targets SELECT * FROM _imports")
        run("layout", "INSERT INTO main.meta VALUES (?, ?)", [IMPORT_TARGETS_LAYOUT, LAYOUT_CHANGED_PATHS])
        return True
    finally:
        run.close()
        for name in (*TEMP_TABLES, *er.STEP_TABLES):
            try:
                con.execute(f"DROP TABLE IF EXISTS {name}")
            except duckdb.Error:
                pass


def _by_key(run: _Runner, base: str, out: str, keys: list[str]) -> None:
    """``out``: the base's files (not changed) under the file keys ``keys``."""
    like = f"SELECT path, language FROM {base}.file_keys"
    if not keys:
        run.empty(out, like)
        return
    run(f"{out}: by key", f"""CREATE OR REPLACE TEMP TABLE {out} AS SELECT DISTINCT path, language
        FROM {base}.file_keys WHERE key IN (SELECT unnest($keys)) AND path NOT IN (SELECT path FROM _d_over)""",
        {"keys": sorted(set(keys))})


def _mapping(run: _Runner, base: str) -> None:
    """``_imports``: the changed paths' import mapping, against the union's files those
    imports could name (the subset graph/edge_resolution.py ``_changed_mapping`` reads,
    looked up by key in the base and read from the delta's own few files)."""
    imports = run.fetch("own imports", "SELECT DISTINCT e.path, f.language, e.target FROM main.edges e "
                        "JOIN main.files f ON f.path = e.path WHERE e.kind = 'imports' ORDER BY ALL")
    rows: list[tuple] = []
    if imports:
        stems, dirs = er.import_keys(imports)
        keys = [f"stem:{s}" for s in stems] + [f"dirname:{d}" for d in dirs]
        _by_key(run, base, "_d_named_files", keys)
        rows = run.fetch("files imports could name", f"""
            SELECT path, language FROM main.files WHERE language IS NOT NULL
              AND ({STEM_KEY.format(p='path')} IN (SELECT unnest($keys))
                   OR {DIRNAME_KEY.format(p='path')} IN (SELECT unnest($keys)))
            UNION SELECT path, language FROM _d_named_files ORDER BY path""", {"keys": keys})
        run.con.execute("DROP TABLE _d_named_files")
    er.register_imports(run.con, er.map_imports(er.FileIndex(rows), imports))


def _package_keys(run: _Runner, files: str) -> list[str]:
    """The package keys (Go, Java: directory and language) of the files ``files`` lists."""
    return [r[0] for r in run.fetch(f"packages of {files}", f"SELECT DISTINCT {PKG_KEY.format(p='path', l='language')} "
                                    f"FROM ({files}) WHERE language IN {PACKAGE_LANGS}")]


def _stats(run: _Runner, base: str, names: str, out: str) -> None:
    """``out``: for each (family, name, edge kind) of the names in table ``names``, the
    repository level before (the base's key: ``n0``, ``h0`` when unique) and after the
    change (``n1``; ``h1``/``p1`` the one symbol when ``n1`` is 1): the base's count minus
    the changed paths' base rows plus their new rows, with the one remaining base symbol
    looked up by name where the others went with the change."""
    run(f"{out}: fits", f"""CREATE OR REPLACE TEMP TABLE _d_fit AS
        SELECT {FAMILY_SQL.format(l='s.language')} AS fam, s.name, k.ek, s.side, s.handle, s.path
        FROM (SELECT language, name, kind, handle, path, -1 AS side FROM _d_removed
              UNION ALL SELECT language, name, kind, handle, path, 1 FROM main.symbols) s, {EDGE_KINDS}
        WHERE s.name IN (SELECT name FROM {names}) AND {_fits()}""")
    run(f"{out}: base keys", f"""CREATE OR REPLACE TEMP TABLE _d_keys AS SELECT * FROM {base}.name_stats
        WHERE name IN (SELECT name FROM {names})""")
    run(f"{out}: keys", f"""CREATE OR REPLACE TEMP TABLE {out} AS
        WITH d AS (SELECT fam, name, ek, count(*) FILTER (WHERE side = 1) AS added,
                     count(*) FILTER (WHERE side = -1) AS removed,
                     min(handle) FILTER (WHERE side = 1) AS ah, min(path) FILTER (WHERE side = 1) AS ap
              FROM _d_fit GROUP BY ALL)
        SELECT coalesce(b.fam, d.fam) AS fam, coalesce(b.name, d.name) AS name, coalesce(b.ek, d.ek) AS ek,
               coalesce(b.n, 0) AS n0, CASE WHEN b.n = 1 THEN b.handle END AS h0,
               coalesce(b.n, 0) - coalesce(d.removed, 0) + coalesce(d.added, 0) AS n1,
               coalesce(d.added, 0) AS added, coalesce(d.removed, 0) AS removed,
               CASE WHEN coalesce(d.added, 0) = 1 THEN d.ah WHEN coalesce(d.removed, 0) = 0 THEN b.handle END AS h1,
               CASE WHEN coalesce(d.added, 0) = 1 THEN d.ap WHEN coalesce(d.removed, 0) = 0 THEN b.path END AS p1
        FROM _d_keys b FULL JOIN d ON b.fam = d.fam AND b.name = d.name AND b.ek = d.ek""")
    run.con.execute("DROP TABLE _d_keys")
    # Unique after the change because the other base symbols of the name went with it: which
    # one is left is looked up by name (such a name has few symbols: the removed ones + 1).
    left = [r[0] for r in run.fetch(f"{out}: names left to one", f"SELECT DISTINCT name FROM {out} "
                                    "WHERE n1 = 1 AND added = 0 AND removed > 0")]
    if not left:
        return
    run(f"{out}: their symbols", f"""CREATE OR REPLACE TEMP TABLE _d_rest_syms AS SELECT * FROM {base}.symbols
        WHERE name IN (SELECT unnest($names))""", {"names": left})
    run(f"{out}: the one left", f"""UPDATE {out} SET h1 = r.h, p1 = r.p FROM (
          SELECT {FAMILY_SQL.format(l='s.language')} AS fam, s.name, k.ek, min(s.handle) AS h, min(s.path) AS p
          FROM _d_rest_syms s, {EDGE_KINDS} WHERE s.path NOT IN (SELECT path FROM _d_over) AND {_fits()}
          GROUP BY ALL) r
        WHERE {out}.n1 = 1 AND {out}.added = 0 AND {out}.removed > 0
          AND r.fam = {out}.fam AND r.name = {out}.name AND r.ek = {out}.ek""")


def _affected(run: _Runner, base: str) -> None:
    """``_aff_edges``: the union's edges whose resolution can differ from the base's — the
    set graph/edge_resolution.py ``_affected`` finds for a delta that keeps its paths: the
    changed paths' edges; the import edges of files importing a changed path; and the edges
    named like a changed symbol (before or after) whose file imports a changed path, is in
    its package (Go, Java: same directory and language — the package level reaches no
    other) or whose name's uniqueness moved."""
    run("changed paths' base symbols", f"""CREATE OR REPLACE TEMP TABLE _d_removed AS SELECT * FROM {base}.symbols
        WHERE path IN (SELECT unnest($p))""", {"p": run.over})
    run("changed names", """CREATE OR REPLACE TEMP TABLE _d_names AS
        SELECT DISTINCT name FROM main.symbols UNION SELECT name FROM _d_removed""")
    _stats(run, base, "_d_names", "_d_stats")
    run("moved names", """CREATE OR REPLACE TEMP TABLE _d_moved AS SELECT DISTINCT name FROM _d_stats
        WHERE h0 IS DISTINCT FROM (CASE WHEN n1 = 1 THEN h1 END)""")
    run("importers", f"""CREATE OR REPLACE TEMP TABLE _d_importers AS SELECT DISTINCT path
        FROM {base}.import_targets WHERE target_path IN (SELECT unnest($p))
          AND path NOT IN (SELECT path FROM _d_over)""", {"p": run.over})
    run("paths naming a moved name", f"""CREATE OR REPLACE TEMP TABLE _d_moved_paths AS SELECT DISTINCT path
        FROM {base}.edge_names WHERE name IN (SELECT name FROM _d_moved) AND path NOT IN (SELECT path FROM _d_over)""")
    run("changed files", f"""CREATE OR REPLACE TEMP TABLE _d_changed AS SELECT path, language FROM main.files
        UNION ALL SELECT path, language FROM {base}.files WHERE path IN (SELECT unnest($p))""", {"p": run.over})
    pkgs = _package_keys(run, "SELECT * FROM _d_changed")
    _by_key(run, base, "_d_dir_paths", pkgs)
    near = run.fetch("near files", """SELECT path FROM _d_importers UNION SELECT path FROM _d_moved_paths
        UNION SELECT path FROM _d_dir_paths""")
    if near:
        run("near edges", f"""CREATE OR REPLACE TEMP TABLE _d_near_edges AS SELECT * FROM {base}.edges
            WHERE path IN (SELECT unnest($p))""", {"p": [r[0] for r in near]})
    else:
        run.empty("_d_near_edges", f"SELECT * FROM {base}.edges")
    run("affected edges", f"""CREATE OR REPLACE TEMP TABLE _aff_edges AS
        SELECT path, source_handle, kind, target, line, blob_id FROM main.edges
          WHERE kind IN {er.kinds_sql(er.RESOLVED_KINDS)}
        UNION ALL
        SELECT path, source_handle, kind, target, line, blob_id FROM (
          SELECT *, CASE WHEN kind <> 'imports' THEN {EDGE_NAME_SQL.format(t='target')} END AS name
          FROM _d_near_edges WHERE kind IN {er.kinds_sql(er.RESOLVED_KINDS)}) e
          WHERE (e.kind = 'imports' AND e.path IN (SELECT path FROM _d_importers))
             OR (e.kind <> 'imports' AND e.name IN (SELECT name FROM _d_names)
                 AND (e.path IN (SELECT path FROM _d_importers) OR e.name IN (SELECT name FROM _d_moved)
                      OR e.path IN (SELECT path FROM _d_dir_paths)))""")


def _resolve(run: _Runner, base: str) -> None:
    """The resolution steps over ``_aff_edges``, reading the symbols of the files those
    edges' levels can reach (their own, the files they import, their package's for Go and
    Java) and the repository level from the keys (``_stats``)."""
    paths = [r[0] for r in run.fetch("edge paths", "SELECT DISTINCT path FROM _aff_edges WHERE path NOT IN "
                                     "(SELECT path FROM _d_over) ORDER BY path")]
    for table, sql in (("_d_files", f"SELECT path, language FROM {base}.files"),
                       ("_d_imp", f"SELECT path, target, target_path, item FROM {base}.import_targets")):
        if paths:
            run(table, f"CREATE OR REPLACE TEMP TABLE {table} AS {sql} WHERE path IN (SELECT unnest($p))",
                {"p": paths})
        else:
            run.empty(table, sql)
    run("union files", "INSERT INTO _d_files SELECT path, language FROM main.files")
    run("union imports", "INSERT INTO _d_imp SELECT * FROM _imports")
    _by_key(run, base, "_d_pkg_paths", _package_keys(run, "SELECT * FROM _d_files"))
    reach = [r[0] for r in run.fetch("reachable paths", """SELECT path FROM _d_files UNION SELECT target_path
        FROM _d_imp UNION SELECT path FROM _d_pkg_paths EXCEPT SELECT path FROM _d_over ORDER BY 1""")]
    if reach:
        run("reachable symbols", f"""CREATE OR REPLACE TEMP TABLE _d_sym AS SELECT * FROM {base}.symbols
            WHERE path IN (SELECT unnest($p))""", {"p": reach})
    else:
        run.empty("_d_sym", f"SELECT * FROM {base}.symbols")
    run("union symbols", "INSERT INTO _d_sym SELECT * FROM main.symbols")
    run("edge names", f"""CREATE OR REPLACE TEMP TABLE _d_edge_names AS SELECT DISTINCT
        {EDGE_NAME_SQL.format(t='target')} AS name FROM _aff_edges WHERE kind <> 'imports'""")
    _stats(run, base, "_d_edge_names", "_d_uniq")
    for name, sql in er.resolution_steps("_d_sym", "_aff_edges", "_d_files", "_d_imp"):
        if name == "_r_uniq":  # the repository level from the keys, not from the rows read
            sql = "SELECT fam, name, ek, n1 AS n, h1 AS h, p1 AS p FROM _d_uniq WHERE n1 > 0"
        run(name, f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
    run("resolved edges", "INSERT INTO main.resolved_edges " + er.FINAL_SQL)
