"""``citegraph mcp`` through the official TypeScript SDK client (issue 22 item 2), run by
Node as the report's browser test drives Chromium. The SDK validates a result's
``structuredContent`` against the tool's ``outputSchema`` and throws ``McpError -32602``
when it does not match — an error result that carried ``{"error": …}`` there never reached
the agent. Errors carry text + ``isError`` only (details in ``_meta``).

The SDK is installed by ``.ci/run`` into tests/node_sdk (package.json and lock committed,
node_modules ignored), never at test time; skipped only where ``node`` or that install is
absent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_mcp_schemas import LISTED, arguments, result_schema, world  # noqa: F401, F811  (world: the fixture)

from citegraph import schemas
from citegraph.graph.snapshot_builder import build_snapshot

NODE_DIR = Path(__file__).parent / "node_sdk"
NODE = shutil.which("node")
SDK = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"

pytestmark = pytest.mark.skipif(NODE is None or not SDK.exists(),
                                reason="node or tests/node_sdk's SDK is absent (.ci/run installs it)")

SRC = "def keep_key(request):\n    return request.idempotency_key\n"


def run_node(home, calls: list[dict]) -> dict:
    spec = {"command": sys.executable, "args": ["-m", "citegraph.cli.main", "mcp"],
            "env": {"CITEGRAPH_HOME": str(home.root), "PATH": os.environ.get("PATH", ""),
                    "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
            "cwd": str(home.root), "calls": calls}
    p = subprocess.run([NODE, str(NODE_DIR / "client.mjs"), json.dumps(spec)], cwd=NODE_DIR,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_tool_errors_reach_the_typescript_sdk_client(make_repo, home):
    r = make_repo("node")
    r.write("src/retry.py", SRC)
    r.commit("c1")
    build_snapshot(r.root, home)
    cwd = str(r.root)
    calls = [
        {"name": "find", "arguments": {"callerCwd": cwd, "name": "keep_key"}},
        {"name": "remember", "arguments": {"callerCwd": cwd, "text": "x", "codeRefs": ["src/nope.py"]}},
        {"name": "show", "arguments": {"memoryId": "cgm_0000000000000000"}},
        {"name": "validate", "arguments": {"callerCwd": cwd, "bogus": 1}},
        {"name": "index_status", "arguments": {"callerCwd": "relative/dir"}},
    ]
    out = run_node(home, calls)
    assert "find" in out["tools"] and "remember" in out["tools"]
    thrown = [(c["name"], x["thrown"]) for c, x in zip(calls, out["results"], strict=True) if "thrown" in x]
    assert thrown == []  # before the fix: every error call threw -32602 (structured content mismatch)
    ok, *errors = [x["result"] for x in out["results"]]
    assert not ok.get("isError") and [s["qualified_name"] for s in ok["structuredContent"]["symbols"]] == ["keep_key"]
    for res, code in zip(errors, (2, 2, 2, 2), strict=True):
        assert res["isError"] is True and "structuredContent" not in res
        line = res["content"][0]["text"]
        assert line.startswith("citegraph: ") and "\n" not in line
        assert res["_meta"]["citegraph.dev/error"] == {**res["_meta"]["citegraph.dev/error"], "message": line,
                                                       "code": code}


def test_every_listed_tool_result_passes_the_typescript_sdk_validation(world, home):  # noqa: F811
    """The TypeScript SDK compiles each published outputSchema (Ajv) and checks every
    result against it, throwing -32602 on a mismatch: every listed tool, every call of
    tests/test_mcp_schemas.py's table (the workset tool through every op, whose schema is
    one anyOf of the op results), passes — and the result still follows the full file."""
    calls = [{"name": name, "arguments": args} for name, many in arguments(world).items() if name in LISTED
             for args in many]
    assert {c["name"] for c in calls} == LISTED
    out = run_node(home, calls)
    assert set(out["tools"]) == LISTED
    for call, res in zip(calls, out["results"], strict=True):
        assert "thrown" not in res, (call, res)
        result = res["result"]
        assert not result.get("isError"), (call, result["content"][0]["text"])
        schemas.validator(result_schema(call["name"], call["arguments"])).validate(result["structuredContent"])
