"""Index configuration: bounds and exclusions (part of a snapshot's identity)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import blake3

from citegraph.indexer.errors import CitegraphError

DEFAULT_EXCLUDES = ("*.min.js", "*.min.css", "*.map", "node_modules/*", "*/node_modules/*")
CONFIG_FILE = ".citegraph.toml"


@dataclass(frozen=True)
class IndexConfig:
    max_file_bytes: int = 1 << 20
    parse_timeout_s: float = 5.0
    exclude: tuple[str, ...] = field(default=DEFAULT_EXCLUDES)

    def fingerprint(self) -> str:
        text = f"{self.max_file_bytes}|{self.parse_timeout_s}|{'|'.join(self.exclude)}"
        return blake3.blake3(text.encode()).hexdigest(8)

    def excluded(self, path: str) -> bool:
        return _matcher(self.exclude)(path) is not None


@cache
def _matcher(patterns: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """One compiled regex for all exclude globs (``fnmatchcase`` semantics, one match per
    path instead of one per pattern)."""
    if not patterns:
        return lambda _path: None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match


def parse_config(text: bytes | None, origin: str = CONFIG_FILE) -> IndexConfig:
    """Read ``[index]`` from a ``.citegraph.toml``; a broken file is a clear error."""
    if not text:
        return IndexConfig()
    try:
        data = tomllib.loads(text.decode("utf-8")).get("index", {})
        cfg = IndexConfig(
            max_file_bytes=int(data.get("max_file_bytes", 1 << 20)),
            parse_timeout_s=float(data.get("parse_timeout_s", 5.0)),
            exclude=tuple(DEFAULT_EXCLUDES) + tuple(str(x) for x in data.get("exclude", [])),
        )
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, TypeError, ValueError) as exc:
        raise CitegraphError(f"{origin}: invalid configuration ({exc})", "fix or remove the file", code=2) from exc
    if cfg.max_file_bytes <= 0 or cfg.parse_timeout_s <= 0:
        raise CitegraphError(f"{origin}: bounds must be positive", "fix [index] in the file", code=2)
    return cfg
