"""`citegraph check --base REV [--head REV]` (SPEC §20): findings of a pull-request-shaped
change in every format, exit codes, the unindexable base, and the scoping rule — the
findings of a check equal those of validating *every* citation at base and at head."""

from __future__ import annotations

import json
import re
import subprocess
from types import SimpleNamespace

import pygit2
import pytest
from gitutil import GIT_ENV, GitRepo
from validation_helpers import cite, index

from citegraph.graph.store import Home
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.memory.review import check as chk
from citegraph.memory.review import check_formats
from citegraph.validator import diff_scope, pipeline

REMOTE = "https://github.com/acme/payments.git"
RETRY = ("def next_delay(attempt):\n    return 2 ** attempt\n\n\n"
         "def keep():\n    return 1\n\n\n"
         "def gone():\n    return 0\n")
TEXTS = {"edit": "Retry delays double each attempt.", "move": "Move helpers live in one module.",
         "gone": "gone() is the fallback <b>*never*</b> [removed](http://x)", "keep": "keep() returns one.",
         "other": "Other code is untouched."}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """main: cited code; branch pr: edits next_delay, moves src/move.py, deletes gone();
    branch unrelated: edits a file nobody cites."""
    root = tmp_path_factory.mktemp("check")
    repo, home = GitRepo(root / "repo", remote=REMOTE), Home.open(root / "home")
    repo.write("src/retry.py", RETRY)
    repo.write("src/move.py", "def moved(x):\n    return x * 5\n")
    repo.write("src/other.py", "def other():\n    return 'o'\n")
    repo.write("src/plain.py", "def plain():\n    return 'p'\n")
    repo.write("README.md", "payments\n")
    base = repo.commit("c1")
    index(repo, home)
    mems = {
        "edit": cite(home, repo, "src/retry.py::next_delay", text=TEXTS["edit"], topic="edit"),
        "move": cite(home, repo, "src/move.py", text=TEXTS["move"], topic="move"),
        "gone": cite(home, repo, "src/retry.py::gone", text=TEXTS["gone"], topic="gone"),
        "keep": cite(home, repo, "src/retry.py::keep", "README.md#L1-L1", text=TEXTS["keep"], topic="keep"),
        "other": cite(home, repo, "src/other.py::other", text=TEXTS["other"], topic="other"),
    }
    repo.git("checkout", "-q", "-b", "pr")
    repo.write("src/retry.py", RETRY.replace("2 ** attempt", "3 ** attempt").replace(
        "\n\n\ndef gone():\n    return 0\n", "\n"))
    repo.mv("src/move.py", "lib/move.py")
    pr = repo.commit("pr: edit, move, delete")
    repo.git("checkout", "-q", "-b", "unrelated", "main")
    repo.write("src/plain.py", "def plain():\n    return 'q'\n")
    unrelated = repo.commit("unrelated")
    repo.git("checkout", "-q", "pr")
    return SimpleNamespace(repo=repo, home=home, mems=mems, base=base, pr=pr, unrelated=unrelated)


def run(run_cli, w, *args, env=None):
    return run_cli("--home", str(w.home.root), "check", *args, cwd=w.repo.root, env=env)


EXPECTED = {  # memory → (rule, level, location path, start line, file level)
    "edit": ("citegraph/changed", "error", "src/retry.py", 2, False),
    "gone": ("citegraph/deleted", "error", "src/retry.py", 6, False),
    "move": ("citegraph/relocated", "warning", "lib/move.py", 1, True),
}


def by_memory(w, findings):
    names = {m["id"]: k for k, m in w.mems.items()}
    return {names[f["memory"]["id"]]: f for f in findings}


def test_pr_branch_gives_exactly_the_three_findings_in_json(run_cli, world):
    p = run(run_cli, world, "--base", "main", "--format", "json")
    assert p.returncode == 1, p.stderr  # stale findings reach --fail-on stale (the default)
    assert "indexing head" in p.stderr and "from the object database" in p.stderr
    doc = json.loads(p.stdout)
    assert doc["status"] == "findings" and doc["exit_code"] == 1
    assert doc["base"]["commit"] == world.base and doc["head"]["commit"] == world.pr
    got = by_memory(world, doc["findings"])
    assert {k: (f["rule"], f["level"], f["location"]["path"], f["location"]["start_line"],
                f["location"]["file_level"]) for k, f in got.items()} == EXPECTED
    assert got["edit"]["base"]["outcome"] == "exact" and got["edit"]["head"]["outcome"] == "changed"
    assert got["move"]["head"]["observed"]["path"] == "lib/move.py"
    assert got["gone"]["location"]["side"] == "head"  # the file survives: where the code was removed
    s = doc["summary"]
    assert (s["findings"], s["stale"], s["changed"], s["deleted"], s["relocated"], s["unknown"]) == (3, 2, 1, 1, 1, 0)
    # keep (same file, unchanged symbol) was re-validated and stays exact: no finding; its
    # README span and the other memory are untouched (not validated at all)
    assert s["citations"] == 6 and s["affected_citations"] == 4 and s["untouched_citations"] == 2
    assert doc["diff"] == {"paths": 3, "added": 1, "deleted": 1, "modified": 1}


def test_pr_branch_in_sarif_text_and_markdown(run_cli, world, tmp_path):
    out = tmp_path / "check.sarif"
    p = run(run_cli, world, "--base", "main", "--format", "sarif", "--out", str(out))
    assert p.returncode == 1, p.stderr
    assert p.stdout == "" and "2 stale, 1 relocated, 0 unknown" in p.stderr
    sarif = json.loads(out.read_text())
    (r,) = sarif["runs"]
    rules = [x["id"] for x in r["tool"]["driver"]["rules"]]
    assert rules == ["citegraph/changed", "citegraph/deleted", "citegraph/relocated", "citegraph/unknown",
                     "citegraph/dependency-changed"]
    results = {}
    for res in r["results"]:
        loc = res["locations"][0]["physicalLocation"]
        results[res["properties"]["memoryId"]] = (res["ruleId"], res["level"], loc["artifactLocation"]["uri"],
                                                  loc["region"]["startLine"], res["properties"]["fileLevel"])
        assert rules[res["ruleIndex"]] == res["ruleId"]
        assert res["properties"]["topic"] in res["message"]["text"]
    assert {k: results[m["id"]] for k, m in world.mems.items() if m["id"] in results} == EXPECTED
    assert r["versionControlProvenance"] == [{"repositoryUri": "https://github.com/acme/payments",
                                              "revisionId": world.pr}]
    gone = next(x for x in r["results"] if x["ruleId"] == "citegraph/deleted")
    # the memory is quoted as data: escaped quotes, no markup interpreted
    assert '"gone() is the fallback <b>*never*</b> [removed](http://x)"' in gone["message"]["text"]

    t = run(run_cli, world, "--base", "main")
    assert t.returncode == 1
    lines = t.stdout.splitlines()
    assert "2 stale, 1 relocated, 0 unknown" in lines[0]
    assert sorted(ln.split()[0] + " " + ln.split()[1] + " " + ln.split()[2] for ln in lines[1:4]) == [
        "error src/retry.py:2 changed", "error src/retry.py:6 deleted", "warning lib/move.py:1 relocated"]

    md = run(run_cli, world, "--base", "main", "--format", "markdown").stdout
    head, _, rest = md.partition("| finding |")
    assert "2 stale, 1 relocated, 0 unknown" in head  # counts first
    assert "| changed | error | 1 |" in md and "| relocated | warning | 1 |" in md
    items = [ln for ln in md.splitlines() if ln.startswith("- **")]
    assert [ln.split("**")[1] for ln in items] == ["changed", "deleted", "relocated"]
    assert "<b>" not in md and "&lt;b&gt;" in md and r"\[removed\]\(http://x\)" in md
    assert "`lib/move.py`" in md


def test_fingerprints_are_stable_across_reruns_and_line_moves(world, tmp_path):
    first = chk.run_check(world.home, base="main", head="pr", repo_path=world.repo.root)
    again = chk.run_check(world.home, base="main", head="pr", repo_path=world.repo.root)
    fp = {f.memory["id"]: f.fingerprint for f in first.findings}
    assert fp == {f.memory["id"]: f.fingerprint for f in again.findings}
    # a later commit on the branch moves the edited function down: new lines, same alert
    clone = GitRepo(tmp_path / "moved", remote=REMOTE)
    clone.git("fetch", "-q", str(world.repo.root), "pr:pr", "main:refs/remotes/origin/main")
    clone.git("checkout", "-q", "pr")
    clone.write("src/retry.py", "import math\n\n\n" + clone.read("src/retry.py"))
    clone.commit("shift")
    shifted = chk.run_check(world.home, base="origin/main", repo_path=clone.root)
    moved = {f.memory["id"]: (f.fingerprint, f.location["start_line"]) for f in shifted.findings}
    edit = world.mems["edit"]["id"]
    assert moved[edit] == (fp[edit], 5)
    sarif = check_formats.to_sarif(shifted)
    lh = {x["properties"]["memoryId"]: x["partialFingerprints"]["primaryLocationLineHash"]
          for x in sarif["runs"][0]["results"]}
    assert lh[edit] == f"{fp[edit]}:1"


def test_an_unrelated_change_gives_nothing_and_exit_0(run_cli, world):
    p = run(run_cli, world, "--base", "main", "--head", "unrelated", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["status"] == "clean" and doc["findings"] == [] and doc["unchanged"] == []
    assert doc["summary"]["affected_citations"] == 0 and doc["summary"]["untouched_citations"] == 6
    sarif = json.loads(run(run_cli, world, "--base", "main", "--head", "unrelated", "--format", "sarif").stdout)
    assert sarif["runs"][0]["results"] == [] and sarif["runs"][0]["invocations"][0]["executionSuccessful"]
    md = run(run_cli, world, "--base", "main", "--head", "unrelated", "--format", "markdown")
    assert md.returncode == 0 and "0 stale, 0 relocated, 0 unknown" in md.stdout


def test_an_unindexable_base_is_unknown_with_exit_2_in_every_format(run_cli, world, tmp_path):
    """A shallow clone (what actions/checkout gives by default) lacks the base commit."""
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "pr", f"file://{world.repo.root}",
                    str(shallow)], check=True, env={**GIT_ENV}, capture_output=True, timeout=60)
    subprocess.run(["git", "remote", "set-url", "origin", REMOTE], cwd=shallow, check=True, timeout=30)
    for fmt in ("json", "sarif", "markdown", "text"):
        p = run_cli("--home", str(world.home.root), "check", "--base", world.base, "--format", fmt, cwd=shallow)
        assert p.returncode == 2, (fmt, p.stderr)
        assert p.stderr.count("\n") >= 1 and "Traceback" not in p.stderr
        assert "base-unavailable" in p.stderr and "fetch-depth: 0" in p.stderr
        # on a terminal stdout and stderr share the screen: the headline once (issue 22)
        assert (p.stdout + p.stderr).count("UNKNOWN — the change could not be checked") == (fmt == "text"), fmt
        if fmt == "json":
            doc = json.loads(p.stdout)
            assert doc["status"] == "unknown" and doc["exit_code"] == 2 and doc["findings"] == []
            assert doc["reason"].startswith("base-unavailable")
        elif fmt == "sarif":
            inv = json.loads(p.stdout)["runs"][0]["invocations"][0]
            assert inv["executionSuccessful"] is False and inv["exitCode"] == 2
            assert "base-unavailable" in inv["toolExecutionNotifications"][0]["message"]["text"]
        elif fmt == "markdown":
            assert "unknown" in p.stdout.splitlines()[0]
        else:
            assert "UNKNOWN" in p.stdout
    # --fail-on cannot turn an unknown check into a pass
    p = run_cli("--home", str(world.home.root), "check", "--base", "0" * 40, "--fail-on", "unknown", cwd=shallow)
    assert p.returncode == 2


def test_usage_errors_are_one_line_exit_2(run_cli, world, tmp_path):
    p = run(run_cli, world, "--base", "main", "--head", "no-such-branch")
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "no-such-branch" in p.stderr
    p = run(run_cli, world)
    assert p.returncode == 2 and "--base" in p.stderr
    p = run(run_cli, world, "--base", "main", "--out", str(tmp_path / "nodir" / "x.sarif"))
    assert p.returncode == 2 and "no such directory" in p.stderr
    p = run_cli("--home", str(world.home.root), "check", "--base", "main", cwd=tmp_path)
    assert p.returncode == 3 and "not a git repository" in p.stderr


def test_relocation_alone_passes_and_unknown_fails_only_with_fail_on_unknown(make_repo, home, run_cli):
    r = make_repo("dup")
    r.write("src/dup.py", "def d():\n    return 'd'\n")
    r.write("src/mv.py", "def m():\n    return 'm'\n")
    r.commit("c1")
    index(r, home)
    cite(home, r, "src/dup.py", topic="dup")
    cite(home, r, "src/mv.py", topic="mv")
    r.git("checkout", "-q", "-b", "pr")
    r.mv("src/mv.py", "lib/mv.py")
    r.commit("move only")
    p = run_cli("check", "--base", "main", "--format", "json", cwd=r.root)
    assert p.returncode == 0, p.stderr  # relocated is a warning: the memory stays fresh
    assert [f["rule"] for f in json.loads(p.stdout)["findings"]] == ["citegraph/relocated"]
    r.mv("src/dup.py", "a/dup.py")
    r.write("b/dup.py", "def d():\n    return 'd'\n")  # two copies: ambiguous
    r.commit("copy twice")
    p = run_cli("check", "--base", "main", "--format", "json", cwd=r.root)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (unk,) = [f for f in doc["findings"] if f["rule"] == "citegraph/unknown"]
    assert unk["level"] == "note" and unk["head"]["reason"] == "ambiguous-relocation" and unk["next_step"]
    assert unk["location"]["side"] == "base" and unk["location"]["file_level"]
    p = run_cli("check", "--base", "main", "--fail-on", "unknown", cwd=r.root)
    assert p.returncode == 1


def test_a_deleted_file_is_file_level_on_the_base_path(make_repo, home):
    r = make_repo("del")
    r.write("src/a.py", "def a():\n    return 1\n")
    r.write("src/b.py", "def b():\n    return 2\n")
    r.commit("c1")
    index(r, home)
    m = cite(home, r, "src/a.py::a", "src/b.py", topic="t")
    r.rm("src/a.py")
    r.commit("rm")
    rep = chk.run_check(home, base="HEAD~1", repo_path=r.root)
    (f,) = rep.findings
    assert f.memory["id"] == m["id"] and f.rule == "deleted"
    assert f.location == {"path": "src/a.py", "start_line": 1, "end_line": 1, "side": "base", "file_level": True,
                          "end_column": 1}
    assert rep.exit_code() == 1


def test_markdown_is_bounded_and_counts_come_first(make_repo, home):
    r = make_repo("many")
    src = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(60))
    r.write("m.py", src)
    r.commit("c1")
    index(r, home)
    for i in range(60):
        cite(home, r, f"m.py::f{i}", text=f"claim {i} " + "x" * 150, topic=f"t{i}")
    r.write("m.py", src.replace("return ", "return -"))
    r.commit("edit all")
    rep = chk.run_check(home, base="HEAD~1", repo_path=r.root)
    assert len(rep.findings) == 60
    full = check_formats.to_markdown(rep)
    assert full.count("\n- **changed**") == 60
    cut = check_formats.to_markdown(rep, limit=4000)
    assert len(cut) <= 4000
    shown = cut.count("\n- **changed**")
    assert 0 < shown < 60 and f"{60 - shown} more finding(s) not shown" in cut
    assert cut.index("60 stale") < cut.index("- **changed**")
    assert len(check_formats.to_markdown(rep)) <= check_formats.MAX_MARKDOWN_CHARS


# --- the scoping rule: untouched means the verdict cannot differ --------------------------------


def full_findings(home, repo_path, base, head):
    """What validating every citation at both sides finds (no scoping)."""
    with MemoryStore.open(home) as ms:
        mems = ms.load(where="status = 'active'")
    items = [pipeline.MemoryInput(m.id, m.citations) for m in mems if m.citations]
    b = pipeline.validate(home, items, pipeline.Scope.for_paths([str(repo_path)], at=base))
    h = pipeline.validate(home, items, pipeline.Scope.for_paths([str(repo_path)], at=head))
    bo = {(v.memory_id, o.citation_id): o for v in b.verdicts for o in v.observations}
    out = set()
    for v in h.verdicts:
        for o in v.observations:
            if diff_scope.change_kind(bo[(v.memory_id, o.citation_id)], o) == "finding":
                out.add((v.memory_id, o.citation_id, o.outcome, o.reason))
    return out


def test_findings_equal_validating_everything_for_global_evidence(make_repo, home):
    """Citations already broken at base, whose verdict depends on files elsewhere: a
    fragment that comes back in an added file (relocated), a span's bytes that appear in an
    added file (relocated), a name in a new file that cannot be parsed (coverage: unknown),
    a copy that makes a relocation ambiguous; plus untouched citations all around."""
    r = make_repo("global")
    r.write("pkg/a.py", "def lost():\n    return 'lost'\n\n\ndef stay():\n    return 's'\n")
    r.write("pkg/b.py", "def gone2():\n    return 'g2'\n")
    r.write("pkg/c.py", "def copied():\n    return 'c'\n")
    r.write("docs/notes.txt", "alpha\nbeta\ngamma\n")
    r.write("keep.txt", "keep\n")
    r.commit("c1")
    index(r, home)
    for topic, ref in (("lost", "pkg/a.py::lost"), ("gone2", "pkg/b.py::gone2"), ("span", "docs/notes.txt#L2-L3"),
                       ("copied", "pkg/c.py::copied"), ("stay", "pkg/a.py::stay"), ("keep", "keep.txt")):
        cite(home, r, ref, topic=topic)
    # base: everything cited is broken in some way, then the change under check
    r.write("pkg/a.py", "def stay():\n    return 's'\n")  # lost() deleted
    r.rm("pkg/b.py")  # gone2 deleted
    r.rm("docs/notes.txt")  # the span's file gone
    r.mv("pkg/c.py", "pkg/c2.py")  # copied relocated
    base = r.commit("base: broken")
    r.write("lib/found.py", "def lost():\n    return 'lost'\n")  # relocation candidate appears
    r.write("lib/broken.py", "result = gone2(1,\n")  # the name in a file with a parse error
    r.write("docs/moved.txt", "intro\nbeta\ngamma\n")  # the span's bytes in an added file
    r.write("pkg/c3.py", "def copied():\n    return 'c'\n")  # second copy: ambiguous
    head = r.commit("head")
    rep = chk.run_check(home, base=base, head=head, repo_path=r.root)
    got = {(f.memory["id"], f.citation.id, f.head.outcome, f.head.reason) for f in rep.findings}
    assert got == full_findings(home, r.root, base, head)
    outcomes = sorted((f.memory["topic"], f.head.outcome, f.head.reason or "", f.scope) for f in rep.findings)
    assert outcomes == [("copied", "unknown", "ambiguous-relocation", "relocation-candidate"),
                        ("gone2", "unknown", "incomplete-coverage", "coverage-changed"),
                        ("lost", "relocated", "", "relocation-candidate"),
                        ("span", "relocated", "", "added-files")]
    assert rep.counts["untouched_citations"] == 2  # stay, keep


def test_a_gone_span_is_affected_only_by_a_path_added_since_its_capture(make_repo, home):
    """A span whose file is gone reads the files added since its capture. A change to a file
    that existed at capture leaves it untouched (not validated); a change to a file added
    since capture that now holds its bytes relocates it — as validating everything says."""
    r = make_repo("gone-span")
    r.write("docs/notes.txt", "alpha\nbeta\ngamma\n")
    r.write("src/old.py", "def old():\n    return 1\n")
    r.commit("c1")
    index(r, home)
    cite(home, r, "docs/notes.txt#L2-L3", topic="span")
    r.rm("docs/notes.txt")
    r.write("docs/new.txt", "intro\n")  # added since the capture
    gone = r.commit("the span's file gone")
    r.write("src/old.py", "def old():\n    return 2\n")  # existed at capture
    edit_old = r.commit("edit a file that existed at capture")
    rep = chk.run_check(home, base=gone, head=edit_old, repo_path=r.root)
    assert rep.counts["affected_citations"] == 0 and rep.counts["untouched_citations"] == 1
    assert not rep.findings and full_findings(home, r.root, gone, edit_old) == set()
    r.write("docs/new.txt", "intro\nbeta\ngamma\n")  # a file added since capture gets the bytes
    found = r.commit("the bytes in a file added since capture")
    rep = chk.run_check(home, base=edit_old, head=found, repo_path=r.root)
    got = {(f.memory["id"], f.citation.id, f.head.outcome, f.head.reason) for f in rep.findings}
    assert got == full_findings(home, r.root, edit_old, found) != set()
    assert [(f.memory["topic"], f.head.outcome, f.scope) for f in rep.findings] == [("span", "relocated",
                                                                                      "added-files")]


def test_new_since_capture_counts_every_path_that_was_not_a_file(make_repo):
    """The facts of the gone-span rule: a capture commit is listed when a changed path was
    absent or a directory there, or the commit cannot be read; not when every changed path
    was a file."""
    r = make_repo("captures")
    r.write("a.txt", "a\n")
    r.write("d/x.txt", "x\n")
    c1 = r.commit("c1")
    r.write("b.txt", "b\n")
    r.rm("d/x.txt")
    r.write("d", "now a file\n")
    c2 = r.commit("c2")
    repo = pygit2.Repository(str(r.root))

    def changed(*paths):
        return [diff_scope.PathChange(p, "modified", "0" * 40, "1" * 40) for p in paths]

    assert diff_scope.new_since_capture(repo, [c1, c2], changed("a.txt")) == set()
    assert diff_scope.new_since_capture(repo, [c1, c2], changed("a.txt", "b.txt")) == {c1}
    assert diff_scope.new_since_capture(repo, [c1, c2], changed("d")) == {c1}
    assert diff_scope.new_since_capture(repo, ["f" * 40, "not-a-commit"], changed("a.txt")) == {"f" * 40,
                                                                                                 "not-a-commit"}
    assert diff_scope.new_since_capture(repo, [c1], []) == set()


@pytest.mark.parametrize("step", ["edit", "rename", "config", "revert"])
def test_findings_equal_validating_everything_on_more_changes(make_repo, home, step):
    r = make_repo(f"more-{step}")
    r.write("svc/h.py", "class Svc:\n    def run(self):\n        return 1\n\n    def stop(self):\n        return 0\n")
    r.write("svc/util.py", "def helper(x):\n    return x + 1\n")
    r.write("vendor/lib.py", "def vendored():\n    return 'v'\n")
    r.commit("c1")
    index(r, home)
    for topic, ref in (("run", "svc/h.py::Svc.run"), ("stop", "svc/h.py::Svc.stop"),
                       ("helper", "svc/util.py::helper"), ("span", "svc/util.py#L1-L2"),
                       ("vendored", "vendor/lib.py::vendored")):
        cite(home, r, ref, topic=topic)
    base = r.head()
    if step == "edit":
        r.write("svc/h.py", "class Svc:\n    def run(self):\n        return 2\n\n    def stop(self):\n        return 0\n")
    elif step == "rename":  # a pure rename: a successor by body hash
        r.write("svc/util.py", "def helper_v2(x):\n    return x + 1\n")
    elif step == "config":  # excluding vendor/ changes coverage everywhere: every citation affected
        r.write(".citegraph.toml", '[index]\nexclude = ["vendor/**"]\n')
    else:
        r.write("svc/h.py", "class Svc:\n    def run(self):\n        return 2\n\n    def stop(self):\n        return 0\n")
        r.commit("tmp")
        r.write("svc/h.py", "class Svc:\n    def run(self):\n        return 1\n\n    def stop(self):\n        return 0\n")
    head = r.commit(step)
    rep = chk.run_check(home, base=base, head=head, repo_path=r.root)
    got = {(f.memory["id"], f.citation.id, f.head.outcome, f.head.reason) for f in rep.findings}
    assert got == full_findings(home, r.root, base, head)
    topics = sorted(f.memory["topic"] for f in rep.findings)
    assert topics == {"edit": ["run"], "rename": ["helper", "span"], "config": ["vendored"], "revert": []}[step]
    if step == "config":
        assert rep.counts["affected_citations"] == 5  # everything re-validated
    if step == "revert":
        assert rep.findings == [] and rep.diff["paths"] == 0


def test_check_reads_no_worktree_and_never_validates_untouched_citations(world, monkeypatch):
    seen: list[int] = []
    real = pipeline.validate

    def counting(home, items, scope, **kw):
        seen.append(sum(len(i.receipts) for i in items))
        return real(home, items, scope, **kw)

    monkeypatch.setattr(pipeline, "validate", counting)
    rep = chk.run_check(world.home, base="main", head="unrelated", repo_path=world.repo.root)
    assert seen == [] and rep.status == "clean"
    rep = chk.run_check(world.home, base="main", head="pr", repo_path=world.repo.root)
    assert seen == [4, 4]  # the affected citations, once at base and once at head


def test_check_opens_each_snapshot_once_and_validates_through_it(world, monkeypatch):
    """The base and head snapshots the check opens to scope the diff are lent to both
    validations (graph/current.py ``LendingSource``), not opened again; and lent, they stay
    open until the check closes them."""
    from citegraph.graph import snapshot_reader

    opened: list[str] = []
    real = snapshot_reader.Snapshot.open.__func__

    def counting(cls, rs, snapshot_id, *a, **kw):
        opened.append(snapshot_id)
        return real(cls, rs, snapshot_id, *a, **kw)

    monkeypatch.setattr(snapshot_reader.Snapshot, "open", classmethod(counting))
    rep = chk.run_check(world.home, base="main", head="pr", repo_path=world.repo.root)
    assert rep.counts["affected_citations"] == 4 and rep.findings
    assert sorted(opened) == sorted([rep.base.snapshot_id, rep.head.snapshot_id])


def test_quote_keeps_memory_text_as_data():
    assert chk.quote('say "hi"\n\tnow\\') == r'"say \"hi\" now\\"'
    assert len(chk.quote("x" * 500)) == chk.MAX_QUOTE + 2
    assert re.fullmatch(r'"[^\x00-\x1f]*"', chk.quote("a\x00b\x1bc"))


def test_json_outputs_match_the_schema(world, make_repo, home):
    import jsonschema

    from citegraph.memory.review.check import run_check

    schema = json.loads((__import__("pathlib").Path(__file__).resolve().parent.parent / "docs" / "schemas" /
                         "check.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema)
    v.check_schema(schema)
    docs = [run_check(world.home, base="main", head=h, repo_path=world.repo.root).to_json()
            for h in ("pr", "unrelated")]
    docs.append(run_check(world.home, base="e" * 40, head="pr", repo_path=world.repo.root).to_json())
    # a change that makes a deleted citation exact again (resolved) and leaves a changed one (unchanged)
    r = make_repo("schema")
    r.write("a.py", "def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    r.commit("c1")
    index(r, home)
    cite(home, r, "a.py::f", "a.py::g", topic="t")
    r.write("a.py", "def g():\n    return 2\n")
    r.commit("break")
    r.write("a.py", "def f():\n    return 1\n\n\ndef g():\n    return 3\n")
    r.commit("restore f")
    mixed = run_check(home, base="HEAD~1", repo_path=r.root).to_json()
    assert [f["citation"]["ref"] for f in mixed["resolved"]] == ["a.py::f"]
    assert [f["citation"]["ref"] for f in mixed["unchanged"]] == ["a.py::g"]
    docs.append(mixed)
    for d in docs:
        v.validate(d)
    assert {d["status"] for d in docs} == {"findings", "clean", "unknown"}


def test_project_selects_only_that_projects_memories_and_counts(make_repo, home):
    """``--project``: the memories of other projects citing the same changed code are neither
    findings nor counted; a forgotten memory is not either."""
    r = make_repo("proj")
    r.write("src/a.py", "def a():\n    return 1\n")
    r.commit("c1")
    index(r, home)
    mine = cite(home, r, "src/a.py::a", topic="t", project="mine")
    cite(home, r, "src/a.py::a", "src/a.py", topic="t", project="theirs")
    r.write("src/a.py", "def a():\n    return 2\n")
    r.commit("edit")
    both = chk.run_check(home, base="HEAD~1", repo_path=r.root)
    assert sorted(f.rule for f in both.findings) == ["changed", "changed", "changed"]
    rep = chk.run_check(home, base="HEAD~1", repo_path=r.root, project="mine")
    assert [(f.memory["id"], f.rule) for f in rep.findings] == [(mine["id"], "changed")]
    assert (rep.counts["memories"], rep.counts["citations"], rep.counts["affected_citations"]) == (1, 1, 1)
