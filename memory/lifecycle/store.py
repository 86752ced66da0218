"""The memory store: memories, append-only revisions, citations (receipts), recall terms,
the code index (code → memories) and the observation cache, in one DuckDB file.

Schema versions (``meta.schema_version``; docs/storage.md): 1 — memories, revisions,
citations, terms, observations, worksets; 2 — adds the ``code_index`` (the inverse index
of the current revisions' citations, SPEC §18) and ``revisions.refresh`` (what a refresh
replaced and why); 3 — adds ``citations.deps`` (a symbol receipt's resolved dependencies
at capture, SPEC §21; NULL for the receipts stored before, which get no advisories); 4 —
adds ``citations.token_hash`` (SPEC §6.3a; NULL before: a change of those is never cosmetic). A
store of an older version is migrated in place, in one transaction, the first time it is
opened (read-only opens migrate first, then read); a newer one is refused.

Connections are short-lived (open, one transaction, close) because a DuckDB file opened
read-write by one process excludes every other process; a busy store is retried for a
bounded time and then reported as a retryable error.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import blake3
import duckdb
import pyarrow as pa

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle import keys_sidecar, store_lock
from citegraph.memory.lifecycle.keys_sidecar import MEMORY_SCHEMA_VERSION
from citegraph.memory.limits import MAX_TEXT_BYTES
from citegraph.validator.model import Observation, Observed, Receipt

LOCK_WAIT_S = 10.0
NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")  # used with fullmatch: "team\n" is no name
TOKEN_RE = re.compile(r"[A-Za-z0-9_]+")

RECEIPT_FIELDS = [f.name for f in fields(Receipt)]

# The code index: one row per (citation of a memory's current revision, key). Keys:
# ``path`` (the cited file), ``blob`` (its content at capture: finds a file moved
# unchanged), and for symbols ``handle``, ``fragment`` (finds a moved copy) and ``locator``
# (``path::Qualified.name``, any ordinal). Kept by every write of a revision (capture,
# import, refresh, bulk load) and by forget; read by ``citegraph cited``, brief
# ``--code-ref`` and the hooks (memory/agent/cited.py). Its path and blob keys are mirrored,
# for the pre-edit hook, in the code-keys sidecar (memory/lifecycle/keys_sidecar.py), which
# ``_Gate`` keeps: invalidated when a read-write connection opens, rewritten when it closes.
CODE_KEYS = ("path", "blob", "handle", "fragment", "locator")
CODE_INDEX_COLS = ("memory_id", "revision", "citation_id", "position", "repository_id", "key_kind", "key",
                   "kind", "path", "start_line", "end_line")
CODE_INDEX_DDL = """CREATE TABLE IF NOT EXISTS code_index(memory_id VARCHAR NOT NULL, revision INTEGER NOT NULL,
  citation_id VARCHAR NOT NULL, position INTEGER NOT NULL, repository_id VARCHAR, key_kind VARCHAR NOT NULL,
  key VARCHAR NOT NULL, kind VARCHAR, path VARCHAR, start_line BIGINT, end_line BIGINT);"""
CODE_INDEX_INDEXES = """
CREATE INDEX IF NOT EXISTS code_index_key ON code_index(key);
CREATE INDEX IF NOT EXISTS code_index_mem ON code_index(memory_id);
CREATE INDEX IF NOT EXISTS code_index_repo ON code_index(repository_id);
"""


def code_keys(r: Receipt) -> list[tuple[str, str]]:
    """The (key kind, key) pairs under which the code index finds receipt ``r``."""
    keys = [("path", r.path), ("blob", r.blob_id)]
    if r.kind == "symbol":
        keys += [("handle", r.handle), ("fragment", r.fragment_hash),
                 ("locator", f"{r.path}::{r.qualified_name}" if r.qualified_name else None)]
    return [(k, v) for k, v in keys if isinstance(v, str) and v]


def code_index_rows(memory_id: str, revision: int, receipts: list[Receipt],
                    into: dict[str, list] | None = None) -> dict[str, list]:
    cols = into if into is not None else {c: [] for c in CODE_INDEX_COLS}
    for pos, r in enumerate(receipts):
        for kk, key in code_keys(r):
            for c, v in zip(CODE_INDEX_COLS, (memory_id, revision, r.id, pos, r.repository_id, kk, key, r.kind,
                                              r.path, r.start_line, r.end_line), strict=True):
                cols[c].append(v)
    return cols

DDL = f"""
CREATE TABLE IF NOT EXISTS meta(key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS memories(id VARCHAR PRIMARY KEY, project VARCHAR NOT NULL,
  topic VARCHAR NOT NULL, kind VARCHAR NOT NULL, status VARCHAR NOT NULL, text VARCHAR NOT NULL,
  revision INTEGER NOT NULL, created_at DOUBLE, updated_at DOUBLE, author VARCHAR,
  agent_id VARCHAR, session_id VARCHAR, supersedes VARCHAR, superseded_by VARCHAR,
  source_commit VARCHAR, legacy BOOLEAN DEFAULT FALSE, schema_version INTEGER, doc_len INTEGER);
CREATE TABLE IF NOT EXISTS revisions(memory_id VARCHAR NOT NULL, revision INTEGER NOT NULL,
  text VARCHAR NOT NULL, kind VARCHAR, created_at DOUBLE, author VARCHAR, agent_id VARCHAR,
  session_id VARCHAR, citation_ids VARCHAR, cleared INTEGER, refresh VARCHAR);
CREATE TABLE IF NOT EXISTS citations(memory_id VARCHAR NOT NULL, revision INTEGER NOT NULL,
  position INTEGER NOT NULL, {", ".join(f"{n} VARCHAR" if n not in ("dirty", "start_line", "end_line", "ordinal", "start_byte", "end_byte") else (f"{n} BOOLEAN" if n == "dirty" else f"{n} BIGINT") for n in RECEIPT_FIELDS)});
CREATE TABLE IF NOT EXISTS terms(memory_id VARCHAR NOT NULL, term VARCHAR NOT NULL, tf INTEGER NOT NULL);
{CODE_INDEX_DDL}
CREATE TABLE IF NOT EXISTS observations(snapshot_id VARCHAR NOT NULL, citation_id VARCHAR NOT NULL,
  outcome VARCHAR NOT NULL, reason VARCHAR, path VARCHAR, start_line BIGINT, end_line BIGINT,
  handle VARCHAR, PRIMARY KEY(snapshot_id, citation_id));
CREATE TABLE IF NOT EXISTS worksets(name VARCHAR PRIMARY KEY, created_at DOUBLE);
CREATE TABLE IF NOT EXISTS workset_members(workset VARCHAR NOT NULL, path VARCHAR NOT NULL,
  repository_id VARCHAR, added_at DOUBLE);
CREATE TABLE IF NOT EXISTS workset_pins(workset VARCHAR NOT NULL, path VARCHAR NOT NULL,
  repository_id VARCHAR, snapshot_id VARCHAR, state VARCHAR, reason VARCHAR, prepared_at DOUBLE);
"""
NOT_SUPERSEDED = "(m.superseded_by IS NULL OR m.superseded_by = m.id)"
"""Live memories (alias ``m``): not superseded. A self link (written before stores refused
them, issue 22) does not count — the memory would otherwise vanish from cited and brief."""

INDEXES = CODE_INDEX_INDEXES + """
CREATE INDEX IF NOT EXISTS citations_mem ON citations(memory_id);
CREATE INDEX IF NOT EXISTS terms_term ON terms(term);
CREATE INDEX IF NOT EXISTS memories_project ON memories(project);
"""


def check_name(what: str, value: str) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value) or set(value) == {"."}:
        raise CitegraphError(f"invalid {what} {value!r}",
                             "use letters, digits, _ - . (at most 128 characters, not only dots)",
                             code=2, kind="invalid-name")
    return value


def check_text(text: str) -> str:
    """Non-empty, valid Unicode (no lone surrogate), at most MAX_TEXT_BYTES in UTF-8."""
    if not isinstance(text, str) or not text.strip():
        raise CitegraphError("memory text is empty", "pass --text with the claim to remember", code=2)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise CitegraphError(f"memory text is not valid Unicode (lone surrogate at character {exc.start})",
                             "pass the text as UTF-8", code=2, kind="invalid-text") from None
    if "\0" in text:
        raise CitegraphError("memory text holds a NUL character", "remove it", code=2, kind="invalid-text")
    if size > MAX_TEXT_BYTES:
        raise CitegraphError(f"memory text is too long: {size} bytes, more than the limit of {MAX_TEXT_BYTES} bytes",
                             "state the claim shortly and cite the code that backs it", code=2,
                             kind="text-too-large")
    return text


def check_field(what: str, value: str | None) -> None:
    """Text the store keeps must be valid UTF-8 without NUL (a lone surrogate or NUL from an
    API or MCP caller is one clear error, not a database failure)."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CitegraphError(f"{what} is not valid UTF-8 (it holds a lone surrogate)",
                             "pass UTF-8 text", code=2, kind="invalid-text") from None
    if "\0" in value:
        raise CitegraphError(f"{what} holds a NUL character", "remove it", code=2, kind="invalid-text")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; identifiers are also split at _ and camelCase."""
    out: list[str] = []
    for tok in TOKEN_RE.findall(text):
        low = tok.lower()
        out.append(low)
        parts = [p for p in re.split(r"_|(?<=[a-z0-9])(?=[A-Z])", tok) if p]
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


def memory_id_for(project: str, topic: str) -> str:
    return "cgm_" + blake3.blake3(f"{project}\0{topic}".encode()).hexdigest(8)


@dataclass
class Memory:
    id: str
    project: str
    topic: str
    kind: str
    status: str
    text: str
    revision: int
    created_at: float
    updated_at: float
    author: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    source_commit: str | None = None
    legacy: bool = False
    citations: list[Receipt] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["citations"] = [{**receipt_summary(r), "repository_id": r.repository_id} for r in self.citations]
        return d


def receipt_summary(r: Receipt) -> dict[str, Any]:
    """A stored citation as the memory commands show it (the locator names the code)."""
    return {"id": r.id, "ref": r.ref, "locator": r.locator, "kind": r.kind, "path": r.path, "handle": r.handle,
            "commit": r.commit, "snapshot_id": r.snapshot_id, "dirty": r.dirty, "start_line": r.start_line,
            "end_line": r.end_line}


MEMORY_COLS = ("id", "project", "topic", "kind", "status", "text", "revision", "created_at", "updated_at",
               "author", "agent_id", "session_id", "supersedes", "superseded_by", "source_commit", "legacy")


def store_failure(exc: BaseException, path: Any) -> CitegraphError | None:
    """The one-line error for a memory-store failure of the disk or the file system (disk
    full, read-only, permissions, I/O), or None for any other error (a bug, or a conflict a
    caller may retry). Nothing was written: DuckDB commits all of a transaction or none."""
    if not isinstance(exc, duckdb.Error):
        return None
    text = str(exc)
    low = text.lower()
    detail = text.splitlines()[0] if text else type(exc).__name__
    if "no space left" in low or "disk full" in low or "disk quota" in low:
        return CitegraphError(f"{path}: the disk is full; nothing was written (the memories stored before are "
                              "intact)", "free some space, then run the command again", code=3, retryable=True,
                              kind="disk-full")
    if "read-only file system" in low or "permission denied" in low or \
            ("cannot open database" in low and "read-only" in low):
        return CitegraphError(f"{path}: the data home is read-only or not writable by you ({detail}); nothing "
                              "was written",
                              "make the data home writable, or pass --home with a writable directory; the "
                              "store itself is not damaged", code=3, kind="read-only")
    if isinstance(exc, duckdb.IOException) or "could not write" in low or "could not read" in low:
        return CitegraphError(f"{path}: the memory store could not be written ({detail}); nothing was written",
                              "check disk space and permissions, then retry", code=3, retryable=True,
                              kind="environment")
    return None


class MemoryStore:
    """One short-lived connection to the memory store."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Any = None) -> None:
        self.con = con
        self.path = path if path is not None else "the memory store"
        self.broken = False  # a write failed on the disk: this connection is not reused
        self._read_only = False  # opened read-only for a read that would cache (open_caching)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One DuckDB transaction: committed when the block ends, rolled back when it
        raises. A failed COMMIT (disk full on the WAL) has already ended the transaction:
        the ROLLBACK after it is skipped, never a second error hiding the first."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
            self.con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            raise

    @classmethod
    @contextmanager
    def open(cls, home: Home, read_only: bool = False, wait_s: float = LOCK_WAIT_S) -> Iterator[MemoryStore]:
        """A short-lived view of the store: a cursor on this process's connection to it.

        Between processes, DuckDB's file lock decides (a busy store is retried, then a
        retryable error). Inside one process (the service, the MCP server) every call
        shares one connection — DuckDB refuses a second connection of another mode to the
        same file — opened by the first call and closed by the last: read-only calls run
        side by side, a read-write call waits for the read-only connection to drain, and
        read-write calls run one at a time (no write-write conflicts). A read-only open
        of a store of an older schema migrates it first (one read-write open)."""
        try:
            with cls._open(home, read_only, wait_s) as ms:
                yield ms
        except _NeedsMigration:
            with cls._open(home, False, wait_s):
                pass
            with cls._open(home, read_only, wait_s) as ms:
                yield ms

    @classmethod
    @contextmanager
    def open_caching(cls, home: Home, wait_s: float = LOCK_WAIT_S) -> Iterator[MemoryStore]:
        """For a read that also caches (validate: observations): read-write when the home
        allows it, else — a read-only data home — read-only, caching nothing. A read
        never fails only because the home cannot be written."""
        entered = False
        try:
            with cls.open(home, wait_s=wait_s) as ms:
                entered = True
                yield ms
            return
        except CitegraphError as err:
            if entered or err.kind != "read-only" or not home.memory_db.exists():
                raise
        with cls.open(home, read_only=True, wait_s=wait_s) as ms:
            ms._read_only = True
            yield ms

    @classmethod
    @contextmanager
    def _open(cls, home: Home, read_only: bool, wait_s: float) -> Iterator[MemoryStore]:
        gate = _gate(home.memory_db)
        want_rw = not read_only or not home.memory_db.exists()  # first use creates it
        deadline = time.monotonic() + wait_s
        if want_rw and not gate.writer.acquire(timeout=max(wait_s, 0.001)):
            raise CitegraphError("the memory store is busy (another call of this process writes to it)",
                                 "retry in a moment", code=1, retryable=True, kind="busy")
        try:
            con = gate.enter(want_rw, deadline, lambda rw: cls._connect(home, rw, deadline))
            ms = cls(con, home.memory_db)
            failure: CitegraphError | None = None
            try:
                yield ms
            except duckdb.Error as exc:
                failure = store_failure(exc, home.memory_db)
                if failure is None:
                    raise
                ms.broken = True
            finally:
                con.close()
                gate.leave(discard=ms.broken)
            if failure is not None:
                raise failure  # outside the handler: not chained to DuckDB's error (one line)
        finally:
            if want_rw:
                gate.writer.release()

    @classmethod
    @contextmanager
    def kept_open(cls, home: Home) -> Iterator[None]:
        """In a process whose connections linger (the service): hold this process's
        connection to the store for a whole request whose store calls are apart by more
        than the linger — remember captures first (hundreds of ms on a large repository),
        then writes — so it is not closed (with a checkpoint) and reopened per request
        (250k-file monorepo: ≈ 55 ms connect + ≈ 60 ms close). Holds nothing in a one-shot
        process, for a store not yet created, or when the store cannot be opened at once."""
        gate, cur = None, None
        if _Gate.linger_s > 0 and home.memory_db.exists():
            gate = _gate(home.memory_db)
            deadline = time.monotonic() + 0.05
            with contextlib.suppress(CitegraphError, duckdb.Error, OSError):
                cur = gate.enter(False, deadline, lambda rw: cls._connect(home, rw, deadline))
        try:
            yield
        finally:
            if gate is not None and cur is not None:
                cur.close()
                gate.leave()

    @staticmethod
    def keep_open_between_calls(seconds: float) -> None:
        """For a long-running process (the service): keep this process's connection to a
        store for ``seconds`` after its last call (see _Gate); 0 closes idle ones now."""
        _Gate.linger_s = max(0.0, float(seconds))
        if _Gate.linger_s == 0:
            close_idle_connections()

    @classmethod
    def _connect(cls, home: Home, read_write: bool, deadline: float) -> duckdb.DuckDBPyConnection:
        path = home.memory_db
        delay = 0.005
        while True:
            try:
                con = duckdb.connect(str(path), read_only=not read_write)
                break
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() and "conflicting" not in str(exc).lower():
                    failure = store_failure(exc, path)
                    if failure is not None and failure.kind != "environment":
                        raise failure from None  # read-only, disk full: the file is fine
                    raise CitegraphError(f"{path}: memory store unreadable ({exc})",
                                         "move the file aside or choose another --home", code=3) from exc
                if time.monotonic() > deadline:
                    raise CitegraphError("the memory store is busy (another citegraph process holds it)",
                                         "retry in a moment", code=1, retryable=True, kind="busy") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
            except duckdb.Error as exc:
                raise CitegraphError(f"{path}: not a citegraph memory store ({exc})",
                                     "move the file aside or choose another --home", code=3) from exc
        failure: CitegraphError | None = None
        try:
            store = cls(con, path)
            if read_write:
                store._migrate()
            else:
                store._check_readable()
        except duckdb.Error as exc:
            con.close()
            failure = store_failure(exc, path)
            if failure is None:
                raise
        except BaseException:
            con.close()
            raise
        if failure is not None:
            raise failure
        return con

    # --- schema ----------------------------------------------------------------------------

    def _check_version(self) -> int:
        try:
            rows = self.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchall()
        except duckdb.Error as exc:
            raise CitegraphError("memory store has no schema", "run a write command once (remember)", code=3) from exc
        version = int(rows[0][0]) if rows else 0
        if version > MEMORY_SCHEMA_VERSION:
            raise CitegraphError(f"memory store schema {version} is newer than this citegraph",
                                 "upgrade citegraph or use another --home", code=3)
        return version

    def _check_readable(self) -> None:
        """A read-only connection cannot migrate: an older store is migrated by a
        read-write open first (``open``)."""
        if self._check_version() < MEMORY_SCHEMA_VERSION:
            raise _NeedsMigration()

    def _migrate(self) -> None:
        tables = {r[0] for r in self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if tables and "meta" not in tables:
            raise CitegraphError("memory store file holds foreign tables",
                                 "move the file aside or choose another --home", code=3)
        version = 0
        if "meta" in tables:
            version = self._check_version()
            if version == MEMORY_SCHEMA_VERSION and {"workset_pins", "code_index"} <= tables:
                return  # current: no DDL on the hot path of every write
        with self.transaction():
            if version in (1, 2):
                # 2 → 3: recorded dependencies; old receipts keep NULL (no deps, no advisories).
                # First: the 1 → 2 step reads every receipt field.
                self.con.execute("ALTER TABLE citations ADD COLUMN IF NOT EXISTS deps VARCHAR")
            if version in (1, 2, 3):
                # 3 → 4: token hashes; old receipts keep NULL (a change is never cosmetic).
                self.con.execute("ALTER TABLE citations ADD COLUMN IF NOT EXISTS token_hash VARCHAR")
            if version == 1:
                self._migrate_1_to_2()
            self.con.execute(DDL)
            self.con.execute(INDEXES)
            self.con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(MEMORY_SCHEMA_VERSION)])

    def _migrate_1_to_2(self) -> None:
        """Version 1 → 2: the refresh column of revisions, and the code index built from the
        citations of every memory's current revision (the rows ``remember`` would have
        written)."""
        self.con.execute("ALTER TABLE revisions ADD COLUMN IF NOT EXISTS refresh VARCHAR")
        self.con.execute(CODE_INDEX_DDL)
        rows = self.con.execute(
            f"SELECT c.memory_id, c.revision, {', '.join('c.' + n for n in RECEIPT_FIELDS)} FROM citations c "
            "JOIN memories m ON m.id = c.memory_id AND m.revision = c.revision "
            "ORDER BY c.memory_id, c.position").fetchall()
        by_mem: dict[tuple[str, int], list[Receipt]] = {}
        for row in rows:
            by_mem.setdefault((row[0], row[1]), []).append(Receipt(**dict(zip(RECEIPT_FIELDS, row[2:], strict=True))))
        cols: dict[str, list] = {c: [] for c in CODE_INDEX_COLS}
        for (mid, rev), receipts in by_mem.items():
            code_index_rows(mid, rev, receipts, cols)
        if cols["memory_id"]:
            self._bulk("code_index", cols)

    # --- writes ------------------------------------------------------------------------------

    def remember(self, text: str, *, kind: str = "durable", project: str = "default", topic: str | None = None,
                 receipts: list[Receipt] | None = None, author: str | None = None, agent_id: str | None = None,
                 session_id: str | None = None, source_commit: str | None = None,
                 supersedes: str | None = None, legacy: bool = False, now: float | None = None,
                 refresh: list[dict[str, Any]] | None = None, memory_id: str | None = None,
                 expect_revision: int | None = None) -> tuple[Memory, int]:
        """Create or revise the (project, topic) memory; returns (memory, citations cleared).
        ``refresh``: what a refresh replaced in this revision and why (memory/agent/refresh.py);
        ``memory_id`` revises that memory (a memory stored without a topic has no
        (project, topic) key); ``expect_revision``: refuse (retryable) unless the memory
        is still at that revision — nothing written."""
        check_text(text)
        if kind not in ("durable", "handoff"):
            raise CitegraphError(f"invalid kind {kind!r}", "use durable or handoff", code=2)
        check_name("project", project)
        if topic is not None:
            check_name("topic", topic)
        for what, value in (("author", author), ("agent id", agent_id), ("session id", session_id)):
            check_field(what, value)
        receipts = receipts or []
        now = time.time() if now is None else now
        mid = memory_id or (memory_id_for(project, topic) if topic else "cgm_" + uuid.uuid4().hex[:16])
        topic = topic or mid[4:]
        with self.transaction():
            prev = self.con.execute("SELECT revision, created_at, supersedes, superseded_by FROM memories "
                                    "WHERE id = ?", [mid]).fetchall()
            if expect_revision is not None and (not prev or prev[0][0] != expect_revision):
                raise CitegraphError(f"memory {mid} was revised meanwhile (expected revision {expect_revision}); "
                                     "nothing was written", "run the command again", code=1, retryable=True,
                                     kind="racing")
            cleared = 0
            superseded_by = None
            # A memory never supersedes itself: ``--supersedes M`` while writing revision n of
            # M is the revision (it replaces n - 1), not a link — a self link would hide M from
            # every reader that skips superseded memories. Stored self links are dropped here.
            if supersedes == mid:
                supersedes = None
            if prev:
                revision = prev[0][0] + 1
                created = prev[0][1]
                # a new revision keeps its supersede links
                supersedes = supersedes or (prev[0][2] if prev[0][2] != mid else None)
                superseded_by = prev[0][3] if prev[0][3] != mid else None
                cleared = self.con.execute("SELECT count(*) FROM citations WHERE memory_id = ? AND revision = ?",
                                           [mid, prev[0][0]]).fetchall()[0][0]
                cleared = cleared if not receipts else 0
                self.con.execute("DELETE FROM memories WHERE id = ?", [mid])
                self.con.execute("DELETE FROM terms WHERE memory_id = ?", [mid])
                self.con.execute("DELETE FROM code_index WHERE memory_id = ?", [mid])
            else:
                revision, created = 1, now
            toks = tokenize(f"{text} {topic} {project}")
            self.con.execute(
                f"INSERT INTO memories ({', '.join(MEMORY_COLS)}, schema_version, doc_len) VALUES "
                f"({', '.join('?' * (len(MEMORY_COLS) + 2))})",
                [mid, project, topic, kind, "active", text, revision, created, now, author, agent_id, session_id,
                 supersedes, superseded_by, source_commit, legacy, MEMORY_SCHEMA_VERSION, len(toks)])
            self.con.execute("INSERT INTO revisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             [mid, revision, text, kind, now, author, agent_id, session_id,
                              json.dumps([r.id for r in receipts]), cleared,
                              json.dumps(refresh) if refresh else None])
            if receipts:
                cols: dict[str, list] = {"memory_id": [], "revision": [], "position": []}
                cols.update({n: [] for n in RECEIPT_FIELDS})
                for pos, r in enumerate(receipts):
                    cols["memory_id"].append(mid)
                    cols["revision"].append(revision)
                    cols["position"].append(pos)
                    for n in RECEIPT_FIELDS:
                        cols[n].append(getattr(r, n))
                self._bulk("citations", cols)
                self._bulk("code_index", code_index_rows(mid, revision, receipts))
            counts = Counter(toks)
            if counts:
                self._bulk("terms", {"memory_id": [mid] * len(counts), "term": list(counts),
                                     "tf": list(counts.values())})
            if supersedes:
                self.con.execute("UPDATE memories SET superseded_by = ? WHERE id = ?", [mid, supersedes])
        mem = self.get(mid)
        assert mem is not None
        return mem, int(cleared)

    def _bulk(self, table: str, cols: dict[str, list]) -> None:
        t = pa.table(cols)
        self.con.register("_src", t)
        try:
            self.con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT * FROM _src")
        finally:
            self.con.unregister("_src")

    def set_status(self, memory_id: str, status: str) -> Memory:
        mem = self.require(memory_id)
        self.con.execute("UPDATE memories SET status = ?, updated_at = ? WHERE id = ?", [status, time.time(), mem.id])
        return self.require(mem.id)

    def forget(self, memory_id: str) -> int:
        mem = self.require(memory_id)
        with self.transaction():
            for table, col in (("memories", "id"), ("revisions", "memory_id"), ("citations", "memory_id"),
                               ("terms", "memory_id"), ("code_index", "memory_id")):
                self.con.execute(f"DELETE FROM {table} WHERE {col} = ?", [mem.id])
            self.con.execute("UPDATE memories SET superseded_by = NULL WHERE superseded_by = ?", [mem.id])
            self.con.execute("UPDATE memories SET supersedes = NULL WHERE supersedes = ?", [mem.id])
        return 1

    # --- reads -------------------------------------------------------------------------------

    def require(self, memory_id: str) -> Memory:
        mem = self.get(memory_id)
        if mem is None:
            raise CitegraphError(f"no memory {memory_id}", "list memories with citegraph list", code=2)
        return mem

    def require_many(self, memory_ids: list[str]) -> list[Memory]:
        """The memories of ``memory_ids`` in that order (duplicates once), in one query;
        an unknown id is an error naming it."""
        wanted = list(dict.fromkeys(memory_ids))
        found = {m.id: m for m in self.load(where="list_contains(?::VARCHAR[], id)", params=[wanted])}
        for mid in wanted:
            if mid not in found:
                raise CitegraphError(f"no memory {mid}", "list memories with citegraph list", code=2)
        return [found[mid] for mid in wanted]

    def get(self, memory_id: str) -> Memory | None:
        mems = self.load(where="id = ?", params=[memory_id])
        if not mems and not memory_id.startswith("cgm_"):
            return None
        return mems[0] if mems else None

    def load(self, where: str = "TRUE", params: list[Any] | None = None, order: str = "updated_at DESC",
             limit: int | None = None) -> list[Memory]:
        sql = f"SELECT {', '.join(MEMORY_COLS)} FROM memories WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self.con.execute(sql, params or []).fetchall()
        mems = [Memory(*row) for row in rows]
        self.attach_citations(mems)
        return mems

    def attach_citations(self, mems: list[Memory]) -> None:
        if not mems:
            return
        ids = pa.table({"id": [m.id for m in mems], "rev": [m.revision for m in mems]})
        self.con.register("_ids", ids)
        try:
            rows = self.con.execute(
                f"SELECT c.memory_id, {', '.join('c.' + n for n in RECEIPT_FIELDS)} FROM citations c "
                "JOIN _ids i ON c.memory_id = i.id AND c.revision = i.rev ORDER BY c.memory_id, c.position"
            ).fetchall()
        finally:
            self.con.unregister("_ids")
        by_id = {m.id: m for m in mems}
        for row in rows:
            by_id[row[0]].citations.append(Receipt(**dict(zip(RECEIPT_FIELDS, row[1:], strict=True))))

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Every revision, oldest first, with its citations (the receipts as stored then)
        and, for a revision written by ``refresh``, what it replaced and why."""
        mem_rows = self.con.execute("SELECT id FROM memories WHERE id = ?", [memory_id]).fetchall()
        rows = self.con.execute(
            "SELECT revision, text, kind, created_at, author, agent_id, session_id, citation_ids, cleared, refresh "
            "FROM revisions WHERE memory_id = ? ORDER BY revision", [memory_id]).fetchall()
        if not rows and not mem_rows:
            raise CitegraphError(f"no memory {memory_id}", "list memories with citegraph list", code=2)
        cites: dict[int, list[dict[str, Any]]] = {}
        for row in self.con.execute(
                f"SELECT revision, {', '.join(RECEIPT_FIELDS)} FROM citations WHERE memory_id = ? "
                "ORDER BY revision, position", [memory_id]).fetchall():
            r = Receipt(**dict(zip(RECEIPT_FIELDS, row[1:], strict=True)))
            cites.setdefault(row[0], []).append(receipt_summary(r))
        return [{"revision": r[0], "text": r[1], "kind": r[2], "created_at": r[3], "author": r[4],
                 "agent_id": r[5], "session_id": r[6], "citation_ids": json.loads(r[7] or "[]"),
                 "cleared": r[8], "citations": cites.get(r[0], []),
                 "refresh": json.loads(r[9]) if r[9] else None} for r in rows]

    # --- the code index ------------------------------------------------------------------

    def code_lookup(self, repository_ids: list[str], keys: list[tuple[str, str]], *,
                    include_archived: bool = False) -> list[dict[str, Any]]:
        """Rows of the code index whose (key kind, key) is one of ``keys``, for citations of
        ``repository_ids``, of active (and not superseded) memories unless
        ``include_archived``. Point lookups by key (indexed), never a scan of memories."""
        if not keys or not repository_ids:
            return []
        t = pa.table({"kk": [k for k, _ in keys], "k": [v for _, v in keys]})
        status = "" if include_archived else f"AND m.status = 'active' AND {NOT_SUPERSEDED}"
        self.con.register("_keys", t)
        try:
            rows = self.con.execute(
                f"SELECT x.memory_id, x.citation_id, x.position, x.repository_id, x.key_kind, x.key, x.kind, x.path, "
                f"x.start_line, x.end_line FROM code_index x JOIN _keys q ON x.key = q.k AND x.key_kind = q.kk "
                f"JOIN memories m ON m.id = x.memory_id AND m.revision = x.revision "
                f"WHERE list_contains(?::VARCHAR[], x.repository_id) {status} "
                f"ORDER BY m.updated_at DESC, x.memory_id, x.position", [list(repository_ids)]).fetchall()
        finally:
            self.con.unregister("_keys")
        cols = ("memory_id", "citation_id", "position", "repository_id", "key_kind", "key", "kind", "path",
                "start_line", "end_line")
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def memories_citing(self, repository_ids: list[str], limit: int) -> list[str]:
        """Active memories with a citation of one of ``repository_ids``, most recently
        updated first (the code index, by repository)."""
        if not repository_ids:
            return []
        rows = self.con.execute(
            "SELECT m.id FROM memories m WHERE m.status = 'active' AND "
            f"{NOT_SUPERSEDED} AND EXISTS "
            "(SELECT 1 FROM code_index x WHERE x.memory_id = m.id AND x.revision = m.revision "
            "AND list_contains(?::VARCHAR[], x.repository_id)) ORDER BY m.updated_at DESC, m.id LIMIT ?",
            [list(repository_ids), int(limit)]).fetchall()
        return [r[0] for r in rows]

    def memories_by_repository(self, repository_ids: list[str]) -> int:
        """How many memories (any status) have a current citation of ``repository_ids``."""
        if not repository_ids:
            return 0
        return int(self.con.execute(
            "SELECT count(DISTINCT x.memory_id) FROM code_index x WHERE list_contains(?::VARCHAR[], x.repository_id)",
            [list(repository_ids)]).fetchall()[0][0])

    # --- observation cache (validator.pipeline.ObservationCache) ----------------------------

    def get_many(self, snapshot_id: str, citation_ids: list[str]) -> dict[str, Observation]:
        if not citation_ids:
            return {}
        self.con.register("_cids", pa.table({"c": citation_ids}))
        try:
            rows = self.con.execute(
                "SELECT citation_id, outcome, reason, path, start_line, end_line, handle FROM observations o "
                "SEMI JOIN _cids c ON o.citation_id = c.c WHERE snapshot_id = ?", [snapshot_id]).fetchall()
        finally:
            self.con.unregister("_cids")
        return {r[0]: Observation(r[0], r[1], r[2], Observed(r[3], r[4], r[5], r[6]) if r[3] else None)
                for r in rows}

    def put_many(self, snapshot_id: str, observations: list[Observation]) -> None:
        if not observations or getattr(self, "_read_only", False):
            return
        cols = {"snapshot_id": [], "citation_id": [], "outcome": [], "reason": [], "path": [],
                "start_line": [], "end_line": [], "handle": []}
        for o in observations:
            ob = o.observed
            for k, v in zip(cols, (snapshot_id, o.citation_id, o.outcome, o.reason, ob.path if ob else None,
                                   ob.start_line if ob else None, ob.end_line if ob else None,
                                   ob.handle if ob else None), strict=True):
                cols[k].append(v)
        try:
            self.con.register("_obs", pa.table(cols))
            self.con.execute("INSERT OR IGNORE INTO observations SELECT * FROM _obs")
        except duckdb.Error:
            pass  # a cache: a read-only or busy store simply does not remember
        finally:
            self.con.unregister("_obs")


class _NeedsMigration(Exception):
    """A read-only open found a store of an older schema (``MemoryStore.open`` migrates)."""


class _Gate:
    """This process's one connection to one memory-store file (see MemoryStore.open).

    With ``linger_s`` > 0 (a long-running process that answers many calls: the service)
    the connection is opened read-write and kept for that long after the last call, so a
    stream of calls pays the connect and schema check once; other processes wait at most
    that long after the stream ends (their busy-retry covers it)."""

    linger_s = 0.0  # set for the whole process by MemoryStore.keep_open_between_calls

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_fd: int | None = None  # the sidecar lock held while ``con`` is open (store_lock)
        self.cond = threading.Condition()
        self.writer = threading.RLock()  # read-write calls, one at a time (a thread may nest)
        self.con: duckdb.DuckDBPyConnection | None = None
        self.read_write = False
        self.users = 0
        self.broken = False
        self.epoch = 0  # moves with every use: an idle timer of an earlier epoch does nothing
        # the store's fingerprint when a read-write connection opened with a trusted code-keys
        # sidecar (keys_sidecar.begin_write): unchanged at the close, the sidecar is restored
        self.sidecar_fp: tuple | None = None

    def enter(self, want_rw: bool, deadline: float,
              connect: Callable[[bool], duckdb.DuckDBPyConnection]) -> duckdb.DuckDBPyConnection:
        with self.cond:
            while want_rw and self.con is not None and not self.read_write:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CitegraphError("the memory store is busy (reads of this process hold it)",
                                         "retry in a moment", code=1, retryable=True, kind="busy")
                self.cond.wait(min(left, 0.05))
            if self.con is None:
                rw = want_rw or _Gate.linger_s > 0
                fd = store_lock.acquire(self.path, rw, deadline)
                if rw:  # before any write can commit: a writer that dies leaves no trusted sidecar
                    self.sidecar_fp = keys_sidecar.begin_write(self.path)
                try:
                    self.con = connect(rw)
                except BaseException:
                    store_lock.release(fd)
                    raise
                self.lock_fd = fd
                self.read_write = rw
            self.users += 1
            self.epoch += 1
            return self.con.cursor()

    def leave(self, discard: bool = False) -> None:
        """A call is done with the connection; ``discard``: a write of it failed on the
        disk, so it is closed once idle instead of lingering (the next call reconnects)."""
        with self.cond:
            self.users -= 1
            self.broken = self.broken or discard
            if self.users == 0 and self.con is not None:
                if self.broken:
                    self._close()
                elif _Gate.linger_s > 0:
                    t = threading.Timer(_Gate.linger_s, self._idle_close, args=(self.epoch,))
                    t.daemon = True
                    t.start()
                else:
                    self._close()
            self.cond.notify_all()

    def _idle_close(self, epoch: int) -> None:
        with self.cond:
            if self.users == 0 and self.epoch == epoch and self.con is not None:
                self._close()
                self.cond.notify_all()

    def _close(self) -> None:
        assert self.con is not None
        # The code-keys sidecar: rewritten after every read-write connection (whatever it
        # wrote), and by a read-only one that finds it missing or out of step; written after
        # the checkpoint, before the lock is released (memory/lifecycle/keys_sidecar.py).
        # A read-write connection that committed nothing (the fingerprint it opened with)
        # restores it instead: no query.
        fp, self.sidecar_fp = self.sidecar_fp, None
        unchanged = fp is not None and keys_sidecar.store_fingerprint(self.path) == fp
        keys = None
        if not unchanged and (self.read_write or not keys_sidecar.in_step(self.path)):
            keys = _code_keys(self.con)
        closed = False
        try:
            self.con.close()  # checkpoints and removes the write-ahead log: under the lock
            closed = True
        finally:
            try:
                if closed and unchanged and keys_sidecar.restore(self.path, fp):
                    pass
                elif keys is not None and closed:
                    keys_sidecar.write(self.path, keys)
                elif self.read_write:
                    keys_sidecar.invalidate(self.path)
            finally:
                store_lock.release(self.lock_fd)
                self.lock_fd = None
        self.con = None
        self.read_write = False
        self.broken = False


def _code_keys(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]] | None:
    """The code index's path and blob keys (for the sidecar), or None when they cannot be
    read (the sidecar is then not written: a reader takes the full path)."""
    try:
        return con.execute("SELECT DISTINCT key_kind, key FROM code_index WHERE key_kind IN ('path', 'blob')"
                           ).fetchall()
    except Exception:  # noqa: BLE001 - best effort: no sidecar is always safe
        return None


_GATES: dict[str, _Gate] = {}
_GATES_LOCK = threading.Lock()


def close_idle_connections() -> None:
    """Close every lingering connection nobody uses (at exit, or when lingering stops):
    a DuckDB connection must not be left to interpreter shutdown and daemon threads."""
    with _GATES_LOCK:
        gates = list(_GATES.values())
    for g in gates:
        with g.cond:
            if g.users == 0 and g.con is not None:
                g._close()


atexit.register(close_idle_connections)


def _gate(path: Any) -> _Gate:
    key = os.path.realpath(str(path))
    with _GATES_LOCK:
        if key not in _GATES or _GATES_PID[0] != os.getpid():
            if _GATES_PID[0] != os.getpid():
                _GATES.clear()
                _GATES_PID[0] = os.getpid()
            _GATES[key] = _Gate(Path(key))
        return _GATES[key]


_GATES_PID = [0]


def bulk_insert(ms: MemoryStore, items: list[dict[str, Any]], now: float | None = None) -> list[str]:
    """Insert new memories (revision 1) in bulk with Arrow: the rows ``remember`` would
    write for each, without per-row statements. Each item: ``text`` and optionally
    ``project``, ``topic``, ``kind``, ``receipts``, ``author``, ``agent_id``,
    ``session_id``, ``source_commit``, ``legacy``, ``created_at``. Ids must not exist yet
    (the caller checks, and runs this inside its transaction). Used by legacy import and
    benchmarks."""
    now = time.time() if now is None else now
    mem: dict[str, list] = {c: [] for c in (*MEMORY_COLS, "schema_version", "doc_len")}
    rev: dict[str, list] = {c: [] for c in ("memory_id", "revision", "text", "kind", "created_at", "author",
                                            "agent_id", "session_id", "citation_ids", "cleared")}
    cit: dict[str, list] = {"memory_id": [], "revision": [], "position": [], **{n: [] for n in RECEIPT_FIELDS}}
    trm: dict[str, list] = {"memory_id": [], "term": [], "tf": []}
    idx: dict[str, list] = {c: [] for c in CODE_INDEX_COLS}
    ids = []
    for it in items:
        text, project = it["text"], it.get("project") or "default"
        kind = it.get("kind") or "durable"
        check_text(text)
        if kind not in ("durable", "handoff"):
            raise CitegraphError("invalid memory in bulk insert", "check text and kind", code=2)
        check_name("project", project)
        topic = it.get("topic")
        mid = memory_id_for(project, topic) if topic else "cgm_" + uuid.uuid4().hex[:16]
        topic = check_name("topic", topic) if topic else mid[4:]
        created = float(it.get("created_at") or now)
        receipts = it.get("receipts") or []
        toks = tokenize(f"{text} {topic} {project}")
        for c, v in zip(mem, (mid, project, topic, kind, "active", text, 1, created, created, it.get("author"),
                              it.get("agent_id"), it.get("session_id"), None, None, it.get("source_commit"),
                              bool(it.get("legacy")), MEMORY_SCHEMA_VERSION, len(toks)), strict=True):
            mem[c].append(v)
        for c, v in zip(rev, (mid, 1, text, kind, created, it.get("author"), it.get("agent_id"),
                              it.get("session_id"), json.dumps([r.id for r in receipts]), 0), strict=True):
            rev[c].append(v)
        for pos, r in enumerate(receipts):
            cit["memory_id"].append(mid)
            cit["revision"].append(1)
            cit["position"].append(pos)
            for n in RECEIPT_FIELDS:
                cit[n].append(getattr(r, n))
        code_index_rows(mid, 1, receipts, idx)
        for term, tf in Counter(toks).items():
            trm["memory_id"].append(mid)
            trm["term"].append(term)
            trm["tf"].append(tf)
        ids.append(mid)
    for table, cols in (("memories", mem), ("revisions", rev), ("citations", cit), ("terms", trm),
                        ("code_index", idx)):
        if cols["memory_id" if table != "memories" else "id"]:
            ms._bulk(table, cols)
    return ids
