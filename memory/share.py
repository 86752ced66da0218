"""Publish and import (SPEC §10): durable memories with their receipts as portable JSONL.

File format (``citegraph-memories``, version 1; see docs/publish.md)::

    {"type": "header", "format": "citegraph-memories", "format_version": 1, "memories": N, ...}
    {"type": "memory", "id": ..., "project": ..., "topic": ..., "text": ..., "citations": [receipt, ...]}
    ...

Publish gate: a memory is publishable only if every citation is clean (not dirty) and
comes from a ``remote`` repository identity, and the record is well formed (names, text,
at most 8 citations, complete receipts whose id matches their fields). Anything else is
refused as a whole — with its reason — and nothing is ever stripped from a memory.

Import validates the whole file first (nothing is loaded if any line is bad), then loads
each memory as a revision of its (project, topic) memory: re-importing the same file
changes nothing. Receipts are kept as they are; they validate against the importer's own
snapshots because the repository id is derived from the remote URL. (Legacy records — text
without receipts — are loaded by ``citegraph import-legacy``.)
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import blake3

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.store import NAME_RE, Memory, MemoryStore, memory_id_for
from citegraph.validator.model import Receipt

FORMAT = "citegraph-memories"
FORMAT_VERSION = 1
MAX_CITATIONS = 8
MAX_LINE_BYTES = 4 << 20  # one memory line; a larger one is not a citegraph file

RECEIPT_FIELDS = tuple(f.name for f in fields(Receipt))
BASE_FIELDS = ("ref", "kind", "repository_id", "repository_kind", "snapshot_id", "commit", "dirty",
               "extractor_version", "path", "blob_id", "content_hash")
KIND_FIELDS = {
    "file": (),
    "span": ("start_line", "end_line", "span_hash", "first_line_hash"),
    "symbol": ("start_line", "end_line", "handle", "language", "symbol_kind", "name", "qualified_name",
               "ordinal", "start_byte", "end_byte", "fragment_hash", "body_hash"),
}
REQUIRED_STR = ("id", "ref", "kind", "repository_id", "repository_kind", "snapshot_id", "commit",
                "extractor_version", "path", "blob_id")
REQUIRED_KIND = {
    "file": {},
    "span": {"start_line": int, "end_line": int, "span_hash": str},
    "symbol": {"start_line": int, "end_line": int, "handle": str, "language": str, "symbol_kind": str,
               "qualified_name": str, "fragment_hash": str},
}
MEMORY_STR = ("id", "project", "topic", "kind", "text")


# --- receipts ------------------------------------------------------------------------------

def _receipt_hash(values: dict[str, Any], keys: set[str]) -> str:
    h = blake3.blake3()
    for k in sorted(keys):
        h.update(f"{k}={values.get(k)}\0".encode("utf-8", "surrogateescape"))
    return "cgc_" + h.hexdigest(16)


def receipt_id_matches(values: dict[str, Any]) -> bool:
    """Does the receipt's id match its fields (capture's ``receipt_id``)? Detects edits."""
    kind = values.get("kind")
    known = set(BASE_FIELDS) | set(KIND_FIELDS.get(kind, ()))
    extra = {k for k in RECEIPT_FIELDS if k != "id" and k not in known and values.get(k) is not None}
    candidates = [known, known | extra, {k for k in RECEIPT_FIELDS if k != "id"}]
    return any(_receipt_hash(values, keys) == values.get("id") for keys in candidates)


def receipt_problem(values: Any) -> str | None:
    """Why a receipt (as a dict) is malformed, or None."""
    if not isinstance(values, dict):
        return "citation is not an object"
    unknown = sorted(set(values) - set(RECEIPT_FIELDS))
    if unknown:
        return f"citation has unknown field {unknown[0]!r}"
    for k in REQUIRED_STR:
        if not isinstance(values.get(k), str) or not values[k]:
            return f"citation {values.get('id', '?')} lacks {k}"
    if not isinstance(values.get("dirty"), bool):
        return f"citation {values['id']} lacks the dirty flag"
    kind = values["kind"]
    if kind not in KIND_FIELDS:
        return f"citation {values['id']} has unknown kind {kind!r}"
    for k, t in REQUIRED_KIND[kind].items():
        v = values.get(k)
        if not isinstance(v, t) or isinstance(v, bool) or v in ("", None):
            return f"{kind} citation {values['id']} lacks {k}"
    if not receipt_id_matches(values):
        return f"citation {values['id']} does not match its fields (edited receipt)"
    return None


def gate_problem(r: dict[str, Any]) -> tuple[str, str] | None:
    """(reason code, message) when a well-formed receipt may not be published."""
    if r.get("dirty"):
        return "dirty-citation", (f"citation {r['id']} ({r['ref']}) was captured from uncommitted changes "
                                  "(dirty); re-capture it after committing")
    if r.get("repository_kind") != "remote":
        return "local-repository", (f"citation {r['id']} ({r['ref']}) comes from a repository without a "
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


def record_problem(rec: dict[str, Any]) -> tuple[str, str] | None:
    """(reason code, message) when a memory record is malformed or fails the publish gate."""
    for k in MEMORY_STR:
        if not isinstance(rec.get(k), str) or not rec[k].strip():
            return "malformed", f"memory lacks {k}"
    for k in ("project", "topic"):
        if not NAME_RE.match(rec[k]) or set(rec[k]) == {"."}:
            return "malformed", f"invalid {k} {rec[k]!r}"
    if rec["kind"] not in ("durable", "handoff"):
        return "malformed", f"invalid kind {rec['kind']!r}"
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
    for k in ("created_at", "updated_at"):
        if rec.get(k) is not None and (not isinstance(rec[k], int | float) or isinstance(rec[k], bool)):
            return "malformed", f"{k} is not a number"
    return None


def publish(home: Home, out: str, project: str | None = None) -> PublishReport:
    """Write the publishable durable memories to ``out`` (``-`` for stdout); report refusals."""
    report = PublishReport(out)
    with MemoryStore.open(home) as ms:
        where, params = "TRUE", []
        if project:
            where, params = "project = ?", [project]
        mems = ms.load(where=where, params=params, order="project, topic, id")
    records = []
    for m in mems:
        if m.kind != "durable":
            report.skipped["handoff"] += 1
            continue
        if m.status != "active":
            report.skipped["archived"] += 1
            continue
        rec = memory_record(m)
        problem = record_problem(rec)
        if problem:
            report.refused.append(Refusal(m.id, *problem))
            continue
        records.append(rec)
        report.published.append(m.id)
    header = {"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION,
              "exported_at": round(time.time(), 3), "project": project, "memories": len(records),
              "generator": f"citegraph {_version()}"}
    lines = [json.dumps(header, sort_keys=True, ensure_ascii=False)]
    lines += [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        _atomic_write(Path(out), data)
    return report


def _version() -> str:
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

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "format": self.format, "format_version": self.format_version,
                "imported": self.imported, "updated": self.updated, "unchanged": self.unchanged,
                "kept_local": self.kept_local}


def _bad(file: str, line: int | None, why: str) -> CitegraphError:
    where = f"{file}:{line}" if line else file
    return CitegraphError(f"{where}: {why}; nothing was imported",
                          "fix the file or export it again with citegraph publish", code=2, kind="bad-import")


def _legacy(file: str) -> CitegraphError:
    return CitegraphError(f"{file}: legacy memory records, not a {FORMAT} file; nothing was imported",
                          f"load it with citegraph import-legacy {file}", code=2, kind="bad-import")


def read_file(file: str) -> tuple[str, int | None, list[dict[str, Any]]]:
    """Parse and validate a file: (format, version, memory records). Raises on any problem."""
    try:
        raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise CitegraphError(f"{file}: cannot read ({exc.strerror or exc})", "pass an existing file",
                             code=2) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(file, None, "not UTF-8 text") from None
    stripped = text.lstrip()
    if not stripped:
        raise _bad(file, None, "empty file")
    if stripped.startswith("["):
        raise _legacy(file)
    parsed: list[tuple[int, Any]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            raise _bad(file, n, "line too long")
        try:
            parsed.append((n, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise _bad(file, n, f"invalid JSON ({exc.msg})") from None
    first_n, first = parsed[0]
    if not isinstance(first, dict):
        raise _bad(file, first_n, "not a JSON object")
    if first.get("type") != "header" and "format" not in first and "text" in first:
        raise _legacy(file)
    if first.get("format") != FORMAT or first.get("type") != "header":
        raise _bad(file, first_n, f"not a {FORMAT} file (format {first.get('format')!r})")
    version = first.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _bad(file, first_n, "header lacks format_version")
    if version > FORMAT_VERSION:
        raise CitegraphError(f"{file}: format version {version} is newer than this citegraph supports "
                             f"({FORMAT_VERSION}); nothing was imported", "upgrade citegraph", code=2,
                             kind="bad-import")
    if version < 1:
        raise _bad(file, first_n, f"unknown format version {version}")
    records = []
    seen: set[tuple[str, str]] = set()
    for n, rec in parsed[1:]:
        if not isinstance(rec, dict) or rec.get("type") != "memory":
            raise _bad(file, n, "not a memory record")
        problem = record_problem(rec)
        if problem:
            raise _bad(file, n, f"memory {rec.get('id', '?')}: {problem[1]}")
        if rec["kind"] != "durable":
            raise _bad(file, n, f"memory {rec['id']}: only durable memories are published")
        key = (rec["project"], rec["topic"])
        if key in seen:
            raise _bad(file, n, f"memory {rec['id']}: {rec['project']}/{rec['topic']} appears twice")
        seen.add(key)
        records.append(rec)
    expected = first.get("memories")
    if isinstance(expected, int) and expected != len(records):
        raise _bad(file, None, f"header announces {expected} memories, the file holds {len(records)} "
                               "(truncated?)")
    return FORMAT, version, records


def import_file(home: Home, file: str) -> ImportReport:
    """Validate ``file`` completely, then load its memories (idempotent)."""
    fmt, version, records = read_file(file)
    report = ImportReport(file, fmt, version)
    with MemoryStore.open(home) as ms:
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
    return report
