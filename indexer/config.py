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

import math
import os
import tomllib
import warnings
from collections.abc import Iterable
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
# the former fnmatch matching named other files (RE2 vs Python ``re`` is an engine, not a
# semantics: pathspec translates the same patterns to the same regular expressions)
MATCHER = "gitignore"
# The file is untrusted input (a pull request can change it): everything is bounded, so a
# hostile file is one error line, never a hang, a crash or an unbounded allocation.
MAX_CONFIG_BYTES = 64 << 10
MAX_FILE_BYTES = 1 << 40  # 1 TiB: larger is a typo, not a bound
MAX_TIMEOUT_S = 3600.0
MAX_PATTERNS = 1000
MAX_PATTERN_CHARS = 1024


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
        # RE2 (google-re2) matches in time linear in the path: a pattern such as
        # ``a*a*…a*b`` would backtrack exponentially under Python's ``re`` (issue 20).
        return compile_spec(self.exclude)

    def excluded(self, path: str) -> bool:
        """Is the repository-relative ``path`` excluded (gitignore semantics)?"""
        return self._spec.match_file(path)

    def __getstate__(self) -> dict[str, Any]:
        # the compiled RE2 set does not pickle; it is rebuilt on first use
        return {k: v for k, v in self.__dict__.items() if k != "_spec"}


def compile_spec(patterns: Iterable[str]) -> pathspec.PathSpec:
    """The gitignore matcher of ``patterns`` on RE2. pathspec also compiles each pattern
    with Python's ``re`` (never used to match here), whose FutureWarning about a possible
    nested set (``[[``) would be a stray stderr line for a legal pattern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return pathspec.GitIgnoreSpec.from_lines(patterns, backend="re2")


def _shown(value: Any) -> str:
    """A value as it may be quoted in an error line: ``repr`` (control characters
    escaped, so a hostile value cannot drive the terminal), cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(origin: str, key: str, value: Any, why: str) -> CitegraphError:
    return CitegraphError(f"{origin}: [index] {key} = {_shown(value)} is invalid: {why}",
                          f"fix {key} in the committed {CONFIG_FILE} (docs/config.md)", code=2)


_TYPE_NAMES = {bool: "a boolean", str: "a string", float: "a float", int: "an integer", list: "an array",
               dict: "a table"}


def _number(origin: str, key: str, value: Any, *, integer: bool, low: float, high: float) -> Any:
    kind = "an integer" if integer else "a number"
    # bool is an int subclass in Python; TOML's true is not a size
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok:
        raise _bad(origin, key, value, f"must be {kind} (written without quotes), not {_TYPE_NAMES.get(type(value), type(value).__name__)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(origin, key, value, f"must be a finite {kind.removeprefix('a ').removeprefix('an ')}")
    if not low <= value <= high:
        raise _bad(origin, key, value, f"must be between {low:g} and {high:.0f}")
    return value


def _patterns(origin: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise _bad(origin, "exclude", value, "exclude must be a list of strings")
    if len(value) > MAX_PATTERNS:
        raise _bad(origin, "exclude", f"<{len(value)} patterns>", f"at most {MAX_PATTERNS} patterns")
    for pat in value:
        if len(pat) > MAX_PATTERN_CHARS:
            raise _bad(origin, "exclude", pat, f"a pattern is at most {MAX_PATTERN_CHARS} characters")
        try:
            compile_spec([pat])
        except Exception as exc:  # noqa: BLE001 - pathspec, re and re2 each raise their own kind
            raise _bad(origin, "exclude", pat, f"not a valid gitignore pattern ({_shown(str(exc))})") from None
    return tuple(value)


def parse_config(text: bytes | None, origin: str = CONFIG_FILE) -> IndexConfig:
    """Read ``[index]`` from a ``.citegraph.toml``; anything wrong in it (syntax, unknown
    key, type, range, pattern) is one error line naming the key — the file is untrusted."""
    if not text:
        return IndexConfig()
    if len(text) > MAX_CONFIG_BYTES:
        raise CitegraphError(f"{origin}: invalid configuration ({len(text)} bytes, at most {MAX_CONFIG_BYTES})",
                             "shorten the file (docs/config.md)", code=2)
    try:
        doc = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CitegraphError(f"{origin}: invalid configuration ({_shown(str(exc))[1:-1]})",
                             "fix or remove the file (docs/config.md)", code=2) from None
    except RecursionError:
        # tomllib recurses per nesting level: arrays or tables nested thousands deep
        raise CitegraphError(f"{origin}: invalid configuration (values nested too deeply to read)",
                             "flatten the nested arrays or tables (docs/config.md)", code=2) from None
    data = doc.get("index", {})
    if not isinstance(data, dict):
        raise CitegraphError(f"{origin}: invalid configuration ([index] must be a table, not a "
                             f"{_TYPE_NAMES.get(type(data), type(data).__name__)})", "write [index] as a table (docs/config.md)", code=2)
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise CitegraphError(f"{origin}: invalid configuration (unknown key(s) "
                             f"{', '.join(_shown(k) for k in unknown)} in [index]; known: {', '.join(KEYS)})",
                             "fix or remove the key (docs/config.md)", code=2)
    max_bytes = _number(origin, "max_file_bytes", data.get("max_file_bytes", 1 << 20), integer=True,
                        low=1, high=MAX_FILE_BYTES)
    timeout = _number(origin, "parse_timeout_s", data.get("parse_timeout_s", 5.0), integer=False,
                      low=0.001, high=MAX_TIMEOUT_S)
    cfg = IndexConfig(max_file_bytes=int(max_bytes), parse_timeout_s=float(timeout),
                      exclude=tuple(DEFAULT_EXCLUDES) + _patterns(origin, data.get("exclude", [])))
    try:
        cfg.excluded("x")  # compile the whole set now: RE2's memory budget bounds it
    except Exception as exc:  # noqa: BLE001 - re2.error: the set of patterns is too large to compile
        raise CitegraphError(f"{origin}: invalid configuration (the exclude patterns are too complex together "
                             f"for the linear-time matcher: {_shown(str(exc))[1:-1]})",
                             "use fewer or simpler exclude patterns (docs/config.md)", code=2) from None
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
