"""Memory lifecycle (SPEC §7): revisions and history, archive, forget, supersede links,
durable vs handoff, provenance, name validation, legacy import."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from citegraph.cli.main import cli
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.brief.recall import recall
from citegraph.memory.lifecycle.legacy_import import import_file
from citegraph.memory.lifecycle.store import MemoryStore


def invoke(home: Home, *args: str):
    return CliRunner().invoke(cli, ["--home", str(home.root), *args])


def ok(home: Home, *args: str) -> str:
    res = invoke(home, *args)
    assert res.exit_code == 0, res.output
    return res.output


def one_line_error(res, code: int = 2) -> str:
    assert res.exit_code == code, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("citegraph: ") and "Traceback" not in res.output
    return lines[0]


def count(home: Home) -> int:
    with MemoryStore.open(home) as ms:
        return ms.con.execute("SELECT count(*) FROM memories").fetchall()[0][0]


@pytest.fixture
def indexed(repo, home):
    repo.write("src/a.py", "def f():\n    return 1\n")
    repo.write("src/b.py", "def g():\n    return 2\n")
    repo.commit("init")
    build_snapshot(repo.root, home)
    return repo


def test_revisions_are_append_only_and_evidence_is_not_inherited(indexed, home):
    r = str(indexed.root)
    first = json.loads(ok(home, "remember", "--text", "f returns one", "--project", "p", "--topic", "t",
                          "--code-ref", "src/a.py::f", "--repo", r, "--json", "--author", "ann"))
    second = json.loads(ok(home, "remember", "--text", "f returns one, always", "--project", "p", "--topic", "t",
                           "--repo", r, "--json", "--agent-id", "agent-7", "--session-id", "s-1"))
    assert first["id"] == second["id"] and second["revision"] == 2
    assert second["citations"] == [] and second["cleared_citations"] == 1
    hist = json.loads(ok(home, "history", first["id"], "--json"))["revisions"]
    assert [h["revision"] for h in hist] == [1, 2]
    assert hist[0]["text"] == "f returns one" and len(hist[0]["citation_ids"]) == 1
    assert (hist[0]["author"], hist[1]["agent_id"], hist[1]["session_id"], hist[1]["cleared"]) == \
        ("ann", "agent-7", "s-1", 1)
    shown = json.loads(ok(home, "show", first["id"], "--json"))
    assert shown["text"] == "f returns one, always" and shown["citations"] == []
    assert (shown["agent_id"], shown["session_id"], shown["revision"]) == ("agent-7", "s-1", 2)
    # a third revision with refs carries exactly those refs
    third = json.loads(ok(home, "remember", "--text", "g returns two", "--project", "p", "--topic", "t",
                          "--code-ref", "src/b.py::g", "--repo", r, "--json"))
    assert [c["ref"] for c in third["citations"]] == ["src/b.py::g"] and third["cleared_citations"] == 0
    assert len(json.loads(ok(home, "history", first["id"], "--json"))["revisions"]) == 3


def test_durable_handoff_and_kind_validation(home):
    d = api.remember(home, "a durable decision", kind="durable", topic="d")
    h = api.remember(home, "a handoff note", kind="handoff", topic="h")
    assert (d["kind"], h["kind"]) == ("durable", "handoff")
    listed = json.loads(ok(home, "list", "--json"))["memories"]
    assert {m["id"]: m["kind"] for m in listed} == {d["id"]: "durable", h["id"]: "handoff"}
    res = invoke(home, "remember", "--text", "x", "--kind", "belief")
    assert res.exit_code == 2
    with pytest.raises(api.CitegraphError) as e:
        api.remember(home, "x", kind="belief")
    assert e.value.code == 2
    with pytest.raises(api.CitegraphError):
        api.remember(home, "   ", topic="blank")


def test_archive_hides_from_list_and_recall_but_keeps_history(home):
    m = api.remember(home, "archived retry claim", topic="arch")
    keep = api.remember(home, "kept retry claim", topic="keep")
    assert "archived" in ok(home, "archive", m["id"])
    assert [x["id"] for x in json.loads(ok(home, "list", "--json"))["memories"]] == [keep["id"]]
    assert {x["id"] for x in json.loads(ok(home, "list", "--all", "--json"))["memories"]} == {m["id"], keep["id"]}
    assert json.loads(ok(home, "show", m["id"], "--json"))["status"] == "archived"
    with MemoryStore.open(home) as ms:
        assert [c.memory_id for c in recall(ms, "retry claim")] == [keep["id"]]
    assert len(json.loads(ok(home, "history", m["id"], "--json"))["revisions"]) == 1
    one_line_error(invoke(home, "archive", "cgm_0000000000000000"))


def test_forget_is_explicit_and_total(indexed, home):
    m = api.remember(home, "forget me", topic="gone", refs=["src/a.py"], repo=indexed.root)
    api.remember(home, "forget me, second revision", topic="gone")
    one_line_error(invoke(home, "forget", m["id"]))  # needs --yes
    assert count(home) == 1
    ok(home, "forget", m["id"], "--yes")
    with MemoryStore.open(home) as ms:
        for table, col in (("memories", "id"), ("revisions", "memory_id"), ("citations", "memory_id"),
                           ("terms", "memory_id")):
            assert ms.con.execute(f"SELECT count(*) FROM {table} WHERE {col} = ?", [m["id"]]).fetchall() == [(0,)]
    one_line_error(invoke(home, "history", m["id"]))
    one_line_error(invoke(home, "show", m["id"]))
    one_line_error(invoke(home, "forget", m["id"], "--yes"))


def test_supersede_links_both_ways_and_recall_prefers_the_successor(home):
    old = api.remember(home, "timeouts are thirty seconds", topic="timeout-v1")
    new = json.loads(ok(home, "remember", "--text", "timeouts are sixty seconds", "--topic", "timeout-v2",
                        "--supersedes", old["id"], "--json"))
    with MemoryStore.open(home) as ms:
        o, n = ms.require(old["id"]), ms.require(new["id"])
        assert (o.superseded_by, n.supersedes) == (n.id, o.id)
        assert [c.memory_id for c in recall(ms, "timeouts seconds")] == [n.id]
    one_line_error(invoke(home, "remember", "--text", "x", "--supersedes", "cgm_ffffffffffffffff"))
    # new revisions of either side keep the links
    api.remember(home, "timeouts were thirty seconds (history)", topic="timeout-v1")
    api.remember(home, "timeouts are sixty seconds, measured", topic="timeout-v2")
    with MemoryStore.open(home) as ms:
        o, n = ms.require(old["id"]), ms.require(new["id"])
        assert (o.superseded_by, n.supersedes, o.revision, n.revision) == (n.id, o.id, 2, 2)
    # forgetting the successor restores the predecessor
    ok(home, "forget", new["id"], "--yes")
    with MemoryStore.open(home) as ms:
        assert ms.require(old["id"]).superseded_by is None
        assert [c.memory_id for c in recall(ms, "timeouts seconds")] == [old["id"]]


def _visible(home: Home, root, mid: str) -> dict[str, bool]:
    """Where a memory citing src/a.py shows: cited, brief --code-ref, the pre-edit hook."""
    from citegraph.memory.agent.cited import cited
    from citegraph.memory.agent.hooks import pre_edit

    by_cited = [m["id"] for m in cited(home, ["src/a.py"], repo=root)["memories"]]
    by_brief = [m["id"] for m in api.brief(home, "change f", code_refs=["src/a.py"], repo=root).to_json()["memories"]]
    hook = pre_edit(home, str(root / "src/a.py"))
    return {"cited": mid in by_cited, "brief": mid in by_brief,
            "hook": hook is not None and mid in hook["hookSpecificOutput"]["additionalContext"]}


def test_supersedes_naming_the_memory_being_revised_keeps_it_visible(make_repo, home):
    """Issue 22 item 1: ``remember --topic T --supersedes M`` where (project, T) is M wrote
    revision 2 of M with ``supersedes: M`` and ``superseded_by: M`` — M vanished from cited,
    brief --code-ref and the pre-edit hook while validate showed it fresh."""
    r = make_repo("selfsup")
    r.write("src/a.py", "def f():\n    return 1\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    first = api.remember(home, "f returns one", repo=r.root, refs=["src/a.py::f"], topic="f-value")
    out = json.loads(ok(home, "remember", "--text", "f returns one, always", "--topic", "f-value",
                        "--repo", str(r.root), "--code-ref", str(r.root / "src/a.py") + "::f",
                        "--supersedes", first["id"], "--json"))
    assert (out["id"], out["revision"]) == (first["id"], 2)
    assert any("no supersede link" in n for n in out["notes"])
    with MemoryStore.open(home) as ms:
        m = ms.require(first["id"])
        assert (m.supersedes, m.superseded_by) == (None, None)
    assert _visible(home, r.root, first["id"]) == {"cited": True, "brief": True, "hook": True}


def test_a_stored_self_supersede_link_does_not_hide_the_memory(make_repo, home):
    """Stores written before the fix hold the self link: readers ignore it and the next
    revision drops it."""
    r = make_repo("selfsup2")
    r.write("src/a.py", "def f():\n    return 1\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    mid = api.remember(home, "f returns one", repo=r.root, refs=["src/a.py::f"], topic="f-value")["id"]
    with MemoryStore.open(home) as ms:
        ms.con.execute("UPDATE memories SET supersedes = id, superseded_by = id WHERE id = ?", [mid])
    assert _visible(home, r.root, mid) == {"cited": True, "brief": True, "hook": True}
    with MemoryStore.open(home) as ms:
        assert [c.memory_id for c in recall(ms, "returns one")] == [mid]
    api.remember(home, "f returns one (measured)", repo=r.root, refs=["src/a.py::f"], topic="f-value")
    with MemoryStore.open(home) as ms:
        m = ms.require(mid)
        assert (m.revision, m.supersedes, m.superseded_by) == (2, None, None)


@pytest.mark.parametrize("opt,value", [
    ("--project", "../etc"), ("--project", "a/b"), ("--project", ".."), ("--project", "x" * 129),
    ("--topic", "has space"), ("--topic", "."), ("--topic", "semi;colon"), ("--project", "tab\tname"),
])
def test_names_are_validated(home, opt, value):
    line = one_line_error(invoke(home, "remember", "--text", "x", opt, value))
    assert "invalid" in line
    assert count(home) == 0


def test_names_at_the_limit_are_accepted(home):
    m = api.remember(home, "edge", project="A-z_0.9", topic="t" * 128)
    assert m["project"] == "A-z_0.9" and m["topic"] == "t" * 128


# --- legacy import ------------------------------------------------------------------------------


def test_import_legacy_jsonl_and_array_are_recallable_without_citations(indexed, home, tmp_path):
    head = indexed.head()
    jsonl = tmp_path / "old.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in [
        {"text": "Legacy retry rule: never retry POST.", "project": "payments", "topic": "post-retry",
         "source_commit": head, "author": "bob", "created_at": "2024-01-02T03:04:05Z"},
        {"text": "Legacy handoff about retry queues.", "kind": "handoff", "created_at": 1700000000},
        {"text": "No commit, no basis retry.", "tags": ["ignored"]},
    ]) + "\n")
    out = ok(home, "import-legacy", str(jsonl), "--json")
    res = json.loads(out)
    assert res["imported"] == 3
    with MemoryStore.open(home) as ms:
        mems = {m.id: m for m in ms.load()}
        assert all(m.legacy and not m.citations for m in mems.values())
        post = next(m for m in mems.values() if m.topic == "post-retry")
        assert (post.project, post.author, post.source_commit) == ("payments", "bob", head)
        assert post.created_at == 1704164645.0
        assert next(m for m in mems.values() if m.kind == "handoff").created_at == 1700000000.0
        assert len(recall(ms, "retry")) == 3
    # legacy verdicts: source commit at HEAD of a clean worktree → fresh; none → no basis
    report = api.validate_memories(home, repo_paths=[str(indexed.root)]).to_json()
    fresh = {m["id"]: (m["freshness"], m["reason"]) for m in report["memories"]}
    assert fresh[post.id] == ("fresh", None)
    assert sorted(fresh.values())[0] == ("fresh", None) and ("unknown", "no-basis") in fresh.values()
    brief = api.brief(home, "retry POST rule", repo_paths=[str(indexed.root)])
    top = brief.data["memories"][0]
    assert top["id"] == post.id and top["legacy"] and top["freshness"] == "fresh" and top["citations"] == []
    # importing the same file again changes nothing
    again = json.loads(ok(home, "import-legacy", str(jsonl), "--json"))
    assert (again["imported"], again["skipped"]) == (0, 3) and count(home) == 3

    arr = tmp_path / "old.json"
    arr.write_text(json.dumps([{"text": "Array record one", "topic": "arr"},
                               {"text": "Array record one, revised", "topic": "arr"}], indent=2))
    assert json.loads(ok(home, "import-legacy", str(arr), "--json"))["imported"] == 2
    with MemoryStore.open(home) as ms:
        arr_mem = next(m for m in ms.load() if m.topic == "arr")
        assert arr_mem.revision == 2 and arr_mem.text == "Array record one, revised"


@pytest.mark.parametrize("content,line,why", [
    ('{"text": "ok"}\n{"text": "ok2"}\n{"project": "p"}\n', 3, "no text"),
    ('{"text": "ok"}\n\n{"text": "x", "project": "../up"}\n', 3, "invalid project"),
    ('{"text": "ok"}\nnot json\n', 2, "not valid JSON"),
    ('{"text": "ok", "kind": "opinion"}\n', 1, "invalid kind"),
    ('{"text": "ok", "created_at": "yesterday"}\n', 1, "created_at"),
    ('{"text": "ok", "source_commit": "zz top"}\n', 1, "source_commit"),
    ('[\n  {"text": "ok"},\n  {"text": "fine"},\n\n  {"text": ""}\n]\n', 5, "no text"),
    ('[\n  {"text": "ok"},\n  "just a string"\n]', 3, "JSON object"),
    ('[\n  {"text": "ok"}\n  {"text": "missing comma"}\n]', 3, "expected"),
])
def test_bad_legacy_records_import_nothing_and_name_the_line(home, tmp_path, content, line, why):
    api.remember(home, "pre-existing", topic="pre")
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    msg = one_line_error(invoke(home, "import-legacy", str(f)))
    assert f"bad.jsonl line {line}:" in msg and why in msg and "nothing was imported" in msg
    assert count(home) == 1
    with pytest.raises(api.CitegraphError):
        import_file(home, f)


def test_import_legacy_file_errors(home, tmp_path):
    one_line_error(invoke(home, "import-legacy", str(tmp_path / "absent.jsonl")))
    f = tmp_path / "latin1.jsonl"
    f.write_bytes(b'{"text": "caf\xe9"}\n')
    one_line_error(invoke(home, "import-legacy", str(f)))
