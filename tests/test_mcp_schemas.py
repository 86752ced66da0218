"""Every MCP tool through the official SDK client (``mcp.client.stdio.stdio_client`` +
``ClientSession``, spawning ``python -m citegraph.cli.main mcp``): its ``structuredContent``
validates against its published ``outputSchema`` (issue 12, acceptance 1), the text part
is the same JSON, errors are ``isError`` results without ``structuredContent`` whose
``_meta["citegraph.dev/error"]`` matches docs/schemas/mcp-error.schema.json
and worded for MCP, every tool and argument is described (acceptance 3), and ``callerCwd``
is optional where the client declares roots or one repository is registered."""

from __future__ import annotations

import json
import os
import sys

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from citegraph import schemas
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory import api
from citegraph.server.mcp_schema import output_schema
from citegraph.server.mcp_server import Dispatcher, mcp_wording
from citegraph.server.mcp_tools import TOOLS, WORKSET_OPS

LISTED = {n for n, t in TOOLS.items() if t.listed}

SRC = '''class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 60)


def keep_key(request):
    return request.idempotency_key
'''


def run_session(home, steps, roots: list[str] | None = None, *extra: str, cwd: str | None = None):
    """Start `citegraph mcp` and run ``steps(session)``; ``roots``: the client declares the
    roots capability and answers ``roots/list`` with these directories; ``cwd``: the
    server's working directory (default: the data home, in no git repository)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "citegraph.cli.main", "mcp", *extra],
        env={"CITEGRAPH_HOME": str(home.root), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        cwd=cwd or str(home.root))
    out = {}
    callback = None
    if roots is not None:
        async def callback(_ctx):
            return types.ListRootsResult(roots=[types.Root(uri=f"file://{r}") for r in roots])

    async def main():
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, list_roots_callback=callback) as session:
                    await session.initialize()
                    with anyio.fail_after(120):
                        out["result"] = await steps(session)

    anyio.run(main)
    return out["result"]


@pytest.fixture
def world(make_repo, home):
    r = make_repo("svc", remote="https://example.com/org/svc.git")
    r.write("src/retry.py", SRC)
    r.write("docs/notes.md", "retry notes\nmore\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    mid = api.remember(home, "retries keep the idempotency key", repo=r.root, project="svc", topic="key",
                       refs=["src/retry.py::keep_key", "docs/notes.md#L1-L1"])["id"]
    return {"repo": r, "root": str(r.root), "mid": mid}


def arguments(w: dict) -> dict[str, list[dict]]:
    """Valid calls of every tool, in an order that works (workset_create before the rest)."""
    root, mid = w["root"], w["mid"]
    return {
        "status": [{"callerCwd": root}], "index_status": [{"callerCwd": root}],
        "index": [{"callerCwd": root}, {"callerCwd": root, "rev": "HEAD"}],
        "find": [{"callerCwd": root, "name": "keep_key"}, {"callerCwd": root, "name": "next_delay", "limit": 5},
                 {"callerCwd": root, "name": "next_*", "kinds": ["method"], "path": "src"}],
        "symbols": [{"callerCwd": root, "file": "src/retry.py"}, {"file": os.path.join(root, "src/retry.py")}],
        "remember": [{"callerCwd": root, "text": "next_delay caps at 60", "project": "svc", "topic": "cap",
                      "codeRefs": ["src/retry.py::RetryPolicy.next_delay"], "kind": "durable"}],
        "cited": [{"callerCwd": root, "codeRefs": ["src/retry.py"]}],
        "refresh": [{"callerCwd": root, "all": True, "dryRun": True}, {"callerCwd": root, "memoryIds": [mid]}],
        "brief": [{"callerCwd": root, "task": "change the retry idempotency key", "budgetTokens": 1000}],
        "validate": [{"callerCwd": root}, {"callerCwd": root, "memoryIds": [mid], "project": "svc"},
                     {"callerCwd": root, "dependencyDepth": 2}],
        "list": [{}, {"project": "svc", "includeArchived": True}],
        "show": [{"memoryId": mid}],
        "history": [{"memoryId": mid}],
        "workset_create": [{"workset": "w", "paths": [root]}],
        "workset_add": [{"workset": "w", "paths": ["."], "callerCwd": root}],
        "workset_list": [{}],
        "workset_show": [{"workset": "w"}],
        "workset_prepare": [{"workset": "w", "concurrency": 1}],
        "workset_status": [{"workset": "w"}],
        "workset_remove": [{"workset": "w", "paths": [root]}],
        "workset": [{"op": "create", "workset": "w2", "paths": [root]}, {"op": "add", "workset": "w2", "paths": ["."],
                                                                        "callerCwd": root},
                    {"op": "list"}, {"op": "show", "workset": "w2"}, {"op": "prepare", "workset": "w2"},
                    {"op": "status", "workset": "w2"}, {"op": "remove", "workset": "w2", "paths": [root]}],
        "graph": [{"callerCwd": root, "op": op, "ref": "src/retry.py::keep_key"}
                  for op in ("callers", "callees", "deps", "dependents")]
        + [{"callerCwd": root, "op": "deps", "ref": "src/retry.py::RetryPolicy.next_delay", "depth": 2}],
        **{f"graph_{op}": [{"callerCwd": root, "ref": "src/retry.py::keep_key"},
                           {"callerCwd": root, "ref": "src/retry.py::RetryPolicy.next_delay", "depth": 2}]
           for op in ("callers", "callees", "deps", "dependents")},
    }


def result_schema(name: str, args: dict) -> str:
    """The docs/schemas file a call's result follows (the workset tool's op chooses)."""
    return WORKSET_OPS[args["op"]][0] if name == "workset" else TOOLS[name].outputs()[0]


def test_every_tool_result_matches_its_output_schema(world, home):
    table = arguments(world)
    assert set(table) == set(TOOLS), "a tool without a call here (add one)"

    async def steps(s):
        listed = {t.name: t for t in (await s.list_tools()).tools}
        results = []
        for name, calls in table.items():
            for args in calls:
                # The SDK client itself validates structuredContent against the outputSchema
                # (it raises on a mismatch); it is checked again below, independently.
                results.append((name, args, await s.call_tool(name, args)))
        errors = [await s.call_tool("show", {"memoryId": "cgm_0000000000000000"}),
                  await s.call_tool("validate", {"callerCwd": world["root"], "at": "nope"}),
                  await s.call_tool("find", {"callerCwd": "relative", "name": "keep_key"}),
                  await s.call_tool("remember", {"callerCwd": world["root"], "text": "x", "codeRefs": ["../x"]})]
        return listed, results, errors

    listed, results, errors = run_session(home, steps)
    assert set(listed) == LISTED  # older names (aliases) are callable, not listed
    for name, args, res in results:
        assert not res.is_error, (name, args, res.content[0].text)
        out_schema = listed[name].output_schema if name in listed else TOOLS[name].output_schema()
        # the structure of the CLI's --json file (its constraints and prose stay in docs/schemas/)
        assert out_schema == output_schema(*TOOLS[name].outputs())
        jsonschema.Draft202012Validator(out_schema).validate(res.structured_content)
        # the full file, constraints and formats (timestamps) included
        schemas.validator(result_schema(name, args)).validate(res.structured_content)
        assert json.loads(res.content[0].text) == res.structured_content, name  # the text part is the JSON
    error_schema = schemas.validator("mcp-error")
    for res in errors:
        assert res.is_error
        # No structuredContent on an error: it would not match the tool's outputSchema (the
        # TypeScript SDK throws -32602 then; tests/test_mcp_node.py); the details ride in _meta.
        assert res.structured_content is None
        error_schema.validate(res.meta["citegraph.dev/error"])
        assert res.content[0].text == res.meta["citegraph.dev/error"]["message"]
        assert " --" not in res.content[0].text, res.content[0].text  # no CLI flags in MCP errors
    assert "`callerCwd`" in errors[2].content[0].text


def test_every_tool_and_argument_is_described(home):
    async def steps(s):
        return (await s.list_tools()).tools

    tools = run_session(home, steps)
    assert {t.name for t in tools} == LISTED
    for t in tools:
        assert t.title and t.title.strip(), t.name
        assert t.description and len(t.description) >= 40, t.name
        assert t.output_schema and t.output_schema.get("type") == "object", t.name
        a = t.annotations
        assert a is not None and a.title is None  # the tool's own title serves (one copy)
        assert isinstance(a.read_only_hint, bool) and a.open_world_hint is False  # local repositories only
        # the MCP spec gives destructive/idempotent meaning only when readOnlyHint is false
        hints = (a.destructive_hint, a.idempotent_hint)
        assert hints == (None, None) if a.read_only_hint else all(isinstance(h, bool) for h in hints), t.name
        assert a.read_only_hint == TOOLS[t.name].read_only
        for arg, prop in t.input_schema["properties"].items():
            assert isinstance(prop.get("description"), str) and prop["description"].strip(), (t.name, arg)
    by_name = {t.name: t.annotations for t in tools}
    assert not by_name["remember"].read_only_hint and not by_name["remember"].idempotent_hint
    # one workset tool for every op: its hints are those of its strongest op (remove, create)
    assert by_name["workset"].destructive_hint is True and by_name["workset"].idempotent_hint is False
    assert not by_name["workset"].read_only_hint
    assert by_name["index"].idempotent_hint is True and not by_name["index"].read_only_hint
    assert all(by_name[n].read_only_hint for n in ("find", "symbols", "status", "brief", "validate", "list", "show",
                                                   "cited", "history", "graph"))
    # the older names keep their own, finer hints
    assert TOOLS["workset_remove"].destructive and TOOLS["workset_show"].read_only


def test_caller_cwd_comes_from_the_clients_roots(world, make_repo, home, tmp_path):
    other = make_repo("lib")
    other.write("lib.py", "def f():\n    return 1\n")
    other.commit("l1")
    build_snapshot(other.root, home)  # two repositories registered: the roots decide
    plain = tmp_path / "not-a-repo"
    plain.mkdir()

    async def steps(s):
        return (await s.call_tool("status", {}),
                await s.call_tool("find", {"name": "keep_key"}),
                await s.call_tool("status", {"callerCwd": str(other.root)}))  # an explicit one wins

    status, found, explicit = run_session(home, steps, roots=[str(plain), world["root"] + "/src"])
    assert not status.is_error, status.content[0].text
    assert status.structured_content["repository_id"] == api_repository_id(world["root"])
    assert [s["qualified_name"] for s in found.structured_content["symbols"]] == ["keep_key"]
    assert explicit.structured_content["repository_id"] == api_repository_id(str(other.root))

    async def two_roots(s):
        return await s.call_tool("status", {})

    both = run_session(home, two_roots, roots=[world["root"], str(other.root)])
    assert both.is_error and "`callerCwd`" in both.content[0].text and "2 git repositories" in both.content[0].text

    async def no_roots(s):
        return await s.call_tool("brief", {"task": "retry key"})

    res = run_session(home, no_roots)
    assert res.is_error and res.meta["citegraph.dev/error"]["code"] == 2
    assert "pass the `callerCwd` argument" in res.content[0].text


def test_caller_cwd_is_the_servers_own_working_directory(world, make_repo, home):
    """Issue 22 item 8: `citegraph mcp` started inside a repository, by a client that
    declares no roots, serves that repository without `callerCwd` — even when the data
    home holds several (before: every call was refused, naming `callerCwd`)."""
    other = make_repo("lib")
    other.write("lib.py", "def f():\n    return 1\n")
    other.commit("l1")
    build_snapshot(other.root, home)

    async def steps(s):
        return (await s.call_tool("status", {}),
                await s.call_tool("find", {"name": "keep_key"}),
                await s.call_tool("remember", {"text": "keys are kept", "codeRefs": ["retry.py::keep_key"]}))

    status, found, remembered = run_session(home, steps, cwd=world["root"] + "/src")
    assert not status.is_error, status.content[0].text
    assert status.structured_content["repository_id"] == api_repository_id(world["root"])
    assert [s["qualified_name"] for s in found.structured_content["symbols"]] == ["keep_key"]
    assert not remembered.is_error, remembered.content[0].text  # refs relative to the server's cwd
    assert remembered.structured_content["citations"][0]["ref"] == "src/retry.py::keep_key"

    async def with_roots(s):
        return await s.call_tool("status", {})

    # the client's roots still come first
    res = run_session(home, with_roots, roots=[str(other.root)], cwd=world["root"])
    assert res.structured_content["repository_id"] == api_repository_id(str(other.root))


def test_caller_cwd_is_the_one_registered_repository(world, home):
    async def steps(s):
        return await s.call_tool("validate", {}), await s.call_tool("brief", {"task": "retry key"})

    validated, brief = run_session(home, steps)  # no roots declared; one repository in the home
    assert not validated.is_error, validated.content[0].text
    assert [m["id"] for m in validated.structured_content["memories"]] == [world["mid"]]
    assert validated.structured_content["memories"][0]["freshness"] == "fresh"
    assert not brief.is_error and brief.structured_content["memories"][0]["id"] == world["mid"]


def api_repository_id(path: str) -> str:
    from citegraph.indexer import gitrepo

    return gitrepo.repository_identity(gitrepo.open_repository(path)).repository_id


@pytest.mark.parametrize("line, worded", [
    ("citegraph: x — pass --repo PATH", "citegraph: x — pass the `callerCwd` argument"),
    ("citegraph: y — run `citegraph index` (or `citegraph serve`)", "citegraph: y — call the `index` tool"),
    ("citegraph: z — run citegraph index --rev abc1, then the check",
     "citegraph: z — call the `index` tool with the `rev` argument, then the check"),
    ("--code-ref ignored: no such file", "the `codeRefs` argument ignored: no such file"),
    ("citegraph: w — run citegraph workset prepare w", "citegraph: w — call the `workset` tool with op prepare"),
    ("citegraph: h — choose another --home", "citegraph: h — choose another --home"),  # how the server started
    ("citegraph: a--repo-b stays", "citegraph: a--repo-b stays"),
])
def test_errors_are_worded_for_mcp(line, worded):
    assert mcp_wording(line) == worded


def test_a_cli_flag_in_an_error_becomes_the_tool_argument(home, tmp_path, run_cli):
    """The same failure: the CLI names its flag, the MCP tool its argument."""
    plain = tmp_path / "plain"
    plain.mkdir()
    cli = run_cli("validate", "--json", cwd=plain)
    assert cli.returncode == 3 and "--repo" in cli.stderr

    async def main():
        return await Dispatcher(home).call("validate", {"callerCwd": str(plain)})

    out = anyio.run(main)
    assert out.is_error and out.data["error"]["code"] == 3
    assert "pass the `callerCwd` argument" in out.text and "--" not in out.text
    assert "not a git repository" in out.text and "not a git repository" in cli.stderr  # the CLI's what



def test_find_tool_ranks_and_filters_like_the_cli(world, home):
    """MCP find takes the CLI's --kind/--path filters and returns the match tier."""
    root = world["root"]

    async def steps(s):
        return (await s.call_tool("find", {"callerCwd": root, "name": "next_*", "kinds": ["method"],
                                           "path": "src"}),
                await s.call_tool("find", {"callerCwd": root, "name": "next_delay", "kinds": ["class"]}))

    hit, miss = run_session(home, steps)
    rows = hit.structured_content["symbols"]
    assert [r["qualified_name"] for r in rows] == ["RetryPolicy.next_delay"]
    assert rows[0]["match"] == "glob" and rows[0]["kind"] == "method"
    assert miss.structured_content["symbols"] == []


def test_the_tool_list_is_lean(home):
    """Issue 22 item 4 (SPEC §11): tools/list is read into every agent's context and stays
    within 30,000 bytes as the client reads it off the wire (59,791 bytes for 20 tools
    before; 93.5 KB for 24 before that). Output schemas are the structure of the
    docs/schemas files (tests/test_mcp_output_schema.py), descriptions one line, older
    names callable but unlisted; docs/mcp.md "Lean tools" says what was chosen."""
    from citegraph.bench.mcp_tools_size import tools_list_line

    line = tools_list_line(str(home.root), str(home.root))
    tools = json.loads(line)["result"]["tools"]
    assert len(line.rstrip(b"\n")) <= 30_000, len(line)
    names = {t["name"] for t in tools}
    assert names == LISTED and "graph" in names and "workset" in names
    assert not names & {"index_status", "graph_callers", "graph_deps", "workset_create", "workset_list"}
    for t in tools:
        assert "\n" not in t["description"] and len(t["description"]) <= 140, t["name"]
        for arg, prop in t["inputSchema"]["properties"].items():
            assert len(prop["description"]) <= 120, (t["name"], arg)

    def prose(o, in_props=False):
        if isinstance(o, list):
            return any(prose(x) for x in o)
        if not isinstance(o, dict):
            return False
        return any((not in_props and k in ("description", "title", "$comment", "pattern", "format")) or
                   prose(v, not in_props and k in ("properties", "$defs")) for k, v in o.items())

    assert not any(prose(t["outputSchema"]) for t in tools)


def test_the_workset_tool_takes_each_ops_own_arguments(world, home):
    """One `workset` tool for seven ops: an argument of another op, or a missing one this
    op needs, is a usage error naming it (the older workset_<op> tools take only theirs);
    `callerCwd`, which agents pass to every tool, every op accepts."""
    async def main():
        d = Dispatcher(home)
        return [await d.call("workset", args) for args in (
            {"op": "show", "workset": "w", "paths": [world["root"]]},
            {"op": "prepare"},
            {"op": "add", "workset": "w"},
            {"op": "list", "concurrency": 2},
            {"op": "create", "workset": "w", "paths": [world["root"]]},
            {"op": "list"},
            {"op": "show", "workset": "w", "callerCwd": world["root"]})]  # callerCwd: every op takes it

    other_op, no_name, no_paths, list_extra, created, listed, shown = anyio.run(main)
    for out, words in ((other_op, "op show takes no `paths`"), (no_name, "op prepare needs the `workset`"),
                       (no_paths, "op add needs the `paths`"), (list_extra, "op list takes no `concurrency`")):
        assert out.is_error and out.data["error"]["kind"] == "usage" and out.data["error"]["code"] == 2, out.text
        assert words in out.text and " --" not in out.text, out.text
    assert not created.is_error and created.data["members"][0]["path"] == world["root"]
    assert [w["name"] for w in listed.data["worksets"]] == ["w"]
    assert shown.data == created.data
