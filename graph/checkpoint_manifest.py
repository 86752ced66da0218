"""The checkpoint layout and its manifest (docs/checkpoints.md).

A checkpoint is a directory (or a tar of one) of Parquet files partitioned by repository id
— ``repository_id=<id>/<table>.parquet`` — and ``manifest.json``, which names every file
with its blake3 digest, size and row count, and the snapshot schema and extractor versions
they were written with. It is untrusted input (SPEC §12.1): the manifest is read with a
size bound and checked field by field, every path it names must stay inside the checkpoint
(no absolute path, no ``..``, no symlink on the way, a regular file at the end), every
digest is recomputed, and a tar is opened with ``tarfile``'s ``data`` filter applied to
every member before anything is extracted. Any failure is one ``CheckpointRefused`` naming
the file and what is wrong; callers then import nothing.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import blake3

from citegraph.graph.schema import SNAPSHOT_SCHEMA_VERSION
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION

FORMAT = "citegraph-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 << 20
MAX_HISTORY = 64  # identity history entries kept per repository (graph/identity.py)
HEX32 = re.compile(r"^[0-9a-f]{32}$")
COMMIT_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
SNAPSHOT_RE = re.compile(r"^cgsnap_[0-9a-f]{32}$")
TABLE_RE = re.compile(r"^[a-z_]{1,32}$")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+#-]{0,63}$")
READ_CHUNK = 1 << 20


def partition_dir(repository_id: str) -> str:
    """The directory of one repository's partition (Hive style: DuckDB, Arrow and Dask read
    ``repository_id`` back as a column)."""
    return f"repository_id={repository_id}"


def member_path(repository_id: str, table: str) -> str:
    return f"{partition_dir(repository_id)}/{table}.parquet"


class CheckpointRefused(CitegraphError):
    """A checkpoint (or one of its files) that does not verify: nothing is imported."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"checkpoint {where}: {why}; nothing was imported",
                         "export it again (citegraph export --parquet) with this citegraph and copy it whole",
                         code=2, kind="bad-checkpoint")


@dataclass(frozen=True)
class FileRecord:
    """One file of a partition as the manifest lists it."""

    path: str  # relative to the checkpoint root, POSIX separators
    table: str
    blake3: str
    bytes: int
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "table": self.table, "blake3": self.blake3, "bytes": self.bytes,
                "rows": self.rows}


@dataclass
class RepositoryPart:
    """One repository of a checkpoint: its identity, the snapshot it holds and its files."""

    repository_id: str
    identity: dict[str, Any]  # kind, source, history (former ids: graph/identity.py)
    snapshot: dict[str, Any]  # the catalog fields of the snapshot (snapshot id, commit, ...)
    files: dict[str, FileRecord]  # table -> file
    memories: bool = False  # whether the partition holds memories (memory/exchange/checkpoint_memories.py)

    def to_json(self) -> dict[str, Any]:
        return {"repository_id": self.repository_id, "identity": self.identity, "snapshot": self.snapshot,
                "memories": self.memories, "files": [f.to_json() for f in self.files.values()]}


@dataclass
class Manifest:
    repositories: list[RepositoryPart] = field(default_factory=list)
    generator: str = ""
    exported_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "schema_version": SNAPSHOT_SCHEMA_VERSION,
                "extractor_version": EXTRACTOR_VERSION, "generator": self.generator,
                "exported_at": self.exported_at, "repositories": [r.to_json() for r in self.repositories]}


def file_digest(path: Path) -> tuple[str, int]:
    """(blake3 hex, size) of a regular file, read without following a final symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        h, size = blake3.blake3(), 0
        while chunk := os.read(fd, READ_CHUNK):
            h.update(chunk)
            size += len(chunk)
        return h.hexdigest(), size
    finally:
        os.close(fd)


def relative_problem(rel: Any) -> str | None:
    """Why a path named by a manifest (or a tar member) is not a plain path inside the
    checkpoint, or None."""
    if not isinstance(rel, str) or not rel or len(rel.encode("utf-8", "surrogateescape")) > 4096:
        return "names a path that is not a string"
    if "\0" in rel or "\\" in rel:
        return f"names a path with a NUL or backslash ({rel!r})"
    p = PurePosixPath(rel)
    if p.is_absolute() or rel.startswith("/"):
        return f"names a path outside the checkpoint ({rel})"
    if any(part in ("..",) for part in p.parts):
        return f"names a path outside the checkpoint ({rel})"
    if any(part in ("", ".") for part in rel.split("/")):
        return f"names a path that is not in normal form ({rel})"
    return None


def inside(root: Path, rel: str, where: str) -> Path:
    """``root / rel`` after checking that no component on the way is a symlink and the end
    is a regular file (a link could point anywhere)."""
    why = relative_problem(rel)
    if why:
        raise CheckpointRefused(where, f"the manifest {why}")
    cur = root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            raise CheckpointRefused(where, f"{rel} is missing") from None
        except OSError as exc:
            raise CheckpointRefused(where, f"{rel} cannot be read ({exc.strerror or exc})") from None
        if stat.S_ISLNK(st.st_mode):
            raise CheckpointRefused(where, f"{rel} is (or passes through) a symlink: it could name a path "
                                           "outside the checkpoint")
        last = i == len(parts) - 1
        if last and not stat.S_ISREG(st.st_mode):
            raise CheckpointRefused(where, f"{rel} is not a regular file")
        if not last and not stat.S_ISDIR(st.st_mode):
            raise CheckpointRefused(where, f"{rel} is missing ({'/'.join(parts[:i + 1])} is not a directory)")
    return cur


def verify_file(root: Path, rec: FileRecord, where: str) -> Path:
    """The file's path once its size and blake3 digest are the manifest's."""
    path = inside(root, rec.path, where)
    try:
        digest, size = file_digest(path)
    except OSError as exc:
        raise CheckpointRefused(where, f"{rec.path} cannot be read ({exc.strerror or exc})") from None
    if size != rec.bytes or digest != rec.blake3:
        raise CheckpointRefused(where, f"{rec.path} does not match its blake3 digest in the manifest "
                                       f"({'size ' + str(size) + ', listed ' + str(rec.bytes) if size != rec.bytes else 'content changed'}:"
                                       " tampered or damaged)")
    return path


def write_manifest(root: Path, manifest: Manifest) -> None:
    data = json.dumps(manifest.to_json(), sort_keys=True, indent=1).encode("utf-8")
    with open(root / MANIFEST, "wb") as f:
        f.write(data + b"\n")
        f.flush()
        os.fsync(f.fileno())


# --- reading an untrusted manifest ---------------------------------------------------------


def _str(d: dict[str, Any], key: str, where: str, pattern: re.Pattern[str] | None = None,
         nullable: bool = False) -> Any:
    v = d.get(key)
    if v is None and nullable:
        return None
    if not isinstance(v, str) or len(v) > 4096 or (pattern is not None and not pattern.fullmatch(v)):
        raise CheckpointRefused(where, f"the manifest's {key} is malformed ({_shown(v)})")
    return v


def _int(d: dict[str, Any], key: str, where: str, lo: int = 0, hi: int = 1 << 53) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise CheckpointRefused(where, f"the manifest's {key} is malformed ({_shown(v)})")
    return v


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def read_manifest(root: Path, where: str) -> Manifest:
    """The manifest of the checkpoint at ``root``, checked field by field; versions that
    are not this citegraph's are refused by name."""
    path = inside(root, MANIFEST, where)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise CheckpointRefused(where, f"{MANIFEST} cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise CheckpointRefused(where, f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CheckpointRefused(where, f"{MANIFEST} is not JSON") from None
    return parse_manifest(data, where)


def parse_manifest(data: Any, where: str) -> Manifest:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointRefused(where, f"{MANIFEST} is not a {FORMAT} manifest")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointRefused(where, f"format version {_shown(version)}, this citegraph reads {FORMAT_VERSION}")
    schema = data.get("schema_version")
    if schema != SNAPSHOT_SCHEMA_VERSION:
        raise CheckpointRefused(where, f"wrong schema version: snapshots of schema {_shown(schema)}, this "
                                       f"citegraph reads schema {SNAPSHOT_SCHEMA_VERSION}")
    extractor = data.get("extractor_version")
    if extractor != EXTRACTOR_VERSION:
        raise CheckpointRefused(where, f"wrong extractor version: {_shown(extractor)}, this citegraph's is "
                                       f"{EXTRACTOR_VERSION} (its snapshot ids and symbols would differ)")
    repos = data.get("repositories")
    if not isinstance(repos, list):
        raise CheckpointRefused(where, "the manifest lists no repositories")
    manifest = Manifest(generator=str(data.get("generator", ""))[:200])
    seen: set[str] = set()
    paths: set[str] = set()
    for raw in repos:
        part = _parse_repository(raw, where)
        if part.repository_id in seen:
            raise CheckpointRefused(where, f"repository {part.repository_id} is listed twice")
        seen.add(part.repository_id)
        for rec in part.files.values():
            if rec.path in paths:
                raise CheckpointRefused(where, f"{rec.path} is listed twice")
            paths.add(rec.path)
        manifest.repositories.append(part)
    return manifest


def _parse_repository(raw: Any, where: str) -> RepositoryPart:
    if not isinstance(raw, dict):
        raise CheckpointRefused(where, "a repository entry of the manifest is not an object")
    rid = _str(raw, "repository_id", where, HEX32)
    ident = raw.get("identity")
    if not isinstance(ident, dict) or ident.get("kind") not in ("remote", "local"):
        raise CheckpointRefused(where, f"repository {rid}: the manifest's identity is malformed")
    history = ident.get("history", [])
    if not isinstance(history, list) or len(history) > MAX_HISTORY:
        raise CheckpointRefused(where, f"repository {rid}: the manifest's identity history is malformed")
    kept = []
    for e in history:
        if not isinstance(e, dict) or not isinstance(e.get("repository_id"), str) \
                or not HEX32.fullmatch(e["repository_id"]) or e["repository_id"] == rid:
            raise CheckpointRefused(where, f"repository {rid}: an identity history entry is malformed")
        kept.append({k: e.get(k) for k in ("repository_id", "source", "kind", "how", "recorded_at")
                     if isinstance(e.get(k), str | int | float)})
    identity = {"kind": ident["kind"], "source": _str(ident, "source", where), "history": kept}
    snap = raw.get("snapshot")
    if not isinstance(snap, dict):
        raise CheckpointRefused(where, f"repository {rid}: the manifest names no snapshot")
    s = f"repository {rid}"
    snapshot = {
        "snapshot_id": _str(snap, "snapshot_id", where, SNAPSHOT_RE),
        "kind": snap.get("kind"),
        "commit": _str(snap, "commit", where, COMMIT_RE),
        "config": _str(snap, "config", where, VERSION_RE),
        "extractor_version": snap.get("extractor_version"),
        "schema_version": snap.get("schema_version"),
        "content_id": _str(snap, "content_id", where, HEX32),
        "files": _int(snap, "files", where),
        "symbols": _int(snap, "symbols", where),
        "inventory_complete": snap.get("inventory_complete"),
    }
    if snapshot["kind"] != "commit":
        raise CheckpointRefused(where, f"{s}: only commit snapshots are checkpoints (kind {_shown(snap.get('kind'))})")
    if snapshot["extractor_version"] != EXTRACTOR_VERSION:
        raise CheckpointRefused(where, f"{s}: wrong extractor version {_shown(snapshot['extractor_version'])}, "
                                       f"this citegraph's is {EXTRACTOR_VERSION}")
    if snapshot["schema_version"] != SNAPSHOT_SCHEMA_VERSION:
        raise CheckpointRefused(where, f"{s}: wrong schema version {_shown(snapshot['schema_version'])}, this "
                                       f"citegraph reads schema {SNAPSHOT_SCHEMA_VERSION}")
    if not isinstance(snapshot["inventory_complete"], bool):
        raise CheckpointRefused(where, f"{s}: the manifest's inventory_complete is malformed")
    files_raw = raw.get("files")
    if not isinstance(files_raw, list):
        raise CheckpointRefused(where, f"{s}: the manifest lists no files")
    files: dict[str, FileRecord] = {}
    for f in files_raw:
        if not isinstance(f, dict):
            raise CheckpointRefused(where, f"{s}: a file entry of the manifest is not an object")
        why = relative_problem(f.get("path"))
        if why:
            raise CheckpointRefused(where, f"the manifest {why}")
        table = _str(f, "table", where, TABLE_RE)
        rec = FileRecord(f["path"], table, _str(f, "blake3", where, re.compile(r"^[0-9a-f]{64}$")),
                         _int(f, "bytes", where), _int(f, "rows", where))
        if rec.path != member_path(rid, table):
            raise CheckpointRefused(where, f"{s}: the manifest names {rec.path} for its {table} table "
                                           f"(expected {member_path(rid, table)})")
        if table in files:
            raise CheckpointRefused(where, f"{s}: the {table} table is listed twice")
        files[table] = rec
    memories = raw.get("memories", False)
    if not isinstance(memories, bool):
        raise CheckpointRefused(where, f"{s}: the manifest's memories flag is malformed")
    return RepositoryPart(rid, identity, snapshot, files, memories)


# --- a tar of a checkpoint -------------------------------------------------------------------


def extract_tar(archive: Path, into: Path) -> None:
    """Extract a checkpoint archive into the empty directory ``into``: every member is first
    passed through ``tarfile``'s ``data`` filter (absolute names, ``..``, links leading out,
    devices: refused by name), then the manifest and the files it names are extracted
    (nothing else, each the size the manifest lists)."""
    where = str(archive)
    try:
        tar = tarfile.open(archive, "r:*")  # noqa: SIM115
    except (OSError, tarfile.TarError) as exc:
        raise CheckpointRefused(where, f"not a readable tar archive ({exc})") from None
    with tar:
        try:
            members = tar.getmembers()
        except (OSError, tarfile.TarError, EOFError) as exc:
            raise CheckpointRefused(where, f"the archive is damaged ({exc})") from None
        named: dict[str, tarfile.TarInfo] = {}
        for m in members:
            try:
                tarfile.data_filter(m, str(into))
            except tarfile.FilterError as exc:
                raise CheckpointRefused(where, f"member {m.name!r} is refused: {exc}") from None
            name = m.name[2:] if m.name.startswith("./") else m.name
            named[name] = m
        man = named.get(MANIFEST)
        if man is None or not man.isreg():
            raise CheckpointRefused(where, f"the archive holds no {MANIFEST}")
        if man.size > MAX_MANIFEST_BYTES:
            raise CheckpointRefused(where, f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES} bytes")
        _extract(tar, man, into, MANIFEST, where)
        manifest = read_manifest(into, where)
        for part in manifest.repositories:
            for rec in part.files.values():
                m = named.get(rec.path)
                if m is None:
                    raise CheckpointRefused(where, f"{rec.path} is missing")
                if not m.isreg():
                    raise CheckpointRefused(where, f"{rec.path} is not a regular file")
                if m.size != rec.bytes:
                    raise CheckpointRefused(where, f"{rec.path} does not match its blake3 digest in the manifest "
                                                   f"(size {m.size}, listed {rec.bytes}: tampered or damaged)")
                _extract(tar, m, into, rec.path, where)


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, into: Path, name: str, where: str) -> None:
    member = member.replace(name=name)
    try:
        tar.extract(member, str(into), filter="data")
    except tarfile.FilterError as exc:
        raise CheckpointRefused(where, f"member {member.name!r} is refused: {exc}") from None
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise CheckpointRefused(where, f"{name} cannot be extracted ({exc})") from None
