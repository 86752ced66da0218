"""The decision tables of SPEC §6 as pure functions over plain data.

No I/O here: facts are gathered at the edges (the plan and run of validator/pipeline.py,
the evidence of validator/evidence.py) and handed in, so the corpus, the property tests and
the mutation run exercise exactly these lines. Each branch names the SPEC row it
implements. Every reason an ``unknown`` can carry is a ``Reason``; no other module spells
one.
"""

from __future__ import annotations

from bisect import bisect_right
from enum import StrEnum
from itertools import accumulate

from citegraph.validator.model import (
    Advisory,
    AtHandleColumns,
    CoverageEvidence,
    DependencyEvidence,
    FileCoverage,
    FileEvidence,
    Observation,
    Observed,
    Receipt,
    SpanEvidence,
    SymbolEvidence,
    SymbolRow,
)


class Reason(StrEnum):
    """Reason codes of ``unknown``. The values are the JSON contract (SPEC §16): never
    renamed."""

    # SPEC §6 "before anything" (and §8, §9)
    INVALID_CITATION = "invalid-citation"
    LIMIT = "limit"
    OUT_OF_SCOPE = "out-of-scope"
    REPOSITORY_AMBIGUOUS = "repository-ambiguous"
    MEMBER_MISSING = "member-missing"
    NOT_CURRENT = "not-current"
    SNAPSHOT_UNREADABLE = "snapshot-unreadable"
    EXTRACTOR_MISMATCH = "extractor-mismatch"
    RACING = "racing"
    # SPEC §6.1–§6.4
    AMBIGUOUS_RELOCATION = "ambiguous-relocation"
    AMBIGUOUS_SUCCESSOR = "ambiguous-successor"
    INCOMPLETE_COVERAGE = "incomplete-coverage"
    # issue 20: the bytes git would store are made by a filter driver citegraph never runs
    FILTER_DRIVER = "filter-driver"


def _unknown(r: Receipt, reason: Reason) -> Observation:
    return Observation(r.id, "unknown", str(reason))


# --- before anything (SPEC §6, §8, §9): decided from facts, before any snapshot is read ----


def well_formed(r: Receipt) -> bool:
    """A stored receipt the tables can judge: a known kind, a repository id and a path; a
    span with its lines, a symbol with its handle (the store is untrusted input, §12.1)."""
    if r.kind not in ("file", "span", "symbol") or not r.repository_id or not r.path:
        return False
    if r.kind == "span" and (not r.start_line or not r.end_line):
        return False
    return not (r.kind == "symbol" and not r.handle)


def within_bounds(*, citations: int, repositories: int, new_repository: bool,
                  max_citations: int | None, max_repositories: int | None) -> bool:
    """SPEC §8: may the next citation be looked at, after ``citations`` admitted ones over
    ``repositories`` repositories? ``new_repository``: it is of none of those."""
    if max_citations is not None and citations >= max_citations:
        return False  # beyond the citation bound
    if max_repositories is not None and new_repository and repositories >= max_repositories:
        return False  # of a repository beyond the repository bound
    return True


def before_anything(r: Receipt, *, well_formed: bool, within_bounds: bool, members: int, read: int,
                    states: int, current: bool, indexing: bool = False) -> Observation | None:
    """The rows before the tables, in order. ``members``: scope members carrying the
    citation's repository id; ``read``: how many of them could be read; ``states``: the
    distinct states (snapshot ids) among those; ``current``: that state has its
    exact-current ready snapshot."""
    if not well_formed:
        return _unknown(r, Reason.INVALID_CITATION)  # a malformed stored receipt
    if not within_bounds:
        return _unknown(r, Reason.LIMIT)  # §8: over the bound, not looked at
    if members == 0:
        return _unknown(r, Reason.OUT_OF_SCOPE)  # §6: its repository is not in the scope
    if members > 1 and (read < members or states > 1):
        # §9: two members with its id in different (or unreadable) states — the answer
        # would depend on which one is read. In one state they are one repository.
        return _unknown(r, Reason.REPOSITORY_AMBIGUOUS)
    if read == 0:
        return _unknown(r, Reason.MEMBER_MISSING)  # §9: the member is gone or no repository
    if not current:
        # §6/§17: no exact-current ready snapshot. While the resident service is still
        # building the state read (past the read's bound), that state is in motion: racing.
        return _unknown(r, Reason.RACING if indexing else Reason.NOT_CURRENT)
    return None


def snapshot_unreadable(r: Receipt, *, damaged: bool) -> Observation:
    """The exact-current snapshot failed to open or read. Found damaged, it is now marked
    failed, so there is no exact-current ready snapshot (§6, not-current); any other
    failure is snapshot-unreadable."""
    if damaged:
        return _unknown(r, Reason.NOT_CURRENT)
    return _unknown(r, Reason.SNAPSHOT_UNREADABLE)


def needs_reextraction(r: Receipt, snapshot_extractor: str) -> bool:
    """SPEC §6 extractor row: only a symbol receipt is an extractor's product (file and span
    receipts are raw bytes and git blob ids); one made by another extractor version must be
    re-extracted from its original blob."""
    return r.kind == "symbol" and r.extractor_version != snapshot_extractor


def extractor_gate(r: Receipt, *, snapshot_extractor: str, reextracted_fragment: str | None
                   ) -> Observation | None:
    """SPEC §6: extractor-mismatch unless the original blob is still there and re-extracts
    to the cited fragment hash (then the tables judge it normally)."""
    if needs_reextraction(r, snapshot_extractor) and (
            reextracted_fragment is None or reextracted_fragment != r.fragment_hash):
        return _unknown(r, Reason.EXTRACTOR_MISMATCH)
    return None


def after_run(observations: list[Observation], *, moved: bool) -> list[Observation]:
    """SPEC §6: the state is re-read after validation; if the repository moved, every
    observation of it is unknown/racing (cached ones too: they answer the state read
    before, which is no longer the current one)."""
    if moved:
        return [Observation(o.citation_id, "unknown", str(Reason.RACING)) for o in observations]
    return list(observations)


def unsettled_content(o: Observation, *, cited_unsettled: bool, observed_unsettled: bool) -> Observation:
    """An answer that read a file whose stored form is unknowable — dirty, and converted by
    an external filter driver citegraph never runs (docs/outcomes.md, "Which bytes are
    hashed") — is only as good as the raw bytes: ``exact`` stands (the cited bytes are there
    as captured), any other verdict about that file is ``unknown/filter-driver`` (git may
    well call the file unchanged)."""
    if o.outcome in ("exact", "unknown") or not (cited_unsettled or observed_unsettled):
        return o
    return Observation(o.citation_id, "unknown", str(Reason.FILTER_DRIVER))


# --- the tables (SPEC §6.1–§6.3) ----------------------------------------------------------


def decide_file(r: Receipt, ev: FileEvidence) -> Observation:
    """SPEC §6.1."""
    if ev.at_path_blob is not None:
        if ev.at_path_blob == r.blob_id:
            return Observation(r.id, "exact", None, Observed(r.path))
        return Observation(r.id, "changed", None, Observed(r.path))  # a copy never rescues it
    elsewhere = tuple(p for p in ev.paths_with_blob if p != r.path)
    if len(elsewhere) > 1:
        return _unknown(r, Reason.AMBIGUOUS_RELOCATION)
    if not ev.inventory_complete:
        # "exactly one file anywhere" and "none has it" are unprovable when part of the
        # inventory is missing (a partial clone lacking a tree may hold another copy).
        return _unknown(r, Reason.INCOMPLETE_COVERAGE)
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
            return _unknown(r, Reason.AMBIGUOUS_RELOCATION)
        return Observation(r.id, "changed", None, Observed(r.path))
    if len(ev.paths_with_cited_blob) > 1:
        return _unknown(r, Reason.AMBIGUOUS_RELOCATION)
    if not ev.inventory_complete:
        # The cited path (or another copy) may sit in a tree this repository lacks.
        return _unknown(r, Reason.INCOMPLETE_COVERAGE)
    if len(ev.paths_with_cited_blob) == 1:
        return Observation(r.id, "relocated", None,
                           Observed(ev.paths_with_cited_blob[0], r.start_line, r.end_line))
    if len(ev.added_files_with_bytes) > 1:
        return _unknown(r, Reason.AMBIGUOUS_RELOCATION)
    if len(ev.added_files_with_bytes) == 1 and ev.diff_complete:
        # Uniqueness among added files holds only when every added file was searched.
        path, start = ev.added_files_with_bytes[0]
        return Observation(r.id, "relocated", None, Observed(path, start, start + n - 1))
    if ev.capture_commit_known and ev.diff_complete:
        return Observation(r.id, "deleted")
    return _unknown(r, Reason.INCOMPLETE_COVERAGE)


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
        return _unknown(r, Reason.AMBIGUOUS_RELOCATION)
    if len(relocations) == 1:
        if not covered:
            return _unknown(r, Reason.INCOMPLETE_COVERAGE)
        return Observation(r.id, "relocated", None, _observed(relocations[0]))
    successors = _distinct(ev.qname_matches + ev.body_matches, r.handle)
    if len(successors) > 1:
        return _unknown(r, Reason.AMBIGUOUS_SUCCESSOR)
    if not covered:
        return _unknown(r, Reason.INCOMPLETE_COVERAGE)
    if len(successors) == 1:
        return Observation(r.id, "changed", None, _observed(successors[0]))
    return Observation(r.id, "deleted")


def decide_symbols_at_handle(receipts: list[Receipt], at: AtHandleColumns) -> list[Observation | None]:
    """SPEC §6.3's first two rows applied to columns (batch validation, §6.6): for each
    receipt whose handle exists in the snapshot, ``exact`` when the fragment hash there is
    the cited one, else ``changed`` — observed at the handle, as ``decide_symbol`` does.
    ``None`` where the handle is absent: those rows need the relocation, successor and
    coverage evidence of ``decide_symbol``. Equal to ``decide_symbol`` row by row
    (tests/test_batch_vectorised.py)."""
    out: list[Observation | None] = []
    append = out.append
    for r, fragment, path, start, end in zip(receipts, at.fragment_hash, at.path, at.start_line, at.end_line,
                                             strict=True):
        if fragment is None:
            append(None)  # handle absent: the rest of the table decides
        elif fragment == r.fragment_hash:
            append(Observation(r.id, "exact", None, Observed(path, start, end, r.handle)))
        else:
            append(Observation(r.id, "changed", None, Observed(path, start, end, r.handle)))
    return out


def _distinct(rows: tuple[SymbolRow, ...], cited_handle: str | None) -> list[SymbolRow]:
    seen: dict[str, SymbolRow] = {}
    for row in rows:
        if row.handle != cited_handle:
            seen.setdefault(row.handle, row)
    return [seen[h] for h in sorted(seen)]


# --- cosmetic change (SPEC §6.3a): a detail of ``changed``, never a verdict ------------------

COSMETIC = "cosmetic"


def change_kind(r: Receipt, o: Observation, observed_token_hash: str | None) -> str | None:
    """``cosmetic`` when a ``changed`` span or symbol citation's code did not change —
    the fragment now at the cited place (the cited handle, the cited span's lines as the
    diff maps them) has the token-sequence hash the receipt recorded (indexer/tokens.py:
    leaf tokens, tree shape, comments out) — else None. A successor is another symbol,
    never cosmetic; a receipt without a token hash (captured before, or not token-exact)
    and a fragment the tokens cannot decide (None) keep today's answer."""
    if o.outcome != "changed" or o.observed is None:
        return None
    if r.kind == "symbol":
        if o.observed.handle != r.handle:
            return None  # a successor: another symbol's code
    elif r.kind != "span" or o.observed.path != r.path:
        return None
    if not r.token_hash or observed_token_hash != r.token_hash:
        return None  # no recorded hash (legacy, not token-exact), or other tokens now
    return COSMETIC


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


# --- dependency-changed (SPEC §6.5 refinement, §21): advisories, never verdicts -----------------

MAX_DEPENDENCY_DEPTH = 3


def dependency_change(fragment_hash: str, ev: DependencyEvidence, token_hash: str | None = None
                      ) -> tuple[str, SymbolRow | None] | None:
    """What happened to one recorded dependency: None when its handle still holds the
    recorded fragment, or code with its recorded ``token_hash`` (comments/formatting only,
    SPEC §6.3a); ``changed`` (in place, or moved and edited: the dependent's edge of
    that name now resolves, by scoping, to one other symbol); ``relocated`` (its fragment
    now elsewhere, uniquely — or in several places: None as the location); ``deleted``
    otherwise. A symbol of the same name elsewhere that scoping does not reach is never
    taken for it."""
    if ev.at_handle is not None:
        if ev.at_handle.fragment_hash == fragment_hash:
            return None
        if token_hash and ev.token_hash == token_hash:
            return None  # a cosmetic change of the dependency: no advisory
        return "changed", ev.at_handle
    moved = [s for s in ev.successors if s.fragment_hash == fragment_hash]
    if len(moved) == 1:
        return "relocated", moved[0]
    if ev.fragment_matches:
        return "relocated", ev.fragment_matches[0] if len(ev.fragment_matches) == 1 else None
    if len(ev.successors) == 1:
        return "changed", ev.successors[0]
    return "deleted", None


def dependency_of_name(d: dict) -> str:
    """The name an edge to dependency ``d`` is written with (its last qualified part)."""
    return str(d.get("qualified_name") or "").rsplit(".", 1)[-1]


def dependent_of(r: Receipt, deps: tuple[dict, ...], d: dict) -> str:
    """The handle whose edge reached ``d`` at capture: the cited symbol, or for a deeper
    dependency the one it was reached through (``via``)."""
    via = d.get("via", -1)
    if isinstance(via, int) and 0 <= via < len(deps):
        return str(deps[via].get("handle"))
    return r.handle or ""


def dependency_advisories(r: Receipt, o: Observation, evidence: dict[tuple[str, str], DependencyEvidence],
                          depth: int) -> tuple[Advisory, ...]:
    """The ``dependency-changed`` advisories of one observation: only for an ``exact``
    symbol citation, over its recorded dependencies up to ``depth`` (1..3; a legacy receipt
    records none). The outcome is never touched; ``evidence`` is keyed by (dependent
    handle, dependency handle, recorded fragment hash)."""
    if o.outcome != "exact" or r.kind != "symbol" or depth < 1:
        return ()
    out = []
    deps = r.dependencies
    for d in deps:
        if d.get("depth", 1) > min(depth, MAX_DEPENDENCY_DEPTH):
            continue
        ev = evidence.get((dependent_of(r, deps, d), d.get("handle"), d.get("fragment_hash")))
        if ev is None:
            continue  # not gathered: no claim
        change = dependency_change(d.get("fragment_hash", ""), ev, d.get("token_hash"))
        if change is None:
            continue
        what, row = change
        loc = f"{d.get('path')}::{d.get('qualified_name')}" + (f"[{d['ordinal']}]" if d.get("ordinal") else "")
        out.append(Advisory(r.id, what, d.get("handle", ""), loc, d.get("edge", "calls"), d.get("depth", 1),
                            _observed(row) if row is not None else None))
    return tuple(out)


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


def memory_reason(observations: list[Observation]) -> str | None:
    """Why a memory with citations is unknown: the distinct reasons of its unknown
    citations, sorted, joined by ``,`` (docs/outcomes.md). A fresh or stale memory has
    none: its citations say what changed."""
    if freshness([o.outcome for o in observations]) != "unknown":
        return None
    reasons = {o.reason for o in observations if o.outcome == "unknown"}
    return ",".join(sorted(x for x in reasons if x)) or None


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


# --- refresh (SPEC §18) ---------------------------------------------------------------------

REFRESH = "refresh"
KEEP = "keep"
REFUSE = "refuse"


def refresh_action(r: Receipt, o: Observation, *, accept_relocated: bool, accept_successor: bool,
                   accept_cosmetic: bool = False) -> tuple[str, str]:
    """May ``refresh`` re-capture citation ``r`` at the location observation ``o`` gives?
    (action, why): ``keep`` an exact one; ``refresh`` a relocated one (with ``--accept
    relocated``) or a changed symbol with its unique observed successor — a handle other
    than the cited one (with ``--accept successor``) or a cosmetic change at the cited place
    (with ``--accept cosmetic``, SPEC §6.3a); ``refuse`` everything else: changed without a
    successor, deleted, unknown, or a kind not accepted. Never automatic: only the command
    asks."""
    if o.outcome == "exact":
        return KEEP, "exact"
    if o.outcome == "relocated":
        if o.observed is None:
            return REFUSE, "no-location"  # nothing to re-capture at
        if not accept_relocated:
            return REFUSE, "relocated-not-accepted"
        return REFRESH, "relocated"
    if o.outcome == "changed" and o.change == COSMETIC:
        if o.observed is None or o.observed.start_line is None:
            return REFUSE, "no-location"  # nothing to re-capture at
        if not accept_cosmetic:
            return REFUSE, "cosmetic-not-accepted"
        return REFRESH, "cosmetic"
    if o.outcome == "changed":
        successor = r.kind == "symbol" and o.observed is not None and o.observed.handle is not None \
            and o.observed.handle != r.handle
        if not successor:
            return REFUSE, "changed"  # the cited code itself changed: the claim needs a review
        if not accept_successor:
            return REFUSE, "successor-not-accepted"
        return REFRESH, "successor"
    if o.outcome == "deleted":
        return REFUSE, "deleted"
    return REFUSE, "unknown"
