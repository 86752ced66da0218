"""How fast `citegraph mcp` answers `initialize` and `tools/list`, against the MCP SDK's
own minimal stdio server in the same run (issue 22: the target is ≤ 1.3× the minimal
server's `initialize`).

    python -m citegraph.bench.mcp_start --runs 5

Each run spawns the server, sends `initialize`, then `notifications/initialized` and
`tools/list`, and times both answers from the spawn; medians are printed. Run it on an
idle machine: on a loaded one the figures swing by seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time

MINIMAL = '''from mcp.server.mcpserver import MCPServer
m = MCPServer("min")
@m.tool()
def ping() -> str:
    """ping"""
    return "pong"
m.run()
'''
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def once(cmd: list[str], cwd: str) -> tuple[float, float, int]:
    """(seconds to the initialize answer, seconds to the tools/list answer, its bytes)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    assert p.stdin is not None and p.stdout is not None
    try:
        p.stdin.write((json.dumps(INIT) + "\n").encode())
        p.stdin.flush()
        if b'"result"' not in p.stdout.readline():
            raise RuntimeError(f"{cmd}: no initialize answer")
        t1 = time.perf_counter()
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode())
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n").encode())
        p.stdin.flush()
        listed = p.stdout.readline()
        return t1 - t0, (time.perf_counter() - t0) if listed else math.nan, len(listed)
    finally:
        p.kill()
        p.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        minimal = f"{tmp}/minimal.py"
        with open(minimal, "w", encoding="utf-8") as f:
            f.write(MINIMAL)
        servers = {"sdk minimal": [sys.executable, minimal],
                   "citegraph mcp": [sys.executable, "-m", "citegraph.cli.main", "mcp"]}
        for name, cmd in servers.items():
            rs = [once(cmd, tmp) for _ in range(args.runs)]
            print(f"{name}: initialize {statistics.median(r[0] for r in rs):.2f} s, tools/list "
                  f"{statistics.median(r[1] for r in rs):.2f} s ({rs[0][2]} bytes), median of {args.runs}")


if __name__ == "__main__":
    main()
