"""``citegraph refresh`` (SPEC §18): after a move, ``refresh --accept relocated`` makes
``validate`` report exact at the new place, ``history`` keeps both receipts and the
observation that justified the move, and the dry run shows exactly what is then done.
Refused: a change without a successor, a deletion, an unknown (not current, ambiguous), a
successor unless accepted; a racing repository writes nothing."""

from __future__ import annotations

import json

import pytest
from service_helpers import js, needs_service, wait_exact

from citegraph.graph.current import ScanSource
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.indexer.errors import CitegraphError
from citegraph.memory import api
from citegraph.memory.agent.refresh import refresh
from citegraph.memory.lifecycle.store import MemoryStore

RETRY = """\
class RetryPolicy:
    def next_delay(self, attempt):
        return 2 ** attempt


def idempotency_key(request):
    return request.headers["Idempotency-Key"]
"""
REFS = ["src/retry.py", "src/retry.py#L6-L7", "src/retry.py::RetryPolicy.next_delay"]


@pytest.fixture
def moved(repo, home):
    """A memory with a file, a span and a symbol citation, then a git mv of the file."""
    repo.write("src/retry.py", RETRY)
    repo.commit("init")
    build_snapshot(repo.root, home)
    mem = api.remember(home, "Retry delays double; the key is a header.", repo=repo.root, refs=REFS, topic="retry")
    repo.mv("src/retry.py", "src/checkout/retry_policy.py")
    repo.commit("move")
    build_snapshot(repo.root, home)
    return mem


def cli(run_cli, repo, *args: str) -> dict:
    extra = [] if args[0] == "validate" else ["--json"]  # validate says --format json
    return js(run_cli(*args, "--repo", str(repo.root), *extra))


def test_refresh_after_a_move_validates_exact_and_history_keeps_both_receipts(moved, repo, home, run_cli):
    mid = moved["id"]
    before = cli(run_cli, repo, "validate", "--format", "json")
    assert [c["outcome"] for c in before["memories"][0]["citations"]] == ["relocated"] * 3
    dry = cli(run_cli, repo, "refresh", mid, "--accept", "relocated", "--dry-run")
    with MemoryStore.open(home) as ms:
        assert ms.require(mid).revision == 1  # the dry run wrote nothing
    done = cli(run_cli, repo, "refresh", mid, "--accept", "relocated")
    # the dry run showed exactly what was then done: every citation, its action and its new receipt
    assert dry["dry_run"] is True and done["dry_run"] is False
    assert dry["memories"][0]["citations"] == done["memories"][0]["citations"]
    assert dry["summary"] == done["summary"] == {"memories": 1, "changed": 1, "refreshed": 3, "kept": 0, "refused": 0}
    assert [m["written"] for m in dry["memories"]] == [False] and [m["written"] for m in done["memories"]] == [True]
    new = [c["new"]["locator"] for c in done["memories"][0]["citations"]]
    assert new == ["src/checkout/retry_policy.py", "src/checkout/retry_policy.py#L6-L7",
                   "src/checkout/retry_policy.py::RetryPolicy.next_delay"]

    after = cli(run_cli, repo, "validate", "--format", "json")
    cites = after["memories"][0]["citations"]
    assert [(c["outcome"], c["path"]) for c in cites] == [("exact", "src/checkout/retry_policy.py")] * 3
    assert after["memories"][0]["freshness"] == "fresh" and "warnings" not in after["memories"][0]

    hist = js(run_cli("history", mid, "--json"))["revisions"]
    assert [h["revision"] for h in hist] == [1, 2]
    assert [c["locator"] for c in hist[0]["citations"]] == REFS  # the old receipts, as captured
    assert [c["path"] for c in hist[1]["citations"]] == ["src/checkout/retry_policy.py"] * 3
    assert hist[0]["text"] == hist[1]["text"] and hist[0]["refresh"] is None
    entries = hist[1]["refresh"]
    assert [e["old_citation_id"] for e in entries] == [c["id"] for c in hist[0]["citations"]]
    assert [e["new_citation_id"] for e in entries] == [c["id"] for c in hist[1]["citations"]]
    for e, c in zip(entries, before["memories"][0]["citations"], strict=True):
        assert e["accepted"] == "relocated" and e["observation"]["outcome"] == "relocated"
        assert e["observation"]["observed"] == c["observed"]  # the observation that justified it
        assert e["commit"] == repo.head()
    text = run_cli("history", mid).stdout
    assert "refreshed" in text and "src/retry.py#L6-L7" in text and "src/checkout/retry_policy.py#L6-L7" in text
    # nothing left to do
    again = cli(run_cli, repo, "refresh", mid)
    assert again["summary"]["refreshed"] == 0 and again["summary"]["kept"] == 3 and not again["memories"][0]["written"]


def test_a_change_without_successor_is_refused_and_the_rest_is_refreshed(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("init")
    build_snapshot(repo.root, home)
    mem = api.remember(home, "claim", repo=repo.root, refs=["src/retry.py::RetryPolicy.next_delay",
                                                             "src/retry.py::idempotency_key"], topic="t")
    repo.write("src/retry.py", "\n\n" + RETRY.replace("2 ** attempt", "3 ** attempt"))
    repo.commit("edit")
    build_snapshot(repo.root, home)
    out = refresh(home, [mem["id"]], repo=repo.root)
    by = {c["locator"]: c for c in out["memories"][0]["citations"]}
    assert (by["src/retry.py::RetryPolicy.next_delay"]["action"], by["src/retry.py::RetryPolicy.next_delay"]["why"]) \
        == ("refuse", "changed")
    assert by["src/retry.py::idempotency_key"]["outcome"] == "exact"  # its lines moved: still exact, kept
    assert by["src/retry.py::idempotency_key"]["action"] == "keep"
    assert not out["memories"][0]["written"]
    with MemoryStore.open(home) as ms:
        assert ms.require(mem["id"]).revision == 1


def test_deleted_and_unknown_are_refused(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.write("src/other.py", "x = 1\n")
    repo.commit("init")
    build_snapshot(repo.root, home)
    gone = api.remember(home, "gone", repo=repo.root, refs=["src/retry.py::idempotency_key"], topic="gone")
    twice = api.remember(home, "twice", repo=repo.root, refs=["src/other.py"], topic="twice")
    repo.write("src/retry.py", "class RetryPolicy:\n    pass\n")
    repo.write("src/a.py", "x = 1\n")
    repo.write("src/b.py", "x = 1\n")
    repo.rm("src/other.py")
    repo.commit("delete and copy twice")
    build_snapshot(repo.root, home)
    out = refresh(home, all_memories=True, repo=repo.root)
    by = {m["topic"]: m["citations"][0] for m in out["memories"]}
    assert (by["gone"]["outcome"], by["gone"]["action"], by["gone"]["why"]) == ("deleted", "refuse", "deleted")
    assert (by["twice"]["outcome"], by["twice"]["reason"], by["twice"]["action"]) == \
        ("unknown", "ambiguous-relocation", "refuse")
    assert out["summary"]["refused"] == 2 and out["summary"]["changed"] == 0
    # not current: nothing authoritative, nothing refreshed
    repo.write("src/c.py", "y = 2\n")
    out = refresh(home, [gone["id"], twice["id"]], repo=repo.root)
    assert {(c["reason"], c["action"]) for m in out["memories"] for c in m["citations"]} == {("not-current", "refuse")}


def test_a_successor_only_when_accepted(repo, home, run_cli):
    repo.write("src/retry.py", RETRY)
    repo.commit("init")
    build_snapshot(repo.root, home)
    mem = api.remember(home, "key", repo=repo.root, refs=["src/retry.py::idempotency_key"], topic="key")
    repo.write("src/retry.py", RETRY.replace("def idempotency_key", "def request_key"))  # a pure rename
    repo.commit("rename")
    build_snapshot(repo.root, home)
    out = cli(run_cli, repo, "refresh", mem["id"])
    c = out["memories"][0]["citations"][0]
    assert (c["outcome"], c["observed"]["path"], c["action"], c["why"]) == \
        ("changed", "src/retry.py", "refuse", "successor-not-accepted")
    out = cli(run_cli, repo, "refresh", mem["id"], "--accept", "relocated,successor")
    c = out["memories"][0]["citations"][0]
    assert (c["action"], c["why"], c["new"]["locator"]) == ("refresh", "successor", "src/retry.py::request_key")
    v = cli(run_cli, repo, "validate", "--format", "json")
    assert [(x["outcome"], x["locator"]) for x in v["memories"][0]["citations"]] == \
        [("exact", "src/retry.py::request_key")]


def test_a_handle_stays_a_handle(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("init")
    build_snapshot(repo.root, home)
    old = api.remember(home, "x", repo=repo.root, refs=["src/retry.py::idempotency_key"], topic="l")
    h = old["citations"][0]["handle"]
    mem = api.remember(home, "y", repo=repo.root, refs=[h], topic="h")
    repo.mv("src/retry.py", "src/r.py")
    repo.commit("mv")
    build_snapshot(repo.root, home)
    out = refresh(home, [mem["id"]], repo=repo.root)
    new = out["memories"][0]["citations"][0]["new"]
    assert new["ref"].startswith("cgs_") and new["ref"] == new["handle"] != h
    assert new["locator"] == "src/r.py::idempotency_key"


class MovesAtTheSecondCheck(ScanSource):
    """The validation's re-check sees nothing; the refresh's own (after the re-capture)
    sees a change."""

    def __init__(self) -> None:
        self.checks = 0

    def moved(self, cur):
        self.checks += 1
        return self.checks >= 2 or super().moved(cur)


def test_a_racing_refresh_writes_nothing(moved, repo, home):
    with pytest.raises(CitegraphError) as exc:
        refresh(home, [moved["id"]], repo=repo.root, source=MovesAtTheSecondCheck())
    assert exc.value.kind == "racing" and exc.value.retryable
    with MemoryStore.open(home) as ms:
        assert ms.require(moved["id"]).revision == 1


def test_a_memory_revised_meanwhile_is_not_overwritten(moved, repo, home, monkeypatch):
    import citegraph.memory.agent.refresh as rf

    real = rf.resolve_each

    def revise_then_resolve(cur, parsed):  # another writer revises the memory during the refresh
        api.remember(home, "someone else's new text", repo=repo.root, topic="retry")
        return real(cur, parsed)

    monkeypatch.setattr(rf, "resolve_each", revise_then_resolve)
    with pytest.raises(CitegraphError) as exc:
        refresh(home, [moved["id"]], repo=repo.root)
    assert exc.value.retryable
    with MemoryStore.open(home) as ms:
        m = ms.require(moved["id"])
    assert m.revision == 2 and m.text == "someone else's new text"


def test_usage_errors(moved, repo, run_cli):
    for args in ([], [moved["id"], "--all"], [moved["id"], "--accept", "deleted"], [moved["id"], "--accept", ""]):
        p = run_cli("refresh", *args, "--repo", str(repo.root))
        assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, args
    p = run_cli("refresh", "cgm_0000000000000000", "--repo", str(repo.root))
    assert p.returncode == 2 and "no memory" in p.stderr


@needs_service
def test_refresh_through_the_service(moved, repo, home, run_cli, serve):
    s = serve(str(repo.root))
    wait_exact(run_cli, repo.root, repo.head(), False)
    before = s.requests()
    out = cli(run_cli, repo, "refresh", moved["id"])
    assert s.requests() >= before + 2 and out["summary"]["refreshed"] == 3
    v = json.loads(run_cli("validate", "--format", "json", "--repo", str(repo.root)).stdout)
    assert {c["outcome"] for c in v["memories"][0]["citations"]} == {"exact"}
