"""Issue 20, item 11 (the service and the hook): malformed requests to a real service
get one clear usage refusal — never "internal error … AttributeError" or "embedded null
byte" — and the service keeps answering; the hook (through the service and one-shot)
refuses a lone-surrogate or 100k-character ``file_path`` in one line that names no
exception class, and never blocks the edit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from service_helpers import TIMEOUT, needs_service, wait_exact

from citegraph.server import client

PY = "def f():\n    return 1\n"


def raw(home, line: bytes) -> dict:
    """One raw request line to the service; its answer."""
    s, _ = client.connect(home, 5)
    try:
        s.settimeout(TIMEOUT)
        s.sendall(line + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    return json.loads(buf)


@needs_service
def test_malformed_requests_are_refused_clearly(repo, home, run_cli, serve):
    repo.write("a.py", PY)
    head = repo.commit("c1")
    serve(str(repo.root))
    wait_exact(run_cli, repo.root, head, False)
    r = json.dumps(str(repo.root))[1:-1].encode()
    long = b"x" * 100_000
    cases = {
        b'{"op":"validate","args":[1]}': "args must be a JSON object, not list",
        b'{"op":"validate","args":"x"}': "args must be a JSON object, not str",
        b'{"op":"status","args":5}': "args must be a JSON object, not int",
        b'{"op":"status","args":{"path":"/tmp/a\\u0000b"}}': "argument path holds a NUL character",
        b'{"op":"status","args":{"path":"\\ud800"}}': "argument path is not valid UTF-8",
        b'{"op":"symbols","args":{"file":"' + r + b'/\\ud800.py"}}': "argument file is not valid UTF-8",
        b'{"op":"validate","args":{"repo_paths":["' + r + b'\\u0000"]}}': "argument repo_paths[0] holds a NUL",
        b'{"op":"validate","args":{"memory_ids":["\\ud800"]}}': "argument memory_ids[0] is not valid UTF-8",
        b'{"op":"remember","args":{"text":"x","refs":["a.py\\u0000"],"repo":"' + r + b'"}}':
            "argument refs[0] holds a NUL",
        b'{"op":"hook_pre_edit","args":{"file":"' + r + b'/\\udcff"}}': "argument file is not valid UTF-8",
        b'{"op":"brief","args":{"task":"\\ud800"}}': "argument task is not valid UTF-8",
        b'{"op":"graph","args":{"repo":"' + r + b'","op":"\\ud800","ref":"a.py::f"}}': "argument op is not valid",
        b'{"op":"status","args":{"path":{"a":1}}}': "argument path is not a string",
        b'{"op":"status","args":{"path":' + b'[' * 50 + b']' * 50 + b'}}': "nested too deeply",
        b'{"op":"index","args":{"path":"' + long + b'"}}': "File name too long",
        b'{"op":"hook_pre_edit","args":{"file":"/' + long + b'"}}': "File name too long",
    }
    for line, needle in cases.items():
        msg = raw(home, line)
        assert msg["ok"] is False, line[:80]
        err = msg["error"]
        assert err["kind"] == "usage" and err["code"] == 2, (line[:80], err)
        assert needle in err["what"], (line[:80], err["what"][:300])
        assert "internal error" not in err["what"] and "Error:" not in err["what"], err["what"][:300]
        assert len(err["what"]) < 400  # a 100 kB path is never echoed whole
    assert raw(home, b'{"op":"ping","args":null}')["ok"] is True  # still answering
    mem = run_cli("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref", "a.py::f")
    assert mem.returncode == 0, mem.stderr


def hook(home, event: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", "hook", "pre-edit", *args], input=event,
                          env=env, capture_output=True, text=True, timeout=TIMEOUT)


def check_refused(p: subprocess.CompletedProcess, needle: str) -> None:
    assert p.returncode == 1 and p.stdout == "", (p.returncode, p.stdout, p.stderr)  # never 2: never blocks
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], p.stderr[:500]
    assert "Traceback" not in p.stderr and "Error:" not in lines[0] and "Error]" not in lines[0], lines[0][:300]
    assert len(lines[0]) < 400


@needs_service
def test_the_hook_refuses_impossible_paths_in_one_line(repo, home, run_cli, serve):
    repo.write("a.py", PY)
    head = repo.commit("c1")
    events = {
        json.dumps({"tool_input": {"file_path": str(repo.root) + "/\udcff.py"}}): "not valid UTF-8",
        json.dumps({"tool_input": {"file_path": "\ud800"}}): "not valid UTF-8",
        json.dumps({"tool_input": {"file_path": str(repo.root) + "/" + "y" * 100_000}}): "more than a path can be",
        json.dumps({"tool_input": {"notebook_path": "/" + "n" * 5000}}): "more than a path can be",
        json.dumps({"tool_input": {"file_path": str(repo.root) + "/" + "z" * 300}}): "File name too long",
    }
    for ev, needle in events.items():  # one-shot (no service yet, then forced)
        check_refused(hook(home, ev), needle)
        check_refused(hook(home, ev, "--no-service"), needle)
    serve(str(repo.root))
    wait_exact(run_cli, repo.root, head, False)
    for ev, needle in events.items():
        check_refused(hook(home, ev), needle)
    ok = hook(home, json.dumps({"tool_input": {"file_path": str(repo.root / "a.py")}}))
    assert (ok.returncode, ok.stderr) == (0, "")
