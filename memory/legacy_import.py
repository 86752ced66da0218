"""Import of legacy memory records (SPEC §7): a JSON array or JSONL of objects with
``text`` and optionally ``project``, ``topic``, ``kind``, ``source_commit``, ``author``,
``created_at`` (epoch seconds or ISO 8601). Other fields are ignored.

Records are stored without citations and flagged ``legacy``; they stay recallable with
exactly the ranking they would have had anyway (no citation, no boost) and are judged by
their ``source_commit`` when validated (SPEC §6.5).

All or nothing: every record is checked first — a bad one is reported as one line naming
its line number and nothing is imported — then all are written in one transaction.
A record without a topic gets a stable one derived from its content, so importing the
same file twice does not duplicate anything (identical records are skipped).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import blake3

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.store import NAME_RE, MemoryStore, bulk_insert, memory_id_for

FIELDS = ("text", "project", "topic", "kind", "source_commit", "author", "created_at")
COMMIT_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
MAX_TEXT = 1_000_000


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
    if not isinstance(value, str) or not NAME_RE.match(value) or set(value) == {"."}:
        raise _bad(source, line, f"invalid {what} {value!r} (letters, digits, _ - ., at most 128)")
    return value


def _time(value: Any, source: str, line: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise _bad(source, line, f"created_at {value!r} is not a time")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise _bad(source, line, f"created_at {value!r} is not ISO 8601 or epoch seconds") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    raise _bad(source, line, f"created_at {value!r} is not a time")


def _record(obj: Any, source: str, line: int) -> LegacyRecord:
    if not isinstance(obj, dict):
        raise _bad(source, line, "a record must be a JSON object")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise _bad(source, line, "record has no text")
    if len(text) > MAX_TEXT:
        raise _bad(source, line, f"text longer than {MAX_TEXT} characters")
    project = _name(obj.get("project"), "project", source, line) or "default"
    kind = obj.get("kind") or "durable"
    if kind not in ("durable", "handoff"):
        raise _bad(source, line, f"invalid kind {kind!r} (durable or handoff)")
    sc = obj.get("source_commit")
    if sc is not None and (not isinstance(sc, str) or not COMMIT_RE.match(sc.strip())):
        raise _bad(source, line, f"source_commit {sc!r} is not a commit id")
    author = obj.get("author")
    if author is not None and not isinstance(author, str):
        raise _bad(source, line, "author must be a string")
    created = _time(obj.get("created_at"), source, line)
    topic = _name(obj.get("topic"), "topic", source, line)
    if topic is None:
        h = blake3.blake3(f"{project}\0{text}\0{sc or ''}\0{created or ''}".encode("utf-8", "surrogatepass"))
        topic = "legacy-" + h.hexdigest(8)
    return LegacyRecord(line, text, project, topic, kind, sc.strip() if sc else None, author, created)


def parse(data: str, source: str = "input") -> list[LegacyRecord]:
    """Parse and check every record; raise on the first bad one (with its line number)."""
    stripped = data.lstrip()
    if stripped.startswith("["):
        return _parse_array(data, source)
    out = []
    for n, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _bad(source, n, f"not valid JSON ({exc.msg})") from None
        out.append(_record(obj, source, n))
    return out


def _parse_array(data: str, source: str) -> list[LegacyRecord]:
    dec = json.JSONDecoder()
    i = data.index("[") + 1
    out: list[LegacyRecord] = []

    def line_at(pos: int) -> int:
        return data.count("\n", 0, pos) + 1

    def skip_ws(pos: int) -> int:
        while pos < len(data) and data[pos] in " \t\r\n":
            pos += 1
        return pos

    i = skip_ws(i)
    if i < len(data) and data[i] == "]":
        i += 1
    else:
        while True:
            i = skip_ws(i)
            try:
                obj, end = dec.raw_decode(data, i)
            except json.JSONDecodeError as exc:
                raise _bad(source, line_at(exc.pos), f"not valid JSON ({exc.msg})") from None
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


class _OuterTx:
    """A connection proxy that lets ``MemoryStore.remember`` run inside one outer
    transaction (its own BEGIN/COMMIT/ROLLBACK become no-ops)."""

    _TX = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|END)\b", re.I)

    def __init__(self, con: Any) -> None:
        self._con = con

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        if self._TX.match(sql):
            return self._con
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def import_file(home: Home, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Import a legacy JSON/JSONL file; returns counts and the ids written."""
    p = Path(path)
    source = p.name
    try:
        data = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise CitegraphError(f"{path}: no such file", "pass the path of a JSON or JSONL file", code=2) from None
    except UnicodeDecodeError as exc:
        raise CitegraphError(f"{path}: not UTF-8 text (byte {exc.start})", "convert the file to UTF-8",
                             code=2) from None
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
        proxy = MemoryStore(_OuterTx(real))  # type: ignore[arg-type]
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
        real.execute("BEGIN TRANSACTION")
        try:
            imported += bulk_insert(ms, [{"text": r.text, "project": r.project, "topic": r.topic, "kind": r.kind,
                                          "author": r.author, "source_commit": r.source_commit, "legacy": True,
                                          "created_at": r.created_at} for r in first])
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
            real.execute("COMMIT")
        except BaseException:
            real.execute("ROLLBACK")
            raise
    return {"imported": len(imported), "skipped": len(skipped), "ids": imported, "skipped_ids": skipped}
