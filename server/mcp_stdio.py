"""The MCP server's stdio transport: newline-delimited JSON-RPC that answers every line.

The SDK's ``mcp.server.stdio.stdio_server`` hands lines that fail to parse to the server
as exceptions, which the server only logs: a client that sends malformed JSON, a lone
surrogate escape (``"\\udc80"``, which the SDK's JSON parser refuses) or bytes that are not
UTF-8 never gets an answer, and an outgoing message holding a lone surrogate would kill
its writer. This transport keeps the SDK's message types and server loop and changes
only the framing:

- a line that is not JSON gets ``-32700`` Parse error (id null, as JSON-RPC 2.0 says);
- JSON that is not a JSON-RPC message gets ``-32600`` Invalid Request, with the
  request's id when it has a usable one (a batch array is not supported: ``-32600``);
- a line longer than ``max_message_bytes``, or nested deeper than the parser allows,
  gets ``-32600`` too, with the id read from the start of the line when it is there;
- bytes that are not UTF-8 inside a JSON string reach the tool as lone surrogates
  (``surrogateescape``), which the tool refuses by argument name;
- a lone surrogate in an outgoing message is written as a ``\\uXXXX`` escape instead of
  failing the writer.
Blocking reads and writes run in daemon threads, never on the event loop.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from citegraph.server.bounded_calls import run_in_thread

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Longest accepted line (a 50 MB memory text still reaches the tool and its own limit)."""

MAX_INT_DIGITS = 1000
"""Longer integer literals parse as ±infinity (Python refuses > 4300 digits outright)."""

_READ_CHUNK = 1 << 20
FLUSH_WAIT_S = 10.0
_ID_AT_START = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")\s*[,}]')


class _Reply(Exception):
    """A line that gets a JSON-RPC error from the transport itself."""

    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


def _bounded_int(digits: str) -> int | float:
    if len(digits.lstrip("-")) <= MAX_INT_DIGITS:
        return int(digits)
    return float("-inf") if digits.startswith("-") else float("inf")


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _usable_id(value: Any) -> Any:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _sniff_id(raw: bytes) -> Any:
    """The id of a request we cannot parse, when it leads the object (as SDK clients write it)."""
    m = _ID_AT_START.match(raw[:512])
    if not m:
        return None
    tok = m.group(1).decode("utf-8", "replace")
    return tok[1:-1] if tok.startswith('"') else int(tok)


def _why_invalid(obj: dict[str, Any], exc: ValidationError) -> str:
    """The validation errors of the message kind ``obj`` looks like (not of all four)."""
    model = (types.JSONRPCRequest if "id" in obj else types.JSONRPCNotification) if "method" in obj else None
    errors = exc.errors()
    if model is not None:
        try:
            model.model_validate(obj, by_name=False)
        except ValidationError as specific:
            errors = specific.errors()
        except RecursionError:
            return "JSON nested too deeply"
    else:
        return "not a JSON-RPC 2.0 request or notification (no method)"
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in errors[:3])


def decode_line(raw: bytes) -> SessionMessage | None:
    """One line of the wire to a message; ``None`` for a blank line; raises ``_Reply``."""
    text = raw.decode("utf-8", "surrogateescape").strip()
    if not text:
        return None
    try:
        obj = json.loads(text, parse_int=_bounded_int, parse_constant=_no_constants)
    except RecursionError:
        raise _Reply(types.INVALID_REQUEST, "Invalid Request: JSON nested too deeply", _sniff_id(raw)) from None
    except ValueError as exc:  # json.JSONDecodeError included
        raise _Reply(types.PARSE_ERROR, f"Parse error: {exc}") from None
    if isinstance(obj, list):
        raise _Reply(types.INVALID_REQUEST, "Invalid Request: batches are not supported; send one message per line")
    if not isinstance(obj, dict):
        raise _Reply(types.INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    try:
        message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except RecursionError:
        raise _Reply(types.INVALID_REQUEST, "Invalid Request: JSON nested too deeply", _usable_id(obj.get("id"))) from None
    except ValidationError as exc:
        if "method" not in obj and ("result" in obj or "error" in obj):
            return None  # a malformed response to us: JSON-RPC answers requests only
        raise _Reply(types.INVALID_REQUEST, f"Invalid Request: {_why_invalid(obj, exc)}",
                     _usable_id(obj.get("id"))) from None
    if isinstance(message, types.JSONRPCNotification) and "id" in obj:
        # The SDK reads a request whose id is not a string or integer as a notification,
        # which would leave its sender waiting for an answer forever.
        raise _Reply(types.INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    return SessionMessage(message)


def encode_message(message: types.JSONRPCMessage) -> bytes:
    """One message as one line; a lone surrogate becomes a ``\\uXXXX`` escape."""
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except Exception:  # noqa: BLE001 - pydantic refuses lone surrogates; json escapes them
        text = json.dumps(message.model_dump(mode="json", by_alias=True, exclude_unset=True), ensure_ascii=True,
                          default=str)
    return text.encode("utf-8") + b"\n"


def _error_message(reply: _Reply) -> SessionMessage:
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=reply.request_id,
                                             error=types.ErrorData(code=reply.code, message=reply.message)))


def _read_line(stream: BinaryIO, limit: int) -> bytes | None:
    """The next line (without limit); ``None`` at EOF; ``_Reply`` for an over-long line,
    whose remainder is skipped."""
    line = stream.readline(limit + 1)
    if not line:
        return None
    if len(line) <= limit or line.endswith(b"\n"):
        return line
    head = line[:512]
    while True:
        rest = stream.readline(_READ_CHUNK)
        if not rest or rest.endswith(b"\n"):
            break
    raise _Reply(types.INVALID_REQUEST, f"Invalid Request: message longer than {limit} bytes", _sniff_id(head))


@asynccontextmanager
async def stdio_transport(stdin: BinaryIO, stdout: BinaryIO, *, max_message_bytes: int = MAX_MESSAGE_BYTES
                          ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                                                   MemoryObjectSendStream[SessionMessage]]]:
    """Streams for ``Server.run`` over binary ``stdin``/``stdout``."""
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    replies = write_send.clone()  # the transport's own answers; the server closes its clone

    async def reader() -> None:
        async with read_send, replies:
            while True:
                try:
                    raw = await run_in_thread(lambda: _read_line(stdin, max_message_bytes), name="citegraph-mcp-stdin")
                    if raw is None:
                        return
                    message = decode_line(raw)
                except _Reply as reply:
                    print(f"citegraph mcp: answered a bad message: {reply.message[:200]}", file=sys.stderr)
                    message = None
                    try:
                        await replies.send(_error_message(reply))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the client went away
                except OSError:
                    return  # stdin is gone: same as EOF
                if message is not None:
                    try:
                        await read_send.send(message)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the server stopped reading

    async def writer() -> None:
        async with write_recv:
            async for item in write_recv:
                data = encode_message(item.message)

                def write(data: bytes = data) -> None:
                    stdout.write(data)
                    stdout.flush()

                try:
                    await run_in_thread(write, name="citegraph-mcp-stdout")
                except OSError:
                    return  # the client went away; the read side ends with it

    reader_scope = anyio.CancelScope()
    writer_done = anyio.Event()

    async def run_reader() -> None:
        with reader_scope:
            await reader()

    async def run_writer() -> None:
        try:
            await writer()
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_reader)
        tg.start_soon(run_writer)
        try:
            yield read_recv, write_send
        finally:
            # Stop reading, then let the writer flush what the server already answered.
            reader_scope.cancel()
            write_send.close()
            with anyio.CancelScope(shield=True), anyio.move_on_after(FLUSH_WAIT_S):
                await writer_done.wait()
            tg.cancel_scope.cancel()


@asynccontextmanager
async def claimed_stdio() -> AsyncIterator[tuple[BinaryIO, BinaryIO]]:
    """The wire as private descriptors; fd 0 reads /dev/null and fd 1 goes to stderr while
    serving, so a handler's or child process's stray output never corrupts the protocol."""
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout.flush()
    os.dup2(2, 1)
    fin = os.fdopen(wire_in, "rb", buffering=_READ_CHUNK)
    fout = os.fdopen(wire_out, "wb", buffering=0)
    try:
        yield fin, fout
    finally:
        with suppress(OSError):
            sys.stdout.flush()
        for saved, fd in ((saved_in, 0), (saved_out, 1)):
            with suppress(OSError):
                os.dup2(saved, fd)
                os.close(saved)
