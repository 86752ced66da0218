"""Memories in checkpoints: two Parquet tables per repository partition (docs/checkpoints.md).

``memories`` holds one row per memory — the fields of a published memory record
(memory/exchange/share.py ``memory_record``) — and ``citations`` one row per receipt, with
the memory id and position: the columns of ``validator.model.Receipt``, typed from its
annotations (one source). A memory is in the partition of every repository it cites (or
whose identity history lists an id it cites); it is the same record in each.

Reading is import's reading: every record is rebuilt as the JSONL record publish writes and
checked with the same rules (``share.check_record``: shape, limits, the publish gate), so a
checkpoint can carry nothing a published file could not. Any problem refuses the whole
checkpoint, naming the file and row.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from citegraph.graph.checkpoint_manifest import (
    CheckpointRefused,
    FileRecord,
    RepositoryPart,
    file_digest,
    member_path,
    verify_file,
)
from citegraph.memory.exchange.share import check_record
from citegraph.validator.model import Receipt

_ARROW_OF = {"str": pa.string(), "str | None": pa.string(), "bool": pa.bool_(), "int | None": pa.int64()}
RECEIPT_SCHEMA = pa.schema([pa.field(f.name, _ARROW_OF[str(f.type)]) for f in fields(Receipt)])
MEMORIES_SCHEMA = pa.schema([
    ("id", pa.string()), ("project", pa.string()), ("topic", pa.string()), ("kind", pa.string()),
    ("text", pa.string()), ("revision", pa.int64()), ("created_at", pa.float64()), ("updated_at", pa.float64()),
    ("author", pa.string()), ("agent_id", pa.string()), ("session_id", pa.string()), ("supersedes", pa.string()),
    ("source_commit", pa.string()), ("legacy", pa.bool_())])
CITATIONS_SCHEMA = pa.schema([("memory_id", pa.string()), ("position", pa.int32()), *RECEIPT_SCHEMA])
MEMORY_TABLES = {"memories": MEMORIES_SCHEMA, "citations": CITATIONS_SCHEMA}


def cited_ids(rec: dict[str, Any]) -> set[str]:
    return {c["repository_id"] for c in rec["citations"]}


def write_memories(records: list[dict[str, Any]], root: Path, repository_id: str) -> dict[str, FileRecord]:
    """The partition's two tables for ``records`` (published memory records), by id."""
    records = sorted(records, key=lambda r: r["id"])
    mem = {name: [r.get(name) for r in records] for name in MEMORIES_SCHEMA.names}
    cit: dict[str, list] = {name: [] for name in CITATIONS_SCHEMA.names}
    for r in records:
        for pos, c in enumerate(r["citations"]):
            cit["memory_id"].append(r["id"])
            cit["position"].append(pos)
            for name in RECEIPT_SCHEMA.names:
                cit[name].append(c.get(name))
    out: dict[str, FileRecord] = {}
    for table, cols, schema in (("memories", mem, MEMORIES_SCHEMA), ("citations", cit, CITATIONS_SCHEMA)):
        rel = member_path(repository_id, table)
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(cols, schema=schema), dest, compression="zstd")
        digest, size = file_digest(dest)
        out[table] = FileRecord(rel, table, digest, size, len(next(iter(cols.values()))))
    return out


def read_memories(root: Path, part: RepositoryPart, where: str) -> list[tuple[str, int, dict[str, Any]]]:
    """The memory records of a partition, each checked like a published one: (file, row,
    record). Raises ``CheckpointRefused`` or the import error of the first bad record."""
    if not part.memories:
        return []
    tables: dict[str, dict[str, list]] = {}
    for name, schema in MEMORY_TABLES.items():
        rec = part.files.get(name)
        if rec is None:
            raise CheckpointRefused(where, f"repository {part.repository_id}: the manifest lists no {name} table")
        path = verify_file(root, rec, where)
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise CheckpointRefused(where, f"{rec.path} is not a Parquet file ({exc})") from None
        if table.schema.names != schema.names or any(table.schema.field(n).type != schema.field(n).type
                                                      for n in schema.names):
            raise CheckpointRefused(where, f"{rec.path} does not have the columns of the {name} table")
        if table.num_rows != rec.rows:
            raise CheckpointRefused(where, f"{rec.path} holds {table.num_rows} rows, the manifest lists {rec.rows}")
        tables[name] = table.to_pydict()
    mem_file = f"{where}/{part.files['memories'].path}"
    cit_file = f"{where}/{part.files['citations'].path}"
    cites: dict[str, dict[int, dict[str, Any]]] = {}
    c = tables["citations"]
    for i in range(len(c["memory_id"])):
        mid, pos = c["memory_id"][i], c["position"][i]
        slot = cites.setdefault(str(mid), {})
        if pos in slot or not isinstance(pos, int) or pos < 0:
            raise CheckpointRefused(where, f"{cit_file} row {i + 1}: citation position {pos} of memory {mid} "
                                           "is repeated or invalid")
        slot[pos] = {name: c[name][i] for name in RECEIPT_SCHEMA.names}
    m = tables["memories"]
    records: list[tuple[str, int, dict[str, Any]]] = []
    seen: set[tuple[str, str]] = set()
    own = {part.repository_id, *(e["repository_id"] for e in part.identity.get("history", []))}
    for i in range(len(m["id"])):
        rec: dict[str, Any] = {"type": "memory", **{name: m[name][i] for name in MEMORIES_SCHEMA.names}}
        slot = cites.pop(str(rec["id"]), {})
        if sorted(slot) != list(range(len(slot))):
            raise CheckpointRefused(where, f"{cit_file}: the citations of memory {rec['id']} are not at positions "
                                           f"0..{len(slot) - 1}")
        rec["citations"] = [slot[p] for p in range(len(slot))]
        check_record(mem_file, i + 1, rec, seen)
        if not cited_ids(rec) & own:
            raise CheckpointRefused(where, f"{mem_file} row {i + 1}: memory {rec['id']} cites nothing of repository "
                                           f"{part.repository_id}, whose partition holds it")
        records.append((mem_file, i + 1, rec))
    if cites:
        raise CheckpointRefused(where, f"{cit_file}: citations of memory {sorted(cites)[0]}, which the partition "
                                       "does not hold")
    return records
