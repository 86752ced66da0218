"""The base rows a delta's resolution has read, kept for the next delta over the same base.

Why: a delta is layered over a full snapshot and holds every path changed since it, so
successive deltas over one base read the same base rows again — the rows of the paths
changed since the base, the files importing them, the keys of the names they carry. Past
50 values DuckDB turns such a lookup into a scan of the whole table (docs/design.md "Where
the milliseconds go now"): on the 250k-file monorepo ≈ 300 ms a build, growing with the
paths changed since the base, for rows that cannot have changed — a snapshot file never
changes once published. So the process keeps, per base file, the rows each lookup found
for each key, and reads from DuckDB only the keys it has not seen (a commit's one or two:
an index scan). A long-running process (the service, a benchmark's warm builds) gains; a
one-shot ``index`` reads as before.

Pure memoisation of ``SELECT cols FROM base.table WHERE key IN keys``: the key is the
base file's path and identity (inode, size, mtime), the table, the columns and the key
column; bounded (``MAX_ROWS`` per base, ``MAX_BASES`` bases), dropped whole when full.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

# How a lookup reaches DuckDB: (label, sql, params) -> an Arrow table; the resolution's
# runner, so a test's statement hook sees the reads the cache makes.
Fetch = Callable[[str, str, object], pa.Table]

MAX_ROWS = 400_000  # per base: a delta's lookups stay far below (thousands of rows)
MAX_BASES = 2


class _Lookup:
    """One lookup's rows (one table, columns and key column): the keys read, and their rows
    as the Arrow tables they came in."""

    def __init__(self) -> None:
        self.keys: set[object] = set()
        self.chunks: list[pa.Table] = []


class _Base:
    def __init__(self) -> None:
        self.lookups: dict[tuple[str, str, str], _Lookup] = {}
        self.memos: dict[str, dict] = {}
        self.count = 0


class BaseRows:
    """Per base snapshot file: each lookup's rows by key (thread-safe; see the module)."""

    def __init__(self, max_rows: int = MAX_ROWS, max_bases: int = MAX_BASES) -> None:
        self.max_rows, self.max_bases = max_rows, max_bases
        self._bases: OrderedDict[tuple, _Base] = OrderedDict()
        self._lock = threading.Lock()
        self.reads = 0  # keys read from DuckDB (a test counts them)
        self.hits = 0  # keys answered from memory

    def kept_rows(self) -> int:
        with self._lock:
            return sum(b.count for b in self._bases.values())

    def clear(self) -> None:
        with self._lock:
            self._bases.clear()

    def _base(self, path: str) -> _Base:
        st = os.stat(path)
        ident = (os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            b = self._bases.get(ident)
            if b is None or b.count > self.max_rows:
                b = self._bases[ident] = _Base()
            self._bases.move_to_end(ident)
            while len(self._bases) > self.max_bases:
                self._bases.popitem(last=False)
            return b

    def memo(self, base_path: str, name: str) -> dict:
        """A dictionary kept with the base file's rows, for a value that is a function of the
        base alone (a delta that keeps the base's paths maps an import as the base's files
        do: graph/delta_resolution.py ``_mapping``). ``note`` counts what it holds."""
        return self._base(base_path).memos.setdefault(name, {})

    def note(self, base_path: str, rows: int) -> None:
        """Count ``rows`` more held for the base file (toward ``max_rows``)."""
        self._base(base_path).count += rows

    def lookup(self, fetch: Fetch, base_path: str, alias: str, table: str, cols: str, key_col: str,
               keys: Sequence[object], label: str) -> pa.Table:
        """The rows of ``alias.table`` (attached from ``base_path``; columns ``cols``, which
        include ``key_col``) whose ``key_col`` is in ``keys``, as an Arrow table; the keys
        not seen before are read through ``fetch`` in one statement (an index scan up to 50
        keys, one scan of the table beyond)."""
        b = self._base(base_path)
        seen = b.lookups.setdefault((table, cols, key_col), _Lookup())
        wanted = list(dict.fromkeys(keys))
        missing = [k for k in wanted if k not in seen.keys]
        self.hits += len(wanted) - len(missing)
        self.reads += len(missing)
        if missing or not seen.chunks:
            got = fetch(label, f"SELECT {cols} FROM {alias}.{table} WHERE {key_col} IN (SELECT unnest($k))",
                        {"k": missing})
            seen.chunks.append(got)
            seen.keys.update(missing)
            b.count += got.num_rows
            if len(missing) == len(wanted):
                return got  # every key read now: these are its rows, nothing to filter
        rows = pa.concat_tables(seen.chunks) if len(seen.chunks) > 1 else seen.chunks[0]
        if len(seen.chunks) > 8:  # fewer, larger chunks: each lookup concatenates them
            seen.chunks = [rows.combine_chunks()]
        if not wanted:
            return rows.slice(0, 0)
        return rows.filter(pc.is_in(rows[key_col], value_set=pa.array(wanted, type=rows.schema.field(key_col).type)))


# One per process: builds in the service and a benchmark's warm builds share it.
BASE_ROWS = BaseRows()
