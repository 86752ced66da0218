"""Handles: stable names for symbols (``cgs_``) and repository-qualified symbols (``cgr_``).

A ``cgs_`` handle hashes (path, language, kind, qualified name, ordinal) and nothing else:
no commit and no content, so the same handle names "the same place" in every snapshot.
Other ids: ``cgsnap_`` snapshots, ``cgm_`` memories, ``cgc_`` citations, ``cgw_`` worksets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import blake3

CGS_RE = re.compile(r"^cgs_[0-9a-f]{32}\Z")
CGR_RE = re.compile(r"^cgr_([0-9a-f]{16})_([0-9a-f]{32})\Z")


def symbol_handle(path: str, language: str, kind: str, qualified_name: str, ordinal: int) -> str:
    # The parts, each followed by a NUL, hashed in one call (the same bytes as one update
    # per part: this runs once per symbol of every cold build).
    data = f"cgs-v1\0{path}\0{language}\0{kind}\0{qualified_name}\0{ordinal}\0"
    return "cgs_" + blake3.blake3(data.encode("utf-8", "surrogateescape")).hexdigest(16)


def repo_handle(repository_id: str, cgs: str) -> str:
    if not CGS_RE.match(cgs):
        raise ValueError(f"not a cgs handle: {cgs!r}")
    return f"cgr_{repository_id[:16]}_{cgs[4:]}"


@dataclass(frozen=True)
class DecodedRepoHandle:
    repository_prefix: str  # first 16 hex of the repository id
    symbol: str  # the cgs_ handle


def decode_repo_handle(handle: str) -> DecodedRepoHandle:
    m = CGR_RE.match(handle)
    if not m:
        raise ValueError(f"not a cgr handle: {handle!r}")
    return DecodedRepoHandle(m.group(1), "cgs_" + m.group(2))


def is_symbol_handle(text: str) -> bool:
    return bool(CGS_RE.match(text))


def is_repo_handle(text: str) -> bool:
    return bool(CGR_RE.match(text))
