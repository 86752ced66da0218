"""Where the resident service of a data home lives: its directory, socket and record.

Kept apart from the service itself so that a client (every CLI command) finds a running
service without importing what the service needs (git, DuckDB, tree-sitter).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
from collections.abc import Callable
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


class Untrusted(Exception):
    """The socket, its directory or the process answering on it is not this user's own:
    nothing may be sent to it, and nothing it says may be believed."""


def check_private_dir(path: Path | str) -> None:
    """Raise ``Untrusted`` unless ``path`` is a real directory (not a symlink) owned by
    this process's uid with no group or other permission bits. Another user who owns the
    directory (they created ``/tmp/citegraph-<uid>`` first) can replace the socket in it."""
    st = _owned(path, stat.S_ISDIR, "a directory (a symlink or another file)")
    if st.st_mode & 0o077:
        raise Untrusted(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, not 0700 (other users may replace "
                        "the socket in it)")


def check_socket_file(path: Path | str) -> None:
    """Raise ``Untrusted`` unless ``path`` is a socket (not a symlink) owned by this uid,
    in a directory ``check_private_dir`` accepts."""
    check_private_dir(os.path.dirname(os.path.abspath(path)))
    _owned(path, stat.S_ISSOCK, "a socket")


def _owned(path: Path | str, is_kind: Callable[[int], bool], kind: str) -> os.stat_result:
    """``lstat`` of ``path``, which must be ``kind`` (never followed through a symlink) and
    owned by this process's uid; else ``Untrusted`` saying which."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise Untrusted(f"{path}: {exc.strerror or exc}") from None
    if not is_kind(st.st_mode):
        raise Untrusted(f"{path} is not {kind}")
    uid = os.getuid()
    if st.st_uid != uid:
        raise Untrusted(f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})")
    return st


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED),
    or None where the platform cannot say."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    return struct.unpack("3i", creds)[1]


def check_peer(sock: socket.socket, path: Path | str) -> None:
    """Raise ``Untrusted`` unless the process answering on ``sock`` runs as this uid. A
    platform without peer credentials is refused too: trusting is never the fallback."""
    uid, peer = os.getuid(), peer_uid(sock)
    if peer is None:
        raise Untrusted(f"{path}: the peer's credentials cannot be read (SO_PEERCRED)")
    if peer != uid:
        raise Untrusted(f"{path} is answered by a process of uid {peer}, not by you (uid {uid})")


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
