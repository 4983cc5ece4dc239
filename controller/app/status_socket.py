"""The local Unix socket over which ``mrc-controller status`` asks the running controller.

One request per connection: the client sends a JSON object on one line
(``{"command": "status"}``), the server answers with one JSON object on one line and closes.
A request that is not JSON, not an object, too long, too deep (past 16 levels), too large (past
64 elements) or names an unknown command gets ``{"ok": false, "error": ...}`` and one warning
in the log; nothing a client sends, and no bug in answering it, can stop the server.
The client reads at most 16 MiB and turns any answer it cannot use into StatusUnavailable.

The socket file is private to its owner (mode 0600); a stale file left by a controller that
died is replaced, a live one (another controller answering) is an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from controller.app.bounded_json import JsonRejected, decode_bounded

MAX_REQUEST_BYTES = 64 * 1024
#: A request is one small object: anything with more elements is not a request of ours.
MAX_REQUEST_ELEMENTS = 64
REQUEST_TIMEOUT_S = 5.0
#: The largest answer the client reads: a status of thousands of switches stays far below.
MAX_ANSWER_BYTES = 16 << 20
MAX_ANSWER_ELEMENTS = 1_000_000
#: How much of a refusal's text the client repeats in its error.
_ERROR_TEXT_CHARS = 200

StatusHandler = Callable[[], Awaitable[dict[str, Any]]]

_log = logging.getLogger(__name__)


class StatusSocketBusy(RuntimeError):
    """Another live controller already answers on this socket path."""


class StatusUnavailable(RuntimeError):
    """No controller answered on the socket (not running, or a different path)."""


class RequestRefused(ValueError):
    """A request the server answers with an error; the message is the answer's ``error``."""


async def serve_status(path: Path, handler: StatusHandler) -> asyncio.Server:
    """Start answering ``status`` requests on ``path`` with what ``handler`` returns."""
    _claim(path)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Everything that goes wrong with one client ends here: answered when possible,
        # logged once, closed; nothing reaches asyncio's handler or the other clients.
        try:
            await _serve_one(reader, writer, handler)
        except ConnectionError:
            pass  # the client went away; nothing to answer, nobody to tell
        except Exception as error:
            _log.warning("status socket: dropped a client after %s", _describe(error))
        finally:
            writer.close()

    server = await asyncio.start_unix_server(serve, path=str(path), limit=MAX_REQUEST_BYTES)
    os.chmod(path, 0o600)
    return server


async def _serve_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: StatusHandler
) -> None:
    try:
        line = await _read_request(reader)
        if not line:
            return  # connected and closed without a word (e.g. another controller's probe)
        response = await _answer(line, handler)
    except RequestRefused as refusal:
        _log.warning("status socket: refused a request: %s", refusal)
        response = {"ok": False, "error": str(refusal)}
    writer.write(_encode(response))
    await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """One line, or RequestRefused when it is too long or too slow to arrive."""
    try:
        return await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
    except (ValueError, asyncio.LimitOverrunError):
        raise RequestRefused(f"request longer than {MAX_REQUEST_BYTES} bytes") from None
    except TimeoutError:
        raise RequestRefused(f"no request within {REQUEST_TIMEOUT_S:g} s") from None


async def _answer(line: bytes, handler: StatusHandler) -> dict[str, Any]:
    """The answer to one request line; RequestRefused for a request we do not answer."""
    parse_request(line)
    try:
        status = await handler()
        json.dumps(status, default=str)  # an answer we cannot send is the handler's failure
    except Exception as error:  # a bug in the snapshot must not take the socket down
        raise RequestRefused(f"status failed: {_describe(error)}") from None
    return {"ok": True, "status": status}


def parse_request(line: bytes) -> str:
    """The command a request line names (only ``status`` is known); else RequestRefused."""
    try:
        request = decode_bounded(
            line, max_bytes=MAX_REQUEST_BYTES, max_elements=MAX_REQUEST_ELEMENTS
        )
    except JsonRejected as error:
        raise RequestRefused(f"request is not JSON we accept: {error}") from None
    if not isinstance(request, dict):
        raise RequestRefused("request must be a JSON object")
    command = request.get("command")
    if command != "status":
        raise RequestRefused(f"unknown command {_cut(repr(command))} (known: status)")
    return command


def _encode(response: dict[str, Any]) -> bytes:
    return json.dumps(response, default=str).encode() + b"\n"


def _describe(error: BaseException) -> str:
    return _cut(repr(error))


def _cut(text: str) -> str:
    return text if len(text) <= _ERROR_TEXT_CHARS else text[:_ERROR_TEXT_CHARS] + "..."


def request_status(path: Path, timeout_s: float = 10.0) -> dict[str, Any]:
    """Ask the controller on ``path`` for its status; StatusUnavailable if none answers."""
    response = _request(path, {"command": "status"}, timeout_s)
    if not response.get("ok"):
        error = _cut(str(response.get("error")))
        raise StatusUnavailable(f"controller on {path} refused: {error}")
    status = response.get("status")
    if not isinstance(status, dict):
        raise StatusUnavailable(f"controller on {path} sent no status")
    return status


def _request(path: Path, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send ``request``; the answer as an object, read within ``timeout_s`` and the bounds."""
    deadline = time.monotonic() + timeout_s
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout_s)
            client.connect(str(path))
            client.sendall(json.dumps(request).encode() + b"\n")
            answer = _read_answer(client, deadline, path)
    except (FileNotFoundError, ConnectionRefusedError):
        raise StatusUnavailable(f"no controller is listening on {path}") from None
    except OSError as error:
        raise StatusUnavailable(f"cannot talk to the controller on {path}: {error}") from None
    try:
        response = decode_bounded(
            answer, max_bytes=MAX_ANSWER_BYTES, max_elements=MAX_ANSWER_ELEMENTS
        )
    except JsonRejected as error:
        raise StatusUnavailable(f"controller on {path} sent a malformed answer: {error}") from None
    if not isinstance(response, dict):
        raise StatusUnavailable(f"controller on {path} sent a malformed answer")
    return response


def _read_answer(client: socket.socket, deadline: float, path: Path) -> bytes:
    """Everything up to the server's close, unless it is too long or too slow to arrive."""
    answer = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise StatusUnavailable(f"controller on {path} did not finish its answer in time")
        client.settimeout(remaining)
        chunk = client.recv(65536)
        if not chunk:
            return bytes(answer)
        answer += chunk
        if len(answer) > MAX_ANSWER_BYTES:
            raise StatusUnavailable(
                f"controller on {path} sent an answer longer than {MAX_ANSWER_BYTES} bytes"
            )


def _claim(path: Path) -> None:
    """Remove a stale socket file; refuse when a live server still answers on it."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    if not stat.S_ISSOCK(path.stat().st_mode):
        raise StatusSocketBusy(f"{path} exists and is not a socket; choose another --socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
            return
    raise StatusSocketBusy(f"another controller answers on {path}; choose another --socket")
