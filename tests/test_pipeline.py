"""The one validation pipeline (SPEC §17): the same verdicts through every entry point, the
one-shot cost rule (one state read before, one re-check after, per repository per
command) and injected state sources (how the resident service and the tests plug in)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from validation_helpers import CountingSource, git, index

from citegraph.graph.current import CurrentState, ScanSource
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.memory.worksets import workset as ws
from citegraph.validator.model import Receipt

SRC = "def handler(event):\n    return event['id']\n\n\nclass Service:\n    def run(self):\n        return 1\n"
TASK = "pipeline parity claim"
# Small projects, so that each brief shows all of its memories within the budget.
PROJECT = {"fresh": "p1", "relocated": "p1", "stale": "p1", "not-current": "p1", "out-of-scope": "p2",
           "none": "p2", "legacy-head": "p2", "mixed": "p3", "two": "p3", "malformed": "p3"}


def service(make_repo, name: str):
    r = make_repo(name)
    r.write("svc/handler.py", SRC)
    r.write("README.md", f"{name} readme\n")
    r.commit("init")
    return r


def real(r) -> str:
    return os.path.realpath(r.root)


@pytest.fixture
def world(make_repo, home):
    """Three repositories in scope (a, b, c) and one outside it (x), with memories whose
    verdicts cover every aggregation path: fresh, relocated, stale, unknown for several
    reasons, malformed, and memories without citations."""
    a, b, c, x = (service(make_repo, n) for n in "abcx")
    for r in (a, b, c, x):
        index(r, home)

    def remember(repo, n, refs=(), **kw):
        return api.remember(home, f"{TASK} {n}", repo=repo.root, refs=list(refs), topic=n,
                            project=PROJECT.get(n, "p0"), **kw)["id"]

    ids = {
        "fresh": remember(a, "fresh", ["svc/handler.py::handler"]),
        "relocated": remember(a, "relocated", ["README.md", "svc/handler.py::Service.run"]),
        "stale": remember(b, "stale", ["svc/handler.py::Service.run", "README.md"]),
        "not-current": remember(c, "not-current", ["svc/handler.py"]),
        "out-of-scope": remember(x, "out-of-scope", ["README.md"]),
        "none": remember(a, "none"),
    }
    # memories citing several repositories, and a malformed stored citation
    c_readme, x_handler = remember(c, "c-readme", ["README.md"]), remember(x, "x-handler", ["svc/handler.py"])
    with MemoryStore.open(home) as ms:
        a_handler = ms.require(ids["fresh"]).citations[0]
        in_c, in_x = ms.require(c_readme).citations, ms.require(x_handler).citations
        ms.forget(c_readme)
        ms.forget(x_handler)
        bad = Receipt(**{**a_handler.to_dict(), "id": "cgc_" + "e" * 32, "ref": "bad", "path": ""})
        bulk_insert(ms, [{"text": f"{TASK} {topic}", "topic": topic, "project": PROJECT[topic], "receipts": rs}
                         for topic, rs in (("mixed", [a_handler, *in_c]), ("two", [*in_c, *in_x]),
                                           ("malformed", [bad]))])
        by_topic = {m.topic: m.id for m in api.select_memories(ms)}
    for topic in ("mixed", "two", "malformed"):
        ids[topic] = by_topic[topic]

    a.mv("README.md", "docs/README.md")  # relocated
    a.commit("move the readme")
    index(a, home)
    b.write("svc/handler.py", SRC.replace("return 1", "return 2"))  # changed
    b.commit("edit")
    index(b, home)
    c.write("svc/handler.py", SRC + "\n# not indexed\n")  # c: no exact-current snapshot
    c.commit("not indexed")
    ids["legacy-head"] = remember(a, "legacy-head", source_commit="HEAD")
    ws.create(home, "parity", [str(a.root), str(b.root), str(c.root)])
    return {"a": a, "b": b, "c": c, "x": x, "ids": ids}


EXPECTED = {  # memory → (freshness, status, reason)
    "fresh": ("fresh", "exact", None),
    "relocated": ("fresh", "relocated", None),
    "stale": ("stale", "changed", None),
    "not-current": ("unknown", "unknown", "not-current"),
    "out-of-scope": ("unknown", "unknown", "out-of-scope"),
    "mixed": ("unknown", "unknown", "not-current"),
    "two": ("unknown", "unknown", "not-current,out-of-scope"),
    "malformed": ("unknown", "unknown", "invalid-citation"),
    "none": ("unknown", None, "no-basis"),
    "legacy-head": ("fresh", None, None),
}


def verdicts_of(memories: list[dict], names: dict[str, str]) -> dict[str, tuple]:
    return {names[m["id"]]: (m["freshness"], m["status"], m["reason"],
                             sorted((c["ref"], c["outcome"], c["reason"]) for c in m["citations"]))
            for m in memories if m["id"] in names}


def test_the_same_memories_get_the_same_verdicts_through_validate_workset_and_brief(world, home):
    names = {v: k for k, v in world["ids"].items()}
    paths = [str(world[n].root) for n in "abc"]
    by_validate = verdicts_of(api.validate_memories(home, repo_paths=paths).to_json()["memories"], names)
    assert {k: v[:3] for k, v in by_validate.items()} == EXPECTED
    assert by_validate["two"][3] == [("README.md", "unknown", "not-current"),
                                     ("svc/handler.py", "unknown", "out-of-scope")]
    by_workset = verdicts_of(api.validate_workset(home, "parity").to_json()["memories"], names)
    assert by_workset == by_validate

    for kw in ({"workset": "parity"}, {"repo_paths": paths}):
        by_brief: dict[str, tuple] = {}
        for project in sorted(set(PROJECT.values())):
            res = api.brief(home, TASK, project=project, budget_tokens=1500, **kw).to_json()
            assert res["omitted"]["memories"] == 0
            by_brief.update(verdicts_of(res["memories"] + res["stale"], names))
        assert set(by_brief) == set(EXPECTED)
        for name, (fresh, status, reason, cites) in by_validate.items():
            got = by_brief[name]
            assert got[:2] == (fresh, status) and got[3] == cites, name
            # every memory carries the verdict's reason as validate reports it (a stale
            # memory's changed citations are in its citations and its stale-memory issue)
            assert got[2] == reason, name
            if fresh == "stale":
                assert reason is None


def test_one_state_read_before_and_one_check_after_per_repository(world, home):
    a, b, c = (real(world[n]) for n in "abc")
    paths = [str(world[n].root) for n in "abc"]
    runs = {
        "validate": lambda s: api.validate_memories(home, repo_paths=paths, source=s),
        "validate --workset": lambda s: api.validate_workset(home, "parity", source=s),
        "brief --workset": lambda s: api.brief(home, TASK, workset="parity", source=s),
        "brief --repo": lambda s: api.brief(home, TASK, repo_paths=paths, source=s),
    }
    for what, run in runs.items():
        source = CountingSource()
        run(source)
        assert source.reads == {a: 1, b: 1, c: 1}, what
        assert source.checks == {a: 1, b: 1}, what  # c is not current: nothing to re-check
    source = CountingSource()
    api.remember(home, "one more", repo=world["a"].root, refs=["docs/README.md", "svc/handler.py::handler"],
                 source=source)
    assert (source.reads, source.checks) == ({a: 1}, {a: 1})


def test_only_the_repositories_citations_need_are_read(world, home):
    source = CountingSource()
    report = api.validate_workset(home, "parity", memory_ids=[world["ids"]["fresh"]], source=source)
    assert report.verdicts[0].freshness == "fresh"
    assert (source.reads, source.checks) == ({real(world["a"]): 1}, {real(world["a"]): 1})


class AlwaysMoved(ScanSource):
    def moved(self, cur: CurrentState) -> bool:
        return True


def test_an_injected_source_decides_racing_for_every_entry_point(world, home):
    ids = world["ids"]
    paths = [str(world[n].root) for n in "abc"]
    reports = [api.validate_memories(home, repo_paths=paths, source=AlwaysMoved()).to_json()["memories"],
               api.validate_workset(home, "parity", source=AlwaysMoved()).to_json()["memories"]]
    res = api.brief(home, TASK, project="p1", workset="parity", source=AlwaysMoved()).to_json()
    reports.append(res["memories"] + res["stale"])
    res = api.brief(home, TASK, project="p2", workset="parity", source=AlwaysMoved()).to_json()
    reports[-1] += res["memories"] + res["stale"]
    for memories in reports:
        by = {m["id"]: m for m in memories}
        for name in ("fresh", "relocated", "stale"):
            assert {(c["outcome"], c["reason"]) for c in by[ids[name]]["citations"]} == {("unknown", "racing")}
            assert (by[ids[name]]["freshness"], by[ids[name]]["reason"]) == ("unknown", "racing")
        # decided before any snapshot is read: nothing to race
        assert [c["reason"] for c in by[ids["not-current"]]["citations"]] == ["not-current"]
        assert [c["reason"] for c in by[ids["out-of-scope"]]["citations"]] == ["out-of-scope"]


class SequencedSource(ScanSource):
    """What the resident service does: the state carries the event sequence number it was
    read at (``fence``), and ``moved`` compares it — an event the scan cannot see (an edit
    and its revert) still moves the state."""

    def __init__(self) -> None:
        self.seq = 0

    def read(self, repo_path, home, at=None):  # type: ignore[no-untyped-def]
        cur = super().read(repo_path, home, at)
        cur.fence = self.seq
        return cur

    def moved(self, cur: CurrentState) -> bool:
        self.seq += 1  # an event arrived while the work ran
        return cur.fence != self.seq or super().moved(cur)


def test_a_fence_in_the_state_gives_racing_where_a_scan_sees_nothing(world, home):
    mem = world["ids"]["fresh"]
    a = str(world["a"].root)
    assert api.validate_memories(home, memory_ids=[mem], repo_paths=[a]).verdicts[0].freshness == "fresh"
    v = api.validate_memories(home, memory_ids=[mem], repo_paths=[a], source=SequencedSource()).verdicts[0]
    assert (v.freshness, v.reason) == ("unknown", "racing")
    with pytest.raises(api.CitegraphError) as err:
        api.remember(home, "fenced", repo=a, refs=["docs/README.md"], source=SequencedSource())
    assert err.value.kind == "racing" and err.value.retryable


class FailingRecheck(ScanSource):
    def moved(self, cur: CurrentState) -> bool:
        cur.path = "/nonexistent/citegraph-test-repository"  # the re-read fails: that counts as moved
        return super().moved(cur)


def test_a_failed_re_read_counts_as_moved(world, home):
    v = api.validate_memories(home, memory_ids=[world["ids"]["fresh"]], repo_paths=[str(world["a"].root)],
                              source=FailingRecheck()).verdicts[0]
    assert (v.freshness, v.reason) == ("unknown", "racing")


def test_two_members_in_one_state_are_one_repository(make_repo, home, tmp_path):
    a = service(make_repo, "a")
    index(a, home)
    mem = api.remember(home, "handler claim", repo=a.root, refs=["svc/handler.py::handler"], topic="h")["id"]
    wt = tmp_path / "a-wt"
    a.git("worktree", "add", "-q", "--detach", str(wt), "HEAD")
    ws.create(home, "same", [str(a.root), str(wt)])
    for report in (api.validate_workset(home, "same"),
                   api.validate_memories(home, memory_ids=[mem], repo_paths=[str(a.root), str(wt)])):
        v = report.verdicts[0]
        assert (v.freshness, [o.reason for o in v.observations]) == ("fresh", [None])
    (Path(wt) / "svc" / "handler.py").write_text(SRC + "\n# wt\n")
    git(wt, "commit", "-qam", "wt moves on")
    for report in (api.validate_workset(home, "same"),
                   api.validate_memories(home, memory_ids=[mem], repo_paths=[str(a.root), str(wt)])):
        v = report.verdicts[0]
        assert (v.freshness, v.reason, [o.reason for o in v.observations]) == (
            "unknown", "repository-ambiguous", ["repository-ambiguous"])
