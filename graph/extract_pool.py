"""Extraction of blobs into snapshot rows, in a process pool when it pays.

Each unit of work (a ``Job``) is one (blob, language) pair with every path holding it:
the worker reads the blob from the object database, parses it once, and builds the rows
for each path (graph/fact_rows.py), so handle hashing uses both cores too. A worker hands
back a chunk's rows as Arrow tables (``Packed``), so the builder process does no work per
row: it only appends them to the snapshot (graph/snapshot_writer.py) and leaves both cores
to the workers. At most ``WINDOW_PER_WORKER`` chunks per worker are in flight, so memory
is bounded by the window, not by the repository. Workers die with the builder however it
dies (``die_with_parent``), and ignore Ctrl-C (the builder handles it and stops them).
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pygit2

from citegraph.graph.fact_rows import Columns, add_rows, empty_columns
from citegraph.graph.forkserver_guard import die_with_parent, preload_for_forkserver
from citegraph.graph.schema import DAMAGE_COLUMNS, EDGE_COLUMNS, SYMBOL_COLUMNS, TABLES
from citegraph.indexer.blob_facts import facts_for_blob

POOL_THRESHOLD = 48  # blobs to extract before a process pool pays for itself
CHUNK = 32  # jobs per task sent to a worker
WINDOW_PER_WORKER = 4  # chunks in flight per worker: keeps workers fed, bounds memory
ROW_TABLES = (("symbols", SYMBOL_COLUMNS), ("edges", EDGE_COLUMNS), ("damage", DAMAGE_COLUMNS))

# One unit of extraction work: (blob id, language or "", paths holding it, timeout, cap).
Job = tuple[str, str, tuple[str, ...], float, int]


@dataclass
class Extracted:
    """A blob's file facts plus its snapshot rows (for every path that holds it)."""

    blob_id: str
    language: str
    status: str
    reason: str | None
    content_hash: str | None
    size: int | None
    symbols: Columns
    edges: Columns
    damage: Columns = field(default_factory=lambda: empty_columns(DAMAGE_COLUMNS))
    read: bool = False  # the blob was read from the object database
    parsed: bool = False  # the bytes were handed to the extractor
    packed: bool = False  # its rows went into a chunk's Arrow tables (``pack``): these are empty


@dataclass
class Packed:
    """A chunk's results from a worker: the file facts (``Extracted`` without rows) and all
    their rows as one Arrow table per row table (typed by graph/schema.py)."""

    results: list[Extracted]
    tables: dict[str, pa.Table]


def pack(results: list[Extracted]) -> Packed:
    """Move the rows of ``results`` into Arrow tables (in the worker, where it is parallel)."""
    tables: dict[str, pa.Table] = {}
    for name, cols in ROW_TABLES:
        merged = empty_columns(cols)
        for ex in results:
            part = getattr(ex, name)
            for c in cols:
                merged[c].extend(part[c])
        if merged[cols[0]]:
            tables[name] = pa.table(merged, schema=TABLES[name].arrow_schema)
    for ex in results:
        ex.symbols, ex.edges, ex.damage = (empty_columns(SYMBOL_COLUMNS), empty_columns(EDGE_COLUMNS),
                                           empty_columns(DAMAGE_COLUMNS))
        ex.packed = True
    return Packed(results, tables)


_WORKER_REPO: pygit2.Repository | None = None


def _worker_init(repo_path: str, parent_pid: int) -> None:
    """``parent_pid``: the forking builder (fork), or 0 when the parent is a fork server."""
    global _WORKER_REPO
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    die_with_parent(parent_pid or os.getppid())
    _WORKER_REPO = pygit2.Repository(repo_path)


def _extract_batch(batch: list[Job]) -> Packed:
    assert _WORKER_REPO is not None
    return pack([extract_job(_WORKER_REPO, job) for job in batch])


def extract_job(repo: pygit2.Repository | None, job: Job, data: bytes | None = None) -> Extracted:
    """Read (unless given), classify, extract and build rows for one blob."""
    blob_id, language, paths, timeout, cap = job
    syms, edges = empty_columns(SYMBOL_COLUMNS), empty_columns(EDGE_COLUMNS)
    read = data is None
    if data is None:
        try:
            assert repo is not None
            data = repo.odb.read(blob_id)[1]
        except (KeyError, ValueError, AssertionError, pygit2.GitError):
            return Extracted(blob_id, language, "skipped", "missing-blob", None, None, syms, edges, read=True)
    if len(data) > cap:
        return Extracted(blob_id, language, "skipped", "too-large", None, len(data), syms, edges, read=read)
    info, facts = facts_for_blob(language or None, data, timeout)
    damage = empty_columns(DAMAGE_COLUMNS)
    if language:
        for path in paths:
            add_rows(facts, language, blob_id, path, syms, edges, damage)
    return Extracted(blob_id, language, facts.status, facts.reason, info.content_hash, info.size, syms, edges,
                     damage, read=read, parsed=bool(language))


def extract_all(repo: pygit2.Repository, jobs_list: list[Job], workers: int, pool_context: str,
                absorb: Callable[[Extracted], None], after_chunk: Callable[[], None] | None = None,
                absorb_tables: Callable[[dict[str, pa.Table]], None] | None = None) -> None:
    """Extract every job, handing each result to ``absorb`` in the builder process: in a
    pool of ``workers`` processes (start method ``pool_context``) when there are enough
    jobs, else here. From the pool, the rows come as Arrow tables to ``absorb_tables``
    (the results ``absorb`` sees then hold none) when it is given. Chunks are consumed in
    order, with a bounded window in flight. A failure or Ctrl-C drops queued work and
    stops the workers."""
    chunks = [jobs_list[i:i + CHUNK] for i in range(0, len(jobs_list), CHUNK)]
    if workers > 1 and len(jobs_list) >= POOL_THRESHOLD:
        import multiprocessing as mp

        context = mp.get_context(pool_context)
        if pool_context == "forkserver":
            preload_for_forkserver(context)  # the fork server and its children die with us
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init,
                                   initargs=(repo.path, os.getpid() if pool_context == "fork" else 0))
        try:
            todo = iter(chunks)
            window: deque[Future[Packed]] = deque()
            while True:
                while len(window) < WINDOW_PER_WORKER * workers:
                    chunk = next(todo, None)
                    if chunk is None:
                        break
                    window.append(pool.submit(_extract_batch, chunk))
                if not window:
                    break
                packed = window.popleft().result()
                if absorb_tables is not None:
                    absorb_tables(packed.tables)
                else:  # the caller wants the rows on each result: put them back
                    _unpack(packed)
                _absorb_all(packed.results, absorb, after_chunk)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
            raise
        pool.shutdown()
    else:
        for chunk in chunks:
            _absorb_all((extract_job(repo, job) for job in chunk), absorb, after_chunk)


def _unpack(packed: Packed) -> None:
    """Put all of the chunk's rows on its first result, for an ``absorb`` that only appends
    rows (the results stay marked ``packed``: no row belongs to one of them)."""
    if not packed.results:
        return
    first = packed.results[0]
    for name, _cols in ROW_TABLES:
        if name in packed.tables:
            setattr(first, name, packed.tables[name].to_pydict())


def _absorb_all(batch: Iterable[Extracted], absorb: Callable[[Extracted], None],
                after_chunk: Callable[[], None] | None) -> None:
    for ex in batch:
        absorb(ex)
    if after_chunk:
        after_chunk()


def default_workers(jobs: int | None) -> int:
    return jobs if jobs is not None else min(2, os.cpu_count() or 1)
