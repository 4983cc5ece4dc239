"""The local Unix socket over which ``mrc-controller status`` asks the running controller.

One request per connection: the client sends a JSON object on one line
(``{"command": "status"}``), the server answers with one JSON object on one line and closes.
A request that is not JSON, not an object, too long or names an unknown command gets
``{"ok": false, "error": ...}``; nothing a client sends can stop the server.

The socket file is private to its owner (mode 0600); a stale file left by a controller that
died is replaced, a live one (another controller answering) is an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

MAX_REQUEST_BYTES = 64 * 1024
REQUEST_TIMEOUT_S = 5.0

StatusHandler = Callable[[], Awaitable[dict[str, Any]]]


class StatusSocketBusy(RuntimeError):
    """Another live controller already answers on this socket path."""


class StatusUnavailable(RuntimeError):
    """No controller answered on the socket (not running, or a different path)."""


async def serve_status(path: Path, handler: StatusHandler) -> asyncio.Server:
    """Start answering ``status`` requests on ``path`` with what ``handler`` returns."""
    _claim(path)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            response = await _answer(reader, handler)
            writer.write(json.dumps(response, default=str).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, TimeoutError):
            pass  # the client went away; nothing to answer
        finally:
            writer.close()

    server = await asyncio.start_unix_server(serve, path=str(path), limit=MAX_REQUEST_BYTES)
    os.chmod(path, 0o600)
    return server


async def _answer(reader: asyncio.StreamReader, handler: StatusHandler) -> dict[str, Any]:
    try:
        line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
    except (ValueError, asyncio.LimitOverrunError):
        return {"ok": False, "error": f"request longer than {MAX_REQUEST_BYTES} bytes"}
    try:
        request = json.loads(line)
    except ValueError:
        return {"ok": False, "error": "request is not JSON"}
    if not isinstance(request, dict):
        return {"ok": False, "error": "request must be a JSON object"}
    command = request.get("command")
    if command != "status":
        return {"ok": False, "error": f"unknown command {command!r} (known: status)"}
    try:
        return {"ok": True, "status": await handler()}
    except Exception as error:  # a bug in the snapshot must not take the socket down
        return {"ok": False, "error": f"status failed: {error!r}"}


def request_status(path: Path, timeout_s: float = 10.0) -> dict[str, Any]:
    """Ask the controller on ``path`` for its status; StatusUnavailable if none answers."""
    response = _request(path, {"command": "status"}, timeout_s)
    if not response.get("ok"):
        raise StatusUnavailable(f"controller on {path} refused: {response.get('error')}")
    status = response.get("status")
    if not isinstance(status, dict):
        raise StatusUnavailable(f"controller on {path} sent no status")
    return status


def _request(path: Path, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout_s)
            client.connect(str(path))
            client.sendall(json.dumps(request).encode() + b"\n")
            chunks = []
            while chunk := client.recv(65536):
                chunks.append(chunk)
    except (FileNotFoundError, ConnectionRefusedError):
        raise StatusUnavailable(f"no controller is listening on {path}") from None
    except OSError as error:
        raise StatusUnavailable(f"cannot talk to the controller on {path}: {error}") from None
    try:
        response = json.loads(b"".join(chunks))
    except ValueError:
        raise StatusUnavailable(f"controller on {path} sent a malformed answer") from None
    if not isinstance(response, dict):
        raise StatusUnavailable(f"controller on {path} sent a malformed answer")
    return response


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
