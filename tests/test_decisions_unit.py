"""Unit tests of validator/decisions.py over plain data (no git, no snapshot).

Branch by branch: every returned outcome, every comparison and every priority between rows
of SPEC §6.1–§6.5 is pinned by at least one assertion on the whole Observation, so a
flipped comparison or a swapped outcome in that module fails here.
"""

from __future__ import annotations

import itertools

import pytest

from citegraph.validator import decisions as d
from citegraph.validator.model import (
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

BLOB = "b" * 40
OTHER_BLOB = "c" * 40
CITED_HANDLE = "cgs_" + "0" * 32


def receipt(kind: str = "file", **kw) -> Receipt:
    base = dict(id=f"cgc_{kind}", ref=f"ref-{kind}", kind=kind, repository_id="r" * 32,
                repository_kind="local", snapshot_id="cgsnap_x", commit="a" * 40, dirty=False,
                extractor_version="cgx-1", path="src/a.py", blob_id=BLOB)
    if kind == "span":
        base.update(start_line=10, end_line=12, span_hash="s", first_line_hash="f")
    if kind == "symbol":
        base.update(handle=CITED_HANDLE, language="python", symbol_kind="function", name="f",
                    qualified_name="f", ordinal=0, start_line=3, end_line=5, fragment_hash="frag",
                    body_hash="body")
    base.update(kw)
    return Receipt(**base)


def unknown(r: Receipt, reason: str) -> Observation:
    return Observation(r.id, "unknown", reason, None)


# --- the reasons (the JSON contract) -------------------------------------------------------------


def test_reason_values_are_the_json_contract():
    assert {r.name: r.value for r in d.Reason} == {
        "INVALID_CITATION": "invalid-citation", "LIMIT": "limit", "OUT_OF_SCOPE": "out-of-scope",
        "REPOSITORY_AMBIGUOUS": "repository-ambiguous", "MEMBER_MISSING": "member-missing",
        "NOT_CURRENT": "not-current", "SNAPSHOT_UNREADABLE": "snapshot-unreadable",
        "EXTRACTOR_MISMATCH": "extractor-mismatch", "RACING": "racing",
        "AMBIGUOUS_RELOCATION": "ambiguous-relocation", "AMBIGUOUS_SUCCESSOR": "ambiguous-successor",
        "INCOMPLETE_COVERAGE": "incomplete-coverage", "FILTER_DRIVER": "filter-driver"}


def test_observations_carry_plain_strings():
    o = d.before_anything(receipt(), **dict(ROUTED, current=False))
    assert type(o.reason) is str and o.reason == "not-current"


# --- before anything (SPEC §6, §8, §9) --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "span", "symbol"])
def test_well_formed_receipts(kind):
    assert d.well_formed(receipt(kind)) is True


@pytest.mark.parametrize("kind", ["file", "span"])
def test_only_a_symbol_needs_a_handle(kind):
    assert d.well_formed(receipt(kind, handle=None)) is True


@pytest.mark.parametrize("bad", [
    dict(kind="directory"), dict(kind=""), dict(repository_id=""), dict(path=""),
    dict(repository_id="", path=""),
])
def test_malformed_receipts(bad):
    assert d.well_formed(receipt(**bad)) is False


@pytest.mark.parametrize("bad", [dict(start_line=None), dict(end_line=None), dict(start_line=0),
                                 dict(start_line=None, end_line=None)])
def test_a_span_needs_its_lines(bad):
    assert d.well_formed(receipt("span", **bad)) is False


def test_a_symbol_needs_its_handle():
    assert d.well_formed(receipt("symbol", handle=None)) is False
    assert d.well_formed(receipt("symbol", handle="")) is False


def bounds(citations=0, repositories=0, new=False, max_c=None, max_r=None):
    return d.within_bounds(citations=citations, repositories=repositories, new_repository=new,
                           max_citations=max_c, max_repositories=max_r)


def test_without_bounds_everything_is_within():
    assert bounds(10_000, 10_000, True) is True


def test_citation_bound():
    assert bounds(95, 1, False, max_c=96) is True
    assert bounds(96, 1, False, max_c=96) is False  # the 97th
    assert bounds(97, 1, False, max_c=96) is False
    assert bounds(0, 0, True, max_c=0) is False


def test_repository_bound():
    assert bounds(5, 31, True, max_r=32) is True
    assert bounds(5, 32, True, max_r=32) is False  # a 33rd repository
    assert bounds(5, 33, True, max_r=32) is False
    assert bounds(5, 32, False, max_r=32) is True  # one of the first 32: still within
    assert bounds(5, 40, False, max_r=32) is True


def test_both_bounds():
    assert bounds(95, 31, True, max_c=96, max_r=32) is True
    assert bounds(96, 1, False, max_c=96, max_r=32) is False
    assert bounds(1, 32, True, max_c=96, max_r=32) is False


# The facts of a citation that every row lets through: one member, read, one state, current.
ROUTED = dict(well_formed=True, within_bounds=True, members=1, read=1, states=1, current=True)


def before(r=None, **facts):
    return d.before_anything(r or receipt(), **dict(ROUTED, **facts))


def test_before_anything_passes_when_all_hold():
    assert before() is None
    assert before(members=2, read=2, states=1) is None  # two worktrees in one state are one repository
    assert before(members=3, read=3, states=1) is None


@pytest.mark.parametrize(("facts", "reason"), [
    (dict(well_formed=False), "invalid-citation"),
    (dict(well_formed=False, within_bounds=False, members=0, read=0, states=0, current=False), "invalid-citation"),
    (dict(within_bounds=False), "limit"),
    (dict(within_bounds=False, members=0, read=0, states=0, current=False), "limit"),
    (dict(members=0, read=0, states=0), "out-of-scope"),
    (dict(members=0, read=0, states=0, current=False), "out-of-scope"),
    (dict(members=2, read=2, states=2), "repository-ambiguous"),
    (dict(members=2, read=2, states=2, current=False), "repository-ambiguous"),
    (dict(members=3, read=3, states=2), "repository-ambiguous"),
    (dict(members=2, read=1, states=1), "repository-ambiguous"),  # one of two is gone
    (dict(members=2, read=0, states=0, current=False), "repository-ambiguous"),
    (dict(members=1, read=0, states=0, current=False), "member-missing"),
    (dict(members=1, read=0, states=0), "member-missing"),
    (dict(current=False), "not-current"),
    (dict(members=2, read=2, states=1, current=False), "not-current"),
])
def test_before_anything_rows_in_order(facts, reason):
    r = receipt()
    assert before(r, **facts) == unknown(r, reason)


def test_snapshot_unreadable():
    r = receipt()
    assert d.snapshot_unreadable(r, damaged=True) == unknown(r, "not-current")
    assert d.snapshot_unreadable(r, damaged=False) == unknown(r, "snapshot-unreadable")


def test_only_symbols_of_another_extractor_need_reextraction():
    assert d.needs_reextraction(receipt("symbol"), "cgx-2") is True
    assert d.needs_reextraction(receipt("symbol"), "cgx-1") is False
    assert d.needs_reextraction(receipt("file"), "cgx-2") is False
    assert d.needs_reextraction(receipt("span"), "cgx-2") is False


def test_extractor_gate():
    sym = receipt("symbol")
    assert d.extractor_gate(sym, snapshot_extractor="cgx-1", reextracted_fragment=None) is None
    assert d.extractor_gate(sym, snapshot_extractor="cgx-2", reextracted_fragment="frag") is None
    assert d.extractor_gate(sym, snapshot_extractor="cgx-2", reextracted_fragment="other") == unknown(
        sym, "extractor-mismatch")
    assert d.extractor_gate(sym, snapshot_extractor="cgx-2", reextracted_fragment=None) == unknown(
        sym, "extractor-mismatch")  # the original blob is gone
    for kind in ("file", "span"):  # raw bytes and blob ids: no extractor involved
        assert d.extractor_gate(receipt(kind), snapshot_extractor="cgx-2", reextracted_fragment=None) is None


def test_extractor_gate_with_a_receipt_lacking_its_fragment():
    sym = receipt("symbol", fragment_hash=None)
    assert d.extractor_gate(sym, snapshot_extractor="cgx-2", reextracted_fragment=None) == unknown(
        sym, "extractor-mismatch")


def test_after_run():
    obs = [Observation("a", "exact", None, Observed("x.py")), Observation("b", "unknown", "incomplete-coverage"),
           Observation("c", "changed", None, Observed("y.py"))]
    assert d.after_run(obs, moved=False) == obs
    assert d.after_run(obs, moved=True) == [Observation(c, "unknown", "racing") for c in "abc"]
    assert d.after_run([], moved=True) == []


# --- §6.1 file ---------------------------------------------------------------------------------


def fev(at=None, paths=(), complete=True) -> FileEvidence:
    return FileEvidence(at, tuple(paths), complete)


def test_file_exact():
    r = receipt()
    assert d.decide_file(r, fev(BLOB, ["src/a.py"])) == Observation(r.id, "exact", None, Observed("src/a.py"))


def test_file_exact_even_with_incomplete_inventory():
    r = receipt()
    assert d.decide_file(r, fev(BLOB, ["src/a.py", "x.py"], complete=False)).outcome == "exact"


def test_file_changed_and_a_copy_never_rescues():
    r = receipt()
    want = Observation(r.id, "changed", None, Observed("src/a.py"))
    assert d.decide_file(r, fev(OTHER_BLOB)) == want
    assert d.decide_file(r, fev(OTHER_BLOB, ["lib/copy.py"])) == want
    assert d.decide_file(r, fev(OTHER_BLOB, ["lib/copy.py", "lib/copy2.py"])) == want


def test_file_relocated_to_the_one_other_path():
    r = receipt()
    assert d.decide_file(r, fev(None, ["lib/a.py"])) == Observation(r.id, "relocated", None, Observed("lib/a.py"))


def test_file_relocation_ignores_the_cited_path_itself():
    r = receipt()
    got = d.decide_file(r, fev(None, ["src/a.py", "lib/a.py"]))
    assert got == Observation(r.id, "relocated", None, Observed("lib/a.py"))


def test_file_ambiguous_relocation():
    r = receipt()
    assert d.decide_file(r, fev(None, ["lib/a.py", "lib/b.py"])) == unknown(r, "ambiguous-relocation")
    assert d.decide_file(r, fev(None, ["x", "y", "z"], complete=False)) == unknown(r, "ambiguous-relocation")


def test_file_deleted_needs_a_complete_inventory():
    r = receipt()
    assert d.decide_file(r, fev(None, [], complete=True)) == Observation(r.id, "deleted", None, None)
    assert d.decide_file(r, fev(None, [], complete=False)) == unknown(r, "incomplete-coverage")


def test_file_unique_relocation_needs_a_complete_inventory():
    r = receipt()
    assert d.decide_file(r, fev(None, ["lib/a.py"], complete=False)) == unknown(r, "incomplete-coverage")


# --- §6.2 span ---------------------------------------------------------------------------------


def test_span_exact_reports_the_cited_lines():
    r = receipt("span")
    ev = SpanEvidence(at_path_exists=True, same_lines_match=True, line_count=3)
    assert d.decide_span(r, ev) == Observation(r.id, "exact", None, Observed("src/a.py", 10, 12))


def test_span_exact_wins_over_other_occurrences():
    r = receipt("span")
    ev = SpanEvidence(at_path_exists=True, same_lines_match=True, other_occurrences=(20, 30), line_count=3)
    assert d.decide_span(r, ev).outcome == "exact"


def test_span_relocated_within_the_file():
    r = receipt("span")
    ev = SpanEvidence(at_path_exists=True, other_occurrences=(20,), line_count=3)
    assert d.decide_span(r, ev) == Observation(r.id, "relocated", None, Observed("src/a.py", 20, 22))


def test_span_relocated_single_line():
    r = receipt("span", start_line=4, end_line=4)
    ev = SpanEvidence(at_path_exists=True, other_occurrences=(7,), line_count=1)
    assert d.decide_span(r, ev) == Observation(r.id, "relocated", None, Observed("src/a.py", 7, 7))


def test_span_ambiguous_within_the_file():
    r = receipt("span")
    ev = SpanEvidence(at_path_exists=True, other_occurrences=(20, 40), line_count=3)
    assert d.decide_span(r, ev) == unknown(r, "ambiguous-relocation")


def test_span_changed():
    r = receipt("span")
    ev = SpanEvidence(at_path_exists=True, line_count=3,
                      # evidence about a gone file is irrelevant while the file exists
                      paths_with_cited_blob=("lib/a.py",), added_files_with_bytes=(("n.py", 1),),
                      capture_commit_known=True, diff_complete=True)
    assert d.decide_span(r, ev) == Observation(r.id, "changed", None, Observed("src/a.py"))


def gone(**kw) -> SpanEvidence:
    base = dict(at_path_exists=False, line_count=3, capture_commit_known=True, diff_complete=True)
    base.update(kw)
    return SpanEvidence(**base)


def test_span_whole_file_relocated_keeps_the_lines():
    r = receipt("span")
    assert d.decide_span(r, gone(paths_with_cited_blob=("lib/a.py",))) == Observation(
        r.id, "relocated", None, Observed("lib/a.py", 10, 12))


def test_span_whole_file_relocation_wins_over_added_files():
    r = receipt("span")
    got = d.decide_span(r, gone(paths_with_cited_blob=("lib/a.py",), added_files_with_bytes=(("n.py", 3),)))
    assert got == Observation(r.id, "relocated", None, Observed("lib/a.py", 10, 12))


def test_span_whole_file_relocation_needs_no_capture_commit():
    r = receipt("span")
    got = d.decide_span(r, gone(paths_with_cited_blob=("lib/a.py",), capture_commit_known=False,
                                diff_complete=False))
    assert got.outcome == "relocated"


def test_span_whole_file_ambiguous():
    r = receipt("span")
    assert d.decide_span(r, gone(paths_with_cited_blob=("a", "b"))) == unknown(r, "ambiguous-relocation")
    assert d.decide_span(r, gone(paths_with_cited_blob=("a", "b"), inventory_complete=False)) == unknown(
        r, "ambiguous-relocation")


def test_span_incomplete_inventory_blocks_every_claim_about_a_gone_file():
    r = receipt("span")
    for ev in (gone(paths_with_cited_blob=("lib/a.py",), inventory_complete=False),
               gone(added_files_with_bytes=(("n.py", 3),), inventory_complete=False),
               gone(inventory_complete=False)):
        assert d.decide_span(r, ev) == unknown(r, "incomplete-coverage")


def test_span_relocated_into_one_added_file():
    r = receipt("span")
    assert d.decide_span(r, gone(added_files_with_bytes=(("new.py", 5),))) == Observation(
        r.id, "relocated", None, Observed("new.py", 5, 7))


def test_span_added_file_relocation_needs_a_complete_diff():
    r = receipt("span")
    assert d.decide_span(r, gone(added_files_with_bytes=(("new.py", 5),), diff_complete=False)) == unknown(
        r, "incomplete-coverage")


def test_span_ambiguous_over_added_files():
    r = receipt("span")
    ev = gone(added_files_with_bytes=(("a.py", 1), ("b.py", 2)))
    assert d.decide_span(r, ev) == unknown(r, "ambiguous-relocation")
    ev = gone(added_files_with_bytes=(("a.py", 1), ("a.py", 9)), diff_complete=False)
    assert d.decide_span(r, ev) == unknown(r, "ambiguous-relocation")


def test_span_deleted_needs_known_commit_and_complete_diff():
    r = receipt("span")
    assert d.decide_span(r, gone()) == Observation(r.id, "deleted", None, None)
    assert d.decide_span(r, gone(capture_commit_known=False)) == unknown(r, "incomplete-coverage")
    assert d.decide_span(r, gone(diff_complete=False)) == unknown(r, "incomplete-coverage")
    assert d.decide_span(r, gone(capture_commit_known=False, diff_complete=False)) == unknown(
        r, "incomplete-coverage")


# --- §6.3 symbol -------------------------------------------------------------------------------


def row(handle: str, path: str = "src/b.py", frag: str = "frag", body: str = "body",
        qname: str = "f", start: int = 7, end: int = 9) -> SymbolRow:
    return SymbolRow(handle, path, "python", "function", qname, start, end, frag, body)


H1, H2 = "cgs_" + "1" * 32, "cgs_" + "2" * 32


def obs_at(r: Receipt, outcome: str, s: SymbolRow) -> Observation:
    return Observation(r.id, outcome, None, Observed(s.path, s.start_line, s.end_line, s.handle))


def test_symbol_exact_reports_new_lines():
    r = receipt("symbol")
    at = row(CITED_HANDLE, "src/a.py", start=30, end=32)
    assert d.decide_symbol(r, SymbolEvidence(at)) == obs_at(r, "exact", at)


def test_symbol_exact_needs_no_coverage():
    r = receipt("symbol")
    at = row(CITED_HANDLE, "src/a.py")
    assert d.decide_symbol(r, SymbolEvidence(at, coverage_ok=False)).outcome == "exact"


def test_symbol_changed_at_the_handle_and_a_copy_never_rescues():
    r = receipt("symbol")
    at = row(CITED_HANDLE, "src/a.py", frag="edited")
    copy = row(H1, frag="frag")
    ev = SymbolEvidence(at, fragment_matches=(copy,), coverage_ok=True)
    assert d.decide_symbol(r, ev) == obs_at(r, "changed", at)


def test_symbol_relocated():
    r = receipt("symbol")
    moved = row(H1, "lib/a.py")
    assert d.decide_symbol(r, SymbolEvidence(None, fragment_matches=(moved,), coverage_ok=True)) == obs_at(
        r, "relocated", moved)


def test_symbol_relocated_counts_distinct_handles_and_ignores_the_cited_one():
    r = receipt("symbol")
    moved = row(H1, "lib/a.py")
    ev = SymbolEvidence(None, fragment_matches=(moved, moved, row(CITED_HANDLE, "src/a.py")), coverage_ok=True)
    assert d.decide_symbol(r, ev) == obs_at(r, "relocated", moved)


def test_symbol_relocation_needs_coverage():
    r = receipt("symbol")
    ev = SymbolEvidence(None, fragment_matches=(row(H1),), coverage_ok=False)
    assert d.decide_symbol(r, ev) == unknown(r, "incomplete-coverage")


def test_symbol_ambiguous_relocation_with_or_without_coverage():
    r = receipt("symbol")
    for cov in (True, False):
        ev = SymbolEvidence(None, fragment_matches=(row(H1), row(H2)), coverage_ok=cov)
        assert d.decide_symbol(r, ev) == unknown(r, "ambiguous-relocation")


def test_symbol_relocation_wins_over_successors():
    r = receipt("symbol")
    moved = row(H1)
    ev = SymbolEvidence(None, fragment_matches=(moved,), qname_matches=(row(H2, frag="x"),),
                        body_matches=(row(H2, frag="x"),), coverage_ok=True)
    assert d.decide_symbol(r, ev) == obs_at(r, "relocated", moved)


def test_symbol_successor_by_qualified_name():
    r = receipt("symbol")
    succ = row(H1, "lib/a.py", frag="other")
    assert d.decide_symbol(r, SymbolEvidence(None, qname_matches=(succ,), coverage_ok=True)) == obs_at(
        r, "changed", succ)


def test_symbol_successor_by_body_hash():
    r = receipt("symbol")
    succ = row(H1, "src/a.py", frag="renamed", qname="g")
    assert d.decide_symbol(r, SymbolEvidence(None, body_matches=(succ,), coverage_ok=True)) == obs_at(
        r, "changed", succ)


def test_symbol_same_successor_by_name_and_body_counts_once():
    r = receipt("symbol")
    succ = row(H1, frag="other")
    ev = SymbolEvidence(None, qname_matches=(succ,), body_matches=(succ,), coverage_ok=True)
    assert d.decide_symbol(r, ev) == obs_at(r, "changed", succ)


def test_symbol_successor_needs_coverage():
    r = receipt("symbol")
    ev = SymbolEvidence(None, qname_matches=(row(H1, frag="other"),), coverage_ok=False)
    assert d.decide_symbol(r, ev) == unknown(r, "incomplete-coverage")


def test_symbol_ambiguous_successor_with_or_without_coverage():
    r = receipt("symbol")
    for cov in (True, False):
        by_name = SymbolEvidence(None, qname_matches=(row(H1, frag="x"), row(H2, frag="y")), coverage_ok=cov)
        mixed = SymbolEvidence(None, qname_matches=(row(H1, frag="x"),), body_matches=(row(H2, frag="y"),),
                               coverage_ok=cov)
        by_body = SymbolEvidence(None, body_matches=(row(H1, frag="x"), row(H2, frag="y")), coverage_ok=cov)
        for ev in (by_name, mixed, by_body):
            assert d.decide_symbol(r, ev) == unknown(r, "ambiguous-successor")


def test_symbol_successor_ignores_the_cited_handle():
    r = receipt("symbol")
    ev = SymbolEvidence(None, qname_matches=(row(CITED_HANDLE, "src/a.py", frag="x"),), coverage_ok=True)
    assert d.decide_symbol(r, ev) == Observation(r.id, "deleted", None, None)


def test_symbol_deleted_needs_coverage():
    r = receipt("symbol")
    assert d.decide_symbol(r, SymbolEvidence(None, coverage_ok=True)) == Observation(r.id, "deleted", None, None)
    assert d.decide_symbol(r, SymbolEvidence(None, coverage_ok=False)) == unknown(r, "incomplete-coverage")


# --- §6.4 coverage for a citation (byte search and damage regions) -------------------------------

def partial(**kw) -> FileCoverage:
    base = dict(path="src/p.py", status="partial", reason="ERROR in module", readable=True,
                name_found=True, occurrences=((100, 104),), damage=((10, 20),))
    base.update(kw)
    return FileCoverage(**base)


def cleared(*files: FileCoverage, complete: bool = True, has_name: bool = True) -> bool:
    return d.coverage_suffices(CoverageEvidence(complete, has_name, files))


def test_coverage_with_no_uncovered_file():
    assert cleared() is True


def test_coverage_needs_a_complete_inventory_and_a_name():
    assert cleared(complete=False) is False
    assert cleared(has_name=False) is False


def test_coverage_byte_search_clears_a_file_without_the_name():
    for status in ("partial", "skipped"):
        assert cleared(partial(status=status, name_found=False, damage=(), occurrences=None)) is True
        assert cleared(partial(status=status, name_found=True, damage=(), occurrences=None)) is False


def test_coverage_unreadable_file_is_never_cleared():
    assert cleared(partial(readable=False, name_found=False)) is False


def test_coverage_symlink_is_always_cleared():
    assert cleared(partial(status="skipped", reason="symlink", readable=False)) is True
    assert cleared(partial(status="skipped", reason="not-regular", readable=False)) is True
    assert cleared(partial(status="skipped", reason="binary", readable=False)) is False


def test_coverage_refinement_clears_a_partial_file_whose_occurrences_miss_the_damage():
    assert cleared(partial()) is True
    assert cleared(partial(occurrences=((15, 19),))) is False


def test_coverage_refinement_is_only_for_partial_files_with_regions_and_occurrences():
    assert cleared(partial(status="skipped")) is False  # a skipped file has no regions to trust
    assert cleared(partial(damage=())) is False  # a partial file without regions: no refinement
    assert cleared(partial(occurrences=None)) is False  # the cited fragment's bytes are gone


def test_coverage_every_file_must_be_cleared():
    good, bad = partial(), partial(path="src/q.py", occurrences=((12, 13),))
    assert cleared(good, good) is True
    assert cleared(good, bad) is False
    assert cleared(bad, good) is False


@pytest.mark.parametrize(("span", "touches"), [
    ((0, 9), False),     # ends one byte before the region
    ((0, 10), True),     # ends where the region starts (touches)
    ((12, 14), True),    # inside
    ((5, 25), True),     # around
    ((20, 22), True),    # starts where the region ends (touches)
    ((21, 22), False),   # starts one byte after
    ((29, 30), True),    # touches the second region
    ((41, 49), False),   # between the second and third
    ((60, 61), True),    # inside the third
    ((71, 80), False),   # after every region
])
def test_touches_any(span, touches):
    regions = ((50, 70), (10, 20), (30, 40))  # any order
    assert d.touches_any((span,), regions) is touches
    assert d.touches_any(((200, 300), span), regions) is touches  # any span of several


def test_touches_any_reaches_over_a_long_earlier_region():
    # the region starting last before the span is short; an earlier one covers the span
    assert d.touches_any(((50, 55),), ((0, 100), (40, 45))) is True
    assert d.touches_any(((50, 55),), ((40, 45), (0, 100))) is True
    assert d.touches_any(((50, 55),), ((0, 10), (40, 45))) is False


def test_touches_any_without_spans_or_regions():
    assert d.touches_any((), ((0, 10),)) is False
    assert d.touches_any(((0, 10),), ()) is False


def test_symbol_decisions_judge_coverage_evidence_when_given():
    r = receipt("symbol")
    moved = row(H1, "lib/a.py")
    ok, blocked = CoverageEvidence(True, True, (partial(),)), CoverageEvidence(True, True, (partial(damage=((99, 101),)),))
    # the evidence wins over coverage_ok
    assert d.decide_symbol(r, SymbolEvidence(None, fragment_matches=(moved,), coverage_ok=False,
                                             coverage=ok)) == obs_at(r, "relocated", moved)
    assert d.decide_symbol(r, SymbolEvidence(None, fragment_matches=(moved,), coverage_ok=True,
                                             coverage=blocked)) == unknown(r, "incomplete-coverage")
    succ = row(H1, frag="other")
    assert d.decide_symbol(r, SymbolEvidence(None, qname_matches=(succ,), coverage=ok)) == obs_at(r, "changed", succ)
    assert d.decide_symbol(r, SymbolEvidence(None, qname_matches=(succ,), coverage_ok=True,
                                             coverage=blocked)) == unknown(r, "incomplete-coverage")
    assert d.decide_symbol(r, SymbolEvidence(None, coverage=ok)) == Observation(r.id, "deleted", None, None)
    assert d.decide_symbol(r, SymbolEvidence(None, coverage_ok=True, coverage=blocked)) == unknown(
        r, "incomplete-coverage")

def test_symbols_at_handle_vectorised_rows():
    """Batch validation (§6.6): the first two rows of §6.3 over columns; a row whose handle
    is absent is left (None) for the rest of the table."""
    a, b, c = receipt("symbol", id="cgc_a"), receipt("symbol", id="cgc_b"), receipt("symbol", id="cgc_c")
    cols = AtHandleColumns(["frag", "edited", None], ["src/a.py", "src/z.py", None], [30, 4, None], [32, 6, None])
    assert d.decide_symbols_at_handle([a, b, c], cols) == [
        Observation(a.id, "exact", None, Observed("src/a.py", 30, 32, CITED_HANDLE)),
        Observation(b.id, "changed", None, Observed("src/z.py", 4, 6, CITED_HANDLE)),
        None]
    for r, (frag, path, start, end) in zip((a, b), (("frag", "src/a.py", 30, 32), ("edited", "src/z.py", 4, 6)),
                                           strict=True):
        at = SymbolRow(CITED_HANDLE, path, "python", "function", "f", start, end, frag, "body")
        assert d.decide_symbols_at_handle([r], AtHandleColumns([frag], [path], [start], [end]))[0] == \
            d.decide_symbol(r, SymbolEvidence(at))
    with pytest.raises(ValueError):  # columns and receipts must align
        d.decide_symbols_at_handle([a, b], AtHandleColumns(["frag"], ["src/a.py"], [1], [2]))


# --- §6.5 aggregation ---------------------------------------------------------------------------

WORST_FIRST = ["changed", "deleted", "unknown", "relocated", "exact"]


def test_precise_status_of_nothing_is_none():
    assert d.precise_status([]) is None


@pytest.mark.parametrize("outcome", WORST_FIRST)
def test_precise_status_of_one(outcome):
    assert d.precise_status([outcome]) == outcome
    assert d.precise_status([outcome, outcome]) == outcome


@pytest.mark.parametrize(("worse", "better"), list(itertools.combinations(WORST_FIRST, 2)))
def test_precise_status_takes_the_worst(worse, better):
    assert d.precise_status([worse, better]) == worse
    assert d.precise_status([better, worse]) == worse


def test_precise_status_over_all_outcomes():
    assert d.precise_status(list(reversed(WORST_FIRST))) == "changed"
    assert d.precise_status(["exact", "relocated", "unknown"]) == "unknown"


@pytest.mark.parametrize(("outcomes", "fresh"), [
    ([], "unknown"),
    (["exact"], "fresh"),
    (["relocated"], "fresh"),
    (["exact", "relocated"], "fresh"),
    (["unknown"], "unknown"),
    (["exact", "unknown"], "unknown"),
    (["relocated", "unknown"], "unknown"),
    (["changed"], "stale"),
    (["deleted"], "stale"),
    (["exact", "changed"], "stale"),
    (["exact", "deleted"], "stale"),
    (["unknown", "changed"], "stale"),
    (["deleted", "unknown"], "stale"),
    (["relocated", "deleted", "exact"], "stale"),
])
def test_freshness(outcomes, fresh):
    assert d.freshness(outcomes) == fresh


def legacy(source="abc", *, is_head=False, clean=True, exists=True, ancestor=False):
    return d.legacy_freshness(source, is_head=is_head, worktree_clean=clean, exists=exists, is_ancestor=ancestor)


def test_legacy_no_basis():
    assert legacy(None, is_head=True) == ("unknown", "no-basis")
    assert legacy("", is_head=True) == ("unknown", "no-basis")


def test_legacy_gone_wins():
    assert legacy(exists=False) == ("stale", "source-commit-gone")
    assert legacy(exists=False, is_head=True, ancestor=True) == ("stale", "source-commit-gone")


def test_legacy_head():
    assert legacy(is_head=True) == ("fresh", None)
    assert legacy(is_head=True, ancestor=True) == ("fresh", None)
    assert legacy(is_head=True, clean=False) == ("unknown", "dirty-worktree")


def test_legacy_behind():
    assert legacy(ancestor=True) == ("unknown", "source-commit-behind")
    assert legacy(ancestor=True, clean=False) == ("unknown", "source-commit-behind")


def test_legacy_not_ancestor():
    assert legacy() == ("stale", "source-commit-not-ancestor")
    assert legacy(clean=False) == ("stale", "source-commit-not-ancestor")


def test_memory_reason():
    ex, re_ = Observation("a", "exact"), Observation("b", "relocated")
    nc, cov = Observation("c", "unknown", "not-current"), Observation("d", "unknown", "incomplete-coverage")
    lim = Observation("e", "unknown", "limit")
    assert d.memory_reason([ex]) is None
    assert d.memory_reason([ex, re_]) is None
    assert d.memory_reason([nc]) == "not-current"
    assert d.memory_reason([ex, nc, re_]) == "not-current"
    assert d.memory_reason([nc, lim, cov, nc]) == "incomplete-coverage,limit,not-current"
    assert d.memory_reason([nc, Observation("f", "changed")]) is None  # stale: its citations say what changed
    assert d.memory_reason([Observation("g", "deleted"), cov]) is None
    assert d.memory_reason([Observation("h", "unknown", None)]) is None


# --- refresh (SPEC §18) ---------------------------------------------------------------------------

SUCCESSOR = "cgs_" + "9" * 32


@pytest.mark.parametrize("reloc, succ", list(itertools.product([True, False], repeat=2)))
def test_refresh_action_table(reloc, succ):
    """Every row of refresh_action, under every --accept: only a relocated citation (when
    accepted) and a changed symbol with an observed handle other than the cited one (when
    successors are accepted) are refreshed; exact is kept; everything else is refused."""
    act = lambda r, o: d.refresh_action(r, o, accept_relocated=reloc, accept_successor=succ)  # noqa: E731
    sym, span, file = receipt("symbol"), receipt("span"), receipt("file")
    for r in (sym, span, file):
        assert act(r, Observation(r.id, "exact", None, Observed(r.path))) == ("keep", "exact")
        moved = Observation(r.id, "relocated", None, Observed("src/b.py", 1, 3, SUCCESSOR if r is sym else None))
        assert act(r, moved) == (("refresh", "relocated") if reloc else ("refuse", "relocated-not-accepted"))
        assert act(r, Observation(r.id, "relocated", None, None)) == ("refuse", "no-location")
        assert act(r, Observation(r.id, "deleted")) == ("refuse", "deleted")
        for reason in ("not-current", "ambiguous-relocation", "racing"):
            assert act(r, Observation(r.id, "unknown", reason)) == ("refuse", "unknown")
        # changed in place (the observed location is the cited one): never refreshed
        assert act(r, Observation(r.id, "changed", None, Observed(r.path, 1, 3, r.handle))) == ("refuse", "changed")
        assert act(r, Observation(r.id, "changed", None, None)) == ("refuse", "changed")
    # a changed symbol with its unique observed successor (another handle)
    succeeded = Observation(sym.id, "changed", None, Observed("src/a.py", 7, 9, SUCCESSOR))
    assert act(sym, succeeded) == (("refresh", "successor") if succ else ("refuse", "successor-not-accepted"))
    assert act(sym, Observation(sym.id, "changed", None, Observed("src/a.py", 7, 9, None))) == ("refuse", "changed")
    # a file or span has no successor, whatever the observation says
    for r in (span, file):
        assert act(r, Observation(r.id, "changed", None, Observed("src/b.py", 7, 9, SUCCESSOR))) == \
            ("refuse", "changed")


def test_unsettled_content_keeps_exact_and_unknown_and_downgrades_every_other_verdict():
    """A verdict read from a dirty file whose stored form a filter driver makes (issue 20)."""
    at = Observed("a.cfg", 1, 2)
    for outcome in ("changed", "relocated", "deleted"):
        o = Observation("cgc_x", outcome, None, at if outcome != "deleted" else None)
        for cited, observed in ((True, False), (False, True), (True, True)):
            got = d.unsettled_content(o, cited_unsettled=cited, observed_unsettled=observed)
            assert (got.outcome, got.reason, got.observed) == ("unknown", "filter-driver", None)
        assert d.unsettled_content(o, cited_unsettled=False, observed_unsettled=False) is o
    for o in (Observation("cgc_x", "exact", None, at), Observation("cgc_x", "unknown", "racing")):
        assert d.unsettled_content(o, cited_unsettled=True, observed_unsettled=True) is o


# --- cosmetic change (SPEC §6.3a) -----------------------------------------------------------------

TOK = "t" * 32


def test_change_kind_cosmetic_only_for_a_changed_citation_at_its_place_with_equal_token_hashes():
    sym = receipt("symbol", token_hash=TOK)
    at = Observation(sym.id, "changed", None, Observed("src/a.py", 3, 6, CITED_HANDLE))
    assert d.change_kind(sym, at, TOK) == "cosmetic" == d.COSMETIC
    assert d.change_kind(sym, at, "u" * 32) is None  # other tokens: a real change
    assert d.change_kind(sym, at, None) is None  # the tokens cannot decide now
    assert d.change_kind(receipt("symbol"), at, TOK) is None  # a receipt without a token hash
    assert d.change_kind(receipt("symbol"), at, None) is None  # ... and none now: never "equal"
    assert d.change_kind(receipt("symbol", token_hash=""), at, "") is None
    # a successor is another symbol: never cosmetic, even with the same tokens (a rename)
    succ = Observation(sym.id, "changed", None, Observed("src/a.py", 3, 6, "cgs_" + "9" * 32))
    assert d.change_kind(sym, succ, TOK) is None
    for outcome in ("exact", "relocated", "deleted", "unknown"):
        assert d.change_kind(sym, at._replace(outcome=outcome), TOK) is None
    assert d.change_kind(sym, at._replace(observed=None), TOK) is None
    span = receipt("span", token_hash=TOK)
    here = Observation(span.id, "changed", None, Observed("src/a.py"))
    assert d.change_kind(span, here, TOK) == "cosmetic"
    assert d.change_kind(span, here, "u" * 32) is None
    assert d.change_kind(span, here._replace(observed=Observed("src/b.py")), TOK) is None
    f = receipt("file", token_hash=TOK)  # a file citation has no fragment: never cosmetic
    assert d.change_kind(f, Observation(f.id, "changed", None, Observed("src/a.py")), TOK) is None


def test_refresh_accepts_a_cosmetic_change_only_when_asked_and_where_it_has_lines():
    sym = receipt("symbol", token_hash=TOK)
    cos = Observation(sym.id, "changed", None, Observed("src/a.py", 3, 6, CITED_HANDLE), change="cosmetic")
    kw = dict(accept_relocated=True, accept_successor=True)
    assert d.refresh_action(sym, cos, **kw) == (d.REFUSE, "cosmetic-not-accepted")
    assert d.refresh_action(sym, cos, **kw, accept_cosmetic=True) == (d.REFRESH, "cosmetic")
    assert d.refresh_action(sym, cos._replace(change=None), **kw, accept_cosmetic=True) == (d.REFUSE, "changed")
    assert d.refresh_action(sym, cos._replace(observed=None), **kw, accept_cosmetic=True) == (d.REFUSE, "no-location")
    span = receipt("span", token_hash=TOK)
    no_lines = Observation(span.id, "changed", None, Observed("src/a.py"), change="cosmetic")
    assert d.refresh_action(span, no_lines, **kw, accept_cosmetic=True) == (d.REFUSE, "no-location")
    lines = no_lines._replace(observed=Observed("src/a.py", 11, 14))
    assert d.refresh_action(span, lines, **kw, accept_cosmetic=True) == (d.REFRESH, "cosmetic")
    # a cosmetic detail never rides on another outcome
    assert d.refresh_action(sym, cos._replace(outcome="deleted"), **kw, accept_cosmetic=True) == (d.REFUSE, "deleted")


def test_dependency_change_in_place_cosmetic_or_not():
    """``dependency_change`` at the handle (SPEC §21, §6.3a): the recorded fragment is no
    change; other bytes with the recorded token hash are comments/formatting only — no
    change; other tokens, or no recorded or computed hash, are ``changed`` there."""
    now = SymbolRow("cgs_" + "1" * 32, "a.py", "python", "function", "dep", 1, 2, "e" * 32, "b" * 32)
    same = now._replace(fragment_hash="f" * 32)
    assert d.dependency_change("f" * 32, DependencyEvidence(same)) is None
    assert d.dependency_change("f" * 32, DependencyEvidence(same, token_hash="9" * 32), TOK) is None
    assert d.dependency_change("f" * 32, DependencyEvidence(now)) == ("changed", now)
    assert d.dependency_change("f" * 32, DependencyEvidence(now, token_hash=TOK), TOK) is None
    assert d.dependency_change("f" * 32, DependencyEvidence(now, token_hash="9" * 32), TOK) == ("changed", now)
    assert d.dependency_change("f" * 32, DependencyEvidence(now, token_hash=TOK), None) == ("changed", now)
    assert d.dependency_change("f" * 32, DependencyEvidence(now, token_hash=None), None) == ("changed", now)
    assert d.dependency_change("f" * 32, DependencyEvidence(now, token_hash=""), "") == ("changed", now)
