"""Index configuration: bounds and exclusions (part of a snapshot's identity).

Read from ``[index]`` of ``.citegraph.toml`` at the repository root (docs/config.md).
``exclude`` patterns have gitignore semantics (the ``pathspec`` library, never
hand-written globbing): ``tests``, ``tests/`` and ``tests/*`` all exclude the tests
directory; ``*.min.js`` matches at any depth; ``!keep.py`` re-includes.

Which copy: always the committed one — HEAD's for a worktree snapshot (commit or dirty
overlay), the commit's for ``index --rev``; ``index``, ``watch``/``serve`` and ``check``
build through the same code (graph/snapshot_builder.py). See docs/config.md for why.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import blake3
import pathspec

from citegraph.indexer.errors import CitegraphError

# gitignore semantics: "node_modules/" is that directory at any depth
DEFAULT_EXCLUDES = ("*.min.js", "*.min.css", "*.map", "node_modules/")
CONFIG_FILE = ".citegraph.toml"
KEYS = {"max_file_bytes": "files larger than this many bytes are skipped (default 1048576)",
        "parse_timeout_s": "a file whose parse takes longer is skipped (default 5.0)",
        "exclude": "gitignore-style patterns of paths never indexed (added to the defaults)"}
# the exclude matcher's semantics are part of the fingerprint: the same patterns under
# the former fnmatch matching named other files
MATCHER = "gitignore"


@dataclass(frozen=True)
class IndexConfig:
    max_file_bytes: int = 1 << 20
    parse_timeout_s: float = 5.0
    exclude: tuple[str, ...] = field(default=DEFAULT_EXCLUDES)

    def fingerprint(self) -> str:
        text = f"{self.max_file_bytes}|{self.parse_timeout_s}|{MATCHER}|{'|'.join(self.exclude)}"
        return blake3.blake3(text.encode()).hexdigest(8)

    @cached_property
    def _spec(self) -> pathspec.PathSpec:
        return pathspec.GitIgnoreSpec.from_lines(self.exclude)

    def excluded(self, path: str) -> bool:
        """Is the repository-relative ``path`` excluded (gitignore semantics)?"""
        return self._spec.match_file(path)


def parse_config(text: bytes | None, origin: str = CONFIG_FILE) -> IndexConfig:
    """Read ``[index]`` from a ``.citegraph.toml``; a broken file is a clear error."""
    if not text:
        return IndexConfig()
    try:
        data: dict[str, Any] = tomllib.loads(text.decode("utf-8")).get("index", {})
        if not isinstance(data, dict):
            raise TypeError("[index] must be a table")
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)} in [index]; known: {', '.join(KEYS)}")
        patterns = data.get("exclude", [])
        if not isinstance(patterns, list) or not all(isinstance(x, str) for x in patterns):
            raise TypeError("exclude must be a list of strings")
        cfg = IndexConfig(
            max_file_bytes=int(data.get("max_file_bytes", 1 << 20)),
            parse_timeout_s=float(data.get("parse_timeout_s", 5.0)),
            exclude=tuple(DEFAULT_EXCLUDES) + tuple(patterns),
        )
        cfg.excluded("x")  # a pattern pathspec cannot compile fails here, with the file named
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, TypeError, ValueError) as exc:
        raise CitegraphError(f"{origin}: invalid configuration ({exc})", "fix or remove the file (docs/config.md)",
                             code=2) from exc
    if cfg.max_file_bytes <= 0 or cfg.parse_timeout_s <= 0:
        raise CitegraphError(f"{origin}: bounds must be positive", "fix [index] in the file", code=2)
    return cfg


def uncommitted_change(repo_path: str | os.PathLike[str]) -> str | None:
    """A one-line note when the worktree's ``.citegraph.toml`` differs from HEAD's (the
    copy every snapshot is built with), else None: an edit takes effect once committed."""
    from citegraph.indexer import gitrepo

    try:
        repo = gitrepo.open_repository(repo_path)
        root = gitrepo.workdir(repo)
        head = gitrepo.head_commit(repo)
    except CitegraphError:
        return None
    committed = gitrepo.commit_tree_file(repo, head, CONFIG_FILE)
    try:
        current: bytes | None = (root / CONFIG_FILE).read_bytes()
    except OSError:
        current = None
    if current == committed:
        return None
    return (f"citegraph: note: {CONFIG_FILE} has uncommitted changes; snapshots use the committed copy "
            "(docs/config.md) — commit it for the change to take effect")
