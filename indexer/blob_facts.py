"""Classify one file's bytes and extract its facts: the unit of blob-keyed work."""

from __future__ import annotations

from dataclasses import dataclass

from citegraph.indexer.extract import FileFacts, blake3_hex, extract

LFS_PREFIX = b"version https://git-lfs.github.com/spec/v1"


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """Path-independent file facts about one blob under one language."""

    content_hash: str | None  # blake3 of the bytes (None when not read: too large, missing)
    size: int


def skip_reason_for_content(data: bytes) -> str | None:
    if b"\0" in data[:8192]:
        return "binary"
    if data.startswith(LFS_PREFIX):
        return "lfs-pointer"
    return None


def facts_for_blob(language: str | None, data: bytes, timeout_s: float) -> tuple[BlobInfo, FileFacts]:
    """Everything citegraph records about one (blob, language) pair."""
    info = BlobInfo(blake3_hex(data), len(data))
    reason = skip_reason_for_content(data)
    if reason:
        return info, FileFacts(status="skipped", reason=reason)
    if language is None:
        return info, FileFacts(status="skipped", reason="unsupported-language")
    return info, extract(language, data, timeout_s)
