"""Edge resolution (SPEC §21, docs/graph.md): each ``calls``/``references``/``inherits``
/``imports`` edge's target name resolved to a symbol handle where exactly one candidate
fits the language's scoping, with an authority tier.

Why derived data: an edge's resolution depends on other files (an imported module, a
name defined once in the repository), so it cannot be cached per blob like the edge rows
are. It is computed per snapshot, by SQL, from the snapshot's own (for a delta: the union)
symbol, edge and file rows, after they are written and before the snapshot is published.
A delta stores the rows of the edges whose resolution can differ from its base's, laid
over the base's by readers; they are a pure function of the union rows, so an incremental
snapshot's resolution is identical to a clean build's (tests/test_incremental.py compares
it). This module computes them over the whole union; graph/delta_resolution.py computes
them in O(change) for a delta that keeps its base's paths, and calls this otherwise.
Measured cost: bench/RESULTS.md "Edge resolution".

Rules, first level with a candidate decides (docs/graph.md):
1. ``scope``: children, named so, of the edge's source symbol or of its nearest enclosing
   symbol that has such a child (a method calling ``self.helper`` finds ``Cls.helper``),
   the file's top-level symbols last (the module scope);
2. ``file``: any symbol of the same file (a method of another class);
3. ``package``: the same directory, for languages whose package is the directory (Go, Java);
4. ``import``: symbols of the files the edge's file imports (import targets mapped to
   files per language, ``import_files``);
5. ``repository``: the one symbol of that name in the repository (same language family).
Exactly one candidate at levels 1-4 → tier ``resolved``; at level 5 → ``name-only`` (a
unique name, not a scoping fact); none, or several at the deciding level → ``unresolved``
(an ambiguous name is never guessed). Candidate kinds fit the edge kind: calls reach
callables, inherits reach types, references reach anything.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable

import duckdb
import pyarrow as pa

from citegraph.graph.schema import IMPORT_TARGETS_LAYOUT, LAYOUT_CHANGED_PATHS

RESOLVED_EDGE_COLUMNS = ("path", "source_handle", "kind", "target", "line", "target_handle", "target_path",
                         "tier", "rule")
TIERS = ("resolved", "name-only", "unresolved")
RESOLVED_KINDS = ("calls", "references", "inherits", "imports")

CALLABLE = ("function", "method", "class", "struct", "record", "object")
TYPES = ("class", "interface", "trait", "struct", "type", "protocol", "record", "enum", "object")
# Languages that see each other's symbols (a TypeScript file imports JavaScript).
FAMILY = {"typescript": "js", "tsx": "js", "javascript": "js"}
PACKAGE_IS_DIRECTORY = ("go", "java")

JS_EXTS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")


def write_resolution(con: duckdb.DuckDBPyConnection, base_path: str | os.PathLike[str] | None = None) -> int:
    """Fill ``resolved_edges`` of the snapshot being built on ``con`` (its own tables, laid
    over the base snapshot at ``base_path`` for a delta, as readers see them). Returns the
    number of rows written.

    A delta recomputes only the edges whose resolution can differ from its base's
    (``_affected``) and stores their rows; readers lay them over the base's rows of the
    other edges (graph/snapshot_reader.py). What readers see is the same function of the
    union rows as a full computation (the incremental == clean property test compares
    them), at a fraction of the cost (bench/RESULTS.md). ``import_targets`` is small and
    stored whole."""
    alias = None
    if base_path is not None:
        alias = "_resolve_base"
        quoted = str(base_path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS {alias} (READ_ONLY)")
    try:
        for t in ("symbols", "edges", "files"):
            if alias:
                con.execute(f"CREATE OR REPLACE TEMP VIEW _u_{t} AS SELECT * FROM main.{t} UNION ALL "
                            f"SELECT x.* FROM {alias}.{t} x WHERE NOT EXISTS "
                            f"(SELECT 1 FROM main.overrides o WHERE o.path = x.path)")
            else:
                con.execute(f"CREATE OR REPLACE TEMP VIEW _u_{t} AS SELECT * FROM main.{t}")
        if alias is None:
            register_imports(con, _mapping(con, None))
            _resolve(con, "_u_edges")
        else:
            layered = _delta_mapping(con, alias)
            _affected(con, alias)
            _resolve(con, "_aff_edges")  # layered: readers lay these rows over the base's
        if alias is not None and layered:
            con.execute("INSERT INTO main.import_targets SELECT * FROM _imports "
                        "WHERE path IN (SELECT path FROM main.overrides)")
            con.execute("INSERT INTO main.meta VALUES (?, ?)", [IMPORT_TARGETS_LAYOUT, LAYOUT_CHANGED_PATHS])
        else:
            con.execute("INSERT INTO main.import_targets SELECT * FROM _imports")
        return int(con.execute("SELECT count(*) FROM main.resolved_edges").fetchall()[0][0])
    finally:
        for name in (*STEP_TABLES, *AFFECTED_TABLES, "_imports"):
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DROP TABLE IF EXISTS {name}")
        for t in ("symbols", "edges", "files"):
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DROP VIEW IF EXISTS _u_{t}")
        if alias:
            con.execute(f"DETACH {alias}")


AFFECTED_TABLES = ("_aff_names", "_aff_sym", "_aff_named", "_aff_before", "_aff_after", "_aff_moved",
                   "_aff_importers", "_aff_own", "_aff_edges1", "_aff_edges", "_aff_files")
STEP_TABLES = ("_r_e", "_r_s", "_r_anc", "_r_imp", "_r_imp_syms", "_r_uniq", "_r_cand", "_r_best", "_r_impe")


def _resolve(con: duckdb.DuckDBPyConnection, edges: str) -> None:
    for name, sql in resolution_steps("_u_symbols", edges, "_u_files", "_imports"):
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
    con.execute("INSERT INTO main.resolved_edges " + FINAL_SQL)


Mapping = dict[str, list]  # columns path, target, target_path, item

UNION_SOURCE_FILES = "SELECT path, language FROM _u_files WHERE language IS NOT NULL"
# File-name stems an import can name without spelling them (a package's ``__init__``, a
# directory's ``index``, Rust's ``mod``/``lib``/``main`` and a crate's ``src.rs``).
IMPLIED_STEMS = ("__init__", "index", "mod", "lib", "main")
# A language's family: languages that see each other's symbols (FAMILY), as SQL over column {l}.
FAMILY_SQL = ("coalesce(CASE {l} WHEN 'typescript' THEN 'js' WHEN 'tsx' THEN 'js' WHEN 'javascript' "
              "THEN 'js' END, {l})")
# A file's package key (Go, Java: the package level), as SQL over columns {p} (path), {l}.
PKG_KEY_SQL = "'pkg:' || parse_dirpath({p}) || '/' || {l}"
_TOKEN = re.compile(r"[^./:]+")
_SEGMENT = re.compile(r"[^/:]+")


def _mapping(con: duckdb.DuckDBPyConnection, only: str | None, files_sql: str = UNION_SOURCE_FILES) -> Mapping:
    """The import mapping of the union's import edges (of the files ``only`` selects, or
    all), against the paths ``files_sql`` lists."""
    where = f" AND e.path IN ({only})" if only else ""
    imports = con.execute("SELECT DISTINCT e.path, f.language, e.target FROM _u_edges e JOIN _u_files f "
                          f"ON f.path = e.path WHERE e.kind = 'imports'{where} ORDER BY ALL").fetchall()
    index = FileIndex(con.execute(files_sql + " ORDER BY path").fetchall())
    return map_imports(index, imports)


def map_imports(index: FileIndex, imports: list[tuple[str, str, str]]) -> Mapping:
    cols: Mapping = {"path": [], "target": [], "target_path": [], "item": []}
    for path, lang, target in imports:
        for tp, item in import_files(index, path, lang, target):
            for c, v in zip(cols, (path, target, tp, item), strict=True):
                cols[c].append(v)
    return cols


# The keys a source file can be looked up by when a delta maps its changed paths' imports
# (graph/delta_resolution.py stores them in a full snapshot's ``file_keys``): ``stem:`` its
# file-name stem; ``dirname:`` its directory's name; ``implied:`` its directory's name when
# its stem is implied (IMPLIED_STEMS: a package's ``__init__``, a directory's ``index``, a
# Rust ``mod``/``lib``/``main``); ``crate:`` a Rust crate's name for its ``src/lib.rs``;
# ``pkg:`` its directory and language (Go, Java: the package level). Paths split on "/"
# only, as FileIndex does.
_STEM = "split_part(ltrim(parse_filename(path, false, 'forward_slash'), '.'), '.', 1)"
_DIRNAME = "parse_filename(parse_dirpath(path, 'forward_slash'), false, 'forward_slash')"
FILE_KEYS_SQL = f"""SELECT * FROM (
  SELECT 'stem:' || {_STEM} AS key, path, language FROM {{files}}
  UNION ALL SELECT 'dirname:' || {_DIRNAME}, path, language FROM {{files}}
  UNION ALL SELECT 'implied:' || {_DIRNAME}, path, language FROM {{files}} WHERE {_STEM} IN {{implied}}
  UNION ALL SELECT 'crate:' || replace(parse_filename(parse_dirpath(parse_dirpath(path, 'forward_slash'),
      'forward_slash'), false, 'forward_slash'), '-', '_'), path, language FROM {{files}}
    WHERE language = 'rust' AND path LIKE '%/src/lib.rs'
  UNION ALL SELECT {PKG_KEY_SQL.format(p='path', l='language')}, path, language FROM {{files}}
    WHERE language IN {{pkg_langs}}
) WHERE language IS NOT NULL"""


def file_keys_sql(files: str) -> str:
    """The (key, path, language) rows of the source files in table ``files``."""
    return FILE_KEYS_SQL.format(files=files, implied=kinds_sql(IMPLIED_STEMS), pkg_langs=kinds_sql(PACKAGE_IS_DIRECTORY))


def lookup_keys(imports: list[tuple[str, str, str]]) -> list[str]:
    """The file keys (``file_keys_sql``) under which every file the ``(path, language,
    target)`` imports can name lies — so an index of only those files maps them exactly as
    one of every file (tests/test_edge_resolution.py holds it).

    Every lookup ``import_files`` makes is a path whose stem is a token of a target or of
    the importing path; or a file with an implied stem in a directory named so (a target
    names the directory; relative imports and ``self``/``super`` climb the importer's own
    directories; a Rust crate root is a ``src`` directory, the root directory has no name);
    or a file of a directory named like a target token (packages); or a crate's
    ``lib.rs`` named by a target token."""
    # tokens, and whole path segments: a directory may be named with a dot (``yaml.v3``)
    targets = {t for _p, _l, target in imports for t in (*_TOKEN.findall(target), *_SEGMENT.findall(target))}
    here = {t for path, _l, _t in imports for t in (*_TOKEN.findall(path), *_SEGMENT.findall(path))}
    if any(lang == "rust" for _p, lang, _t in imports):
        targets.add("src")
    names = targets | here
    # Only a package lookup (Go; a Python namespace package; a Java wildcard) reads a directory's files, and
    # only of directories named like the last part of the target: in a monorepo a token's
    # directories hold thousands of files (``dirname:src``: 14k), which no other lookup reads.
    dirnames = {posixpath.basename(rels[0]) for _p, lang, target in imports if (rels := package_dirs(lang, target))}
    return sorted({*(f"stem:{t}" for t in names), *(f"dirname:{t}" for t in dirnames), "implied:",
                   *(f"implied:{t}" for t in names), *(f"crate:{t}" for t in targets)})


def package_dirs(language: str, target: str) -> list[str]:
    """The directory suffixes a package lookup of the import ``target`` consults, in the
    order it tries them (``_go``: the longest first; ``_python``: a namespace package;
    ``_java``: a wildcard import);
    empty for an import whose mapping reads no directory's files."""
    if language == "go":
        parts = target.split("/")
        return ["/".join(parts[-n:]) for n in range(len(parts), 0, -1)]
    if language == "python" and not target.startswith("."):
        rest = target.replace(".", "/")
        return [rest] if rest else []
    if language == "java":  # a wildcard import of a package
        return ["/".join(target.split("."))]
    return []


def index_rows(rows: Iterable[tuple[str, str, str]], imports: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """The ``(path, language)`` rows a ``FileIndex`` needs to map ``imports`` exactly as an
    index of every file would, from the ``(key, path, language)`` rows found under
    ``lookup_keys(imports)``: a row found only by its directory name is kept when its
    directory is one a package lookup consults — for each import, those ending with the
    first of its ``package_dirs`` that any such directory ends with (the lookup stops
    there). Every directory so named is among the rows (each file has its ``dirname:`` key),
    so the lookups see what they would see over every file."""
    keep: set[tuple[str, str]] = set()
    by_dir: dict[str, list[tuple[str, str]]] = defaultdict(list)  # directory -> its rows found by its name
    by_name: dict[str, set[str]] = defaultdict(set)  # directory name -> directories found by it
    for key, path, lang in rows:
        if key.startswith("dirname:"):
            d = path.rpartition("/")[0]  # posixpath.dirname of a relative path
            by_dir[d].append((path, lang))
            by_name[key[8:]].add(d)  # the key names the directory: its last part
        else:
            keep.add((path, lang))
    consulted: set[str] = set()
    for _p, lang, target in imports:
        rels = package_dirs(lang, target)
        if not rels:
            continue
        found = by_name.get(posixpath.basename(rels[0]), set())
        for rel in rels:
            hits = {d for d in found if d == rel or d.endswith("/" + rel)}
            if hits:
                consulted |= hits
                break
    for d in consulted:
        keep.update(by_dir[d])
    return sorted(keep)


def _changed_mapping(con: duckdb.DuckDBPyConnection) -> Mapping:
    """The import mapping of the changed paths' import edges, against an index of only the
    union's files those imports could name (``lookup_keys``) — not every path."""
    imports = con.execute("SELECT DISTINCT e.path, f.language, e.target FROM main.edges e JOIN main.files f "
                          "ON f.path = e.path WHERE e.kind = 'imports' ORDER BY ALL").fetchall()
    if not imports:
        return map_imports(FileIndex(()), [])
    rows = con.execute(f"SELECT DISTINCT key, path, language FROM ({file_keys_sql('_u_files')}) "
                       "WHERE key IN (SELECT unnest($keys))", {"keys": lookup_keys(imports)}).fetchall()
    return map_imports(FileIndex(index_rows(rows, imports)), imports)


def _delta_mapping(con: duckdb.DuckDBPyConnection, base: str) -> bool:
    """Register ``_imports``, the union's import mapping, for a delta: the base's rows for
    the unchanged files and new rows for the changed ones (returns True: only the changed
    paths' rows differ from the base's) — or, when paths were added or removed (the mapping
    of any file may change), computed anew (returns False); ``_aff_files`` then lists the
    unchanged files whose mapping changed."""
    files_changed = con.execute(f"""SELECT EXISTS (SELECT 1 FROM main.files f WHERE NOT EXISTS
            (SELECT 1 FROM {base}.files b WHERE b.path = f.path))
        OR EXISTS (SELECT 1 FROM {base}.files b SEMI JOIN main.overrides o ON o.path = b.path
            WHERE NOT EXISTS (SELECT 1 FROM main.files f WHERE f.path = b.path))""").fetchall()[0][0]
    if files_changed:
        register_imports(con, _mapping(con, None))
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _aff_files AS
            SELECT DISTINCT path FROM (
              (SELECT * FROM _imports EXCEPT SELECT * FROM {base}.import_targets)
              UNION ALL (SELECT * FROM {base}.import_targets EXCEPT SELECT * FROM _imports))
            WHERE path NOT IN (SELECT path FROM main.overrides)""")
        return False
    con.execute("CREATE OR REPLACE TEMP TABLE _aff_files AS SELECT ''::VARCHAR AS path WHERE false")
    # The unchanged files' rows stay in the database (copied by SQL, never through Python).
    register_imports(con, _changed_mapping(con), kept=f"SELECT path, target, target_path, item FROM "
                      f"{base}.import_targets x WHERE NOT EXISTS (SELECT 1 FROM main.overrides o WHERE o.path = x.path)")
    return True


def register_imports(con: duckdb.DuckDBPyConnection, cols: Mapping, kept: str | None = None) -> None:
    """``_imports``: the mapping's rows (and the ``kept`` query's), as one temp table."""
    con.register("_imports_new", pa.table({k: pa.array(v, pa.string()) for k, v in cols.items()}))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE _imports AS SELECT * FROM _imports_new"
                    + (f" UNION ALL {kept}" if kept else ""))
    finally:
        con.unregister("_imports_new")


def _affected(con: duckdb.DuckDBPyConnection, base: str) -> None:
    """``_aff_edges``: the union's edges whose resolution can differ from the base's.

    An edge's candidates are symbols named like its target: at the scope and file levels
    in its own file; at the package level in its directory; at the import level in the
    files it imports; at the repository level anywhere, where only whether the name is
    unique (and which symbol is) decides. A changed path (``overrides``) changes only the
    candidates named like its symbols (before or after: ``_aff_names``). So the affected
    edges are those of changed paths and of files whose import mapping changed
    (``_aff_files``), and those named in ``_aff_names`` whose file imports a changed path
    (before or after), shares its directory (Go, Java), or whose name's uniqueness in the
    repository changed — plus the import edges of files importing a changed path."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _aff_names AS
        SELECT DISTINCT name FROM main.symbols
        UNION SELECT DISTINCT s.name FROM {base}.symbols s SEMI JOIN main.overrides o ON o.path = s.path""")
    # The symbols named like a changed symbol, read once (the few columns uniqueness needs):
    # the base's rows, marked when their path changed, and the changed paths' new rows.
    # Before = the base's rows; after = the unchanged base rows and the new ones.
    family = FAMILY_SQL.format(l="language")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _aff_sym AS
        SELECT {family} AS fam, s.name, s.handle, s.kind, 'base' AS side,
               s.path IN (SELECT path FROM main.overrides) AS gone
          FROM {base}.symbols s SEMI JOIN _aff_names n ON n.name = s.name
        UNION ALL SELECT {family}, s.name, s.handle, s.kind, 'new', false FROM main.symbols s""")
    uniq = f"""SELECT fam, name, k.ek, CASE WHEN count(*) = 1 THEN min(handle) END AS h
        FROM (SELECT * FROM _aff_sym WHERE {{rows}}) s,
             (VALUES ('references'), ('calls'), ('inherits')) k(ek)
        WHERE k.ek = 'references' OR (k.ek = 'calls' AND s.kind IN {kinds_sql(CALLABLE)})
           OR (k.ek = 'inherits' AND s.kind IN {kinds_sql(TYPES)})
        GROUP BY ALL"""
    # The edges named like a changed symbol are found first (one pass over the union's
    # edges, no join); the conditions then join only those, and the changed paths' edges.
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _aff_named AS
        SELECT * FROM (SELECT e.path, e.source_handle, e.kind, e.target, e.line, e.blob_id,
                         regexp_extract(e.target, '([^.:]+)$', 1) AS name
                       FROM _u_edges e WHERE e.kind IN {kinds_sql(RESOLVED_KINDS[:3])})
        WHERE name IN (SELECT name FROM _aff_names)""")
    con.execute("CREATE OR REPLACE TEMP TABLE _aff_before AS " + uniq.format(rows="side = 'base'"))
    con.execute("CREATE OR REPLACE TEMP TABLE _aff_after AS " + uniq.format(rows="NOT gone"))
    con.execute("""CREATE OR REPLACE TEMP TABLE _aff_moved AS SELECT DISTINCT name FROM (
          SELECT * FROM (SELECT * FROM _aff_before EXCEPT SELECT * FROM _aff_after)
          UNION ALL SELECT * FROM (SELECT * FROM _aff_after EXCEPT SELECT * FROM _aff_before))""")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _aff_importers AS
        SELECT path FROM _imports WHERE target_path IN (SELECT path FROM main.overrides)
          UNION SELECT path FROM {base}.import_targets WHERE target_path IN (SELECT path FROM main.overrides)""")
    con.execute("""CREATE OR REPLACE TEMP TABLE _aff_own AS SELECT path FROM main.overrides
        UNION SELECT path FROM _aff_files""")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _aff_edges1 AS
        SELECT e.path, e.source_handle, e.kind, e.target, e.line, e.blob_id FROM _u_edges e
          WHERE e.kind IN {kinds_sql(RESOLVED_KINDS)} AND (e.path IN (SELECT path FROM _aff_own)
            OR (e.kind = 'imports' AND e.path IN (SELECT path FROM _aff_importers)))""")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _aff_edges AS SELECT * FROM _aff_edges1
        UNION ALL
        SELECT e.path, e.source_handle, e.kind, e.target, e.line, e.blob_id FROM _aff_named e
          LEFT JOIN _u_files f ON f.path = e.path
          WHERE e.path NOT IN (SELECT path FROM _aff_own) AND (e.path IN (SELECT path FROM _aff_importers)
            OR e.name IN (SELECT name FROM _aff_moved) OR (f.language IN {kinds_sql(PACKAGE_IS_DIRECTORY)}
              AND parse_dirpath(e.path) IN (SELECT DISTINCT parse_dirpath(path) FROM main.overrides)))""")


class FileIndex:
    """The snapshot's source paths, indexed for import mapping."""

    def __init__(self, files: Iterable[tuple[str, str]]) -> None:
        self.paths: set[str] = set()
        self.by_dir: dict[str, list[str]] = defaultdict(list)
        self.by_suffix: dict[str, list[str]] = defaultdict(list)  # last two path parts → paths
        self.crates: dict[str, str] = {}  # Rust crate name → its src directory
        self._seen_dirs: set[str] = set()
        for path, lang in files:
            self.paths.add(path)
            d = posixpath.dirname(path)
            self.by_dir[d].append(path)
            parts = path.split("/")
            self.by_suffix["/".join(parts[-2:])].append(path)
            if lang == "rust" and (path.endswith("/src/lib.rs") or path == "src/lib.rs"):
                root = posixpath.dirname(posixpath.dirname(path))
                name = posixpath.basename(root).replace("-", "_") if root else ""
                if name:
                    self.crates.setdefault(name, posixpath.dirname(path))
        self.dirs = set(self.by_dir)
        self.dirs_by_name: dict[str, list[str]] = defaultdict(list)  # last directory part → dirs
        for d in self.dirs:
            while d and d not in self._seen_dirs:
                self._seen_dirs.add(d)
                self.dirs_by_name[posixpath.basename(d)].append(d)
                d = posixpath.dirname(d)

    def ending_with(self, rel: str) -> list[str]:
        """Paths equal to ``rel`` or ending with ``/rel``."""
        parts = rel.split("/")
        return sorted(p for p in self.by_suffix.get("/".join(parts[-2:]), ())
                      if p == rel or p.endswith("/" + rel))

    def dirs_ending_with(self, rel: str) -> list[str]:
        """Directories holding source files (directly) equal to ``rel`` or ending with ``/rel``."""
        return sorted(d for d in self.dirs_by_name.get(posixpath.basename(rel), ())
                      if d in self.dirs and (d == rel or d.endswith("/" + rel)))


def import_files(index: FileIndex, path: str, language: str, target: str) -> list[tuple[str, str | None]]:
    """The files an import ``target`` written in ``path`` names (with the item named inside
    them, if any); empty when it names nothing in the snapshot (an external package)."""
    if language == "python":
        return _python(index, path, target)
    if FAMILY.get(language) == "js":
        return _js(index, path, target)
    if language == "go":
        return _go(index, target)
    if language == "rust":
        return _rust(index, path, target)
    if language == "java":
        return _java(index, target)
    return []


def _python(index: FileIndex, path: str, target: str) -> list[tuple[str, str | None]]:
    dots = len(target) - len(target.lstrip("."))
    rest = target[dots:].replace(".", "/")
    if dots:
        base = posixpath.dirname(path)
        for _ in range(dots - 1):
            base = posixpath.dirname(base)
        stem = posixpath.join(base, rest) if rest else base
        cands = [f"{stem}.py", f"{stem}/__init__.py"] if rest else [f"{stem}/__init__.py"]
        return [(c, None) for c in cands if c in index.paths]
    if not rest:
        return []
    found = index.ending_with(f"{rest}.py") or index.ending_with(f"{rest}/__init__.py")
    if not found:
        # A namespace package (no __init__.py): ``from pkg import mod`` names its modules.
        dirs = index.dirs_ending_with(rest)
        if len(dirs) == 1:
            found = [p for p in index.by_dir[dirs[0]] if p.endswith(".py")]
    return [(p, None) for p in sorted(found)]


def _js(index: FileIndex, path: str, target: str) -> list[tuple[str, str | None]]:
    if not target.startswith("."):
        return []  # a package (node_modules, a path alias): not resolved
    stem = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if stem.startswith(".."):
        return []
    if stem in index.paths:
        return [(stem, None)]
    base, ext = posixpath.splitext(stem)
    cands = [stem + e for e in JS_EXTS] + [f"{stem}/index{e}" for e in JS_EXTS]
    if ext in (".js", ".jsx", ".mjs", ".cjs"):  # TypeScript ESM imports name the emitted file
        cands += [base + e for e in (".ts", ".tsx", ".mts", ".cts")]
    for c in cands:
        if c in index.paths:
            return [(c, None)]
    return []


def _go(index: FileIndex, target: str) -> list[tuple[str, str | None]]:
    parts = target.split("/")
    for n in range(len(parts), 0, -1):  # the longest directory suffix that exists
        dirs = index.dirs_ending_with("/".join(parts[-n:]))
        if dirs:
            if len(dirs) > 1:
                return []  # two packages could be meant: name none
            return [(p, None) for p in sorted(index.by_dir[dirs[0]]) if p.endswith(".go")]
        if n <= 1:
            break
    return []


def _rust(index: FileIndex, path: str, target: str) -> list[tuple[str, str | None]]:
    segs = [s for s in target.split("::") if s]
    if not segs:
        return []
    here = posixpath.dirname(path)
    if len(segs) == 1 and segs[0] not in ("crate", "self", "super"):  # `mod foo;` / `extern crate`
        stem = posixpath.splitext(posixpath.basename(path))[0]
        own = here if stem in ("mod", "lib", "main") else posixpath.join(here, stem)
        for c in (f"{own}/{segs[0]}.rs", f"{own}/{segs[0]}/mod.rs"):
            if c.lstrip("/") in index.paths:
                return [(c.lstrip("/"), None)]
        root = index.crates.get(segs[0])
        return [(f"{root}/lib.rs", None)] if root else []
    head, rest = segs[0], segs[1:]
    stem = posixpath.splitext(posixpath.basename(path))[0]
    own = here if stem in ("mod", "lib", "main") else posixpath.join(here, stem)
    if head == "crate":
        root = _crate_src(path)
    elif head == "self":
        root = own
    elif head == "super":
        root = posixpath.dirname(own)
        while rest and rest[0] == "super":
            root, rest = posixpath.dirname(root), rest[1:]
    else:
        root = index.crates.get(head)
    if root is None:
        return []
    for n in range(len(rest), -1, -1):  # the longest module path that is a file
        mod = "/".join(rest[:n])
        item = rest[n] if n < len(rest) else None
        cands = ([f"{root}/{mod}.rs", f"{root}/{mod}/mod.rs"] if mod
                 else [f"{root}/lib.rs", f"{root}/main.rs", f"{root}/mod.rs", f"{root}.rs"])
        for c in cands:
            c = c.lstrip("/")
            if c in index.paths:
                return [(c, item)]
    return []


def _crate_src(path: str) -> str | None:
    """The ``src`` directory of the crate holding ``path`` (None outside one)."""
    parts = path.split("/")[:-1]
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "src":
            return "/".join(parts[: i + 1])
    return None


def _java(index: FileIndex, target: str) -> list[tuple[str, str | None]]:
    segs = target.split(".")
    for n in range(len(segs), 0, -1):
        found = index.ending_with("/".join(segs[:n]) + ".java")
        if found:
            item = segs[n] if n < len(segs) else None
            return [(p, item) for p in found]
    dirs = index.dirs_ending_with("/".join(segs))  # a wildcard import of a package
    if len(dirs) == 1:
        return [(p, None) for p in sorted(index.by_dir[dirs[0]]) if p.endswith(".java")]
    return []


def kinds_sql(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


def resolution_steps(symbols: str, edges: str, files: str, imports: str) -> list[tuple[str, str]]:
    """(temp table, SELECT) steps, run in order, then ``FINAL_SQL`` over them. Each step is
    materialised once (a CTE referenced by several branches would be recomputed), and the
    import level joins edges with the pre-joined symbols of imported files (joining
    edges × imports first multiplies rows by the imports of each file: 5.7 s on ruff)."""
    fits = (f"(e.kind = 'references' OR (e.kind = 'calls' AND s.kind IN {kinds_sql(CALLABLE)}) "
            f"OR (e.kind = 'inherits' AND s.kind IN {kinds_sql(TYPES)}))")
    family = FAMILY_SQL
    return [
        ("_r_e", f"""
SELECT row_number() OVER () AS eid, e.path, e.source_handle, e.kind, e.target, e.line,
  f.language AS lang, {family.format(l='f.language')} AS fam,
  CASE WHEN e.kind = 'imports' THEN NULL ELSE regexp_extract(e.target, '([^.:]+)$', 1) END AS name
FROM {edges} e LEFT JOIN {files} f ON f.path = e.path
WHERE e.kind IN {kinds_sql(RESOLVED_KINDS)}"""),
        # the imports of the files whose edges are resolved (all of them in a full build)
        ("_r_imp", f"SELECT DISTINCT path, target, target_path, item FROM {imports} "
                   "WHERE path IN (SELECT DISTINCT path FROM _r_e)"),
        # the symbols any level can reach: those of the edges' files (scopes, ancestors), those
        # named like an edge, and the items imports name (all of them in a full build)
        ("_r_s", f"""
SELECT handle, path, language, kind, name, parent_handle, {family.format(l='language')} AS fam,
  kind IN {kinds_sql(CALLABLE)} AS callable, kind IN {kinds_sql(TYPES)} AS is_type FROM {symbols}
WHERE path IN (SELECT DISTINCT path FROM _r_e) OR name IN (SELECT DISTINCT name FROM _r_e)
  OR name IN (SELECT DISTINCT item FROM _r_imp)"""),
        ("_r_anc", """
WITH RECURSIVE anc(eid, handle, depth) AS (
  SELECT eid, source_handle, 0 FROM _r_e WHERE source_handle IS NOT NULL AND name IS NOT NULL
  UNION ALL
  SELECT a.eid, s.parent_handle, a.depth + 1 FROM anc a JOIN _r_s s ON s.handle = a.handle
  WHERE s.parent_handle IS NOT NULL AND a.depth < 16
) SELECT * FROM anc"""),
        ("_r_imp_syms", """
SELECT DISTINCT i.path, s.name, s.handle, s.path AS spath, s.kind FROM (SELECT DISTINCT path, target_path
  FROM _r_imp) i JOIN _r_s s ON s.path = i.target_path"""),
        ("_r_uniq", """
WITH s AS (SELECT * FROM _r_s SEMI JOIN (SELECT DISTINCT name FROM _r_e) n ON n.name = _r_s.name)
SELECT fam, name, 'references' AS ek, count(*) AS n, min(handle) AS h, min(path) AS p FROM s GROUP BY fam, name
UNION ALL SELECT fam, name, 'calls', count(*), min(handle), min(path) FROM s WHERE callable GROUP BY fam, name
UNION ALL SELECT fam, name, 'inherits', count(*), min(handle), min(path) FROM s WHERE is_type
  GROUP BY fam, name"""),
        ("_r_cand", f"""
SELECT a.eid, 1 AS lvl, a.depth AS sub, s.handle, s.path, 1 AS cnt FROM _r_anc a JOIN _r_e e ON e.eid = a.eid
  JOIN _r_s s ON s.parent_handle = a.handle AND s.name = e.name WHERE {fits}
UNION ALL
SELECT e.eid, 1, 99, s.handle, s.path, 1 FROM _r_e e JOIN _r_s s ON s.path = e.path AND s.name = e.name
  AND s.parent_handle IS NULL WHERE {fits}
UNION ALL
SELECT e.eid, 2, 0, s.handle, s.path, 1 FROM _r_e e JOIN _r_s s ON s.path = e.path AND s.name = e.name
  WHERE {fits}
UNION ALL
SELECT e.eid, 3, 0, s.handle, s.path, 1 FROM _r_e e JOIN _r_s s ON s.name = e.name AND s.language = e.lang
  AND s.path <> e.path AND parse_dirpath(s.path) = parse_dirpath(e.path)
  WHERE e.lang IN {kinds_sql(PACKAGE_IS_DIRECTORY)} AND {fits}
UNION ALL
SELECT e.eid, 4, 0, s.handle, s.spath, 1 FROM _r_e e JOIN _r_imp_syms s ON s.path = e.path AND s.name = e.name
  WHERE {fits}
UNION ALL
SELECT e.eid, 5, 0, u.h, u.p, u.n FROM _r_e e JOIN _r_uniq u ON u.fam = e.fam AND u.name = e.name
  AND u.ek = e.kind"""),
        ("_r_best", """
SELECT eid, lvl, CASE WHEN lvl = 5 THEN max(cnt) ELSE count(DISTINCT handle) END AS n,
  min(handle) AS h, min(path) AS p
FROM _r_cand GROUP BY eid, lvl, sub
QUALIFY row_number() OVER (PARTITION BY eid ORDER BY lvl, sub) = 1"""),
        ("_r_impe", """
WITH m AS (SELECT path, target, count(DISTINCT target_path) AS n, min(target_path) AS tp, min(item) AS item
  FROM _r_imp GROUP BY path, target),
c AS (SELECT m.path, m.target, count(*) AS k, min(s.handle) AS h FROM m JOIN _r_s s ON m.n = 1
  AND s.path = m.tp AND s.name = m.item AND s.parent_handle IS NULL GROUP BY m.path, m.target)
SELECT m.*, CASE WHEN c.k = 1 THEN c.h END AS h FROM m LEFT JOIN c ON c.path = m.path AND c.target = m.target"""),
    ]


FINAL_SQL = """
SELECT e.path, e.source_handle, e.kind, e.target, e.line,
  CASE WHEN e.kind = 'imports' THEN m.h WHEN b.n = 1 THEN b.h END AS target_handle,
  CASE WHEN e.kind = 'imports' THEN CASE WHEN m.n = 1 THEN m.tp END WHEN b.n = 1 THEN b.p END AS target_path,
  CASE WHEN e.kind = 'imports' THEN CASE WHEN m.n = 1 THEN 'resolved' ELSE 'unresolved' END
       WHEN b.n = 1 AND b.lvl = 5 THEN 'name-only' WHEN b.n = 1 THEN 'resolved' ELSE 'unresolved' END AS tier,
  CASE WHEN e.kind = 'imports' THEN CASE WHEN m.n = 1 THEN 'import' END
       WHEN b.n = 1 THEN ['scope', 'file', 'package', 'import', 'repository'][b.lvl] END AS rule
FROM _r_e e LEFT JOIN _r_best b ON b.eid = e.eid
LEFT JOIN _r_impe m ON e.kind = 'imports' AND m.path = e.path AND m.target = e.target
"""
