"""Plain data of validation: receipts (what capture stored), evidence (what a snapshot
shows), observations (the verdict for one citation against one snapshot).

Evidence and observations are NamedTuples: immutable like frozen dataclasses, and several
times cheaper to create, which batch validation does once per citation."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

OUTCOMES = ("exact", "relocated", "changed", "deleted", "unknown")

# How outputs word a change detail of ``changed`` (SPEC §6.3a): text, SARIF, brief, report.
CHANGE_TEXT = {"cosmetic": "comments/formatting only"}

# The reason codes of unknown are ``citegraph.validator.decisions.Reason``.


@dataclass(frozen=True)
class Receipt:
    """An immutable statement about the past; never a verdict."""

    id: str
    ref: str
    kind: str  # file | span | symbol
    repository_id: str
    repository_kind: str
    snapshot_id: str
    commit: str
    dirty: bool
    extractor_version: str
    path: str
    blob_id: str
    content_hash: str | None = None
    # span
    start_line: int | None = None
    end_line: int | None = None
    span_hash: str | None = None
    first_line_hash: str | None = None
    # symbol
    handle: str | None = None
    language: str | None = None
    symbol_kind: str | None = None
    name: str | None = None
    qualified_name: str | None = None
    ordinal: int | None = None
    start_byte: int | None = None
    end_byte: int | None = None
    fragment_hash: str | None = None
    body_hash: str | None = None
    # symbol: its resolved dependencies at capture (SPEC §21), compact JSON of a list of
    # {handle, path, qualified_name, ordinal, symbol_kind, fragment_hash, edge, tier,
    # depth, via}; None for a receipt captured before (or without) any (docs/graph.md).
    deps: str | None = None
    # span and symbol: the token-sequence hash of the cited fragment at capture
    # (indexer/tokens.py; SPEC §6.3a): None for a receipt captured before it existed, or
    # whose fragment tokens cannot decide (then a change is never called cosmetic).
    token_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def dependencies(self) -> tuple[dict[str, Any], ...]:
        """The recorded dependencies (empty for a legacy receipt or an unreadable field)."""
        if not self.deps:
            return ()
        try:
            value = json.loads(self.deps)
        except ValueError:
            return ()
        return tuple(d for d in value if isinstance(d, dict)) if isinstance(value, list) else ()

    @property
    def locator(self) -> str:
        """How outputs name the cited code, never by a hash alone: ``path`` for a file,
        ``path#La-Lb`` for a span, ``path::Qualified.name`` for a symbol — with ``[N]``,
        its ordinal, when several definitions share the name (docs/handles.md)."""
        return locator_of(self.kind, self.path, self.start_line, self.end_line, self.qualified_name,
                          self.ordinal, self.ref)


def locator_of(kind: str, path: str | None, start_line: int | None, end_line: int | None,
               qualified_name: str | None, ordinal: int | None, fallback: str) -> str:
    """The locator of a citation (see ``Receipt.locator``); ``fallback`` when the fields
    needed are missing (a malformed stored receipt)."""
    if not path:
        return fallback
    if kind == "symbol":
        if not qualified_name:
            return fallback
        return f"{path}::{qualified_name}" + (f"[{ordinal}]" if ordinal else "")
    if kind == "span" and start_line and end_line:
        return f"{path}#L{start_line}-L{end_line}"
    return path


class Observed(NamedTuple):
    path: str
    start_line: int | None = None
    end_line: int | None = None
    handle: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line,
                "handle": self.handle}


class Observation(NamedTuple):
    citation_id: str
    outcome: str
    reason: str | None = None
    observed: Observed | None = None
    warnings: tuple[str, ...] = ()
    # ``dependency-changed`` advisories (SPEC §21): never part of the outcome, never cached
    # with it (they depend on the requested depth); added by the pipeline after the tables.
    advisories: tuple[Advisory, ...] = ()
    # A detail of ``changed`` (SPEC §6.3a): "cosmetic" when only comments or layout changed
    # (``decisions.change_kind``); None otherwise. Added after the cache, like advisories.
    change: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"outcome": self.outcome, "reason": self.reason,
             "observed": self.observed.to_dict() if self.observed else None}
        if self.change:
            d["change"] = self.change
        return d


class Advisory(NamedTuple):
    """A recorded dependency of an ``exact`` symbol citation that is no longer as it was."""

    citation_id: str
    change: str  # changed | deleted | relocated
    handle: str  # the dependency's handle at capture
    locator: str  # path::Qualified.name at capture
    edge: str  # calls | references | inherits
    depth: int  # 1 = a direct dependency
    now: Observed | None = None  # where it is now (changed: in place; relocated: elsewhere)

    kind = "dependency-changed"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "citation_id": self.citation_id, "change": self.change,
                "dependency": {"handle": self.handle, "locator": self.locator, "edge": self.edge,
                               "depth": self.depth},
                "now": self.now.to_dict() if self.now else None}

    def text(self) -> str:
        where = f" (now at {self.now.path}#L{self.now.start_line}-L{self.now.end_line})" \
            if self.now and self.change != "deleted" else ""
        return f"dependency-changed: {self.citation_id} depends on {self.locator}, {self.change}{where}"


class SymbolRow(NamedTuple):
    """A symbol as the snapshot holds it (the subset decisions need)."""

    handle: str
    path: str
    language: str
    kind: str
    qualified_name: str
    start_line: int
    end_line: int
    fragment_hash: str
    body_hash: str


class AtHandleColumns(NamedTuple):
    """The symbol at each cited handle in a snapshot, as columns aligned with a list of
    symbol receipts (one SQL pass, validator/evidence.py ``at_handle_columns``): ``None``
    in ``fragment_hash`` where the handle is absent."""

    fragment_hash: list[str | None]
    path: list[str | None]
    start_line: list[int | None]
    end_line: list[int | None]


class FileEvidence(NamedTuple):
    at_path_blob: str | None  # blob at the cited path now, None if the path is gone
    paths_with_blob: tuple[str, ...]  # every path whose blob equals the cited blob
    inventory_complete: bool


class SpanEvidence(NamedTuple):
    at_path_exists: bool
    same_lines_match: bool = False
    # 1-based start lines where the cited bytes occur in the current file, other than the
    # cited lines themselves
    other_occurrences: tuple[int, ...] = ()
    # file gone:
    paths_with_cited_blob: tuple[str, ...] = ()
    added_files_with_bytes: tuple[tuple[str, int], ...] = ()  # (path, start line)
    capture_commit_known: bool = False
    diff_complete: bool = False
    line_count: int = 1
    inventory_complete: bool = True  # False: the snapshot's inventory misses trees


class FileCoverage(NamedTuple):
    """One file of the cited language that is not `indexed`, as SPEC §6.4 sees it for one
    citation (byte spans are half-open, damage regions as recorded at index time)."""

    path: str
    status: str  # partial | skipped
    reason: str | None  # skip reason, or the construct of a partial file's first error
    readable: bool = True  # its bytes could be read
    name_found: bool = True  # the cited name occurs in its bytes
    # every occurrence of the cited name, fragment and body (fragment after the name, grown
    # back over the bytes a new name would take); None when they cannot be computed (the
    # cited fragment's bytes are gone)
    occurrences: tuple[tuple[int, int], ...] | None = None
    damage: tuple[tuple[int, int], ...] = ()  # where the parse may be wrong (partial files)


class CoverageEvidence(NamedTuple):
    """What SPEC §6.4 judges for one symbol citation."""

    inventory_complete: bool
    has_name: bool  # the receipt names the symbol (a byte search needs a needle)
    files: tuple[FileCoverage, ...] = ()  # the non-indexed files of the cited language


class DependencyEvidence(NamedTuple):
    """Where one recorded dependency (handle + fragment at capture) is in a snapshot."""

    at_handle: SymbolRow | None  # the symbol at the recorded handle now
    fragment_matches: tuple[SymbolRow, ...] = ()  # other handles holding the recorded fragment
    # what the dependent's edge of that name resolves to now (tier ``resolved`` only, never
    # a repository-wide guess): where a moved and edited dependency went
    successors: tuple[SymbolRow, ...] = ()
    # the token-sequence hash of the symbol at the handle now, when its bytes differ from the
    # recorded ones (None: not computed, or the tokens cannot decide)
    token_hash: str | None = None


class SymbolEvidence(NamedTuple):
    at_handle: SymbolRow | None
    fragment_matches: tuple[SymbolRow, ...] = ()  # other handles with the cited fragment hash
    qname_matches: tuple[SymbolRow, ...] = ()  # other handles with same (language, kind, qname)
    body_matches: tuple[SymbolRow, ...] = ()  # other handles with the same body hash
    coverage_ok: bool = False  # SPEC §6.4 for this citation, when ``coverage`` is not given
    coverage: CoverageEvidence | None = None  # SPEC §6.4 evidence, judged by decisions.py


@dataclass
class MemoryVerdict:
    memory_id: str
    freshness: str  # fresh | stale | unknown
    status: str | None
    reason: str | None = None
    observations: list[Observation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
