"""One receipt identity (issue 20, item 2): every path that writes a receipt — remember of a
file, a span and a symbol (with and without recorded dependencies, by locator, cgs_ and cgr_
handle), refresh of each kind after a move (a symbol re-spelled in the user's form), import —
writes an id the checker used by publish and import accepts; a refreshed memory publishes,
and the published file imports into another clone."""

from __future__ import annotations

from pathlib import Path

from gitutil import GitRepo

from citegraph.graph.handles import repo_handle
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.agent.refresh import refresh
from citegraph.memory.exchange.receipt_checks import receipt_problem
from citegraph.memory.exchange.share import import_file, publish
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator.capture import receipt_id

ORIGIN = "https://example.com/org/identity.git"

CODE = '''"""Retries."""


def base_delay():
    return 2


class RetryPolicy:
    def next_delay(self, attempt):
        return min(base_delay() ** attempt, 60)


def keep_key(request):
    return request.idempotency_key
'''


def stored_receipts(home: Home) -> list[dict]:
    with MemoryStore.open(home) as ms:
        return [r.to_dict() for m in ms.load() for r in m.citations]


def assert_all_accepted(home: Home) -> list[dict]:
    receipts = stored_receipts(home)
    assert receipts
    for r in receipts:
        assert receipt_problem(r) is None, (r["ref"], receipt_problem(r))
        assert receipt_id(r) == r["id"]
    return receipts


def test_every_receipt_writer_agrees_with_the_checker(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo", remote=ORIGIN)
    home = Home.open(tmp_path / "home")
    repo.write("src/retry.py", CODE)
    repo.commit("init")
    build_snapshot(repo.root, home)
    by_locator = api.remember(home, "delays double from the base", repo=repo.root, topic="loc", refs=[
        "src/retry.py", "src/retry.py#L5-L6", "src/retry.py::RetryPolicy.next_delay",  # deps: base_delay
        "src/retry.py::keep_key"])  # no deps
    captured = {r["qualified_name"]: r for r in stored_receipts(home) if r["kind"] == "symbol"}
    sym = captured["RetryPolicy.next_delay"]
    assert sym["deps"] and not captured["keep_key"]["deps"]
    handle = sym["handle"]
    by_handle = api.remember(home, "the key is a header", repo=repo.root, topic="handle", refs=[handle])
    cgr = api.remember(home, "repository handle", repo=repo.root, topic="cgr",
                       refs=[repo_handle(sym["repository_id"], handle)])
    assert_all_accepted(home)

    repo.mv("src/retry.py", "src/policy/retry.py")
    repo.commit("move")
    build_snapshot(repo.root, home)
    out = refresh(home, all_memories=True, repo=repo.root)
    assert out["summary"]["refreshed"] == 6 and out["summary"]["refused"] == 0, out
    receipts = assert_all_accepted(home)
    assert {r["path"] for r in receipts} == {"src/policy/retry.py"}
    assert {r["ref"] for r in receipts if r["kind"] == "symbol"} >= {
        "src/policy/retry.py::RetryPolicy.next_delay", "src/policy/retry.py::keep_key"}

    report = publish(home, str(tmp_path / "out.jsonl"))
    assert report.refused == [], [r.to_json() for r in report.refused]
    assert sorted(report.published) == sorted(m["id"] for m in (by_locator, by_handle, cgr))

    clone = GitRepo(tmp_path / "clone")
    clone.git("pull", "-q", str(repo.root), "main")
    clone.git("remote", "add", "origin", ORIGIN)
    home2 = Home.open(tmp_path / "home2")
    build_snapshot(clone.root, home2)
    rep = import_file(home2, str(tmp_path / "out.jsonl"), repos=[str(clone.root)])
    assert sorted(rep.imported) == sorted(report.published)
    assert_all_accepted(home2)


def test_the_id_covers_deps_and_legacy_refresh_ids_still_check(tmp_path: Path) -> None:
    """An edited ``deps`` is an edited receipt; an id refresh wrote before (every field)
    is still accepted on the read side, and an edit of it is still caught."""
    import blake3

    repo = GitRepo(tmp_path / "repo", remote=ORIGIN)
    home = Home.open(tmp_path / "home")
    repo.write("src/retry.py", CODE)
    repo.commit("init")
    build_snapshot(repo.root, home)
    api.remember(home, "x", repo=repo.root, topic="t", refs=["src/retry.py::RetryPolicy.next_delay"])
    (r,) = stored_receipts(home)
    assert r["deps"] and receipt_problem(r) is None
    edited = {**r, "deps": r["deps"].replace("base_delay", "base_delax")}
    assert "edited receipt" in (receipt_problem(edited) or "")
    assert r["token_hash"]  # the id covers the token hash too (a forged one could call a change cosmetic)
    assert "edited receipt" in (receipt_problem({**r, "token_hash": "0" * 32}) or "")
    assert receipt_problem({**r, "token_hash": None}) is not None

    def old_refresh_id(v: dict) -> str:  # respell before issue 20: every field but id
        h = blake3.blake3()
        for k in sorted(v):
            if k != "id" and not (k in ("deps", "token_hash") and v[k] is None):  # token_hash: later
                h.update(f"{k}={v[k]}\0".encode("utf-8", "surrogateescape"))
        return "cgc_" + h.hexdigest(16)

    for deps in (r["deps"], None):
        legacy = {**r, "deps": deps, "token_hash": None}  # no legacy receipt has a token hash
        legacy["id"] = old_refresh_id(legacy)
        assert legacy["id"] != receipt_id(legacy) and receipt_problem(legacy) is None
        assert "edited receipt" in (receipt_problem({**legacy, "end_line": legacy["end_line"] + 1}) or "")
