"""Publish and import (SPEC §10): durable memories with their receipts as portable JSONL.

File format (``citegraph-memories``, version 1; see docs/publish.md)::

    {"type": "header", "format": "citegraph-memories", "format_version": 1, "memories": N, ...}
    {"type": "memory", "id": ..., "project": ..., "topic": ..., "text": ..., "citations": [receipt, ...]}
    ...

Publish gate: a memory is publishable only if every citation is clean (not dirty) and
comes from a ``remote`` repository identity, and the record is well formed and within the
bounds import enforces (names, text size, at most 8 citations, receipts that pass
``receipt_checks.receipt_problem``). Anything else is refused as a whole — with its reason
— and nothing is ever stripped from a memory.

Import verifies, never trusts (SPEC §12.1): every line is read with a size bound and
decoded with bounded nesting and numbers; every record and receipt is re-checked with the
publish rules (capture's ref rules included); every receipt whose capture commit is in a
local clone of its repository is recomputed from that commit (blob, content, span and
fragment hashes). Any problem refuses the whole file, naming the line; nothing is loaded.
Then each memory is loaded, in one transaction, as a revision of its (project, topic)
memory: re-importing the same file changes nothing. (Legacy records — text without
receipts — are loaded by ``citegraph import-legacy``.)
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.exchange.receipt_checks import (
    MAX_RECEIPT_JSON_BYTES,
    CommitSource,
    ReceiptMismatch,
    receipt_problem,
)
from citegraph.memory.exchange.untrusted_json import JSONInputError, lone_surrogate, shown
from citegraph.memory.exchange.untrusted_json import loads as bounded_loads
from citegraph.memory.lifecycle.store import (
    MAX_TEXT_BYTES,
    NAME_RE,
    Memory,
    MemoryStore,
    memory_id_for,
)
from citegraph.memory.lifecycle.transactions import one_transaction
from citegraph.validator.model import Receipt, locator_of

FORMAT = "citegraph-memories"
FORMAT_VERSION = 1
MAX_CITATIONS = 8
MAX_META_BYTES = 1024  # author, agent_id, session_id (UTF-8 bytes each)
MAX_DEPTH = 16  # JSON nesting of one line (a memory record needs 3)
MAX_TIME = 253402300799.0  # 9999-12-31T23:59:59Z, the last time datetime can show
# The longest line publish can write, worst case: text and provenance made of characters
# JSON escapes as \u00XX (6 bytes for 1), 8 receipts at their bound, 4 KiB for the rest
# (keys, ids, names of at most 128 ASCII characters, numbers). A longer line is not ours.
MAX_LINE_BYTES = 6 * (MAX_TEXT_BYTES + 3 * MAX_META_BYTES) + MAX_CITATIONS * MAX_RECEIPT_JSON_BYTES + 4096
MEMORY_ID_RE = re.compile(r"^cgm_[0-9a-f]{16}$")
COMMIT_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
MEMORY_STR = ("id", "project", "topic", "kind", "text")


def gate_problem(r: dict[str, Any]) -> tuple[str, str] | None:
    """(reason code, message) when a well-formed receipt may not be published."""
    where = locator_of(r["kind"], r.get("path"), r.get("start_line"), r.get("end_line"), r.get("qualified_name"),
                       r.get("ordinal"), r["ref"])
    if r.get("dirty"):
        return "dirty-citation", (f"citation {r['id']} ({where}) was captured from uncommitted changes "
                                  "(dirty); re-capture it after committing")
    if r.get("repository_kind") != "remote":
        return "local-repository", (f"citation {r['id']} ({where}) comes from a repository without a "
                                    "network 'origin' remote (local identity); others cannot validate it")
    return None


# --- publish -------------------------------------------------------------------------------

@dataclass
class Refusal:
    id: str
    reason: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason, "message": self.message}


@dataclass
class PublishReport:
    out: str
    published: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=lambda: {"handoff": 0, "archived": 0})

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, "format": FORMAT, "format_version": FORMAT_VERSION,
                "published": self.published, "refused": [r.to_json() for r in self.refused],
                "skipped": self.skipped}


def memory_record(m: Memory) -> dict[str, Any]:
    return {"type": "memory", "id": m.id, "project": m.project, "topic": m.topic, "kind": m.kind,
            "text": m.text, "revision": m.revision, "created_at": m.created_at, "updated_at": m.updated_at,
            "author": m.author, "agent_id": m.agent_id, "session_id": m.session_id,
            "supersedes": m.supersedes, "source_commit": m.source_commit, "legacy": bool(m.legacy),
            "citations": [r.to_dict() for r in m.citations]}


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def record_problem(rec: dict[str, Any]) -> tuple[str, str] | None:
    """(reason code, message) when a memory record is malformed, too large, or fails the
    publish gate. Publish and import apply the same rules, so whatever publish writes,
    import accepts."""
    for k in MEMORY_STR:
        if not isinstance(rec.get(k), str) or not rec[k].strip():
            return "malformed", f"memory lacks {k}"
    if not MEMORY_ID_RE.fullmatch(rec["id"]):
        return "malformed", f"memory id {shown(rec['id'])} is not cgm_ + 16 lowercase hex"
    for k in ("project", "topic"):
        if not NAME_RE.fullmatch(rec[k]) or set(rec[k]) == {"."}:
            return "malformed", f"invalid {k} {shown(rec[k])}"
    if rec["kind"] not in ("durable", "handoff"):
        return "malformed", f"invalid kind {shown(rec['kind'])}"
    surrogate = lone_surrogate(rec)
    if surrogate:
        return "malformed", surrogate
    size = len(rec["text"].encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        return "too-large", f"text is {size} bytes, more than the limit of {MAX_TEXT_BYTES} bytes"
    for k in ("author", "agent_id", "session_id"):
        v = rec.get(k)
        if v is not None and not isinstance(v, str):
            return "malformed", f"{k} is not a string"
        if isinstance(v, str) and len(v.encode("utf-8")) > MAX_META_BYTES:
            return "too-large", f"{k} is longer than {MAX_META_BYTES} bytes"
    for k in ("created_at", "updated_at"):
        v = rec.get(k)
        if v is not None and not _number(v):
            return "malformed", f"{k} is not a number"
        if v is not None and not 0 <= v <= MAX_TIME:
            return "malformed", f"{k} {shown(v)} is not a time (0..{MAX_TIME:.0f} seconds since 1970)"
    rev = rec.get("revision")
    if rev is not None and (not isinstance(rev, int) or isinstance(rev, bool) or not 1 <= rev <= 2**31 - 1):
        return "malformed", f"revision {shown(rev)} is not a revision number"
    if rec.get("supersedes") is not None and (not isinstance(rec["supersedes"], str)
                                               or not MEMORY_ID_RE.fullmatch(rec["supersedes"])):
        return "malformed", f"supersedes {shown(rec['supersedes'])} is not a memory id"
    sc = rec.get("source_commit")
    if sc is not None and (not isinstance(sc, str) or not COMMIT_RE.fullmatch(sc)):
        return "malformed", f"source_commit {shown(sc)} is not a commit id"
    if rec.get("legacy") is not None and not isinstance(rec["legacy"], bool):
        return "malformed", "legacy is not a boolean"
    cites = rec.get("citations")
    if not isinstance(cites, list):
        return "malformed", "citations is not a list"
    if len(cites) > MAX_CITATIONS:
        return "malformed", f"{len(cites)} citations (at most {MAX_CITATIONS})"
    ids = set()
    for c in cites:
        why = receipt_problem(c)
        if why:
            return "malformed", why
        if c["id"] in ids:
            return "malformed", f"citation {c['id']} appears twice"
        ids.add(c["id"])
    for c in cites:
        gate = gate_problem(c)
        if gate:
            return gate
    return None


def _line(rec: dict[str, Any]) -> str:
    return json.dumps(rec, sort_keys=True, ensure_ascii=False)


def publish(home: Home, out: str, project: str | None = None) -> PublishReport:
    """Write the publishable durable memories to ``out`` (``-`` for stdout); report refusals."""
    report = PublishReport(out)
    with MemoryStore.open(home) as ms:
        where, params = "TRUE", []
        if project:
            where, params = "project = ?", [project]
        mems = ms.load(where=where, params=params, order="project, topic, id")
    records: list[bytes] = []
    for m in mems:
        if m.kind != "durable":
            report.skipped["handoff"] += 1
            continue
        if m.status != "active":
            report.skipped["archived"] += 1
            continue
        rec = memory_record(m)
        problem = record_problem(rec)
        line = _line(rec).encode("utf-8") if problem is None else b""
        if len(line) > MAX_LINE_BYTES:  # cannot happen within the bounds above; never write what import refuses
            problem = "too-large", f"the record is {len(line)} bytes as JSON, more than {MAX_LINE_BYTES}"
        if problem:
            report.refused.append(Refusal(m.id, *problem))
            continue
        records.append(line)
        report.published.append(m.id)
    header = {"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION,
              "exported_at": round(time.time(), 3), "project": project, "memories": len(records),
              "generator": f"citegraph {citegraph_version()}"}
    data = b"\n".join([_line(header).encode("utf-8"), *records]) + b"\n"
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        _atomic_write(Path(out), data)
    return report


def citegraph_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("citegraph")
    except PackageNotFoundError:
        return "0"


def _atomic_write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise CitegraphError(f"{path}: cannot write ({exc.strerror or exc})",
                             "choose a writable --out path", code=3) from exc


# --- import --------------------------------------------------------------------------------

@dataclass
class ImportReport:
    file: str
    format: str
    format_version: int | None
    imported: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept_local: list[dict[str, str]] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)  # citation ids checked against their capture commit
    unverified: list[dict[str, str]] = field(default_factory=list)  # {"memory_id", "id", "reason"}

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "format": self.format, "format_version": self.format_version,
                "imported": self.imported, "updated": self.updated, "unchanged": self.unchanged,
                "kept_local": self.kept_local, "verified": self.verified, "unverified": self.unverified}


def _bad(file: str, line: int | None, why: str) -> CitegraphError:
    where = f"{file}:{line}" if line else file
    return CitegraphError(f"{where}: {why}; nothing was imported",
                          "fix the file or export it again with citegraph publish", code=2, kind="bad-import")


def _legacy(file: str) -> CitegraphError:
    return CitegraphError(f"{file}: legacy memory records, not a {FORMAT} file; nothing was imported",
                          f"load it with citegraph import-legacy {file}", code=2, kind="bad-import")


def _raw_lines(file: str) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of every line, each read with a bound: a line longer than any
    publish can write is refused before it is held in memory whole."""
    try:
        f = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    except OSError as exc:
        raise CitegraphError(f"{file}: cannot read ({exc.strerror or exc})", "pass an existing file",
                             code=2) from exc
    try:
        n = 0
        while True:
            try:
                raw = f.readline(MAX_LINE_BYTES + 2)
            except OSError as exc:
                raise CitegraphError(f"{file}: cannot read ({exc.strerror or exc})", "pass a readable file",
                                     code=2) from exc
            if not raw:
                return
            n += 1
            body = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw
            if len(body) > MAX_LINE_BYTES:
                raise _bad(file, n, f"line longer than {MAX_LINE_BYTES} bytes, more than any published memory "
                                    f"(text is limited to {MAX_TEXT_BYTES} bytes)")
            yield n, body
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _parse(file: str) -> list[tuple[int, Any]]:
    parsed: list[tuple[int, Any]] = []
    for n, raw in _raw_lines(file):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _bad(file, n, f"not UTF-8 text (byte {exc.start + 1} of the line)") from None
        if not line.strip():
            continue
        if not parsed and line.lstrip().startswith("["):
            raise _legacy(file)
        try:
            parsed.append((n, bounded_loads(line, MAX_DEPTH)))
        except JSONInputError as exc:
            raise _bad(file, n, exc.why) from None
    if not parsed:
        raise _bad(file, None, "empty file")
    return parsed


def read_file(file: str) -> tuple[str, int | None, list[tuple[int, dict[str, Any]]]]:
    """Parse and check a file: (format, version, [(line number, memory record)]). Raises on
    any problem, naming the line."""
    parsed = _parse(file)
    first_n, first = parsed[0]
    if not isinstance(first, dict):
        raise _bad(file, first_n, "not a JSON object")
    if first.get("type") != "header" and "format" not in first and "text" in first:
        raise _legacy(file)
    if first.get("format") != FORMAT or first.get("type") != "header":
        raise _bad(file, first_n, f"not a {FORMAT} file (format {shown(first.get('format'))})")
    version = first.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _bad(file, first_n, "header lacks format_version")
    if version > FORMAT_VERSION:
        raise CitegraphError(f"{file}: format version {shown(version)} is newer than this citegraph supports "
                             f"({FORMAT_VERSION}); nothing was imported", "upgrade citegraph", code=2,
                             kind="bad-import")
    if version < 1:
        raise _bad(file, first_n, f"unknown format version {shown(version)}")
    records = []
    seen: set[tuple[str, str]] = set()
    for n, rec in parsed[1:]:
        if not isinstance(rec, dict) or rec.get("type") != "memory":
            raise _bad(file, n, "not a memory record")
        check_record(file, n, rec, seen)
        records.append((n, rec))
    expected = first.get("memories")
    if isinstance(expected, int) and expected != len(records):
        raise _bad(file, None, f"header announces {shown(expected)} memories, the file holds {len(records)} "
                               "(truncated?)")
    return FORMAT, version, records


def check_record(file: str, n: int, rec: dict[str, Any], seen: set[tuple[str, str]]) -> None:
    """The publish rules for one record of an import (``file`` line or row ``n``), and one
    record per (project, topic) in ``seen``; raises naming the record."""
    problem = record_problem(rec)
    if problem:
        mid = rec["id"] if MEMORY_ID_RE.fullmatch(str(rec.get("id"))) else shown(rec.get("id", "?"))
        raise _bad(file, n, f"memory {mid}: {problem[1]}")
    if rec["kind"] != "durable":
        raise _bad(file, n, f"memory {rec['id']}: only durable memories are published")
    key = (rec["project"], rec["topic"])
    if key in seen:
        raise _bad(file, n, f"memory {rec['id']}: {rec['project']}/{rec['topic']} appears twice")
    seen.add(key)


def verify_records(home: Home, file: str, records: list[tuple[int, dict[str, Any]]],
                   repos: list[str] | None, report: ImportReport) -> None:
    """Recompute every receipt against its capture commit where a clone has it (SPEC §12.1);
    the first mismatch refuses the whole file, naming memory, citation and field."""
    source = CommitSource(home, repos)
    for n, rec in records:
        for c in rec["citations"]:
            try:
                note = source.verify(c)
            except ReceiptMismatch as exc:
                raise _bad(file, n, f"memory {rec['id']}: citation {c['id']} ({shown(c['ref'])}) does not match "
                                    f"its capture commit: {exc}") from None
            if note is None:
                report.verified.append(c["id"])
            else:
                report.unverified.append({"memory_id": rec["id"], "id": c["id"], "reason": note})


def import_file(home: Home, file: str, repos: list[str] | None = None) -> ImportReport:
    """Check ``file`` completely (shape, then content against the capture commits found in
    ``repos`` — default the working directory — and in this home's indexed worktrees), then
    load its memories in one transaction (idempotent)."""
    fmt, version, records = read_file(file)
    report = ImportReport(file, fmt, version)
    verify_records(home, file, records, repos, report)
    load_records(home, [rec for _n, rec in records], report)
    return report


def load_records(home: Home, records: list[dict[str, Any]], report: ImportReport) -> None:
    """Load checked records in one transaction, each as a revision of its (project, topic)
    memory (docs/publish.md "Loading"): imported, updated, unchanged or kept local."""
    with MemoryStore.open(home) as store, one_transaction(store) as ms:
        for rec in records:
            receipts = [Receipt(**c) for c in rec["citations"]]
            mid = memory_id_for(rec["project"], rec["topic"])
            cur = ms.get(mid)
            if cur is not None and cur.text == rec["text"] and cur.kind == rec["kind"] and \
                    [c.id for c in cur.citations] == [r.id for r in receipts]:
                report.unchanged.append(mid)
                continue
            ts = rec.get("updated_at")
            if cur is not None and ts is not None and cur.updated_at > ts:
                report.kept_local.append({"id": mid, "reason": "the local revision is newer than the imported one"})
                continue
            supersedes = rec.get("supersedes")
            if supersedes and ms.get(supersedes) is None:
                supersedes = None
            ms.remember(rec["text"], kind=rec["kind"], project=rec["project"], topic=rec["topic"],
                        receipts=receipts, author=rec.get("author"), agent_id=rec.get("agent_id"),
                        session_id=rec.get("session_id"), source_commit=rec.get("source_commit"),
                        supersedes=supersedes, legacy=bool(rec.get("legacy")), now=ts)
            (report.updated if cur is not None else report.imported).append(mid)
