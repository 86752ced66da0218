"""dependency-changed (SPEC §21): capture records a symbol citation's resolved
dependencies; validation of an ``exact`` citation adds an advisory when one of them
changed, was deleted or moved — and never changes the outcome or the freshness."""

from __future__ import annotations

import json

import pytest

from citegraph.graph import graph_view
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator import decisions
from citegraph.validator.model import DependencyEvidence, Observation, Observed, Receipt, SymbolRow

# --- the pure decision --------------------------------------------------------------------------


def row(handle: str = "cgs_" + "1" * 32, fragment: str = "f" * 32, path: str = "a.py", qname: str = "dep",
        start: int = 1) -> SymbolRow:
    return SymbolRow(handle, path, "python", "function", qname, start, start + 1, fragment, "b" * 32)


def test_unchanged_dependency_is_no_change():
    assert decisions.dependency_change("f" * 32, DependencyEvidence(row())) is None


def test_edited_in_place_is_changed_there():
    now = row(fragment="e" * 32)
    assert decisions.dependency_change("f" * 32, DependencyEvidence(now)) == ("changed", now)


def test_edited_in_place_with_the_recorded_tokens_is_no_change():
    """SPEC §6.3a: other bytes at the handle, the same token hash as recorded at capture —
    comments/formatting only: no advisory. Other tokens, or none recorded or computed: changed."""
    now = row(fragment="e" * 32)
    tok = "7" * 32
    assert decisions.dependency_change("f" * 32, DependencyEvidence(now, token_hash=tok), tok) is None
    assert decisions.dependency_change("f" * 32, DependencyEvidence(now, token_hash="8" * 32), tok) == ("changed", now)
    assert decisions.dependency_change("f" * 32, DependencyEvidence(now, token_hash=tok)) == ("changed", now)
    assert decisions.dependency_change("f" * 32, DependencyEvidence(now), None) == ("changed", now)
    assert decisions.dependency_change("f" * 32, DependencyEvidence(now, token_hash=None), tok) == ("changed", now)


def test_gone_handle_with_its_fragment_elsewhere_is_relocated():
    moved = row("cgs_" + "2" * 32, path="b.py")
    assert decisions.dependency_change("f" * 32, DependencyEvidence(None, (moved,))) == ("relocated", moved)
    two = (moved, row("cgs_" + "3" * 32, path="c.py"))
    assert decisions.dependency_change("f" * 32, DependencyEvidence(None, two)) == ("relocated", None)


def test_gone_handle_is_where_the_dependents_edge_now_resolves():
    """Moved and edited: the dependent's edge of that name now resolves (by scoping) to
    one other symbol. Several such, or none, is no location."""
    moved = row("cgs_" + "2" * 32, fragment="e" * 32, path="b.py")
    assert decisions.dependency_change("f" * 32, DependencyEvidence(None, (), (moved,))) == ("changed", moved)
    same = row("cgs_" + "3" * 32, path="c.py")  # moved unchanged, and a copy elsewhere
    other = row("cgs_" + "4" * 32, path="d.py")
    assert decisions.dependency_change("f" * 32, DependencyEvidence(None, (same, other), (same,))) == (
        "relocated", same)
    two = (moved, row("cgs_" + "3" * 32, fragment="d" * 32, path="c.py"))
    assert decisions.dependency_change("f" * 32, DependencyEvidence(None, (), two)) == ("deleted", None)


def test_gone_everywhere_is_deleted():
    assert decisions.dependency_change("f" * 32, DependencyEvidence(None)) == ("deleted", None)


def receipt(deps: list[dict] | None) -> Receipt:
    return Receipt("cgc_" + "0" * 32, "x.py::f", "symbol", "r" * 32, "remote", "cgsnap_" + "0" * 32, "c" * 40,
                   False, "cgx-4", "x.py", "b" * 40, handle="cgs_" + "9" * 32, qualified_name="f",
                   deps=json.dumps(deps) if deps is not None else None)


def dep(handle: str, depth: int = 1, fragment: str = "f" * 32, via: int = -1) -> dict:
    return {"handle": handle, "path": "a.py", "qualified_name": "dep", "ordinal": 0, "symbol_kind": "function",
            "fragment_hash": fragment, "edge": "calls", "tier": "resolved", "depth": depth, "via": via}


H1, H2 = "cgs_" + "1" * 32, "cgs_" + "2" * 32
ROOT = "cgs_" + "9" * 32
CHANGED = {(ROOT, H1, "f" * 32): DependencyEvidence(row(H1, fragment="e" * 32)),
           (H1, H2, "f" * 32): DependencyEvidence(None)}


def test_advisories_only_on_exact_and_up_to_the_depth():
    r = receipt([dep(H1), dep(H2, depth=2, via=0)])  # H2 reached through H1
    exact = Observation(r.id, "exact", observed=Observed("x.py", 1, 2, r.handle))
    one = decisions.dependency_advisories(r, exact, CHANGED, 1)
    assert [(a.change, a.handle, a.depth) for a in one] == [("changed", H1, 1)]
    assert one[0].now == Observed("a.py", 1, 2, H1) and one[0].locator == "a.py::dep"
    two = decisions.dependency_advisories(r, exact, CHANGED, 2)
    assert [(a.change, a.handle) for a in two] == [("changed", H1), ("deleted", H2)]
    assert two[1].now is None
    assert decisions.dependency_advisories(r, exact, CHANGED, 0) == ()
    for outcome in ("relocated", "changed", "deleted", "unknown"):
        assert decisions.dependency_advisories(r, exact._replace(outcome=outcome), CHANGED, 3) == ()


def test_legacy_receipts_and_ungathered_dependencies_get_none():
    exact = Observation("cgc_" + "0" * 32, "exact")
    assert decisions.dependency_advisories(receipt(None), exact, CHANGED, 3) == ()
    assert decisions.dependency_advisories(receipt([dep("cgs_" + "7" * 32)]), exact, CHANGED, 3) == ()
    unchanged = {(ROOT, H1, "f" * 32): DependencyEvidence(row(H1))}
    assert decisions.dependency_advisories(receipt([dep(H1)]), exact, unchanged, 3) == ()


def test_dependency_names_and_dependents_from_the_record():
    """The edge name of a dependency is its last qualified part; a dependency's dependent
    is the cited symbol unless ``via`` names an earlier dependency (a bad ``via`` falls
    back to the cited symbol, never an index error)."""
    assert decisions.dependency_of_name({"qualified_name": "a.b.c"}) == "c"
    assert decisions.dependency_of_name({"qualified_name": "fee"}) == "fee"
    assert decisions.dependency_of_name({"qualified_name": None}) == ""
    assert decisions.dependency_of_name({}) == ""
    r = receipt([dep(H1), dep(H2, depth=2, via=0)])
    deps = r.dependencies
    assert decisions.dependent_of(r, deps, deps[0]) == ROOT
    assert decisions.dependent_of(r, deps, deps[1]) == H1
    no_via = {k: v for k, v in dep(H1).items() if k != "via"}
    assert decisions.dependent_of(r, deps, no_via) == ROOT
    assert decisions.dependent_of(r, deps, dep(H2, via=len(deps))) == ROOT
    assert decisions.dependent_of(r, deps, dep(H2, via=-2)) == ROOT


def test_depth_zero_reports_nothing_whatever_the_record_says():
    r = receipt([dep(H1, depth=0)])
    exact = Observation(r.id, "exact", observed=Observed("x.py", 1, 2, r.handle))
    assert decisions.dependency_advisories(r, exact, CHANGED, 0) == ()
    assert [a.handle for a in decisions.dependency_advisories(r, exact, CHANGED, 1)] == [H1]
    # a record without a depth is a direct dependency (depth 1)
    bare = receipt([{k: v for k, v in dep(H1).items() if k != "depth"}])
    got = decisions.dependency_advisories(bare, exact._replace(citation_id=bare.id), CHANGED, 1)
    assert [(a.handle, a.depth) for a in got] == [(H1, 1)]


# --- capture and validation, end to end ---------------------------------------------------------

RETRY = "def with_retry(fn):\n    return fn()\n\n\ndef backoff(n):\n    return n * 2\n"
CHARGE = ("from pay.retry import with_retry\n\n\ndef charge():\n    return with_retry(lambda: 1) + fee()\n\n\n"
          "def fee():\n    return 3\n")
OTHER = "def with_retry(fn):\n    return None\n"


def scene(repo, home):
    repo.write("pay/retry.py", RETRY)
    repo.write("pay/charge.py", CHARGE)
    repo.write("other/retry.py", OTHER)  # same name, not imported: never a dependency of charge
    repo.commit("scene")
    build_snapshot(repo.root, home, jobs=1)
    api.remember(home, "charge retries with the original key", repo=repo.root, refs=["pay/charge.py::charge"],
                 topic="charge")


def advisories(home, repo, depth: int = 1) -> tuple[str, str, list[dict]]:
    build_snapshot(repo.root, home, jobs=1)
    report = api.validate_memories(home, repo_paths=[str(repo.root)], dependency_depth=depth).to_json()
    [m] = report["memories"]
    [c] = m["citations"]
    return m["freshness"], c["outcome"], c.get("advisories", [])


def test_capture_records_resolved_dependencies(repo, home):
    scene(repo, home)
    with MemoryStore.open(home) as ms:
        [m] = ms.load()
    deps = m.citations[0].dependencies
    assert sorted((d["path"], d["qualified_name"], d["tier"], d["depth"], d["via"]) for d in deps) == [
        ("pay/charge.py", "fee", "resolved", 1, -1), ("pay/retry.py", "with_retry", "resolved", 1, -1)]


def test_callee_edited_is_an_advisory_not_a_verdict(repo, home):
    scene(repo, home)
    repo.write("pay/retry.py", RETRY.replace("return fn()", "return fn() or fn()"))
    repo.commit("edit callee")
    fresh, outcome, adv = advisories(home, repo)
    assert (fresh, outcome) == ("fresh", "exact")
    assert [(a["change"], a["dependency"]["locator"], a["now"]["path"]) for a in adv] == [
        ("changed", "pay/retry.py::with_retry", "pay/retry.py")]


def test_callee_deleted_and_moved(repo, home):
    scene(repo, home)
    repo.write("pay/retry.py", "def backoff(n):\n    return n * 2\n")
    repo.write("pay/charge.py", CHARGE.replace("def fee():\n    return 3\n", "").rstrip() + "\n")
    repo.write("pay/fees.py", "def fee():\n    return 3\n")
    repo.commit("delete one callee, move the other")
    # charge's own bytes did not change (fee moved out of the file below it)
    fresh, outcome, adv = advisories(home, repo)
    assert (fresh, outcome) == ("fresh", "exact")
    got = {a["dependency"]["locator"]: (a["change"], a["now"] and a["now"]["path"]) for a in adv}
    assert got == {"pay/retry.py::with_retry": ("deleted", None), "pay/charge.py::fee": ("relocated", "pay/fees.py")}


def test_an_unrelated_same_name_elsewhere_does_not_trigger(repo, home):
    scene(repo, home)
    repo.write("other/retry.py", OTHER.replace("None", "0"))
    repo.commit("edit the unrelated with_retry")
    assert advisories(home, repo) == ("fresh", "exact", [])


def test_depth_two_reaches_the_callee_of_a_callee(repo, home):
    repo.write("pay/retry.py", "def with_retry(fn):\n    return backoff(1)\n\n\ndef backoff(n):\n    return n * 2\n")
    repo.write("pay/charge.py", "from pay.retry import with_retry\n\n\ndef charge():\n    return with_retry(1)\n")
    repo.commit("chain")
    build_snapshot(repo.root, home, jobs=1)
    api.remember(home, "charge backs off", repo=repo.root, refs=["pay/charge.py::charge"], topic="c")
    repo.write("pay/retry.py", "def with_retry(fn):\n    return backoff(1)\n\n\ndef backoff(n):\n    return n * 3\n")
    repo.commit("edit the callee's callee")
    assert advisories(home, repo, depth=1) == ("fresh", "exact", [])
    _, _, adv = advisories(home, repo, depth=2)
    assert [(a["change"], a["dependency"]["locator"], a["dependency"]["depth"]) for a in adv] == [
        ("changed", "pay/retry.py::backoff", 2)]


def test_a_comment_in_a_dependency_raises_no_advisory_and_a_real_edit_does(repo, home):
    """Issue 23: a comment-only change in a called function raised dependency-changed."""
    code = "def helper(a):\n    return a * 2\n\n\ndef main(x):\n    return helper(x)\n"
    repo.write("m.py", code)
    repo.commit("c0")
    build_snapshot(repo.root, home)
    api.remember(home, "main doubles", repo=repo.root, topic="t", refs=["m.py::main"])
    with MemoryStore.open(home) as ms:
        (r,) = ms.load()[0].citations
    assert all(d.get("token_hash") for d in r.dependencies)
    repo.write("m.py", code.replace("    return a * 2", "    # doubles\n    return a*2"))
    repo.commit("c1")
    build_snapshot(repo.root, home)
    (c,) = api.validate_memories(home, repo_paths=[str(repo.root)]).to_json()["memories"][0]["citations"]
    assert c["outcome"] == "exact" and not c.get("advisories")
    repo.write("m.py", code.replace("    return a * 2", "    return a * 3"))
    repo.commit("c2")
    build_snapshot(repo.root, home)
    (c,) = api.validate_memories(home, repo_paths=[str(repo.root)]).to_json()["memories"][0]["citations"]
    assert c["outcome"] == "exact" and [a["change"] for a in c["advisories"]] == ["changed"]


def test_dependency_depth_is_bounded(repo, home):
    scene(repo, home)
    with pytest.raises(Exception) as exc:
        api.validate_memories(home, repo_paths=[str(repo.root)], dependency_depth=4)
    assert "dependency depth 4" in str(exc.value)


def test_records_are_bounded(repo, home):
    callees = "".join(f"def c{i}():\n    return {i}\n\n\n" for i in range(40))
    calls = " +\n        ".join(f"c{i}()" for i in range(40))  # one call a line: source order
    repo.write("m.py", callees + f"def big():\n    return (\n        {calls})\n")
    repo.commit("many callees")
    build_snapshot(repo.root, home, jobs=1)
    api.remember(home, "big sums", repo=repo.root, refs=["m.py::big"], topic="b")
    with MemoryStore.open(home) as ms:
        [m] = ms.load()
    deps = m.citations[0].dependencies
    assert len(deps) == graph_view.MAX_DEPS
    assert [d["qualified_name"] for d in deps] == [f"c{i}" for i in range(graph_view.MAX_DEPS)]


def test_check_warns_at_the_dependencys_change_and_not_for_an_unrelated_name(repo, home):
    from citegraph.memory.review.check import run_check
    from citegraph.memory.review.check_formats import to_sarif

    scene(repo, home)
    base = repo.head()
    repo.write("other/retry.py", OTHER.replace("None", "0"))  # unrelated: same name, not reached
    repo.write("pay/retry.py", RETRY.replace("return fn()", "return fn() or fn()"))
    repo.commit("edit callee")
    rep = run_check(home, base=base, repo_path=repo.root)
    assert rep.exit_code() == 0  # a warning, never a stale finding
    [f] = rep.findings
    assert (f.rule, f.level, f.location["path"], f.location["start_line"]) == (
        "dependency-changed", "warning", "pay/retry.py", 1)
    assert "pay/retry.py::with_retry" in f.message() and "stays fresh" in f.message()
    [res] = to_sarif(rep)["runs"][0]["results"]
    assert res["ruleId"] == "citegraph/dependency-changed"
    assert run_check(home, base=base, repo_path=repo.root, dependency_depth=0).findings == []
    only_other = repo.head()
    repo.write("other/retry.py", OTHER)
    repo.commit("unrelated again")
    assert run_check(home, base=only_other, repo_path=repo.root).findings == []


def test_brief_shows_the_advisory_as_an_issue_beside_the_fresh_memory(repo, home):
    scene(repo, home)
    repo.write("pay/retry.py", RETRY.replace("return fn()", "return fn() or fn()"))
    repo.commit("edit callee")
    build_snapshot(repo.root, home, jobs=1)
    out = api.brief(home, "charge retries", repo=repo.root).to_json()
    [m] = out["memories"]
    assert m["freshness"] == "fresh"
    [issue] = [i for i in out["issues"] if i["kind"] == "dependency-changed"]
    assert issue["memory_id"] == m["id"] and "pay/retry.py::with_retry" in issue["message"]
    quiet = api.brief(home, "charge retries", repo=repo.root, dependency_depth=0).to_json()
    assert not [i for i in quiet["issues"] if i["kind"] == "dependency-changed"]


def test_brief_code_ref_ranks_memories_citing_code_two_hops_away(repo, home):
    """Recall by proximity: working on backoff, the memory citing charge (charge → with_retry
    → backoff) ranks above an unrelated memory with the same words; an uncited (legacy)
    memory keeps its pure BM25 rank relative to the other uncited one."""
    repo.write("pay/retry.py", "def with_retry(fn):\n    return backoff(1)\n\n\ndef backoff(n):\n    return n * 2\n")
    repo.write("pay/charge.py", "from pay.retry import with_retry\n\n\ndef charge():\n    return with_retry(1)\n")
    repo.write("pay/far.py", "def far():\n    return 0\n")
    repo.commit("chain")
    build_snapshot(repo.root, home, jobs=1)
    api.remember(home, "payment notes about timing", repo=repo.root, refs=["pay/far.py::far"], topic="far")
    api.remember(home, "payment notes", repo=repo.root, refs=["pay/charge.py::charge"], topic="near")
    from citegraph.memory.lifecycle.legacy_import import LegacyRecord, import_records
    import_records(home, [LegacyRecord(1, "payment notes about timing, legacy", "default", "old1", "durable",
                                       None, None, None),
                          LegacyRecord(2, "payment notes legacy", "default", "old2", "durable", None, None, None)])
    topics = lambda refs: [m["topic"] for m in api.brief(home, "payment notes timing", repo=repo.root,  # noqa: E731
                                                        code_refs=refs).to_json()["memories"]]
    plain = topics([])
    assert plain.index("far") < plain.index("near")  # BM25 alone: "timing" favours far
    near = topics(["pay/retry.py::backoff"])
    assert near.index("near") < near.index("far")
    assert [t for t in near if t.startswith("old")] == [t for t in plain if t.startswith("old")]
    assert nearby_count(repo, home) == 2  # with_retry (1 hop) and charge (2 hops)


def nearby_count(repo, home) -> int:
    from citegraph.graph.current import ScanSource
    from citegraph.memory.agent.cited import nearby_handles

    cur = ScanSource().read(repo.root, home)
    return len(nearby_handles(["pay/retry.py::backoff"], cur))
