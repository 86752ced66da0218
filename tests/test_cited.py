"""``citegraph cited`` (SPEC §18): code → the memories whose citations touch it — by file,
overlapping span, handle, locator and the fragment hash of a moved copy — each with its
current freshness, through a real service and one-shot alike; the code index is fed by
capture, import and refresh, and forgets what ``forget`` deletes."""

from __future__ import annotations

import json

from service_helpers import needs_service, wait_exact

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.agent.cited import cited
from citegraph.memory.exchange.share import import_file, publish
from citegraph.memory.lifecycle.store import MemoryStore

RETRY = """\
class RetryPolicy:
    def next_delay(self, attempt):
        return 2 ** attempt


def idempotency_key(request):
    return request.headers["Idempotency-Key"]
"""
REMOTE = "https://git.example.com/acme/payments.git"


def scene(make_repo, home):
    r = make_repo("payments", remote=REMOTE)
    r.write("src/retry.py", RETRY)
    r.write("docs/notes.txt", "alpha\nbeta\ngamma\n")
    r.commit("init")
    build_snapshot(r.root, home)
    handle = next(s["handle"] for s in api_symbols(home, r, "src/retry.py") if s["qualified_name"] == "idempotency_key")
    mems = {
        "file": api.remember(home, "the retry module", repo=r.root, refs=["src/retry.py"], topic="file"),
        "span": api.remember(home, "the key lines", repo=r.root, refs=["src/retry.py#L6-L7"], topic="span"),
        "symbol": api.remember(home, "delays double", repo=r.root, refs=["src/retry.py::RetryPolicy.next_delay"],
                               topic="symbol"),
        "handle": api.remember(home, "the key is a header", repo=r.root, refs=[handle], topic="handle"),
        "notes": api.remember(home, "three words", repo=r.root, refs=["docs/notes.txt"], topic="notes"),
    }
    return r, {k: v["id"] for k, v in mems.items()}, handle


def api_symbols(home, r, path):
    from citegraph.graph import queries

    return queries.symbols_of_file(r.root / path, home)


def found(data: dict) -> dict[str, list[str]]:
    """topic → how each match touched the ref."""
    return {m["topic"]: sorted(x["how"] for x in m["matches"]) for m in data["memories"]}


def cli_cited(run_cli, r, *refs: str, service: bool = True) -> tuple[int, dict]:
    args = ["cited", *refs, "--repo", str(r.root), "--json"] + ([] if service else ["--no-service"])
    p = run_cli(*args)
    assert "Traceback" not in p.stderr and p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


@needs_service
def test_cited_by_file_span_handle_locator_and_moved_fragment_through_the_service(make_repo, home, run_cli,
                                                                                  serve):
    r, ids, handle = scene(make_repo, home)
    s = serve(str(r.root))
    wait_exact(run_cli, r.root, r.head(), False)

    def ask(*refs: str) -> dict[str, list[str]]:
        before = s.requests()
        rc, via = cli_cited(run_cli, r, *refs)
        assert s.requests() >= before + 2  # this call went through the service (ping counts itself)
        rc1, one = cli_cited(run_cli, r, *refs, service=False)
        assert (rc, via) == (rc1, one)  # the same answer one-shot
        assert all(m["freshness"] == "fresh" for m in via["memories"])
        return found(via)

    # a file: every citation into it
    assert ask("src/retry.py") == {"file": ["path"], "span": ["path"], "symbol": ["path"], "handle": ["path"]}
    # a span: overlapping citations, and the whole-file one
    assert ask("src/retry.py#L2-L2") == {"symbol": ["overlap"], "file": ["file"]}
    assert ask("src/retry.py#L7-L9") == {"span": ["overlap"], "handle": ["overlap"], "file": ["file"]}
    # a symbol by locator and by handle (its own citation by handle; spans overlapping it)
    assert ask("src/retry.py::idempotency_key") == {"handle": ["handle"], "span": ["overlap"], "file": ["file"]}
    assert ask(handle) == {"handle": ["handle"], "span": ["overlap"], "file": ["file"]}
    assert ask("src/retry.py::RetryPolicy.next_delay") == {"symbol": ["handle"], "file": ["file"]}
    # nothing cites this file: exit 1, like grep
    rc, data = cli_cited(run_cli, r, "docs/other.txt")
    assert rc == 1 and data["memories"] == []

    # the file moves: its content finds the file and span citations, the symbol's fragment
    # hash finds the moved copy (another handle now)
    r.mv("src/retry.py", "src/checkout/retry_policy.py")
    head = r.commit("move")
    wait_exact(run_cli, r.root, head, False)
    assert ask("src/checkout/retry_policy.py") == {"file": ["content"], "span": ["content"], "symbol": ["content"],
                                                   "handle": ["content"]}
    got = ask("src/checkout/retry_policy.py::RetryPolicy.next_delay")
    assert got["symbol"] == ["fragment"]
    _, data = cli_cited(run_cli, r, "src/checkout/retry_policy.py::RetryPolicy.next_delay")
    sym = next(m for m in data["memories"] if m["topic"] == "symbol")
    assert [(c["outcome"], c["observed"]["path"]) for c in sym["citations"]] == \
        [("relocated", "src/checkout/retry_policy.py")]
    assert data["refs"][0]["resolved"] and data["refs"][0]["handle"] != handle


def test_cited_is_fed_by_refresh_and_forget(make_repo, home):
    r, ids, _ = scene(make_repo, home)
    r.mv("src/retry.py", "src/policy.py")
    r.commit("move")
    build_snapshot(r.root, home)
    assert found(cited(home, ["src/policy.py"], repo=r.root))["file"] == ["content"]
    api_refresh = __import__("citegraph.memory.agent.refresh", fromlist=["refresh"]).refresh
    api_refresh(home, [ids["file"], ids["symbol"]], repo=r.root)
    got = found(cited(home, ["src/policy.py"], repo=r.root))
    assert got["file"] == ["path"] and got["symbol"] == ["path"]  # the index holds the new receipts
    assert got["span"] == ["content"]  # not refreshed: still found by its content
    assert "file" not in found(cited(home, ["src/retry.py"], repo=r.root))
    with MemoryStore.open(home) as ms:
        ms.forget(ids["span"])
        ms.set_status(ids["handle"], "archived")
    got = found(cited(home, ["src/policy.py"], repo=r.root))
    assert "span" not in got and "handle" not in got
    assert "handle" in found(cited(home, ["src/policy.py"], repo=r.root, include_archived=True))


def test_cited_is_fed_by_import(make_repo, home, tmp_path):
    r, ids, _ = scene(make_repo, home)
    out = tmp_path / "team.jsonl"
    publish(home, str(out))
    other = Home.open(tmp_path / "other-home")
    build_snapshot(r.root, other)
    import_file(other, str(out), repos=[str(r.root)])
    assert set(found(cited(other, ["src/retry.py"], repo=r.root))) == {"file", "span", "symbol", "handle"}
    assert set(found(cited(other, ["docs/notes.txt#L3"], repo=r.root))) == {"notes"}


def test_cited_without_an_exact_current_snapshot_still_finds_and_says_unknown(make_repo, home):
    r, ids, _ = scene(make_repo, home)
    r.write("src/retry.py", RETRY + "\n# edited\n")  # dirty, not indexed
    data = cited(home, ["src/retry.py::RetryPolicy.next_delay"], repo=r.root)
    assert not data["repository"]["exact_current"]
    by = {m["topic"]: m for m in data["memories"]}
    assert by["symbol"]["freshness"] == "unknown" and by["symbol"]["reason"] == "not-current"
    assert data["refs"][0]["resolved"] is False and "exact-current" in data["refs"][0]["note"]
    assert [x["how"] for x in by["symbol"]["matches"]] == ["locator"]


def test_cited_bad_input_is_one_line(make_repo, home, run_cli):
    r, _, _ = scene(make_repo, home)
    for args in (["../x.py"], ["src/retry.py#Lx"], ["cgs_123"]):
        p = run_cli("cited", *args, "--repo", str(r.root))
        assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = run_cli("cited", "src/retry.py", "--repo", str(r.root), "--limit", "0")
    assert p.returncode == 2 and "--limit" in p.stderr


def test_brief_code_ref_ranks_the_memories_citing_that_code_first(make_repo, home, run_cli):
    r, ids, handle = scene(make_repo, home)
    # many memories the task's words favour, none citing src/retry.py
    for i in range(30):
        api.remember(home, f"shell completion shell completion note {i}", repo=r.root, refs=["docs/notes.txt"],
                     topic=f"noise{i}")
    task = "shell completion"
    plain = api.brief(home, task, repo=r.root, budget_tokens=1500).to_json()
    assert not {m["id"] for m in plain["memories"] + plain["stale"]} & set(ids.values()) - {ids["notes"]}
    for ref, want in (("src/retry.py", {"file", "span", "symbol", "handle"}),
                      ("src/retry.py::idempotency_key", {"file", "span", "handle"}),
                      (handle, {"file", "span", "handle"})):
        d = api.brief(home, task, repo=r.root, code_refs=[ref], budget_tokens=1500).to_json()
        shown = sorted(d["memories"] + d["stale"], key=lambda m: m["rank"])
        first = {m["topic"] for m in shown[:len(want)]}
        assert first == want, (ref, [m["topic"] for m in shown])
    # the CLI and MCP's codeRefs take the same path
    p = run_cli("brief", "--task", task, "--code-ref", "src/retry.py#L6-L7", "--repo", str(r.root), "--json")
    d = json.loads(p.stdout)
    top = sorted(d["memories"] + d["stale"], key=lambda m: m["rank"])[:3]
    assert {m["topic"] for m in top} == {"span", "handle", "file"}
