"""SPEC §6.3 (symbol citations), §6.4 (coverage per citation) and the extractor-version
precondition, built with real git operations (Python sources).

Cited: src/retry.py::helper (function, lines 12-13 of validation_helpers.RETRY) and
src/retry.py::RetryPolicy.next_delay (method, lines 5-6).
"""

from __future__ import annotations

import dataclasses

import pytest
from validation_helpers import (
    HELPER,
    RETRY,
    assert_obs,
    cite,
    drop_commit_from_odb,
    handle,
    index,
    loc,
    memory_verdict,
    observe,
)

import citegraph.validator.capture as capture_mod
import citegraph.validator.evidence as evidence_mod
from citegraph.indexer.extract import EXTRACTOR_VERSION

HELPER_REF = "src/retry.py::helper"
H_HELPER = handle("src/retry.py", "helper")
H_NEXT = handle("src/retry.py", "RetryPolicy.next_delay", "method")
BROKEN_WITH_NAME = "def broken(:\n    return helper()\n"  # parses with error nodes
BROKEN_WITHOUT_NAME = "def broken(:\n    return other()\n"
RETRY_WITHOUT_HELPER = RETRY.split("\n\ndef helper")[0] + "\n"


@pytest.fixture
def cited(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.write("src/other.py", "X = 1\n")
    repo.commit("c1")
    index(repo, home)
    return cite(home, repo, HELPER_REF)


def check(repo, home, mem, outcome, reason, observed):
    res = index(repo, home)
    assert_obs(observe(home, repo, mem), outcome, reason, observed)
    return res


# --- handle exists -------------------------------------------------------------------------


def test_exact_when_lines_moved_reports_new_lines(repo, home):
    # Acceptance 4: an unrelated edit elsewhere in the same file keeps the citation exact.
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, HELPER_REF, "src/retry.py::RetryPolicy.next_delay")
    edited = ("import time\nimport math\n\n\ndef first():\n    return math.pi\n" + RETRY[len("import time\n"):])
    edited = edited.replace("self.attempts = 0", "self.attempts = -1")  # edit another method
    repo.write("src/retry.py", edited)
    repo.commit("unrelated edits in the same file")
    index(repo, home)
    m = memory_verdict(home, repo, mem)
    helper_c, next_c = m["citations"]
    assert_obs(helper_c, "exact", None, loc("src/retry.py", 17, 18, H_HELPER))
    assert_obs(next_c, "exact", None, loc("src/retry.py", 10, 11, H_NEXT))
    assert (m["freshness"], m["status"]) == ("fresh", "exact")


def test_whitespace_only_change_inside_the_symbol_is_changed(repo, home, cited):
    # Acceptance 4: no normalisation — an extra space is a real change.
    repo.write("src/retry.py", RETRY.replace("    return 42", "    return  42"))
    repo.commit("whitespace")
    check(repo, home, cited, "changed", None, loc("src/retry.py", 12, 13, H_HELPER))


def test_trailing_whitespace_inside_the_symbol_is_changed(repo, home, cited):
    repo.write("src/retry.py", RETRY.replace("def helper():\n", "def helper(): \n"))
    repo.commit("trailing space")
    check(repo, home, cited, "changed", None, loc("src/retry.py", 12, 13, H_HELPER))


def test_comment_before_the_symbol_is_not_part_of_it(repo, home, cited):
    repo.write("src/retry.py", RETRY.replace("def helper", "# the helper\ndef helper"))
    repo.commit("comment above")
    check(repo, home, cited, "exact", None, loc("src/retry.py", 13, 14, H_HELPER))


def test_changed_body_and_a_copy_elsewhere_never_rescues_it(repo, home, cited):
    repo.write("src/retry.py", RETRY.replace("return 42", "return 43"))
    repo.write("lib/copy.py", HELPER)  # the exact cited fragment, elsewhere
    repo.commit("edit + copy")
    check(repo, home, cited, "changed", None, loc("src/retry.py", 12, 13, H_HELPER))


# --- handle absent: relocation -----------------------------------------------------------------


def test_relocated_by_git_mv_new_handle_same_fragment(repo, home, cited):
    repo.mv("src/retry.py", "lib/retry.py")
    repo.commit("git mv")
    check(repo, home, cited, "relocated", None, loc("lib/retry.py", 12, 13, handle("lib/retry.py", "helper")))


def test_relocated_when_moved_into_another_existing_file(repo, home, cited):
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.write("src/other.py", "X = 1\n\n\n" + HELPER)
    repo.commit("move helper to other.py")
    check(repo, home, cited, "relocated", None, loc("src/other.py", 4, 5, handle("src/other.py", "helper")))


def test_ambiguous_relocation_with_two_identical_copies(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("lib/a.py", HELPER)
    repo.write("lib/b.py", "Y = 2\n\n\n" + HELPER)
    repo.commit("two copies")
    check(repo, home, cited, "unknown", "ambiguous-relocation", None)


# --- handle absent: successors -------------------------------------------------------------


def test_changed_with_successor_by_qualified_name_in_another_file(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("lib/util.py", "def helper():\n    return 43\n")
    repo.commit("moved and edited")
    check(repo, home, cited, "changed", None, loc("lib/util.py", 1, 2, handle("lib/util.py", "helper")))


def test_changed_with_successor_by_pure_rename(repo, home, cited):
    repo.write("src/retry.py", RETRY.replace("def helper", "def assist"))
    repo.commit("rename")
    check(repo, home, cited, "changed", None, loc("src/retry.py", 12, 13, handle("src/retry.py", "assist")))


def test_pure_rename_into_another_file(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("lib/util.py", "Z = 0\n\n\ndef assist():\n    return 42\n")
    repo.commit("rename and move")
    check(repo, home, cited, "changed", None, loc("lib/util.py", 4, 5, handle("lib/util.py", "assist")))


def test_ambiguous_successor_two_same_names(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("lib/a.py", "def helper():\n    return 1\n")
    repo.write("lib/b.py", "def helper():\n    return 2\n")
    repo.commit("two successors")
    check(repo, home, cited, "unknown", "ambiguous-successor", None)


def test_ambiguous_successor_name_match_plus_rename_match(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("lib/a.py", "def helper():\n    return 1\n")  # same name, other body
    repo.write("lib/b.py", "def assist():\n    return 42\n")  # same body, other name
    repo.commit("two kinds of successor")
    check(repo, home, cited, "unknown", "ambiguous-successor", None)


def test_other_kind_with_same_name_is_not_a_successor(repo, home, cited):
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER + "\n\nclass helper:\n    pass\n")
    repo.commit("a class now has the name")
    check(repo, home, cited, "deleted", None, None)


# --- deleted and coverage (§6.4) -----------------------------------------------------------------


def test_deleted_with_full_coverage(repo, home, cited):
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.commit("delete helper")
    res = check(repo, home, cited, "deleted", None, None)
    assert res.coverage["python"]["partial"] == 0 and res.coverage["python"]["skipped"] == 0


def test_incomplete_coverage_when_a_partial_file_contains_the_name(repo, home, cited):
    # Acceptance 5: a broken .py file that mentions the name makes absence unprovable...
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.write("src/broken.py", BROKEN_WITH_NAME)
    repo.commit("delete helper, add a broken file")
    res = check(repo, home, cited, "unknown", "incomplete-coverage", None)
    assert res.coverage["python"]["partial"] == 1


def test_deleted_when_the_partial_file_does_not_contain_the_name(repo, home, cited):
    # ...while one that cannot hold the evidence does not (coverage is per citation).
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.write("src/broken.py", BROKEN_WITHOUT_NAME)
    repo.commit("delete helper, add a broken file")
    res = check(repo, home, cited, "deleted", None, None)
    assert res.coverage["python"]["partial"] == 1


def test_relocation_needs_coverage(repo, home, cited):
    repo.mv("src/retry.py", "lib/retry.py")
    repo.write("src/broken.py", BROKEN_WITH_NAME)
    repo.commit("move + broken file")
    check(repo, home, cited, "unknown", "incomplete-coverage", None)


def test_unique_successor_needs_coverage(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("lib/util.py", "def helper():\n    return 43\n")
    repo.write("src/broken.py", BROKEN_WITH_NAME)
    repo.commit("successor + broken file")
    check(repo, home, cited, "unknown", "incomplete-coverage", None)


def test_skipped_file_of_the_language_counts_as_uncovered(repo, home):
    repo.write(".citegraph.toml", '[index]\nexclude = ["gen/*"]\n')
    repo.write("src/retry.py", RETRY)
    repo.write("gen/generated.py", "VALUE = helper()\n")  # skipped/excluded, holds the name
    repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, HELPER_REF)
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.commit("delete helper")
    res = check(repo, home, mem, "unknown", "incomplete-coverage", None)
    assert res.coverage["python"]["skipped"] == 1
    repo.write("gen/generated.py", "VALUE = 1\n")
    repo.commit("generated file no longer mentions it")
    check(repo, home, mem, "deleted", None, None)


# A partial file whose error is local (rule 3 of indexer/damage.py: the statement and its
# neighbouring definitions) and that mentions the cited name far from it.
LOCAL_ERROR_WITH_NAME = ("def uses():\n    return helper()\n\n\ndef a():\n    return 1\n\n\n"
                         "x = 1 @ @\n\n\ndef b():\n    return 2\n")


def test_partial_file_whose_damage_misses_the_name_clears_the_citation(repo, home, cited):
    # Issue 15: the name occurs in the partial file, but nowhere near its damage region.
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.write("src/local.py", LOCAL_ERROR_WITH_NAME)
    repo.commit("delete helper, add a file with a local parse error")
    res = check(repo, home, cited, "deleted", None, None)
    assert res.coverage["python"]["partial"] == 1
    # the same file with the mention inside the damaged statement: unknown again
    repo.write("src/local.py", LOCAL_ERROR_WITH_NAME.replace("x = 1 @ @", "x = helper @ @"))
    repo.commit("mention it in the broken statement")
    check(repo, home, cited, "unknown", "incomplete-coverage", None)


def test_relocation_into_a_partial_file_clear_of_its_damage(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("lib/moved.py", HELPER + "\n\n" + LOCAL_ERROR_WITH_NAME)
    repo.commit("helper moves into a file with a local parse error")
    check(repo, home, cited, "relocated", None, loc("lib/moved.py", 1, 2, handle("lib/moved.py", "helper")))


def test_refinement_needs_the_cited_fragment(repo, home):
    # Cited from a dirty edit that never reaches the object database: the fragment and body
    # cannot be searched for, so only the plain byte search may clear the partial file.
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    repo.write("src/retry.py", RETRY.replace("return 42", "return 41"))  # dirty
    index(repo, home)
    mem = cite(home, repo, HELPER_REF)
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.write("src/local.py", LOCAL_ERROR_WITH_NAME)
    repo.commit("delete helper, add a file with a local parse error")
    check(repo, home, mem, "unknown", "incomplete-coverage", None)
    repo.write("src/local.py", LOCAL_ERROR_WITH_NAME.replace("helper", "other"))
    repo.commit("the partial file no longer names it")
    check(repo, home, mem, "deleted", None, None)


def test_uncovered_file_of_another_language_does_not_block_deletion(repo, home, cited):
    repo.write("src/retry.py", RETRY_WITHOUT_HELPER)
    repo.write("docs/notes.txt", "helper() was removed\n")  # unsupported-language, not Python
    repo.commit("delete helper")
    check(repo, home, cited, "deleted", None, None)


# --- extractor version (§6 precondition) -------------------------------------------------------


def _cite_with_old_extractor(monkeypatch, home, repo, *refs):
    monkeypatch.setattr(capture_mod, "EXTRACTOR_VERSION", "cgx-0-old")
    mem = cite(home, repo, *refs)
    monkeypatch.setattr(capture_mod, "EXTRACTOR_VERSION", EXTRACTOR_VERSION)
    return mem


def test_extractor_mismatch_revalidates_when_blob_reextracts_to_same_fragment(repo, home, monkeypatch):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    mem = _cite_with_old_extractor(monkeypatch, home, repo, HELPER_REF, "src/retry.py#L12-L13",
                                   "src/retry.py")
    repo.write("src/retry.py", "# moved down\n" + RETRY)
    repo.commit("lines move")
    index(repo, home)
    sym_c, span_c, file_c = memory_verdict(home, repo, mem)["citations"]
    assert_obs(sym_c, "exact", None, loc("src/retry.py", 13, 14, H_HELPER))
    # File and span citations are judged over raw bytes and blob ids that no extractor
    # produces, so the extractor version does not gate them.
    assert_obs(span_c, "relocated", None, loc("src/retry.py", 13, 14))
    assert_obs(file_c, "changed", None, loc("src/retry.py"))


def test_extractor_mismatch_when_the_original_blob_is_gone(repo, home, monkeypatch):
    repo.write("README.md", "r\n")
    repo.commit("c0")
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    old = _cite_with_old_extractor(monkeypatch, home, repo, HELPER_REF)
    control = cite(home, repo, HELPER_REF, topic="control")
    # Rewrite history: the capture commit and its blob leave the object database.
    repo.write("src/retry.py", RETRY.replace("return 42", "return 43"))
    repo.git("commit", "-q", "--amend", "-a", "-m", "c1 rewritten")
    drop_commit_from_odb(repo)
    index(repo, home)
    assert_obs(observe(home, repo, old), "unknown", "extractor-mismatch", None)
    assert_obs(observe(home, repo, control), "changed", None, loc("src/retry.py", 12, 13, H_HELPER))


def test_extractor_mismatch_when_reextraction_gives_another_fragment(repo, home, monkeypatch, cited):
    mem = _cite_with_old_extractor(monkeypatch, home, repo, HELPER_REF)
    real = evidence_mod.extract

    def new_extractor(language, data, *a, **kw):  # an extractor whose fragments differ
        facts = real(language, data, *a, **kw)
        facts.symbols[:] = [dataclasses.replace(s, fragment_hash="f" * 32) for s in facts.symbols]
        return facts

    monkeypatch.setattr(evidence_mod, "extract", new_extractor)
    index(repo, home)
    assert_obs(observe(home, repo, mem), "unknown", "extractor-mismatch", None)
    # The current-version receipt of the same symbol is unaffected.
    assert_obs(observe(home, repo, cited), "exact", None, loc("src/retry.py", 12, 13, H_HELPER))
