"""The MCP server (SPEC §11), driven over stdio by the ``mcp`` SDK's own client: tool
results carry the CLI's --json structure, errors are tool errors with the CLI's line and code."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory import api
from citegraph.server.mcp_server import max_text_bytes

SRC = '''class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 60)


def keep_key(request):
    return request.idempotency_key
'''

TOOLS = {"remember", "brief", "validate", "status", "workset"}  # the first five; all kept (index_status and
# workset_prepare are callable as unlisted older names of status and workset)


@pytest.fixture
def indexed(make_repo, home):
    repo = make_repo("svc", remote="https://example.com/org/svc.git")
    repo.write("src/retry.py", SRC)
    repo.write("docs/notes.md", "retry notes\n")
    repo.commit("c1")
    build_snapshot(repo.root, home)
    return repo


def run_session(home, steps, *extra):
    """Start `citegraph mcp` as a subprocess and run ``steps(session)`` against it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "citegraph.cli.main", "mcp", *extra],
        env={"CITEGRAPH_HOME": str(home.root), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        cwd=str(home.root))  # in no git repository: only callerCwd or the home choose one
    out = {}

    async def main():
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    with anyio.fail_after(90):
                        out["result"] = await steps(session)

    anyio.run(main)
    return out["result"]


def cli_json(run_cli, *args, cwd=None):
    res = run_cli(*args, cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_tools_over_stdio(indexed, home, run_cli):
    cwd = str(indexed.root)

    async def steps(s):
        r = {}
        r["tools"] = (await s.list_tools()).tools
        r["remember"] = await s.call_tool("remember", {
            "callerCwd": cwd, "text": "retries keep the idempotency key", "project": "svc", "topic": "retry",
            "codeRefs": ["src/retry.py::keep_key", "src/retry.py#L1-L3", "docs/notes.md"]})
        r["brief"] = await s.call_tool("brief", {"callerCwd": cwd, "task": "change the retry idempotency key",
                                                 "project": "svc", "budgetTokens": 1000})
        r["validate"] = await s.call_tool("validate", {"callerCwd": cwd, "project": "svc"})
        r["status"] = await s.call_tool("index_status", {"callerCwd": cwd})
        r["bad_ref"] = await s.call_tool("remember", {"callerCwd": cwd, "text": "x", "codeRefs": ["src/nope.py"]})
        r["bad_symbol"] = await s.call_tool("remember", {"callerCwd": cwd, "text": "x",
                                                         "codeRefs": ["src/retry.py::Nope"]})
        r["relative"] = await s.call_tool("index_status", {"callerCwd": "relative/dir"})
        r["unknown_arg"] = await s.call_tool("validate", {"callerCwd": cwd, "bogus": 1})
        r["wrong_type"] = await s.call_tool("remember", {"callerCwd": cwd, "text": "x", "codeRefs": "src/retry.py"})
        r["unknown_tool"] = await s.call_tool("nope", {})
        r["not_repo"] = await s.call_tool("index_status", {"callerCwd": "/"})
        # The CLI's --json output for the same state (compared below).
        r["cli_validate"] = cli_json(run_cli, "validate", "--project", "svc", "--format", "json", cwd=cwd)
        r["cli_status"] = cli_json(run_cli, "status", "--json", cwd=cwd)
        r["cli_bad_ref"] = run_cli("remember", "--text", "x", "--code-ref", "src/nope.py", cwd=cwd)
        indexed.write("src/retry.py", SRC + "\n\ndef extra():\n    return 0\n")  # dirty, never indexed by hand
        r["after_edit"] = await s.call_tool("remember", {"callerCwd": cwd, "text": "x",
                                                         "codeRefs": ["src/retry.py::extra"]})
        return r

    r = run_session(home, steps)

    tools = {t.name: t for t in r["tools"]}
    assert TOOLS <= set(tools)
    for name in TOOLS:
        assert "callerCwd" in tools[name].input_schema["properties"]
        # optional: the client's roots or the one registered repository stand in (test_mcp_schemas.py)
        assert "callerCwd" not in tools[name].input_schema.get("required", [])
    assert tools["remember"].input_schema["properties"]["codeRefs"]["type"] == "array"
    # The memory text's limit is published; the generic bounds against hostile input are
    # enforced, not repeated on every argument (docs/mcp.md, "Bounds and hostile input").
    assert tools["remember"].input_schema["properties"]["text"]["maxLength"] == max_text_bytes()
    assert "maxItems" not in tools["remember"].input_schema["properties"]["codeRefs"]

    rem = r["remember"]
    assert not rem.is_error, rem.content
    sc = rem.structured_content
    assert sc["id"].startswith("cgm_") and [c["kind"] for c in sc["citations"]] == ["symbol", "span", "file"]
    assert sc["citations"][0]["handle"].startswith("cgs_")
    assert sc["id"] in rem.content[0].text

    # structuredContent equals the CLI's --json output.
    assert r["validate"].structured_content == r["cli_validate"]
    val = r["validate"].structured_content
    assert val["memories"][0]["freshness"] == "fresh" and val["summary"]["exact"] == 3
    assert "fresh" in r["validate"].content[0].text
    status = r["cli_status"]
    assert r["status"].structured_content == status and status["exact_current"] is True

    if hasattr(api, "brief"):
        b = r["brief"]
        assert not b.is_error, b.content
        assert b.structured_content["coverage"] in ("supported", "partial", "none")
        assert sc["id"] in [m["id"] for m in b.structured_content["memories"]]
    else:
        assert r["brief"].is_error and "not available" in r["brief"].content[0].text

    # A bad ref is a tool error with the CLI's one line and exit code; nothing stored.
    bad = r["bad_ref"]
    assert bad.is_error
    cli = r["cli_bad_ref"]
    assert bad.content[0].text == cli.stderr.strip()
    assert bad.meta["citegraph.dev/error"]["code"] == cli.returncode == 2
    assert r["bad_symbol"].is_error and "candidates" in r["bad_symbol"].content[0].text

    for key in ("relative", "unknown_arg", "wrong_type", "unknown_tool"):
        res = r[key]
        assert res.is_error, key
        assert res.content[0].text.startswith("citegraph: ")
        assert res.meta["citegraph.dev/error"]["code"] == 2, key
    assert r["wrong_type"].meta["citegraph.dev/error"]["kind"] == "invalid-argument"
    assert "'codeRefs'" in r["wrong_type"].content[0].text
    assert r["unknown_arg"].meta["citegraph.dev/error"]["kind"] == "usage"
    assert r["not_repo"].is_error and r["not_repo"].meta["citegraph.dev/error"]["code"] == 3
    assert "not a git repository" in r["not_repo"].content[0].text

    # The server runs the resident service: a capture right after an edit waits for the
    # overlay of the new state (no `citegraph index`) and cites the new symbol, dirty.
    res = r["after_edit"]
    assert not res.is_error, res.content
    assert [(c["ref"], c["dirty"]) for c in res.structured_content["citations"]] == [("src/retry.py::extra", True)]
    assert r["status"].structured_content["service"]["used"] is True


def test_without_the_service_an_unindexed_edit_is_not_current(indexed, home):
    """`citegraph mcp --no-service`: no exact-current snapshot after an edit is a
    retryable tool error (exit code 1) that names both ways out."""
    cwd = str(indexed.root)

    async def steps(s):
        indexed.write("src/retry.py", SRC + "\n\ndef extra():\n    return 0\n")
        return await s.call_tool("remember", {"callerCwd": cwd, "text": "x", "codeRefs": ["src/retry.py"]})

    res = run_session(home, steps, "--no-service")
    assert res.is_error
    err = res.meta["citegraph.dev/error"]
    assert err["code"] == 1 and err["retryable"] is True
    # worded for MCP: the tool to call, not the CLI command (the service is how the server runs)
    assert "call the `index` tool" in res.content[0].text and "citegraph serve" in res.content[0].text
    assert "--" not in res.content[0].text


def test_a_revision_naming_itself_in_supersedes_stays_citable(indexed, home):
    """Issue 22 item 1 through the MCP tools: revision 2 of M written with ``supersedes: M``
    is still found by ``cited`` and ``brief`` (it does not supersede itself)."""
    cwd = str(indexed.root)

    async def steps(s):
        first = await s.call_tool("remember", {"callerCwd": cwd, "text": "keys are kept", "topic": "keys",
                                               "codeRefs": ["src/retry.py::keep_key"]})
        mid = first.structured_content["id"]
        second = await s.call_tool("remember", {"callerCwd": cwd, "text": "keys are kept on retry",
                                                "topic": "keys", "supersedes": mid,
                                                "codeRefs": ["src/retry.py::keep_key"]})
        cited = await s.call_tool("cited", {"callerCwd": cwd, "codeRefs": ["src/retry.py"]})
        brief = await s.call_tool("brief", {"callerCwd": cwd, "task": "change keep_key",
                                            "codeRefs": ["src/retry.py"]})
        return mid, second, cited, brief

    mid, second, cited, brief = run_session(home, steps)
    assert not second.is_error and second.structured_content["revision"] == 2
    assert [m["id"] for m in cited.structured_content["memories"]] == [mid]
    assert mid in [m["id"] for m in brief.structured_content["memories"]]
