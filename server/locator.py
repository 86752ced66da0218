"""Where the resident service of a data home lives: its directory, socket and record.

Kept apart from the service itself so that a client (every CLI command) finds a running
service without importing what the service needs (git, DuckDB, tree-sitter).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import blake3

from citegraph.graph.store import Home, pid_alive


def service_dir(home: Home) -> Path:
    return home.root / "service"


def socket_path(home: Home) -> Path:
    """``<home>/service/socket``, or a short path under /tmp when that is too long for a
    Unix socket (108 bytes): ``/tmp/citegraph-<uid>/<hash of the home>.sock``."""
    p = service_dir(home) / "socket"
    if len(os.fsencode(p)) < 100:
        return p
    digest = blake3.blake3(os.fsencode(os.path.realpath(home.root))).hexdigest(8)
    return Path(f"/tmp/citegraph-{os.getuid()}") / f"{digest}.sock"


def read_record(home: Home) -> dict[str, Any] | None:
    """The running service's record (pid, socket), or None when none is running."""
    try:
        rec = json.loads((service_dir(home) / "service.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int):
        return None
    if not pid_alive(rec["pid"], rec.get("pid_start")):
        return None
    return rec
