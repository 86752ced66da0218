"""Hostile imports (SPEC §12.1, issue 9): import verifies receipts, never trusts them; one
text-size limit holds for capture, import, import-legacy and MCP; hostile legacy records are
one error line. Every refusal: exit 2, one ``citegraph: …`` line, no traceback, store unchanged."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import duckdb
import pytest
from gitutil import GitRepo
from hypothesis import given
from hypothesis import strategies as st

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import extract
from citegraph.memory import api
from citegraph.memory.exchange.receipt_checks import (
    BASE_FIELDS,
    KIND_FIELDS,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    RECEIPT_FIELDS,
    fragment_lines,
    receipt_problem,
)
from citegraph.memory.exchange.share import (
    MAX_LINE_BYTES,
    MAX_META_BYTES,
    import_file,
    publish,
    record_problem,
)
from citegraph.memory.lifecycle.store import MAX_TEXT_BYTES, MemoryStore, bulk_insert
from citegraph.validator.capture import receipt_id

ORIGIN = "https://example.com/org/hostile.git"

RETRY = '''"""Retries."""


class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 60)


def keep_key(request):
    return request.idempotency_key
'''


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A published file (one memory: symbol, span and file citation) and a second clone of
    the same origin that has the capture commit."""
    base = tmp_path_factory.mktemp("hostile")
    home = Home.open(base / "pub-home")
    repo = GitRepo(base / "publisher", remote=ORIGIN)
    repo.write("src/retry.py", RETRY)
    repo.write("README.md", "# repo\n\nsome words\n")
    os.symlink("src/retry.py", repo.root / "link.py")
    repo.commit("c1")
    build_snapshot(repo.root, home)
    mem = api.remember(home, "retries keep the idempotency key", repo=repo.root, project="team",
                       topic="retry-key", refs=["src/retry.py::keep_key", "src/retry.py#L5-L6", "README.md"])
    out = base / "team.jsonl"
    assert publish(home, str(out), project="team").published == [mem["id"]]
    header, record = (json.loads(line) for line in out.read_text().splitlines())
    clone = GitRepo(base / "importer")
    clone.git("pull", "-q", str(repo.root), "main")
    clone.git("remote", "add", "origin", ORIGIN)
    blobs = {p: repo.git("rev-parse", f"HEAD:{p}") for p in ("README.md", "link.py", "src/retry.py")}
    return {"repo": repo, "clone": clone, "header": header, "record": record, "file": out, "blobs": blobs,
            "memory_id": mem["id"], "base": base}


def cite(record: dict, kind: str) -> dict:
    return next(c for c in record["citations"] if c["kind"] == kind)


def forge(record: dict, kind: str, **changes) -> dict:
    """The record with one receipt changed and its id recomputed as capture would (a
    receipt id is a plain hash: anyone can do this)."""
    rec = copy.deepcopy(record)
    c = cite(rec, kind)
    c.update(changes)
    c["id"] = receipt_id({k: c.get(k) for k in (*BASE_FIELDS, *KIND_FIELDS[c["kind"]], "token_hash")})
    return rec


def write(path: Path, header: dict, *lines: dict | str | bytes) -> Path:
    out = [json.dumps(header).encode()]
    for x in lines:
        out.append(x if isinstance(x, bytes) else (x if isinstance(x, str) else json.dumps(x)).encode())
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


def listing(run_cli) -> dict:
    res = run_cli("list", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def refused(run_cli, world, file: Path, *expected: str) -> str:
    """Import through the CLI: exit 2, one error line naming the problem, store unchanged."""
    before = listing(run_cli)
    res = run_cli("import", str(file), "--repo", str(world["clone"].root))
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith("citegraph: ") and res.stderr.count("\n") == 1, res.stderr
    for e in expected:
        assert e in res.stderr, res.stderr
    assert listing(run_cli) == before
    return res.stderr


@pytest.fixture
def stocked(home):
    """The importing home holds one memory already (so "unchanged" means something)."""
    api.remember(home, "pre-existing claim", topic="pre")
    return home


# --- forged receipts -------------------------------------------------------------------------

def test_the_genuine_file_imports_verified(world, stocked, run_cli):
    res = run_cli("import", str(world["file"]), "--repo", str(world["clone"].root), "--json")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["imported"] == [world["memory_id"]]
    assert sorted(rep["verified"]) == sorted(c["id"] for c in world["record"]["citations"])
    assert rep["unverified"] == []


@pytest.mark.parametrize("kind,changes,expected", [
    ("file", {"path": "/etc/passwd", "ref": "/etc/passwd"}, ("'/etc/passwd'", "absolute")),
    ("file", {"path": "../../../../etc/passwd", "ref": "../../../../etc/passwd"}, ("etc/passwd", "'..'")),
    ("file", {"path": "src/a\0b.py", "ref": "src/a\0b.py"}, ("NUL",)),
    ("symbol", {"handle": "cgs_ZZZ", "ref": "cgs_ZZZ"}, ("handle 'cgs_ZZZ'", "cgs_")),
    ("symbol", {"handle": "cgs_" + "0" * 32, "ref": "cgs_" + "0" * 32}, ("is not the handle of",)),
    ("span", {"start_line": 10**30, "ref": f"src/retry.py#L{10**30}-L{10**30 + 1}", "end_line": 10**30 + 1},
     ("start_line", "out of range")),
    ("span", {"start_line": 6, "end_line": 5, "ref": "src/retry.py#L6-L5"}, ("start_line 6 is after end_line 5",)),
    ("span", {"ref": "src/retry.py#L5-L7"}, ("names other lines",)),
    ("file", {"blob_id": "README"}, ("blob_id 'README'", "git object id")),
    ("symbol", {"ordinal": -1}, ("ordinal -1", "out of range")),
    ("symbol", {"start_byte": True}, ("start_byte", "not an integer")),
    ("file", {"repository_id": "A" * 32}, ("repository_id",)),
    ("file", {"snapshot_id": "cgsnap_short"}, ("snapshot_id",)),
    ("symbol", {"language": "javascript"}, ("language 'javascript'",)),
    ("span", {"symbol_kind": "function"}, ("a span citation has no symbol_kind",)),
])
def test_forged_receipt_shapes_are_refused(world, stocked, run_cli, tmp_path, kind, changes, expected):
    f = write(tmp_path / "forged.jsonl", world["header"], forge(world["record"], kind, **changes))
    msg = refused(run_cli, world, f, "forged.jsonl:2", *expected)
    assert world["memory_id"] in msg and "nothing was imported" in msg


def test_forged_receipts_are_recomputed_from_the_capture_commit(world, stocked, run_cli, tmp_path):
    rec, blobs = world["record"], world["blobs"]
    cases = {
        # a real blob of the repository, but not the one at that path
        "blob": (forge(rec, "file", blob_id=blobs["src/retry.py"]), "blob_id"),
        "content": (forge(rec, "file", content_hash="0" * 32), "content_hash"),
        "fragment": (forge(rec, "symbol", fragment_hash="1" * 32), "fragment_hash"),
        "body": (forge(rec, "symbol", body_hash="2" * 32), "body_hash"),
        "span": (forge(rec, "span", span_hash="3" * 32), "span_hash"),
        "first-line": (forge(rec, "span", first_line_hash="4" * 32), "first_line_hash"),
        "tokens": (forge(rec, "symbol", token_hash="6" * 32), "token_hash"),
        "span-tokens": (forge(rec, "span", token_hash="7" * 32), "token_hash"),
        "beyond": (forge(rec, "span", start_line=50, end_line=60, ref="src/retry.py#L50-L60"), "beyond the end"),
        "lines": (forge(rec, "symbol", start_line=1, end_line=2), "lines 1-2"),
        "not-there": (forge(rec, "file", path="src/missing.py", ref="src/missing.py"), "not a file of"),
        "symlink": (forge(rec, "file", path="link.py", ref="link.py", blob_id=blobs["link.py"]), "symlink"),
        "directory": (forge(rec, "file", path="src", ref="src"), "directory"),
        "commit-is-blob": (forge(rec, "file", commit=blobs["README.md"]), "not a commit"),
    }
    for name, (forged, what) in cases.items():
        f = write(tmp_path / f"{name}.jsonl", world["header"], forged)
        cid = next(c["id"] for c in forged["citations"] if c["id"] not in {x["id"] for x in rec["citations"]})
        msg = refused(run_cli, world, f, what, world["memory_id"], cid, "does not match its capture commit")
        assert f"{name}.jsonl:2" in msg


def test_a_forged_symbol_pointing_at_another_symbol_is_refused(world, tmp_path, home):
    """Everything consistent except the claim: the receipt names RetryPolicy.next_delay but
    carries keep_key's bytes — the handle, then the re-extraction, catch it."""
    rec = world["record"]
    sym = cite(rec, "symbol")
    forged = forge(rec, "symbol", qualified_name="RetryPolicy.next_delay", name="next_delay",
                   ref="src/retry.py::RetryPolicy.next_delay", symbol_kind="method")
    with pytest.raises(CitegraphError) as info:
        import_file(home, str(write(tmp_path / "f.jsonl", world["header"], forged)), [str(world["clone"].root)])
    assert "is not the handle of" in info.value.line()
    from citegraph.graph.handles import symbol_handle

    handle = symbol_handle("src/retry.py", "python", "method", "RetryPolicy.next_delay", 0)
    forged = forge(rec, "symbol", qualified_name="RetryPolicy.next_delay", name="next_delay", handle=handle,
                   ref="src/retry.py::RetryPolicy.next_delay", symbol_kind="method")
    with pytest.raises(CitegraphError) as info:
        import_file(home, str(write(tmp_path / "g.jsonl", world["header"], forged)), [str(world["clone"].root)])
    assert f"start_byte {sym['start_byte']} is not the start_byte of method 'RetryPolicy.next_delay'" \
        in info.value.line()
    with MemoryStore.open(home) as ms:
        assert ms.load() == []


def test_hostile_lines_are_refused(world, stocked, run_cli, tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    f = write(tmp_path / "deep.jsonl", world["header"], '{"type": "memory", "citations": ' + deep + "}")
    refused(run_cli, world, f, "deep.jsonl:2", "nested deeper than")
    f = tmp_path / "deep-header.jsonl"
    f.write_text('{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n")
    refused(run_cli, world, f, "deep-header.jsonl:1", "nested deeper than")
    rec = copy.deepcopy(world["record"])
    rec["text"] = "x" * (10 << 20)
    refused(run_cli, world, write(tmp_path / "huge.jsonl", world["header"], rec), "huge.jsonl:2", "line longer than")
    rec["text"] = "y" * (MAX_TEXT_BYTES + 1)
    refused(run_cli, world, write(tmp_path / "big.jsonl", world["header"], rec),
            f"text is {MAX_TEXT_BYTES + 1} bytes", str(MAX_TEXT_BYTES))
    refused(run_cli, world, write(tmp_path / "num.jsonl", world["header"], json.dumps(world["record"])
                                  .replace('"revision": 1', '"revision": ' + "9" * 5000)), "num.jsonl:2", "number")
    refused(run_cli, world, write(tmp_path / "nan.jsonl", world["header"], json.dumps(world["record"])
                                  .replace('"revision": 1', '"revision": NaN')), "NaN")
    rec = copy.deepcopy(world["record"])
    rec["author"] = "\ud800"
    refused(run_cli, world, write(tmp_path / "sur.jsonl", world["header"], rec), "lone surrogate")
    refused(run_cli, world, write(tmp_path / "bytes.jsonl", world["header"], b'{"type": "memory", "x": "\xff"}'),
            "bytes.jsonl:2", "not UTF-8")
    rec = copy.deepcopy(world["record"])
    rec["updated_at"] = 1e30
    refused(run_cli, world, write(tmp_path / "time.jsonl", world["header"], rec), "updated_at", "not a time")


# --- what cannot be verified here is kept, shape-checked, and reported ---------------------

def test_receipts_without_their_commit_are_kept_unverified(world, home, tmp_path, make_repo):
    stranger = make_repo("stranger", remote="https://example.com/org/other.git")
    stranger.write("a.txt", "a\n")
    stranger.commit("s")
    rep = import_file(home, str(world["file"]), [str(stranger.root)])
    assert rep.imported == [world["memory_id"]] and rep.verified == []
    assert {u["id"] for u in rep.unverified} == {c["id"] for c in world["record"]["citations"]}
    assert all("no clone of repository" in u["reason"] for u in rep.unverified)

    # a foreign repo.json in the data home is no clone either (and no traceback)
    garbled = Home.open(tmp_path / "garbled")
    rs = garbled.repo(cite(world["record"], "file")["repository_id"])
    rs.root.mkdir(parents=True)
    (rs.root / "repo.json").write_bytes(b"\xff\xfe not json")
    assert len(import_file(garbled, str(world["file"]), []).unverified) == 3

    # the same origin, but a clone that has not fetched the capture commit
    behind = make_repo("behind", remote=ORIGIN)
    behind.write("other.txt", "unrelated history\n")
    behind.commit("b")
    home2 = Home.open(tmp_path / "home2")
    rep = import_file(home2, str(world["file"]), [str(behind.root)])
    assert rep.verified == [] and all("not in the object database" in u["reason"] for u in rep.unverified)

    # shape checks still hold without the commit
    forged = forge(world["record"], "file", path="/etc/passwd", ref="/etc/passwd")
    with pytest.raises(CitegraphError) as info:
        import_file(Home.open(tmp_path / "home3"), str(write(tmp_path / "f.jsonl", world["header"], forged)),
                    [str(behind.root)])
    assert "absolute" in info.value.line()


def test_indexed_worktrees_of_the_home_verify_without_repo(world, tmp_path):
    """A home that has indexed a clone finds it by repository id (no --repo needed)."""
    home = Home.open(tmp_path / "h")
    build_snapshot(world["clone"].root, home)
    rep = import_file(home, str(world["file"]), [])
    assert sorted(rep.verified) == sorted(c["id"] for c in world["record"]["citations"])


def test_another_extractor_version_checks_bytes_not_identity(world, tmp_path):
    clone = [str(world["clone"].root)]
    rep = import_file(Home.open(tmp_path / "a"), str(write(tmp_path / "v.jsonl", world["header"], forge(
        world["record"], "symbol", extractor_version="cgx-0"))), clone)
    (u,) = rep.unverified
    assert len(rep.verified) == 2 and u["id"] not in {c["id"] for c in world["record"]["citations"]}
    assert "not re-extracted" in u["reason"] and "cgx-0" in u["reason"]
    # the fragment bytes are still checked: a forged hash is refused under any version
    with pytest.raises(CitegraphError) as info:
        import_file(Home.open(tmp_path / "b"), str(write(tmp_path / "w.jsonl", world["header"], forge(
            world["record"], "symbol", extractor_version="cgx-0", fragment_hash="5" * 32))), clone)
    assert "fragment_hash" in info.value.line()


def test_fragment_lines_agree_with_the_extractor():
    """The line range derived from bytes alone (used when the extractor version differs)
    is the extractor's, including CRLF files and nodes ending at a line start."""
    samples = {"python": RETRY.encode() + b"\n@dec\nclass A:\n    x = 1\r\n    def f(self):\r\n        pass\r\n",
               "go": b"package m\n\nfunc (r *R) M() {\n}\n\ntype R struct{}\n",
               "rust": b"impl Foo {\n    fn bar(&self) {}\n}\nfn main() {}",
               "javascript": b"class A {\n  m() {}\n}\nconst f = () =>\n  1;\n"}
    n = 0
    for lang, data in samples.items():
        for s in extract(lang, data).symbols:
            assert fragment_lines(data, s.start_byte, s.end_byte) == (s.start_line, s.end_line), (lang, s)
            n += 1
    assert n >= 8


# --- one text limit --------------------------------------------------------------------------

def test_text_limit_at_capture_and_bulk_insert(home, run_cli):
    res = run_cli("remember", "--text", "a" * (MAX_TEXT_BYTES + 1), "--topic", "big")
    assert res.returncode == 2 and "more than the limit" in res.stderr and res.stderr.count("\n") == 1
    assert run_cli("remember", "--text", "a" * MAX_TEXT_BYTES, "--topic", "fits").returncode == 0
    with pytest.raises(CitegraphError) as info:
        api.remember(home, "é" * (MAX_TEXT_BYTES // 2 + 1))  # the limit is in UTF-8 bytes
    assert info.value.code == 2
    with pytest.raises(CitegraphError), MemoryStore.open(home) as ms:
        bulk_insert(ms, [{"text": "b" * (MAX_TEXT_BYTES + 1)}])
    with pytest.raises(CitegraphError) as info:
        api.remember(home, "half \ud800 surrogate")
    assert "lone surrogate" in info.value.line()
    assert [m["topic"] for m in listing(run_cli)["memories"]] == ["fits"]


def test_text_limit_over_mcp(home, run_cli, tmp_path):
    """MCP's remember is a tool error with the CLI's line and code for a text over the limit."""
    import sys

    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "citegraph.cli.main", "mcp"],
                                   env={"CITEGRAPH_HOME": str(home.root), "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    out = {}
    cwd = str(tmp_path)

    async def main():
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                with anyio.fail_after(90):
                    out["big"] = await s.call_tool("remember", {"callerCwd": cwd, "text": "m" * (MAX_TEXT_BYTES + 1)})
                    out["fits"] = await s.call_tool("remember", {"callerCwd": cwd, "text": "m" * MAX_TEXT_BYTES})

    anyio.run(main)
    big = out["big"]
    assert big.is_error and big.meta["citegraph.dev/error"]["code"] == 2
    cli = run_cli("remember", "--text", "m" * (MAX_TEXT_BYTES + 1))
    assert big.content[0].text == cli.stderr.strip() and "more than the limit" in cli.stderr
    assert not out["fits"].is_error, out["fits"].content
    assert [len(m["text"]) for m in listing(run_cli)["memories"]] == [MAX_TEXT_BYTES]


def test_text_at_the_limit_round_trips(world, tmp_path):
    """The worst case for the line bound: every byte of the text escapes to six in JSON."""
    pub = Home.open(tmp_path / "pub")
    build_snapshot(world["repo"].root, pub)
    text = "\x01" * (MAX_TEXT_BYTES - 8) + "\u00e9" * 4  # exactly MAX_TEXT_BYTES in UTF-8
    assert len(text.encode()) == MAX_TEXT_BYTES
    mem = api.remember(pub, text, repo=world["repo"].root, project="team", topic="long",
                       refs=["src/retry.py::keep_key"])
    out = tmp_path / "long.jsonl"
    assert publish(pub, str(out)).published == [mem["id"]]
    home = Home.open(tmp_path / "imp")
    rep = import_file(home, str(out), [str(world["clone"].root)])
    assert rep.imported == [mem["id"]] and len(rep.verified) == 1
    with MemoryStore.open(home) as ms:
        assert ms.require(mem["id"]).text == text


def test_stored_oversized_memory_is_refused_by_publish(world, tmp_path, run_cli, home):
    api.remember(home, "small one", project="team", topic="small")
    big = api.remember(home, "to be enlarged", project="team", topic="big")
    con = duckdb.connect(str(home.memory_db))  # stored before the limit existed
    con.execute("UPDATE memories SET text = ? WHERE id = ?", ["z" * (10 << 20), big["id"]])
    con.close()
    out = tmp_path / "out.jsonl"
    res = run_cli("publish", "--out", str(out), "--json")
    assert res.returncode == 1, res.stderr
    rep = json.loads(res.stdout)
    assert [(r["id"], r["reason"]) for r in rep["refused"]] == [(big["id"], "too-large")]
    assert "more than the limit" in rep["refused"][0]["message"] and len(rep["published"]) == 1
    home2 = Home.open(tmp_path / "h2")
    assert len(import_file(home2, str(out)).imported) == 1  # what publish wrote, import loads


def widest_deps() -> str:
    """Recorded dependencies at their bounds (16 entries, the JSON byte limit), their
    names made of quotes (each written as \\" inside the receipt's JSON string)."""
    from citegraph.validator.capture import MAX_DEPS_JSON_BYTES, encode_deps

    def text(n: int) -> str:
        deps = [{"handle": "cgs_" + "a" * 32, "path": "p.py", "qualified_name": '"' * n, "ordinal": 0,
                 "symbol_kind": "function", "fragment_hash": "f" * 32, "edge": "calls", "tier": "resolved",
                 "depth": 3, "via": 15} for _ in range(16)]
        return encode_deps(deps)

    lo, hi = 1, MAX_DEPS_JSON_BYTES  # the widest n that fits: binary search (a linear one took minutes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t = text(mid)  # encode_deps drops entries that do not fit: "fits" means all 16 are kept
        if len(json.loads(t)) == 16 and len(t.encode()) <= MAX_DEPS_JSON_BYTES:
            lo = mid
        else:
            hi = mid - 1
    n = lo
    out = text(n)
    assert len(json.loads(out)) == 16 and len(out.encode()) > MAX_DEPS_JSON_BYTES - 64
    return out


def test_line_bound_holds_for_the_largest_publishable_record(world):
    """MAX_LINE_BYTES is derived from the limits: a record at every limit, made of
    characters JSON escapes six-fold (recorded dependencies: quotes, which escape twice
    in a JSON string of JSON), is publishable and fits in one line."""
    wide = "\x01"
    path = wide * (MAX_PATH_BYTES - 3) + ".py"
    qname = wide * MAX_NAME_BYTES
    rec = copy.deepcopy(world["record"])
    rec.update(text=wide * MAX_TEXT_BYTES, author=wide * MAX_META_BYTES, agent_id=wide * MAX_META_BYTES,
               session_id=wide * MAX_META_BYTES, project="p" * 128, topic="t" * 128,
               source_commit="f" * 64, supersedes="cgm_" + "0" * 16)
    from citegraph.graph.handles import symbol_handle

    sym = cite(rec, "symbol")
    rec["citations"] = []
    deps = widest_deps()
    for i in range(8):
        q = qname[:-1] + str(i)
        r = {**sym, "path": path, "qualified_name": q, "name": q, "ref": f"{path}::{q}",
             "commit": "e" * 64, "blob_id": "d" * 64, "start_line": 10**7, "end_line": 10**7,
             "start_byte": 2**40, "end_byte": 2**40, "ordinal": 10**6,
             "handle": symbol_handle(path, "python", sym["symbol_kind"], q, 10**6)}
        r["deps"] = deps
        r["id"] = receipt_id({k: r.get(k) for k in (*BASE_FIELDS, *KIND_FIELDS["symbol"], "deps", "token_hash")})
        assert receipt_problem(r) is None, receipt_problem(r)
        rec["citations"].append(r)
    assert record_problem(rec) is None
    size = len(json.dumps(rec, sort_keys=True, ensure_ascii=False).encode())
    assert 0.9 * MAX_LINE_BYTES < size <= MAX_LINE_BYTES


# --- import-legacy ---------------------------------------------------------------------------

@pytest.mark.parametrize("content,line,why", [
    (b'{"text": "ok"}\n{"text": "bad \\ud800 half"}\n', 2, "lone surrogate"),
    (b'{"text": "ok", "author": "\\udfff"}\n', 1, "lone surrogate"),
    (b'{"text": "ok"}\n{"text": "deep", "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", 2, "nested deeper"),
    (b"[\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n]\n", 2, "nested deeper"),
    (b'{"text": "ok", "created_at": 1' + b"0" * 30 + b"}\n", 1, "out of range"),
    (b'{"text": "ok", "created_at": 1' + b"0" * 5000 + b"}\n", 1, "number"),
    (b'{"text": "ok", "created_at": 1e400}\n', 1, "out of range"),
    (b'{"text": "ok", "created_at": NaN}\n', 1, "NaN"),
    (b'{"text": "ok", "created_at": "99999-01-01"}\n', 1, "created_at"),
    (b'{"text": "ok"}\n{"text": "caf\xe9"}\n', 2, "not UTF-8"),
    (b'[\n {"text": "ok"},\n {"text": "x", "kind": ' + b'"k' * 5000 + b'"}\n]', 3, "not valid JSON"),
    (b'{"text": "' + b"t" * (MAX_TEXT_BYTES + 1) + b'"}\n', 1, "more than the limit"),
])
def test_hostile_legacy_records(run_cli, home, tmp_path, content, line, why):
    api.remember(home, "pre-existing", topic="pre")
    before = listing(run_cli)
    f = tmp_path / "legacy.jsonl"
    f.write_bytes(content)
    res = run_cli("import-legacy", str(f))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("citegraph: ") and res.stderr.count("\n") == 1, res.stderr
    assert f"legacy.jsonl line {line}:" in res.stderr and why in res.stderr and "nothing was imported" in res.stderr
    assert listing(run_cli) == before


def test_legacy_text_with_unicode_line_breaks_and_bom(home, tmp_path):
    f = tmp_path / "l.jsonl"
    f.write_bytes("\ufeff".encode() + json.dumps({"text": "a\u2028b\x85c", "topic": "t"}, ensure_ascii=False)
                  .encode() + b"\n")
    assert api.import_legacy(home, f)["imported"] == 1
    with MemoryStore.open(home) as ms:
        assert ms.load()[0].text == "a\u2028b\x85c"


# --- property: any hostile record is a clear error or a valid import -------------------------

# Receipt fields import cannot check against the capture commit (documented): a receipt may
# differ from a genuine one only there (content_hash only by being absent) and still import.
UNVERIFIABLE = {"id", "snapshot_id", "extractor_version"}
# ... and, under another extractor version (no re-extraction), what names the symbol.
IDENTITY = {"name", "symbol_kind", "qualified_name", "ordinal", "handle", "body_hash", "language", "ref"}


def genuine_but_unverifiable(c: dict, originals: list[dict], also: frozenset = frozenset()) -> bool:
    return any(all(c.get(k) == o.get(k) or k in UNVERIFIABLE or k in also
                   or (k == "content_hash" and c.get(k) is None) for k in RECEIPT_FIELDS) for o in originals)


hostile_chars = st.one_of(st.characters(), st.characters(categories=["Cs"]),
                          st.sampled_from(["\0", "\n", "\u2028", "\x85", '"', "\\", "/", ".", "#", ":"]))
hostile_values = st.one_of(
    st.none(), st.booleans(), st.text(hostile_chars, max_size=12),
    st.integers(-(10**45), 10**45), st.sampled_from([0, 1, -1, 2**40 + 1, 10**7 + 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.integers(17, 200).map(lambda n: {"deep": json.loads("[" * n + "]" * n)}),
)


def near(value):
    """A near miss of a valid value (same type, one step away); hex ids and hashes mostly
    one digit off, which passes every shape check and only the content can refute."""
    if isinstance(value, bool):
        return st.just(not value)
    if isinstance(value, int):
        return st.sampled_from([value - 1, value + 1, value + 1, value * 10**6])
    if isinstance(value, str) and value:
        flip = value[:-1] + ("0" if value[-1] != "0" else "1")
        return st.sampled_from([flip, flip, flip, value + "x", value.upper(), " " + value, value + "\n",
                                "/" + value, "../" + value])
    return st.just(value)


def _recompute_id(c: dict) -> None:
    kind = c.get("kind")
    c["id"] = receipt_id({f: c.get(f) for f in (*BASE_FIELDS, *KIND_FIELDS.get(kind if isinstance(kind, str)
                                                                              else "", ()), "token_hash")})


@st.composite
def mutations(draw, record):
    """1–3 changes to a genuine record: forgeries (a receipt field one step off, id
    recomputed), hostile receipt or memory values, deleted fields, or a hostile raw line."""
    rec = copy.deepcopy(record)
    changed: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["forge", "forge", "forge", "hostile", "delete", "memory", "raw"]))
        if how == "raw":
            raw = draw(st.one_of(st.binary(max_size=40), st.integers(17, 50_000).map(lambda n: "[" * n),
                                 st.text(hostile_chars, max_size=20).map(lambda t: json.dumps(t)[:-1])))
            return rec, [("raw", "raw")], raw
        cites = rec.get("citations")
        if how == "memory" or not (isinstance(cites, list) and cites and all(isinstance(c, dict) for c in cites)):
            k = draw(st.sampled_from([*rec, "extra"]))
            rec[k] = draw(st.one_of(hostile_values, near(rec.get(k))))
            changed.append(("memory", k))
            continue
        c = draw(st.sampled_from(cites))
        if how == "forge":
            k = draw(st.sampled_from(sorted(k for k, v in c.items() if v is not None and k != "id")))
            c[k] = draw(near(c[k]))
        elif how == "hostile":
            k = draw(st.sampled_from([*c, "bogus"]))
            c[k] = draw(hostile_values)
        else:
            k = draw(st.sampled_from(sorted(c)))
            del c[k]
        if k != "id" and draw(st.integers(0, 4)):  # a forger recomputes the plain-hash id
            _recompute_id(c)
        changed.append(("receipt", k))
    return rec, changed, None


def _memories(home: Home) -> list[dict]:
    with MemoryStore.open(home) as ms:
        return [m.to_json() for m in ms.load(order="id")]


@given(data=st.data())
def test_property_hostile_records_are_clear_errors_or_valid_imports(world, tmp_path_factory, data):
    rec, changed, raw = data.draw(mutations(world["record"]))
    home = Home.open(tmp_path_factory.mktemp("prop"))
    api.remember(home, "pre-existing claim", topic="pre")
    before = _memories(home)
    f = tmp_path_factory.mktemp("f") / "x.jsonl"
    body = raw if raw is not None else json.dumps(rec).encode()  # ASCII escapes: surrogates survive
    if isinstance(body, str):
        body = body.encode()
    f.write_bytes(json.dumps(world["header"]).encode() + b"\n" + body + b"\n")
    try:
        rep = import_file(home, str(f), [str(world["clone"].root)])
    except CitegraphError as err:
        assert err.code == 2 and "\n" not in err.line() and err.line().startswith("citegraph: ")
        assert _memories(home) == before
        return
    # imported: a valid record. A receipt naming the clone's repository and a commit it has
    # is checked, so it differs from a genuine one only where nothing can check it; one that
    # names another repository or a commit the clone lacks is reported unverified.
    assert raw is None, changed
    genuine = world["record"]["citations"]
    unverified = {u["id"]: u["reason"] for u in rep.unverified}
    assert sorted([*rep.verified, *unverified]) == sorted(c["id"] for c in rec["citations"])
    for c in rec["citations"]:
        if (c["repository_id"], c["commit"]) == (genuine[0]["repository_id"], genuine[0]["commit"]):
            also = frozenset(IDENTITY) if "not re-extracted" in unverified.get(c["id"], "") else frozenset()
            assert genuine_but_unverifiable(c, genuine, also), (changed, c, unverified)
        else:
            assert c["id"] in unverified, (changed, c)
    assert len(rep.imported) + len(rep.updated) + len(rep.kept_local) == 1
    if rep.kept_local:
        return
    with MemoryStore.open(home) as ms:
        (mem,) = [m for m in ms.load() if (m.project, m.topic) == (rec["project"], rec["topic"])]
        assert mem.text == rec["text"]
        assert [c.to_dict() for c in mem.citations] == [{k: c.get(k) for k in RECEIPT_FIELDS}
                                                       for c in rec["citations"]]
