"""Every CLI command's ``--json`` output validates against its JSON Schema (issue 12,
acceptance 1; SPEC §16, §19).

The command list comes from walking the Click group recursively, so a new command fails
``test_every_command_is_covered`` until it has an ``@outputs`` schema, a ``--json`` flag
and an invocation here. The schemas are the files of docs/schemas/, read through
``citegraph.schemas`` (the same loader the MCP server's ``outputSchema``s use).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import click
import jsonschema
import pytest
from click.testing import CliRunner

from citegraph import schemas
from citegraph.cli.main import cli
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory import api

EXEMPT = {"mcp": "its output is the MCP protocol; tests/test_mcp_schemas.py checks every tool's "
                 "structuredContent against its outputSchema"}
ALWAYS_JSON = {"hook pre-edit", "hook session-start"}  # a Claude Code hook answers in JSON only
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def leaves(group: click.Group, prefix: tuple[str, ...] = ()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        path = (*prefix, name)
        if isinstance(cmd, click.Group):
            yield from leaves(cmd, path)
        else:
            yield " ".join(path), cmd


def invocations(w: dict) -> dict[str, list[tuple[list[str], set[int], str]]]:
    """Per command: (arguments, accepted exit codes, how to read stdout: doc | lines)."""
    root, mid, other = w["root"], w["mid"], w["other"]
    return {
        "index": [(["index", root, "--json"], {0}, "doc")],
        "status": [(["status", root, "--json"], {0}, "doc")],
        "symbols": [(["symbols", os.path.join(root, "src/retry.py"), "--json"], {0}, "doc")],
        "find": [(["find", "delay", "--repo", root, "--json"], {0}, "doc")],
        "remember": [(["remember", "--text", "key is one", "--topic", "key", "--repo", root,
                       "--code-ref", "src/retry.py::key", "--code-ref", "notes.txt#L1-L2", "--json"], {0}, "doc")],
        "list": [(["list", "--json"], {0}, "doc"), (["list", "--all", "--json"], {0}, "doc")],
        "show": [(["show", mid, "--json"], {0}, "doc")],
        "history": [(["history", mid, "--json"], {0}, "doc")],
        "validate": [(["validate", "--repo", root, "--json"], {0}, "doc"),
                     (["validate", "--repo", root, "--format", "json"], {0}, "doc"),
                     (["validate", "--repo", root, "--format", "jsonl"], {0}, "lines:memory")],
        "brief": [(["brief", "--task", "retry delay", "--repo", root, "--json"], {0}, "doc"),
                  (["brief", "--task", "retry delay", "--repo", root, "--format", "json"], {0}, "doc")],
        "cited": [(["cited", "src/retry.py", "--repo", root, "--json"], {0}, "doc")],
        **{f"graph {op}": [(["graph", op, "src/retry.py::Retry.delay", "--repo", root, "--json"], {0}, "doc")]
           for op in ("callers", "callees", "deps", "dependents")},
        "refresh": [(["refresh", "--all", "--repo", root, "--dry-run", "--json"], {0}, "doc")],
        "check": [(["check", "--base", "HEAD~1", "--repo", root, "--json"], {0, 1}, "doc"),
                  (["check", "--base", "HEAD~1", "--repo", root, "--format", "json"], {0, 1}, "doc")],
        "report": [(["report", "--repo", root, "--json"], {0}, "doc"),
                   (["report", "--repo", root, "--format", "json"], {0}, "doc")],
        "repo show": [(["repo", "show", root, "--json"], {0}, "doc")],
        "repo move": [(["repo", "move", "https://a.example/x.git", "https://b.example/y.git", "--json"], {0}, "doc")],
        "gc": [(["gc", "--dry-run", "--json"], {0}, "doc"), (["gc", "--keep-last", "5", "--json"], {0}, "doc")],
        "workset create": [(["workset", "create", "w", root, "--json"], {0}, "doc")],
        "workset add": [(["workset", "add", "w", w["root2"], "--json"], {0}, "doc")],
        "workset remove": [(["workset", "remove", "w", w["root2"], "--json"], {0}, "doc")],
        "workset list": [(["workset", "list", "--json"], {0}, "doc")],
        "workset status": [(["workset", "status", "w", "--json"], {0, 1}, "doc")],
        "workset prepare": [(["workset", "prepare", "w", "--json"], {0}, "doc")],
        "workset show": [(["workset", "show", "w", "--json"], {0}, "doc")],
        "workset delete": [(["workset", "delete", "w", "--json"], {0}, "doc")],
        "publish": [(["publish", "--out", w["pub"], "--json"], {0, 1}, "doc")],
        "export": [(["export", "--parquet", w["ckpt"], "--repo", root, "--json"], {0}, "doc")],
        "import": [(["import", w["pub"], "--repo", root, "--json"], {0}, "doc"),
                   (["import", "--parquet", w["ckpt"], "--repo", root, "--json"], {0}, "doc")],
        "batch validate": [(["batch", "validate", "--parquet", w["ckpt"], "--scheduler", "inline", "--out",
                             w["batch_out"], "--repo", root, "--json"], {0}, "doc")],
        "import-legacy": [(["import-legacy", w["legacy"], "--json"], {0}, "doc")],
        "hook pre-edit": [(["hook", "pre-edit"], {0}, "doc")],
        "hook session-start": [(["hook", "session-start"], {0}, "doc")],
        "watch": [(["watch", root, "--once", "--json"], {0}, "lines")],
        "archive": [(["archive", other, "--json"], {0}, "doc")],
        "forget": [(["forget", other, "--yes", "--json"], {0}, "doc")],
        "serve": [],  # run as a process: test_serve_json_events
    }


@pytest.fixture
def world(make_repo, home, tmp_path):
    r = make_repo("svc", remote="https://example.com/org/svc.git")
    r.write("src/retry.py", "class Retry:\n    def delay(self, n):\n        return 2 ** n\n\n\ndef key():\n    return 1\n")
    r.write("notes.txt", "a\nb\nc\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    mid = api.remember(home, "retry doubles the delay", repo=r.root, refs=["src/retry.py::Retry.delay"],
                       topic="delay")["id"]
    other = api.remember(home, "notes hold a", repo=r.root, refs=["notes.txt#L1-L1"], topic="notes")["id"]
    api.remember(home, "a handoff", kind="handoff", topic="handoff", repo=r.root)
    r.write("src/retry.py", "class Retry:\n    def delay(self, n):\n        return 3 ** n\n\n\ndef key():\n    return 1\n")
    r.commit("c2")
    build_snapshot(r.root, home)
    r2 = make_repo("lib")
    r2.write("lib.py", "def f():\n    return 1\n")
    r2.commit("l1")
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text(json.dumps({"text": "legacy claim", "source_commit": r.head(), "created_at": 1700000000}) + "\n")
    return {"repo": r, "root": str(r.root), "root2": str(r2.root), "mid": mid, "other": other,
            "pub": str(tmp_path / "pub.jsonl"), "legacy": str(legacy), "ckpt": str(tmp_path / "ckpt"),
            "batch_out": str(tmp_path / "batch")}


def check_times(doc, where: str) -> None:
    """Every ``*_at`` field is an ISO 8601 UTC string, never an epoch number."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k.endswith("_at") or (k == "at" and "event" in doc):
                assert v is None or (isinstance(v, str) and TIME.match(v)), f"{where}: {k}={v!r}"
            check_times(v, where)
    elif isinstance(doc, list):
        for v in doc:
            check_times(v, where)


def validate(schema: str, doc, where: str, definition: str | None = None) -> None:
    errors = sorted(schemas.validator(schema, definition).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, f"{where}: {errors[0].message} at {list(errors[0].absolute_path)}"
    check_times(doc, where)


def test_every_command_is_covered(world):
    table = invocations(world)
    seen = dict(leaves(cli))
    assert set(seen) == set(table) | set(EXEMPT), "a command without an invocation here (or one gone)"
    for path, cmd in seen.items():
        if path in EXEMPT:
            continue
        schema = getattr(cmd, "output_schema", None)
        assert schema in schemas.names(), f"{path}: no @outputs schema ({schema!r})"
        flags = {o for p in cmd.params for o in getattr(p, "opts", [])}
        assert "--json" in flags or path in ALWAYS_JSON, f"{path}: no --json"


def test_every_json_output_matches_its_schema(world, home, monkeypatch):
    seen = dict(leaves(cli))
    runner = CliRunner()
    monkeypatch.chdir(world["root"])
    hook_event = json.dumps({"hook_event_name": "PreToolUse", "cwd": world["root"],
                             "tool_input": {"file_path": os.path.join(world["root"], "src/retry.py")}})
    checked = set()
    for path, runs in invocations(world).items():
        schema = seen[path].output_schema
        for args, codes, how in runs:
            stdin = hook_event if path.startswith("hook") else None
            res = runner.invoke(cli, ["--home", str(home.root), *args, "--no-service"]
                                if "--no-service" in {o for p in seen[path].params for o in getattr(p, "opts", [])}
                                else ["--home", str(home.root), *args], input=stdin)
            where = " ".join(args)
            assert res.exit_code in codes, f"{where}: exit {res.exit_code}: {res.output}"
            out = res.stdout
            if how.startswith("lines"):
                lines = [json.loads(x) for x in out.splitlines() if x.strip()]
                assert lines, f"{where}: no output"
                for doc in lines:
                    validate(schema, doc, where, how.partition(":")[2] or None)
            else:
                validate(schema, json.loads(out), where)
            checked.add(path)
    assert checked == set(seen) - set(EXEMPT) - {"serve"}


def test_serve_json_events(home, make_repo, tmp_path):
    r = make_repo("svc")
    r.write("a.py", "def f():\n    return 1\n")
    r.commit("c1")
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    p = subprocess.Popen([sys.executable, "-m", "citegraph.cli.main", "serve", "--json", str(r.root)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    events = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            events.append(json.loads(line))
            if events[-1]["event"] in ("published", "reused"):
                break
    finally:
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=60)
    events += [json.loads(x) for x in rest.splitlines() if x.strip()]
    assert p.returncode == 0
    assert {"listening", "stopped"} <= {e["event"] for e in events}
    for e in events:
        validate("watch-event", e, f"serve --json: {e['event']}")


@pytest.mark.parametrize("name", schemas.names())
def test_schemas_are_valid_and_self_contained_when_bundled(name):
    jsonschema.Draft202012Validator.check_schema(schemas.load(name))
    whole = schemas.bundled(name)
    jsonschema.Draft202012Validator.check_schema(whole)
    refs = re.findall(r'"\$ref": "([^"]*)"', json.dumps(whole))
    assert all(r.startswith("#/") for r in refs), refs  # every cross-file $ref was inlined
    if name != "common":
        assert whole.get("type") == "object", "an MCP outputSchema must be an object schema"


def test_iso_time_is_utc_to_the_second():
    assert schemas.iso_time(0) == "1970-01-01T00:00:00Z"
    assert schemas.iso_time(1796149029.9) == "2026-12-01T18:17:09Z"
    out = schemas.to_output({"created_at": 1.0, "x": [{"published_at": 2}], "at": 3, "flag_at": True,
                             "seconds": 1.5})
    assert out == {"created_at": "1970-01-01T00:00:01Z", "x": [{"published_at": "1970-01-01T00:00:02Z"}],
                   "at": 3, "flag_at": True, "seconds": 1.5}


def test_the_schema_index_lists_every_schema():
    readme = (schemas.SCHEMA_DIR / "README.md").read_text(encoding="utf-8")
    for name in schemas.names():
        assert f"[`{name}`]({name}.schema.json)" in readme, name
