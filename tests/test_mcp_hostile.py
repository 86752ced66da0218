"""The MCP server under hostile input (SPEC §12.1): every request is answered within a
bound (a parse error for malformed JSON), one slow repository never blocks calls for
another, and hostile argument values are one clear error that changes nothing.

Real ``citegraph mcp`` subprocesses are driven with raw stdin lines (what an SDK client
could never send); the dispatcher is driven in process with injected handlers."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stall_launcher import stalled_argv

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.memory.worksets import workset as ws
from citegraph.server.bounded_calls import Lanes
from citegraph.server.mcp_server import (
    MAX_LIST_ITEMS,
    MAX_STRING_CHARS,
    TOOLS,
    Dispatcher,
    ToolSpec,
    max_text_bytes,
)
from citegraph.server.mcp_stdio import stdio_transport

SRC = '''class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 60)


def keep_key(request):
    return request.idempotency_key
'''

WIRE_TIMEOUT_S = 60  # the bound a test waits for any one answer (the server's are far lower)


@pytest.fixture
def indexed(make_repo, home):
    repo = make_repo("svc")
    repo.write("src/retry.py", SRC)
    repo.write("docs/notes.md", "retry notes\n")
    repo.commit("c1")
    build_snapshot(repo.root, home)
    return repo


# --- a raw stdio client ------------------------------------------------------------------------

class RawServer:
    """``citegraph mcp`` as a subprocess spoken to line by line; every wait is bounded."""

    def __init__(self, home, *args: str, launcher: list[str] | None = None) -> None:
        env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
        cli = launcher or [sys.executable, "-m", "citegraph.cli.main"]
        self.proc = subprocess.Popen([*cli, "mcp", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                     cwd=home.root)  # in no git repository
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.pending: list[dict] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.stderr: list[bytes] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, msg: dict | bytes) -> None:
        data = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = WIRE_TIMEOUT_S) -> dict:
        if self.pending:
            return self.pending.pop(0)
        line = self.lines.get(timeout=timeout)
        return json.loads(line)  # every line the server writes is JSON

    def answer(self, rid, timeout: float = WIRE_TIMEOUT_S) -> dict:
        """The response with id ``rid`` (others are kept for later)."""
        deadline = time.monotonic() + timeout
        for i, msg in enumerate(self.pending):
            if msg.get("id") == rid:
                return self.pending.pop(i)
        while True:
            msg = json.loads(self.lines.get(timeout=max(0.01, deadline - time.monotonic())))
            if msg.get("id") == rid:
                return msg
            self.pending.append(msg)

    def initialize(self) -> dict:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "hostile-test", "version": "1"}}})
        res = self.answer(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return res

    def call(self, rid, name: str, arguments: dict | None = None) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments or {}}})

    def close(self, timeout: float = 30) -> int:
        """Close stdin; the server must exit by itself within ``timeout``."""
        try:
            self.proc.stdin.close()
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def raw_server(home):
    servers: list[RawServer] = []

    def start(*args: str, launcher: list[str] | None = None) -> RawServer:
        servers.append(RawServer(home, *args, launcher=launcher))
        return servers[-1]

    yield start
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=10)


def tool_error(msg: dict) -> dict:
    assert "result" in msg, msg
    res = msg["result"]
    assert res["isError"] is True, res
    assert "structuredContent" not in res, res  # it would not match the tool's outputSchema
    assert res["content"][0]["text"] == res["_meta"]["citegraph.dev/error"]["message"]
    assert res["content"][0]["text"].startswith("citegraph: ")
    return res["_meta"]["citegraph.dev/error"]


# --- (a) framing: parse errors, invalid requests -------------------------------------------------

def test_malformed_lines_get_jsonrpc_errors_and_service_continues(raw_server):
    s = raw_server()
    init = s.initialize()
    assert init["result"]["serverInfo"]["name"] == "citegraph"

    s.send(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"')  # truncated
    err = s.recv()
    assert err["id"] is None and err["error"]["code"] == -32700 and "Parse error" in err["error"]["message"]
    s.send(b"\xff\xfe not json at all")
    assert s.recv()["error"]["code"] == -32700
    s.send(b"NaN")
    assert s.recv()["error"]["code"] == -32700

    # Valid JSON that is not a JSON-RPC request: -32600, with the id when it has one.
    s.send(b"[]")
    assert s.recv()["error"]["code"] == -32600
    s.send(b'"just a string"')
    assert s.recv()["error"]["code"] == -32600
    s.send(b'{"jsonrpc": "2.0", "id": 7, "method": 5}')
    assert s.recv() == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600,
                                                             "message": "Invalid Request: method: Input should be a valid string"}}
    s.send(b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}')  # not a notification either
    err = s.recv()
    assert err["id"] is None and err["error"]["code"] == -32600
    # Deeper than the JSON parser goes: still answered, to the request's own id.
    deep = b"[" * 100_000 + b"]" * 100_000
    s.send(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "remember", '
           b'"arguments": {"callerCwd": "/", "codeRefs": ' + deep + b"}}}")
    err = s.answer(8)
    assert err["error"]["code"] == -32600 and "nested too deeply" in err["error"]["message"]
    s.send(b"")  # blank lines are ignored, not answered

    s.send({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
    tools = s.answer(9)["result"]["tools"]
    assert {t["name"] for t in tools} == {n for n, t in TOOLS.items() if t.listed}  # aliases unlisted
    assert s.close() == 0


async def _serve_pipes(home, max_message_bytes, lines: list[bytes], wanted: int) -> list[dict]:
    """The transport in process over OS pipes with a small message limit."""
    from citegraph.server.mcp_server import build_server

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    fin, fout = os.fdopen(in_r, "rb"), os.fdopen(out_w, "wb", buffering=0)
    server = build_server(home)
    got: list[dict] = []

    async def client() -> None:
        with os.fdopen(in_w, "wb", buffering=0) as w:
            for line in lines:
                await anyio.to_thread.run_sync(w.write, line + b"\n")
            reader = os.fdopen(out_r, "rb")
            while len(got) < wanted:
                got.append(json.loads(await anyio.to_thread.run_sync(reader.readline)))

    with anyio.fail_after(WIRE_TIMEOUT_S):
        async with stdio_transport(fin, fout, max_message_bytes=max_message_bytes) as (read, write):
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.run, read, write, server.create_initialization_options())
                await client()
                tg.cancel_scope.cancel()
    return got


def test_oversized_message_is_refused_with_its_id(home):
    init = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}}}).encode()
    big = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "remember", "arguments": {"callerCwd": "/", "text": "x" * 5000}}}).encode()
    ping = json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping"}).encode()
    got = anyio.run(_serve_pipes, home, 2000, [init, big, ping], 3)
    by_id = {m["id"]: m for m in got}
    assert by_id[5]["error"]["code"] == -32600 and "longer than 2000 bytes" in by_id[5]["error"]["message"]
    assert by_id[6]["result"] == {}  # the rest of the long line was skipped, the next one served


# --- (b) hostile strings on the wire --------------------------------------------------------------

def test_lone_surrogates_nul_and_bad_utf8_are_invalid_arguments(raw_server, indexed):
    cwd = str(indexed.root).encode()
    s = raw_server("--call-timeout", "20")
    s.initialize()
    # A raw "\udc80" escape: the SDK's own parser refuses it and the request went unanswered.
    s.send(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", '
           b'"arguments": {"callerCwd": "' + cwd + b'", "text": "a claim \\udc80"}}}')
    err = tool_error(s.answer(1))
    assert err["code"] == 2 and err["kind"] == "invalid-argument" and err["retryable"] is False
    assert "'text'" in err["message"] and "U+DC80" in err["message"]
    # Bytes that are not UTF-8 inside a string: the same error for that argument.
    s.send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "index_status", '
           b'"arguments": {"callerCwd": "' + cwd + b'/\xff\xfe"}}}')
    err = tool_error(s.answer(2))
    assert err["kind"] == "invalid-argument" and "'callerCwd'" in err["message"]
    # NUL inside a list item names the list and the item.
    s.call(3, "remember", {"callerCwd": str(indexed.root), "text": "x", "codeRefs": ["docs/notes.md", "a\u0000b"]})
    err = tool_error(s.answer(3))
    assert err["kind"] == "invalid-argument" and "'codeRefs' item 1" in err["message"] and "NUL" in err["message"]
    # A lone surrogate in the tool name: a usage error, written as valid JSON (escaped).
    s.send(b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "\\ud800", "arguments": {}}}')
    err = tool_error(s.answer(4))
    assert err["code"] == 2 and "unknown tool" in err["message"]
    # ... and in a method name: the SDK's own error, still answered.
    s.send(b'{"jsonrpc": "2.0", "id": 5, "method": "\\udfff"}')
    assert s.answer(5)["error"]["code"] == -32601
    # A 50 MB memory text: the text limit, as a tool error, without storing anything.
    s.send(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "remember", '
           b'"arguments": {"callerCwd": "' + cwd + b'", "text": "' + b"x" * 50_000_000 + b'"}}}')
    err = tool_error(s.answer(6))
    assert err["kind"] == "invalid-argument" and "too long" in err["message"]
    # A huge integer and deep nesting where a list of strings is expected.
    s.call(7, "brief", {"callerCwd": str(indexed.root), "task": "t", "budgetTokens": 10 ** 30})
    assert "out of range" in tool_error(s.answer(7))["message"]
    nested: list = ["x"]
    for _ in range(200):
        nested = [nested]
    s.call(8, "validate", {"callerCwd": str(indexed.root), "memoryIds": nested})
    assert "list of strings" in tool_error(s.answer(8))["message"]
    # Still serving, and nothing was stored by any of it.
    s.call(9, "validate", {"callerCwd": str(indexed.root)})
    assert s.answer(9)["result"]["structuredContent"]["memories"] == []
    assert s.close() == 0


# --- (c) a slow repository does not block another --------------------------------------------------

def _probe_tools(gates: dict[str, threading.Event], entered: list[str]) -> dict[str, ToolSpec]:
    def handler(_home, a):
        entered.append(a["callerCwd"])
        gate = gates.get(a["callerCwd"])
        if gate is not None:
            gate.wait(WIRE_TIMEOUT_S)
        return {"served": a["callerCwd"]}, "served"

    return {"probe": ToolSpec("probe", "test probe", {"callerCwd": {"type": "string"}}, ("callerCwd",), handler)}


async def _until(cond, timeout: float = WIRE_TIMEOUT_S) -> None:
    with anyio.fail_after(timeout):
        while not cond():
            await anyio.sleep(0.01)


def test_slow_repository_does_not_block_another_in_process(make_repo, home):
    a, b = make_repo("a"), make_repo("b")
    (a.root / "sub").mkdir()
    A, B = str(a.root), str(b.root)
    gates = {A: threading.Event()}
    entered: list[str] = []
    dispatcher = Dispatcher(home, tools=_probe_tools(gates, entered), call_timeout=1.5)
    out: dict = {}

    async def main() -> None:
        async def first() -> None:
            out["a1"] = await dispatcher.call("probe", {"callerCwd": A})

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await _until(lambda: entered == [A])  # A's call is inside its (stuck) handler
            with anyio.fail_after(WIRE_TIMEOUT_S):
                out["b"] = await dispatcher.call("probe", {"callerCwd": B})
            out["b_while_a_stuck"] = not gates[A].is_set() and "a1" not in out
        # A's thread still runs and holds A's lane: a second call for A (from a
        # subdirectory: same repository) waits and times out without entering the handler.
        out["a2"] = await dispatcher.call("probe", {"callerCwd": A + "/sub"})
        out["entered"] = list(entered)
        out["busy"] = dispatcher.lanes.busy_threads()
        out["b2"] = await dispatcher.call("probe", {"callerCwd": B})
        gates[A].set()
        await _until(lambda: dispatcher.lanes.busy_threads() == 0)
        out["a3"] = await dispatcher.call("probe", {"callerCwd": A})

    anyio.run(main)
    assert out["b"].is_error is False and out["b"].data == {"served": B}
    assert out["b_while_a_stuck"] is True
    err = out["a1"].data["error"]
    assert out["a1"].is_error and err == {"message": out["a1"].text, "code": 3, "kind": "timeout", "retryable": True}
    assert "did not finish within 1.5 s" in err["message"] and A in err["message"]
    err2 = out["a2"].data["error"]
    assert err2["kind"] == "timeout" and err2["retryable"] and "still running" in err2["message"]
    assert out["entered"] == [A, B] and out["busy"] == 1  # never a second thread stuck on A
    assert out["b2"].is_error is False
    assert out["a3"].is_error is False and out["a3"].data == {"served": A}


def test_thread_cap_bounds_stuck_calls(make_repo, home):
    repos = [str(make_repo(n).root) for n in "abc"]
    gates = {repos[0]: threading.Event(), repos[1]: threading.Event()}
    entered: list[str] = []
    dispatcher = Dispatcher(home, tools=_probe_tools(gates, entered), call_timeout=1.0, max_threads=2)
    out: dict = {}

    async def main() -> None:
        out["a"] = await dispatcher.call("probe", {"callerCwd": repos[0]})
        out["b"] = await dispatcher.call("probe", {"callerCwd": repos[1]})
        out["c"] = await dispatcher.call("probe", {"callerCwd": repos[2]})  # both threads are stuck
        out["entered"] = list(entered)
        for g in gates.values():
            g.set()
        await _until(lambda: dispatcher.lanes.busy_threads() == 0)
        out["c2"] = await dispatcher.call("probe", {"callerCwd": repos[2]})

    anyio.run(main)
    assert [out[k].data["error"]["kind"] for k in "abc"] == ["timeout"] * 3
    assert "all 2 worker threads are busy" in out["c"].text
    assert out["entered"] == repos[:2]
    assert out["c2"].data == {"served": repos[2]}


def test_lanes_serialise_each_key_run_keys_in_parallel_and_forget_idle_keys():
    lanes = Lanes(max_threads=4)
    lock = threading.Lock()
    active: dict[str, int] = {}
    peak: dict[str, int] = {}
    started = {k: threading.Event() for k in "ab"}

    def work(key: str) -> bool:
        with lock:
            active[key] = active.get(key, 0) + 1
            peak[key] = max(peak.get(key, 0), active[key])
        started[key].set()
        # a and b each wait for the other to have started: only parallel lanes finish.
        met = started["b" if key == "a" else "a"].wait(WIRE_TIMEOUT_S)
        time.sleep(0.01)
        with lock:
            active[key] -= 1
        return met

    results: list[bool] = []

    async def main() -> None:
        async def one(key: str) -> None:
            results.append(await lanes.run([key], lambda: work(key), WIRE_TIMEOUT_S))

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, "ab"[i % 2])
        # A call cancelled while it waits for a lane leaves nothing behind.
        gate = threading.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lanes.run, ["c"], lambda: gate.wait(WIRE_TIMEOUT_S), WIRE_TIMEOUT_S)
            await _until(lambda: lanes.busy_threads() == 1)
            with anyio.move_on_after(0.2):
                await lanes.run(["c"], lambda: None, WIRE_TIMEOUT_S)
            gate.set()
        await _until(lambda: lanes.busy_threads() == 0)

    anyio.run(main)
    assert results == [True] * 8 and peak == {"a": 1, "b": 1}
    assert len(lanes) == 0 and lanes.busy_keys() == []


def test_handler_bugs_and_os_timeouts_are_one_line_errors(make_repo, home):
    A = str(make_repo("a").root)

    def boom(_home, a):
        raise RuntimeError("boom")

    def os_timeout(_home, a):
        raise TimeoutError(110, "Connection timed out")  # an OSError, not the call's deadline

    tools = {"boom": ToolSpec("boom", "", {"callerCwd": {"type": "string"}}, ("callerCwd",), boom),
             "slowio": ToolSpec("slowio", "", {"callerCwd": {"type": "string"}}, ("callerCwd",), os_timeout)}
    dispatcher = Dispatcher(home, tools=tools, call_timeout=10)

    async def main():
        return (await dispatcher.call("boom", {"callerCwd": A}), await dispatcher.call("slowio", {"callerCwd": A}))

    boom_out, io_out = anyio.run(main)
    assert boom_out.data["error"]["kind"] == "internal" and boom_out.text.count("\n") == 0
    assert io_out.data["error"]["kind"] == "environment" and "timed out" in io_out.text


def test_concurrent_calls_on_two_repositories_share_the_store(make_repo, home):
    """Without the global lock, calls of two repositories meet on the one memory store in
    this process (DuckDB refuses a read-only connection next to a read-write one): such a
    clash is retried, never reported as a damaged store."""
    roots = []
    for n in "ab":
        r = make_repo(n)
        r.write("m.py", "def f():\n    return 1\n")
        r.commit("c")
        build_snapshot(r.root, home)
        roots.append(str(r.root))
    results: list = []

    async def main() -> None:
        dispatcher = Dispatcher(home, call_timeout=WIRE_TIMEOUT_S)

        async def one(i: int) -> None:
            tool = ("remember", "brief", "validate", "index_status")[i % 4]
            args: dict = {"callerCwd": roots[i % 2]}
            if tool == "remember":
                args |= {"text": f"claim {i}", "codeRefs": ["m.py::f"], "topic": f"t{i}"}
            elif tool == "brief":
                args |= {"task": "change f"}
            results.append((tool, await dispatcher.call(tool, args)))

        with anyio.fail_after(2 * WIRE_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for i in range(24):
                    tg.start_soon(one, i)

    anyio.run(main)
    failed = [(tool, o.text) for tool, o in results if o.is_error]
    assert failed == [] and len(results) == 24
    with MemoryStore.open(home) as ms:
        assert ms.con.execute("SELECT count(*) FROM memories").fetchall()[0][0] == 6


def test_store_clashes_are_recognised_and_nothing_else():
    import duckdb

    from citegraph.indexer.errors import CitegraphError
    from citegraph.server.mcp_server import store_conflict

    def wrapped(cause: BaseException) -> CitegraphError:
        try:
            raise CitegraphError("memory store unreadable", code=3) from cause
        except CitegraphError as err:
            return err

    mode = duckdb.ConnectionException("Connection Error: Can't open a connection to same database file with a "
                                      "different configuration than existing connections")
    assert store_conflict(wrapped(mode))  # as MemoryStore.open reports it
    assert store_conflict(duckdb.TransactionException("Catalog write-write conflict"))
    assert store_conflict(duckdb.ConstraintException('Duplicate key "key: schema_version"'))
    assert not store_conflict(wrapped(duckdb.ConnectionException("Connection Error: something else")))
    assert not store_conflict(CitegraphError("no exact-current snapshot", code=1, retryable=True))
    assert not store_conflict(ValueError("bug"))


def test_fifo_in_one_repository_does_not_block_another(raw_server, make_repo, home):
    """A FIFO in place of a tracked file made reads of that repository hang. Whether or not
    the read itself is fixed, the call is answered within the bound and the other
    repository's calls in the same session are served meanwhile."""
    roots = []
    for n in ("stuck", "fine"):
        r = make_repo(n)
        r.write("m.py", "def f():\n    return 1\n")
        r.write("notes.txt", "notes\n")
        r.commit("c")
        build_snapshot(r.root, home)
        roots.append(str(r.root))
    stuck, fine = roots
    os.remove(os.path.join(stuck, "notes.txt"))
    os.mkfifo(os.path.join(stuck, "notes.txt"))

    s = raw_server("--call-timeout", "3")
    s.initialize()
    s.call(1, "index_status", {"callerCwd": stuck})
    s.call(2, "index_status", {"callerCwd": fine})
    fine_res = s.answer(2)["result"]
    assert fine_res["isError"] is False and fine_res["structuredContent"]["exact_current"] is True
    first = s.answer(1)["result"]
    kind = tool_error({"result": first})["kind"] if first["isError"] else None
    if kind == "timeout":  # the read still hangs: the call's bound answered it
        err = tool_error({"result": first})
        assert err["code"] == 3 and err["retryable"] is True and stuck in err["message"]
        s.call(3, "validate", {"callerCwd": stuck})
        assert tool_error(s.answer(3))["kind"] == "timeout"  # waits for the stuck call, bounded
    else:  # the read no longer hangs: an answer, never a crash; a FIFO is no regular file
        assert kind != "internal", first
        assert kind is not None or first["structuredContent"]["exact_current"] is False
    s.call(4, "validate", {"callerCwd": fine})
    assert s.answer(4)["result"]["isError"] is False
    assert s.close() == 0  # a stuck call never keeps the server alive after the client left


# --- (d) generated hostile arguments for every tool ----------------------------------------------

def _nest(depth: int) -> list:
    value: list = ["x"]
    for _ in range(depth):
        value = [value]
    return value


SPECIAL = ["\x00", "\udc80", "\ud800", "\udfff", "a\x00b", "\U0010ffff", "é", "\u202e", "..", "../..", "-",
           " ", "\n", "cgs_" + "0" * 40, "cgr_x", "path with spaces/ü.py"]
hostile_strings = st.one_of(
    st.text(max_size=40),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.builds(lambda a, c, b: a + c + b, st.text(max_size=6), st.sampled_from(SPECIAL), st.text(max_size=6)),
    st.just("y" * (MAX_STRING_CHARS + 1)),
)
hostile_values = st.one_of(
    hostile_strings,
    st.integers(),
    st.sampled_from([10 ** 30, -10 ** 30, 10 ** 5000, float("inf"), float("-inf"), float("nan"), 1e308, 0.5,
                     True, False, None, {}, [], [None], [[]], {"a": [1]}]),
    st.floats(),
    st.integers(1, 3000).map(_nest),
    st.lists(hostile_strings, max_size=4),
    st.just(["r"] * (MAX_LIST_ITEMS + 1)),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _valid_values(name: str, root: str, tool: str = "graph") -> st.SearchStrategy:
    refs = ["src/retry.py::keep_key", "src/retry.py#L1-L3", "docs/notes.md", "src/nope.py", "src/retry.py::Nope"]
    return {
        "callerCwd": st.sampled_from([root, root + "/src", "/", "relative/dir"]),
        "text": st.sampled_from(["retries keep the idempotency key", "x" * (max_text_bytes() + 1), " "]),
        "task": st.sampled_from(["change the retry key", "t" * (max_text_bytes() + 1)]),
        "codeRefs": st.lists(st.sampled_from(refs), max_size=3),
        "kind": st.sampled_from(["durable", "handoff", "other"]),
        "project": st.sampled_from(["svc", "bad name!"]),
        "topic": st.sampled_from(["t1", "t2"]),
        "budgetTokens": st.integers(700, 1600),
        "memoryIds": st.lists(st.sampled_from(["cgm_0000000000000000", "nope"]), max_size=2),
        "repos": st.lists(st.sampled_from([root, "docs", "/nonexistent"]), max_size=2),
        "workset": st.sampled_from(["ws", "missing", "bad/name"]),
        "concurrency": st.integers(0, 100),
        "at": st.sampled_from(["HEAD", "nope"]),
        "sourceCommit": st.sampled_from(["HEAD", "deadbeef"]),
        "supersedes": st.none(),
        "name": st.sampled_from(["keep_key", "RetryPolicy.next_delay", "nothing"]),
        "file": st.sampled_from(["src/retry.py", root + "/src/retry.py", "nope.py", "/etc/passwd"]),
        "limit": st.integers(0, 600),
        "ref": st.sampled_from(["src/retry.py::keep_key", "src/retry.py::Nope", "cgs_zz", "../x"]),
        "depth": st.integers(0, 7),
        "op": st.sampled_from([*TOOLS[tool].properties.get("op", {}).get("enum", []), "nope"]),
        "dependencyDepth": st.integers(-1, 5),
        "kinds": st.lists(st.sampled_from(["function", "method", "class", "nope"]), max_size=2),
        "path": st.sampled_from(["src", "src/retry.py", "src/*.py", "/etc", "../x"]),
        "rev": st.sampled_from(["HEAD", "nope"]),
        "memoryId": st.sampled_from(["cgm_0000000000000000", "nope"]),
        "paths": st.lists(st.sampled_from([root, "src", "/nonexistent"]), max_size=2),
        "accept": st.sampled_from(["relocated", "successor", "relocated,successor", "bogus"]),
        "all": st.booleans(), "dryRun": st.booleans(), "includeArchived": st.booleans(),
    }.get(name, st.sampled_from(["a", "agent-1"]))


@st.composite
def _arguments(draw, tool: str, root: str) -> tuple[dict, str | None]:
    """Valid-looking arguments (so calls reach the tools' code, not only the argument
    check), then usually one hostile change: a hostile value (its name is returned), an
    unknown argument, or a required argument dropped."""
    spec = TOOLS[tool]
    args = {n: draw(_valid_values(n, root, tool)) for n in spec.required}
    for n in spec.properties:
        if n not in spec.required and draw(st.booleans()):
            args[n] = draw(_valid_values(n, root, tool))
    mode, hostile = draw(st.integers(0, 9)), None
    if 3 <= mode <= 7 and spec.properties:
        hostile = draw(st.sampled_from(sorted(spec.properties)))
        args[hostile] = draw(hostile_values)
    elif mode == 8:
        args[draw(st.one_of(hostile_strings, st.sampled_from(["bogus", "\udc80"])))] = draw(hostile_values)
    elif mode == 9 and spec.required:
        args.pop(draw(st.sampled_from(spec.required)), None)
    return args, hostile


def _bad_string(name: str, v: object) -> bool:
    limit = max_text_bytes() if name in ("text", "task") else MAX_STRING_CHARS
    return not isinstance(v, str) or bool(re.search("[\x00\ud800-\udfff]", v)) or len(v) > limit


def plainly_invalid(tool: str, name: str, v: object) -> bool:
    """An oracle independent of the server's checks: is ``v`` wrong for ``name``'s schema type?"""
    if v is None:
        return False  # null means "not given"
    prop = TOOLS[tool].properties[name]
    if prop["type"] == "string":
        return _bad_string(name, v)
    if prop["type"] == "array":
        return (not isinstance(v, list) or len(v) > MAX_LIST_ITEMS
                or any(_bad_string(name, item) for item in v))
    if prop["type"] == "integer":
        if isinstance(v, bool) or not isinstance(v, int | float):
            return True
        if isinstance(v, float) and not v.is_integer():
            return True
        return not (prop.get("minimum", v) <= v <= prop.get("maximum", v))
    if prop["type"] == "boolean":
        return not isinstance(v, bool)
    return False


def _store_rows(home) -> dict[str, list]:
    with MemoryStore.open(home) as ms:
        return {t: ms.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in ("memories", "revisions", "citations")}


RESULT_KEYS = {"remember": "citations", "brief": "coverage", "validate": "summary", "index_status": "repository_id",
               "workset_prepare": "members", "status": "repository_id", "index": "snapshot_id", "find": "symbols",
               "symbols": "symbols", "cited": "memories", "refresh": "memories", "list": "memories", "show": "text",
               "history": "revisions", "workset_create": "members", "workset_add": "members",
               "workset_remove": "members", "workset_list": "worksets", "workset_show": "members",
               "workset_status": "ready", "graph": "nodes", "workset": ("members", "worksets"),
               **{f"graph_{op}": "nodes" for op in ("callers", "callees", "deps", "dependents")}}
WRITERS = {"remember", "refresh"}  # tools that may add memory revisions by design


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_hostile_arguments_get_a_clear_error_or_a_result(tool, indexed, home):
    root = str(indexed.root)
    ws.create(home, "ws", [root])

    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                     HealthCheck.data_too_large])
    @given(drawn=_arguments(tool, root))
    def check(drawn):
        args, hostile = drawn
        before = _store_rows(home)

        async def main():
            with anyio.fail_after(2 * WIRE_TIMEOUT_S):
                return await Dispatcher(home, call_timeout=WIRE_TIMEOUT_S).call(tool, args)

        out = anyio.run(main)
        assert out.text.encode("utf-8")  # clean UTF-8: no lone surrogate echoed back
        if out.is_error:
            err = out.data["error"]
            assert err["kind"] not in ("internal", "timeout"), out.text
            assert err["code"] in (1, 2, 3), out.text
            assert err["message"] == out.text and out.text.startswith("citegraph: ") and "\n" not in out.text
            assert "Traceback" not in out.text
            assert _store_rows(home) == before  # a refused call stores nothing
        if hostile is not None and plainly_invalid(tool, hostile, args[hostile]):
            assert out.is_error and out.data["error"]["kind"] == "invalid-argument", (hostile, out.text)
        elif not out.is_error:
            keys = RESULT_KEYS[tool]
            assert any(k in out.data for k in ((keys,) if isinstance(keys, str) else keys)), out.data
            if tool not in WRITERS:
                assert _store_rows(home) == before

    check()


HOSTILE_BY_TYPE = {
    "string": ["\udc80", "a\x00b", "x\ud800", "\udfff" * 3, 10 ** 30, ["x"], {"a": 1}, True, 1.5, _nest(2000),
               "y" * (1024 * 1024 * 50)],
    "array": ["src/retry.py", [1], [["x"]], _nest(2000), ["docs/notes.md", "\udc80"], ["a\x00"],
              ["r"] * (MAX_LIST_ITEMS + 1), ["y" * (1024 * 1024 * 50)], 10 ** 30, {"a": ["x"]}],
    "integer": [10 ** 30, -10 ** 30, 10 ** 5000, float("inf"), float("-inf"), float("nan"), 1.5, "1000", True,
                [1000], 10 ** 30 + 0.0],
    "boolean": ["true", 1, 0, 1.5, [True], {"a": True}, "\udc80", 10 ** 30],
}


def test_every_argument_refuses_every_hostile_value_by_name(indexed, home):
    """Each argument of each tool, each hostile value of its type: one invalid-argument error
    naming the argument, within the bound, nothing stored (50 MB strings included)."""
    root = str(indexed.root)
    ws.create(home, "ws", [root])
    base = {"callerCwd": root, "text": "a claim", "task": "a task", "workset": "ws", "name": "keep_key",
            "file": "src/retry.py", "memoryId": "cgm_0000000000000000", "codeRefs": ["src/retry.py"],
            "paths": [root], "ref": "src/retry.py::x", "op": "callers"}
    before = _store_rows(home)
    seen = 0

    async def main() -> None:
        nonlocal seen
        dispatcher = Dispatcher(home, call_timeout=WIRE_TIMEOUT_S)
        for tool, spec in TOOLS.items():
            for name, prop in spec.properties.items():
                for value in HOSTILE_BY_TYPE[prop["type"]]:
                    args = {k: v for k, v in base.items() if k in spec.required} | {name: value}
                    if "op" in spec.required and name != "op":  # a valid op of this tool
                        args["op"] = spec.properties["op"]["enum"][0]
                    assert plainly_invalid(tool, name, value)
                    with anyio.fail_after(WIRE_TIMEOUT_S):
                        out = await dispatcher.call(tool, args)
                    err = out.data["error"] if out.is_error else {}
                    assert err.get("kind") == "invalid-argument" and err["code"] == 2, (tool, name, out.text[:200])
                    assert name in out.text and "\n" not in out.text and len(out.text) < 400, out.text
                    out.text.encode("utf-8")
                    seen += 1

    anyio.run(main)
    assert seen > 200
    assert _store_rows(home) == before


def test_tool_schemas_publish_the_limits_of_the_data_not_the_generic_bounds():
    """The memory text and the task carry their limit, integers their range; the bounds
    every string and list gets against hostile input (MAX_STRING_CHARS, MAX_LIST_ITEMS) are
    enforced by check_args (the tests above) and documented, not repeated on every argument
    of every tool in tools/list (issue 22: ≤ 30 KB)."""
    for spec in TOOLS.values():
        schema = spec.input_schema()
        for name, prop in schema["properties"].items():
            if prop["type"] == "string":
                assert prop.get("maxLength") == (max_text_bytes() if name in ("text", "task") else None)
            if prop["type"] == "array":
                assert "maxItems" not in prop and "maxLength" not in prop["items"]
            if prop["type"] == "integer":
                assert prop["minimum"] <= prop["maximum"]


def test_cli_refuses_a_bad_timeout(run_cli, tmp_path: Path):
    res = run_cli("mcp", "--call-timeout", "0")
    assert res.returncode == 2 and "--call-timeout" in res.stderr


def test_initialize_is_answered_before_the_service_starts(indexed, home, raw_server):
    """Issue 22 item 3: `citegraph mcp` answered `initialize` only after importing and
    starting the in-process resident service (~1 s more on a loaded machine); now the
    service starts at the first tools/list or call, and calls wait for it."""
    from citegraph.server.locator import socket_path

    s = raw_server()
    s.initialize()
    assert not socket_path(home).exists()  # answered before the service was started
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert s.answer(2)["result"]["tools"]
    s.call(3, "status", {"callerCwd": str(indexed.root)})
    res = s.answer(3)["result"]
    assert res["isError"] is False and res["structuredContent"]["service"]["used"] is True, res
    assert socket_path(home).exists()
    assert s.close() == 0


def test_a_client_leaving_while_the_hosted_service_builds_inside_duckdb_ends_the_server_cleanly(
        raw_server, repo, tmp_path):
    """The client closes stdin while the service the server hosts builds a repository in a
    lane thread inside DuckDB (tests/stall_launcher.py's ``db:`` stall): the server names
    the abandoned build and exits 0 at once. Before, the interpreter's exit unwound that
    thread through DuckDB's C++ frames and the process aborted (SIGABRT)."""
    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit("c1")
    marker = tmp_path / "stalled"
    s = raw_server(launcher=stalled_argv("extract", marker, "db:60"))
    s.initialize()
    s.call(1, "validate", {"callerCwd": str(repo.root)})  # registers the repository: the service builds it
    deadline = time.monotonic() + WIRE_TIMEOUT_S
    while not marker.exists():
        assert time.monotonic() < deadline, b"".join(s.stderr).decode(errors="replace")
        time.sleep(0.05)
    assert "result" in s.answer(1)  # the call itself is over (unknown/racing at its bound): no stuck call
    assert s.close() == 0, b"".join(s.stderr).decode(errors="replace")
    time.sleep(0.2)  # the stderr reader drains what is left
    err = b"".join(s.stderr).decode(errors="replace")
    assert f"stopped during a build of {repo.root}; nothing of it was published" in err, err
