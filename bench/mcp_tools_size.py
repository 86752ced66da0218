"""How many bytes `citegraph mcp` puts into every agent's context with `tools/list`, by
tool and by part (issue 22: the target is ≤ 30 KB as serialized on the wire).

    python -m citegraph.bench.mcp_tools_size

Spawns the server, sends `initialize` and `tools/list` as a client does, and measures the
answer line exactly as it came (compact JSON, what the client reads). A part's bytes are
its key and value as compact JSON; "other" is the name, title and annotations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from citegraph.bench.mcp_start import INIT

PARTS = ("description", "inputSchema", "outputSchema")


def tools_list_line(cwd: str, home: str) -> bytes:
    """The raw `tools/list` answer line of a freshly spawned `citegraph mcp` (data home
    ``home``), as a client reads it: what tests/test_mcp_schemas.py bounds."""
    cmd = [sys.executable, "-m", "citegraph.cli.main", "mcp", "--no-service"]
    env = {**os.environ, "CITEGRAPH_HOME": home}
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
                         env=env)
    assert p.stdin is not None and p.stdout is not None
    try:
        for msg in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):
            p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()
        p.stdout.readline()  # the initialize answer
        return p.stdout.readline()
    finally:
        p.kill()
        p.wait(timeout=60)


def size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        line = tools_list_line(tmp, os.path.join(tmp, "home"))
    tools = json.loads(line)["result"]["tools"]
    totals = dict.fromkeys((*PARTS, "other"), 0)
    print(f"{'tool':<18} {'total':>6} " + " ".join(f"{p:>12}" for p in (*PARTS, "other")))
    for t in tools:
        parts = {p: size({p: t[p]}) if p in t else 0 for p in PARTS}
        whole = size(t)
        parts["other"] = whole - sum(parts.values())
        for p, n in parts.items():
            totals[p] += n
        print(f"{t['name']:<18} {whole:>6} " + " ".join(f"{parts[p]:>12}" for p in (*PARTS, "other")))
    print(f"{'all ' + str(len(tools)) + ' tools':<18} {sum(totals.values()):>6} "
          + " ".join(f"{totals[p]:>12}" for p in (*PARTS, "other")))
    wire = len(line.rstrip(b"\n"))
    print(f"tools/list answer on the wire: {wire} bytes")


if __name__ == "__main__":
    main()
