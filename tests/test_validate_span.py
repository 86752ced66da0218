"""SPEC §6.2 (span citations), every row built with real git operations.

The cited span is src/retry.py#L4-L6 (RetryPolicy's first three lines, see
validation_helpers.RETRY); each test asserts outcome, reason and observed location.
"""

from __future__ import annotations

import pytest
from validation_helpers import (
    RETRY,
    SPAN_4_6,
    assert_obs,
    cite,
    drop_commit_from_odb,
    index,
    loc,
    observe,
)

REF = "src/retry.py#L4-L6"


@pytest.fixture
def cited(repo, home):
    repo.write("README.md", "readme\n")
    repo.commit("c0")
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    return cite(home, repo, REF)


def check(repo, home, mem, outcome, reason, observed):
    index(repo, home)
    assert_obs(observe(home, repo, mem), outcome, reason, observed)


# --- file at path ------------------------------------------------------------------------


def test_exact_when_other_lines_of_the_file_change(repo, home, cited):
    repo.write("src/retry.py", RETRY.replace("return 42", "return 43"))  # line 13
    repo.commit("edit below the span")
    check(repo, home, cited, "exact", None, loc("src/retry.py", 4, 6))


def test_exact_wins_over_copies_elsewhere_in_the_file(repo, home, cited):
    repo.write("src/retry.py", RETRY + "\n\n" + SPAN_4_6)
    repo.commit("a copy below")
    check(repo, home, cited, "exact", None, loc("src/retry.py", 4, 6))


def test_relocated_within_the_file_when_lines_are_inserted_above(repo, home, cited):
    repo.write("src/retry.py", "# header\n# more\n" + RETRY)
    repo.commit("insert above")
    check(repo, home, cited, "relocated", None, loc("src/retry.py", 6, 8))


def test_ambiguous_when_the_bytes_occur_twice_elsewhere_in_the_file(repo, home, cited):
    repo.write("src/retry.py", "# header\n" + RETRY + "\n\n" + SPAN_4_6)
    repo.commit("shift and duplicate")
    check(repo, home, cited, "unknown", "ambiguous-relocation", None)


def test_changed_when_the_bytes_occur_nowhere_in_the_file(repo, home, cited):
    repo.write("src/retry.py", RETRY.replace("2 ** attempt", "3 ** attempt"))
    repo.write("src/copy.py", RETRY)  # the cited bytes elsewhere never rescue a changed file
    repo.commit("edit inside the span")
    check(repo, home, cited, "changed", None, loc("src/retry.py"))


def test_whitespace_inside_the_span_is_a_change(repo, home, cited):
    """The bytes changed: changed — of layout only (SPEC §6.3a), so the observation says
    cosmetic and where the span's lines are now."""
    repo.write("src/retry.py", RETRY.replace("        return 2 ** attempt", "        return 2 **  attempt"))
    repo.commit("whitespace")
    check(repo, home, cited, "changed", None, loc("src/retry.py", 4, 6))
    assert observe(home, repo, cited)["change"] == "cosmetic"


def test_crlf_conversion_is_a_change(repo, home, cited):
    repo.write("src/retry.py", RETRY.replace("\n", "\r\n"))
    repo.commit("crlf")
    check(repo, home, cited, "changed", None, loc("src/retry.py"))


# --- file gone ---------------------------------------------------------------------------


def test_relocated_with_same_lines_when_the_whole_file_moved(repo, home, cited):
    repo.mv("src/retry.py", "lib/retry.py")
    repo.commit("git mv")
    check(repo, home, cited, "relocated", None, loc("lib/retry.py", 4, 6))


def test_ambiguous_when_the_whole_file_exists_at_two_paths(repo, home, cited):
    repo.mv("src/retry.py", "lib/a.py")
    repo.write("lib/b.py", RETRY)
    repo.commit("git mv + copy")
    check(repo, home, cited, "unknown", "ambiguous-relocation", None)


def test_relocated_into_exactly_one_added_file(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("src/backoff.py", "import math\n\n" + SPAN_4_6 + "\n\ndef other():\n    pass\n")
    repo.commit("split: part of retry.py lives on in a new file")
    check(repo, home, cited, "relocated", None, loc("src/backoff.py", 3, 5))


def test_ambiguous_when_the_bytes_are_in_several_added_files(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("src/backoff.py", "import math\n\n" + SPAN_4_6)
    repo.write("src/policy.py", SPAN_4_6 + "\n\nX = 1\n")
    repo.commit("two new files carry the bytes")
    check(repo, home, cited, "unknown", "ambiguous-relocation", None)


def test_ambiguous_when_one_added_file_holds_the_bytes_twice(repo, home, cited):
    repo.rm("src/retry.py")
    repo.write("src/backoff.py", SPAN_4_6 + "\n\n" + SPAN_4_6)
    repo.commit("one new file, two copies")
    check(repo, home, cited, "unknown", "ambiguous-relocation", None)


def test_bytes_in_a_file_that_existed_at_capture_do_not_rescue(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.write("src/old.py", "# older file\n" + SPAN_4_6)
    repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, REF)
    repo.rm("src/retry.py")
    repo.commit("delete")
    # Only files *added* since the capture commit are searched (bounded diff).
    check(repo, home, mem, "deleted", None, None)


def test_deleted_when_capture_commit_known_and_diff_complete(repo, home, cited):
    repo.rm("src/retry.py")
    repo.commit("git rm")
    check(repo, home, cited, "deleted", None, None)


def test_unknown_when_the_capture_commit_is_gone(repo, home, cited):
    c0 = repo.git("rev-parse", "HEAD~1")
    repo.git("reset", "-q", "--hard", c0)  # history rewritten: the capture commit is dropped
    drop_commit_from_odb(repo)
    assert repo.git("cat-file", "-t", cited_commit(home, cited), check=False) == ""
    check(repo, home, cited, "unknown", "incomplete-coverage", None)


def test_dirty_worktree_overlay_counts_untracked_files_as_added(repo, home, cited):
    repo.delete("src/retry.py")  # dirty deletion, not committed
    repo.write("scratch/new.py", "# wip\n" + SPAN_4_6 + "\n")  # untracked, not ignored
    check(repo, home, cited, "relocated", None, loc("scratch/new.py", 2, 4))


def cited_commit(home, mem) -> str:
    from citegraph.memory.lifecycle.store import MemoryStore

    with MemoryStore.open(home) as ms:
        return ms.require(mem["id"]).citations[0].commit


def test_gone_files_share_one_tree_diff_per_capture_commit(repo, home, monkeypatch):
    """Spans of one batch captured at one commit whose files are gone search the files
    added since that commit: the tree diff is made once for all of them, not per span."""
    from validation_helpers import verdicts

    from citegraph.validator import evidence

    repo.write("src/retry.py", RETRY)
    repo.write("src/copy.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    mems = [cite(home, repo, "src/retry.py#L4-L6"), cite(home, repo, "src/copy.py#L4-L6"),
            cite(home, repo, "src/retry.py#L8-L9")]
    repo.rm("src/retry.py")
    repo.rm("src/copy.py")
    repo.write("src/backoff.py", "import math\n\n" + SPAN_4_6)
    repo.commit("both gone; the first lines live on in a new file")
    index(repo, home)
    calls = []
    real = evidence.SnapshotEvidence._added_since_uncached

    def counting(self, *args):
        calls.append(args[1:])
        return real(self, *args)

    monkeypatch.setattr(evidence.SnapshotEvidence, "_added_since_uncached", counting)
    data = verdicts(home, repo, memory_ids=[m["id"] for m in mems])
    outcomes = sorted(c["outcome"] for m in data["memories"] for c in m["citations"])
    assert outcomes == ["deleted", "relocated", "relocated"], outcomes
    assert len(calls) == 1
