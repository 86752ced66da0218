"""The decision tables of SPEC §6.1–§6.5 as pure functions over plain data.

No I/O here: evidence is gathered at the edges (validator/evidence.py) and handed in, so
the corpus, the property tests and the mutation run exercise exactly these lines. Each
branch names the table row it implements.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from citegraph.validator.model import (
    CoverageEvidence,
    FileCoverage,
    FileEvidence,
    Observation,
    Observed,
    Receipt,
    SpanEvidence,
    SymbolEvidence,
    SymbolRow,
)


def _unknown(r: Receipt, reason: str) -> Observation:
    return Observation(r.id, "unknown", reason)


def precondition(r: Receipt, *, in_scope: bool, current: bool, extractor_ok: bool) -> Observation | None:
    """SPEC §6 'before anything': out of scope, not current, extractor mismatch."""
    if not in_scope:
        return _unknown(r, "out-of-scope")
    if not current:
        return _unknown(r, "not-current")
    if not extractor_ok:
        return _unknown(r, "extractor-mismatch")
    return None


def decide_file(r: Receipt, ev: FileEvidence) -> Observation:
    """SPEC §6.1."""
    if ev.at_path_blob is not None:
        if ev.at_path_blob == r.blob_id:
            return Observation(r.id, "exact", None, Observed(r.path))
        return Observation(r.id, "changed", None, Observed(r.path))  # a copy never rescues it
    elsewhere = tuple(p for p in ev.paths_with_blob if p != r.path)
    if len(elsewhere) > 1:
        return _unknown(r, "ambiguous-relocation")
    if not ev.inventory_complete:
        # "exactly one file anywhere" and "none has it" are unprovable when part of the
        # inventory is missing (a partial clone lacking a tree may hold another copy).
        return _unknown(r, "incomplete-coverage")
    if len(elsewhere) == 1:
        return Observation(r.id, "relocated", None, Observed(elsewhere[0]))
    return Observation(r.id, "deleted")


def decide_span(r: Receipt, ev: SpanEvidence) -> Observation:
    """SPEC §6.2."""
    n = ev.line_count
    if ev.at_path_exists:
        if ev.same_lines_match:
            return Observation(r.id, "exact", None, Observed(r.path, r.start_line, r.end_line))
        if len(ev.other_occurrences) == 1:
            start = ev.other_occurrences[0]
            return Observation(r.id, "relocated", None, Observed(r.path, start, start + n - 1))
        if len(ev.other_occurrences) > 1:
            return _unknown(r, "ambiguous-relocation")
        return Observation(r.id, "changed", None, Observed(r.path))
    if len(ev.paths_with_cited_blob) > 1:
        return _unknown(r, "ambiguous-relocation")
    if not ev.inventory_complete:
        # The cited path (or another copy) may sit in a tree this repository lacks.
        return _unknown(r, "incomplete-coverage")
    if len(ev.paths_with_cited_blob) == 1:
        return Observation(r.id, "relocated", None,
                           Observed(ev.paths_with_cited_blob[0], r.start_line, r.end_line))
    if len(ev.added_files_with_bytes) > 1:
        return _unknown(r, "ambiguous-relocation")
    if len(ev.added_files_with_bytes) == 1 and ev.diff_complete:
        # Uniqueness among added files holds only when every added file was searched.
        path, start = ev.added_files_with_bytes[0]
        return Observation(r.id, "relocated", None, Observed(path, start, start + n - 1))
    if ev.capture_commit_known and ev.diff_complete:
        return Observation(r.id, "deleted")
    return _unknown(r, "incomplete-coverage")


def _observed(row: SymbolRow) -> Observed:
    return Observed(row.path, row.start_line, row.end_line, row.handle)


def decide_symbol(r: Receipt, ev: SymbolEvidence) -> Observation:
    """SPEC §6.3 (coverage per §6.4 judged from ``ev.coverage``, or given as ``ev.coverage_ok``)."""
    if ev.at_handle is not None:
        if ev.at_handle.fragment_hash == r.fragment_hash:
            return Observation(r.id, "exact", None, _observed(ev.at_handle))
        return Observation(r.id, "changed", None, _observed(ev.at_handle))
    covered = ev.coverage_ok if ev.coverage is None else coverage_suffices(ev.coverage)
    relocations = _distinct(ev.fragment_matches, r.handle)
    if len(relocations) > 1:
        return _unknown(r, "ambiguous-relocation")
    if len(relocations) == 1:
        if not covered:
            return _unknown(r, "incomplete-coverage")
        return Observation(r.id, "relocated", None, _observed(relocations[0]))
    successors = _distinct(ev.qname_matches + ev.body_matches, r.handle)
    if len(successors) > 1:
        return _unknown(r, "ambiguous-successor")
    if not covered:
        return _unknown(r, "incomplete-coverage")
    if len(successors) == 1:
        return Observation(r.id, "changed", None, _observed(successors[0]))
    return Observation(r.id, "deleted")


def _distinct(rows: tuple[SymbolRow, ...], cited_handle: str | None) -> list[SymbolRow]:
    seen: dict[str, SymbolRow] = {}
    for row in rows:
        if row.handle != cited_handle:
            seen.setdefault(row.handle, row)
    return [seen[h] for h in sorted(seen)]


# --- coverage for a citation (SPEC §6.4) -------------------------------------------------


# Skipped files whose bytes can never hold a definition (a symlink's are its target path;
# a FIFO or device is not read).
NEVER_DEFINITIONS = ("symlink", "not-regular")


def coverage_suffices(c: CoverageEvidence) -> bool:
    """A uniqueness or absence claim needs every non-indexed file of the cited language
    proven unable to hold the evidence."""
    if not c.inventory_complete or not c.has_name:
        return False
    return all(file_cleared(f) for f in c.files)


def file_cleared(f: FileCoverage) -> bool:
    """One partial/skipped file is cleared by the byte search (the name is not in its
    bytes) or, partial, when no occurrence of the cited name, fragment or body lies within
    or touches a damage region (the refinement; docs/coverage.md argues why)."""
    if f.reason in NEVER_DEFINITIONS:
        return True  # a link's bytes are a path, a FIFO or device has none
    if not f.readable:
        return False
    if not f.name_found:
        return True
    if f.status != "partial" or not f.damage or f.occurrences is None:
        return False  # skipped: nothing is known of its symbols; no regions: no refinement
    return not touches_any(f.occurrences, f.damage)


def touches_any(spans: tuple[tuple[int, int], ...], regions: tuple[tuple[int, int], ...]) -> bool:
    """Does any half-open byte span [a, b) lie within or touch (share an end point with)
    a region [s, e)? Regions in any order, overlapping or not."""
    ordered = sorted(regions)
    starts = [s for s, _ in ordered]
    reach = list(accumulate((e for _, e in ordered), max))  # furthest end among regions so far
    for a, b in spans:
        i = bisect_right(starts, b) - 1  # the regions starting at or before b
        if i >= 0 and reach[i] >= a:
            return True
    return False


# --- aggregation (SPEC §6.5) -------------------------------------------------------------

SEVERITY = {"changed": 4, "deleted": 3, "unknown": 2, "relocated": 1, "exact": 0}


def precise_status(outcomes: list[str]) -> str | None:
    """The worst outcome: changed > deleted > unknown > relocated > exact."""
    if not outcomes:
        return None
    return max(outcomes, key=lambda o: SEVERITY[o])


def freshness(outcomes: list[str]) -> str:
    """Any changed/deleted → stale; else any unknown → unknown; else fresh."""
    if not outcomes:
        return "unknown"
    if any(o in ("changed", "deleted") for o in outcomes):
        return "stale"
    if any(o == "unknown" for o in outcomes):
        return "unknown"
    return "fresh"


def legacy_freshness(source_commit: str | None, *, is_head: bool, worktree_clean: bool,
                     exists: bool, is_ancestor: bool) -> tuple[str, str | None]:
    """A memory without citations: judged by its ``source_commit`` (or no basis)."""
    if not source_commit:
        return "unknown", "no-basis"
    if not exists:
        return "stale", "source-commit-gone"
    if is_head:
        return ("fresh", None) if worktree_clean else ("unknown", "dirty-worktree")
    if is_ancestor:
        return "unknown", "source-commit-behind"
    return "stale", "source-commit-not-ancestor"
