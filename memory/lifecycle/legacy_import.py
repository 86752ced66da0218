"""Import of legacy memory records (SPEC §7): a JSON array or JSONL of objects with
``text`` and optionally ``project``, ``topic``, ``kind``, ``source_commit``, ``author``,
``created_at`` (epoch seconds or ISO 8601). Other fields are ignored.

Records are stored without citations and flagged ``legacy``; they stay recallable with
exactly the ranking they would have had anyway (no citation, no boost) and are judged by
their ``source_commit`` when validated (SPEC §6.5).

All or nothing: every record is checked first — a bad one is reported as one line naming
its line number and nothing is imported — then all are written in one transaction.
Hostile input is a bad record like any other (SPEC §12.1): bytes that are not UTF-8, lone
surrogates in a used field, nesting deeper than MAX_DEPTH, numbers beyond their range,
text over the store's one text limit (``MAX_TEXT_BYTES``).
A record without a topic gets a stable one derived from its content, so importing the
same file twice does not duplicate anything (identical records are skipped).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import blake3

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.exchange.untrusted_json import (
    JSON_SPACE,
    JSONInputError,
    check_depth,
    lone_surrogate,
    raw_decode,
    shown,
)
from citegraph.memory.lifecycle.store import (
    MAX_TEXT_BYTES,
    NAME_RE,
    MemoryStore,
    bulk_insert,
    memory_id_for,
)
from citegraph.memory.lifecycle.transactions import one_transaction

FIELDS = ("text", "project", "topic", "kind", "source_commit", "author", "created_at")
COMMIT_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
MAX_DEPTH = 64  # JSON nesting of one record (its ignored fields may hold nested metadata)
MAX_AUTHOR_BYTES = 1024  # as publish allows
MAX_TIME = 253402300799.0  # 9999-12-31T23:59:59Z


@dataclass
class LegacyRecord:
    line: int
    text: str
    project: str
    topic: str
    kind: str
    source_commit: str | None
    author: str | None
    created_at: float | None


def _bad(source: str, line: int, why: str) -> CitegraphError:
    return CitegraphError(f"{source} line {line}: {why}; nothing was imported",
                          "fix that record (text is required; project/topic use letters, digits, _ - .) "
                          "and import again", code=2, kind="invalid-legacy-record")


def _name(value: Any, what: str, source: str, line: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not NAME_RE.fullmatch(value) or set(value) == {"."}:
        raise _bad(source, line, f"invalid {what} {shown(value)} (letters, digits, _ - ., at most 128)")
    return value


def _time(value: Any, source: str, line: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise _bad(source, line, f"created_at {shown(value)} is not a time")
    if isinstance(value, int | float):
        if not 0 <= value <= MAX_TIME:
            raise _bad(source, line, f"created_at {shown(value)} is out of range (0..{MAX_TIME:.0f} epoch seconds)")
        return float(value)
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise _bad(source, line, f"created_at {shown(value)} is not ISO 8601 or epoch seconds") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        try:
            ts = dt.timestamp()
        except (OverflowError, ValueError):
            ts = -1.0
        if not 0 <= ts <= MAX_TIME:
            raise _bad(source, line, f"created_at {shown(value)} is out of range (1970 to 9999)")
        return ts
    raise _bad(source, line, f"created_at {shown(value)} is not a time")


def _record(obj: Any, source: str, line: int) -> LegacyRecord:
    if not isinstance(obj, dict):
        raise _bad(source, line, "a record must be a JSON object")
    surrogate = lone_surrogate({k: obj.get(k) for k in FIELDS})
    if surrogate:
        raise _bad(source, line, f"{surrogate}: not valid Unicode")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise _bad(source, line, "record has no text")
    size = len(text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        raise _bad(source, line, f"text is {size} bytes, more than the limit of {MAX_TEXT_BYTES} bytes")
    project = _name(obj.get("project"), "project", source, line) or "default"
    kind = obj.get("kind") or "durable"
    if kind not in ("durable", "handoff"):
        raise _bad(source, line, f"invalid kind {shown(kind)} (durable or handoff)")
    sc = obj.get("source_commit")
    if sc is not None and (not isinstance(sc, str) or not COMMIT_RE.fullmatch(sc.strip())):
        raise _bad(source, line, f"source_commit {shown(sc)} is not a commit id")
    author = obj.get("author")
    if author is not None and not isinstance(author, str):
        raise _bad(source, line, "author must be a string")
    if author is not None and len(author.encode("utf-8")) > MAX_AUTHOR_BYTES:
        raise _bad(source, line, f"author is longer than {MAX_AUTHOR_BYTES} bytes")
    created = _time(obj.get("created_at"), source, line)
    topic = _name(obj.get("topic"), "topic", source, line)
    if topic is None:
        h = blake3.blake3(f"{project}\0{text}\0{sc or ''}\0{created or ''}".encode("utf-8", "surrogatepass"))
        topic = "legacy-" + h.hexdigest(8)
    return LegacyRecord(line, text, project, topic, kind, sc.strip() if sc else None, author, created)


def _json(text: str, pos: int, source: str, line_at: Callable[[int], int], depth: int | None = MAX_DEPTH
          ) -> tuple[Any, int]:
    """One JSON value at ``text[pos:]``: nesting checked first (unless the caller did),
    numbers bounded."""
    try:
        if depth is not None:
            check_depth(text, depth, pos)
        return raw_decode(text, pos)
    except JSONInputError as exc:
        why = exc.why.replace("invalid JSON", "not valid JSON", 1)
        raise _bad(source, line_at(exc.pos if exc.pos is not None else pos), why) from None


def parse(data: str, source: str = "input") -> list[LegacyRecord]:
    """Parse and check every record; raise on the first bad one (with its line number).
    JSONL lines are split at ``\\n`` only: other line breaks (U+2028, \\x85) may occur in text."""
    data = data.removeprefix("\ufeff")
    stripped = data.lstrip()
    if stripped.startswith("["):
        return _parse_array(data, source)
    out = []
    for n, raw in enumerate(data.split("\n"), start=1):
        if not raw.strip():
            continue
        body = raw.strip(JSON_SPACE)
        obj, end = _json(body, 0, source, lambda _pos, n=n: n)
        if end != len(body):
            raise _bad(source, n, "not valid JSON (extra data after the record)")
        out.append(_record(obj, source, n))
    return out


def _parse_array(data: str, source: str) -> list[LegacyRecord]:
    i = data.index("[") + 1
    out: list[LegacyRecord] = []

    def line_at(pos: int) -> int:
        return data.count("\n", 0, pos) + 1

    def skip_ws(pos: int) -> int:
        while pos < len(data) and data[pos] in " \t\r\n":
            pos += 1
        return pos

    try:  # once for the whole array (records sit one level down)
        check_depth(data, MAX_DEPTH + 1)
    except JSONInputError as exc:
        raise _bad(source, line_at(exc.pos or 0), exc.why) from None
    i = skip_ws(i)
    if i < len(data) and data[i] == "]":
        i += 1
    else:
        while True:
            i = skip_ws(i)
            obj, end = _json(data, i, source, line_at, depth=None)
            out.append(_record(obj, source, line_at(i)))
            i = skip_ws(end)
            if i < len(data) and data[i] == ",":
                i += 1
                continue
            if i < len(data) and data[i] == "]":
                i += 1
                break
            raise _bad(source, line_at(i), "expected ',' or ']' in the JSON array")
    if data[skip_ws(i):].strip():
        raise _bad(source, line_at(skip_ws(i)), "text after the end of the JSON array")
    return out


def import_file(home: Home, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Import a legacy JSON/JSONL file; returns counts and the ids written."""
    p = Path(path)
    source = "stdin" if os.fspath(path) == "-" else p.name
    try:
        raw = sys.stdin.buffer.read() if os.fspath(path) == "-" else p.read_bytes()
        data = raw.decode("utf-8")
    except FileNotFoundError:
        raise CitegraphError(f"{path}: no such file", "pass the path of a JSON or JSONL file", code=2) from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise CitegraphError(f"{source} line {line}: not UTF-8 text (byte {exc.start + 1} of the file); "
                             "nothing was imported", "convert the file to UTF-8", code=2,
                             kind="invalid-legacy-record") from None
    records = parse(data, source)
    return import_records(home, records)


def import_records(home: Home, records: list[LegacyRecord]) -> dict[str, Any]:
    """Write ``records`` in one transaction: first occurrences of new (project, topic)
    pairs in bulk, later ones as new revisions through ``remember``; a record identical to
    the current text of its memory is skipped."""
    imported: list[str] = []
    skipped: list[str] = []
    with MemoryStore.open(home) as ms:
        real = ms.con
        ids = [memory_id_for(r.project, r.topic) for r in records]
        existing = {}
        if ids:
            existing = dict(real.execute("SELECT id, text FROM memories WHERE list_contains(?::VARCHAR[], id)",
                                         [sorted(set(ids))]).fetchall())
        first: list[LegacyRecord] = []
        later: list[tuple[str, LegacyRecord]] = []
        seen: set[str] = set()
        for mid, rec in zip(ids, records, strict=True):
            if mid not in existing and mid not in seen:
                first.append(rec)
            else:
                later.append((mid, rec))
            seen.add(mid)
        with one_transaction(ms) as proxy:
            imported += bulk_insert(proxy, [{"text": r.text, "project": r.project, "topic": r.topic,
                                             "kind": r.kind, "author": r.author, "source_commit": r.source_commit,
                                             "legacy": True, "created_at": r.created_at} for r in first])
            current = {r.topic and memory_id_for(r.project, r.topic): r.text for r in first} | existing
            for mid, rec in later:
                if current.get(mid) == rec.text:
                    skipped.append(mid)
                    continue
                mem, _ = proxy.remember(rec.text, kind=rec.kind, project=rec.project, topic=rec.topic,
                                        author=rec.author, source_commit=rec.source_commit, legacy=True,
                                        now=rec.created_at)
                current[mid] = rec.text
                imported.append(mem.id)
    return {"imported": len(imported), "skipped": len(skipped), "ids": imported, "skipped_ids": skipped}
