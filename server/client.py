"""Talking to the resident service of a data home from the CLI (or any other process).

``call`` returns ``None`` when no service answers for the home — none is running, its
record is stale, or the socket refuses the connection — and the caller takes the one-shot
path. Once a request has been sent, a missing answer is an error, never a silent
fallback: the request may have taken effect (``remember``), and doing it twice is worse
than saying so.

Before anything is sent the client checks that it talks to its own service: the socket's
directory is this uid's with mode 0700, the socket is this uid's, and the process that
answers runs as this uid (``SO_PEERCRED``). A mismatch is a refusal — one line on stderr,
and the caller answers through the one-shot path — never a fallback to trusting: another
user who owns ``/tmp/citegraph-<uid>`` could otherwise answer "fresh" for anything.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.server.locator import Untrusted, check_peer, check_socket_file, read_record

CONNECT_TIMEOUT_S = 0.5
ANSWER_TIMEOUT_S = 120.0


class Unavailable(Exception):
    """No service answers for this home (the reason is kept for ``status``)."""


class Refused(Unavailable):
    """A socket answers, but it is not provably this user's own service: nothing was sent."""


_warned: set[str] = set()


def connect(home: Home, timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[socket.socket, dict[str, Any]]:
    """A connection to this home's service, checked to be this user's own (see the module
    doc); ``Refused`` when it is not, ``Unavailable`` when none answers."""
    rec = read_record(home)
    if rec is None:
        raise Unavailable("no service is running for this data home")
    path = rec.get("socket")
    if not isinstance(path, str) or not path or "\0" in path:
        raise Unavailable("the service record names no socket")
    try:
        check_socket_file(path)
    except Untrusted as why:
        raise Refused(f"refused the service socket {path}: {why}") from None
    except OSError as exc:
        raise Unavailable(f"the service (pid {rec['pid']}) does not accept connections ({exc.strerror or exc})") \
            from None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(path)
        check_peer(s, path)
    except Untrusted as why:
        s.close()
        raise Refused(f"refused the service socket {path}: {why}") from None
    except OSError as exc:
        s.close()
        raise Unavailable(f"the service (pid {rec['pid']}) does not accept connections ({exc.strerror or exc})") \
            from None
    return s, rec


def warn_refused(why: Refused) -> None:
    """One line on stderr per reason and process: the command still answers (one-shot)."""
    text = str(why)
    if text in _warned:
        return
    _warned.add(text)
    line = CitegraphError(f"{text}; answered without the service (one-shot)",
                          "remove that directory or socket (another user may have planted it) and start "
                          "`citegraph serve` again", code=3, kind="service-refused").line()
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def call(home: Home, op: str, args: dict[str, Any], *, timeout_s: float = ANSWER_TIMEOUT_S,
         read_only: bool = False) -> Any:
    """The service's answer to ``op``, or None when no service answers (take the one-shot
    path). An error answer is raised as the CitegraphError it describes. A ``read_only``
    request whose connection is lost (the service was killed) also returns None."""
    try:
        s, rec = connect(home)
    except Refused as why:
        warn_refused(why)
        return None
    except Unavailable:
        return None
    try:
        return exchange(s, rec, op, args, timeout_s)
    except CitegraphError as err:
        if err.kind == "not-watchable" or (read_only and err.kind == "service-lost"):
            return None  # the service cannot vouch for this repository: the one-shot path
        raise
    finally:
        s.close()


def exchange(s: socket.socket, rec: dict[str, Any], op: str, args: dict[str, Any], timeout_s: float) -> Any:
    s.settimeout(timeout_s)
    try:
        s.sendall(json.dumps({"op": op, "args": args}).encode("utf-8") + b"\n")
        chunks = []
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    except TimeoutError:
        raise CitegraphError(f"the citegraph service (pid {rec['pid']}) did not answer {op} in {timeout_s:.0f}s",
                             "retry, or pass --no-service", code=1, retryable=True, kind="service-timeout") from None
    except OSError as exc:
        raise CitegraphError(f"the citegraph service (pid {rec['pid']}) dropped the connection during {op} "
                             f"({exc.strerror or exc})", "retry, or pass --no-service", code=1, retryable=True,
                             kind="service-lost") from None
    raw = b"".join(chunks)
    try:
        msg = json.loads(raw)
    except ValueError:
        raise CitegraphError(f"the citegraph service (pid {rec['pid']}) gave no answer to {op}",
                             "retry, or pass --no-service", code=1, retryable=True, kind="service-lost") from None
    if msg.get("ok"):
        return msg.get("data")
    e = msg.get("error") or {}
    raise CitegraphError(str(e.get("what", "service error")), str(e.get("todo", "")), code=int(e.get("code", 3)),
                         retryable=bool(e.get("retryable")), kind=str(e.get("kind", "error")))
