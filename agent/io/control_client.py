"""Blocking client of the agent's control socket, for the command-line tools.

``connect_to_agent`` answers the tools' first question, "is the host's agent running?": a
socket that is missing or refuses means no (the tool then runs an endpoint of its own), any
other failure is reported. ``ControlClient.request`` sends one request and returns its result,
passing progress lines to a callback; an error reply is raised as the ``AgentError`` the agent
reported, so the tool exits with the same code either way.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from typing import Any

from agent.io.control_protocol import Request, parse_reply
from agent.io.errors import PermissionDeniedError, ProtocolError, UsageError
from agent.io.json_lines import MAX_LINE, decode_line, encode_line

_ABSENT = frozenset({errno.ENOENT, errno.ECONNREFUSED})


class ControlClient:
    """One connection to the agent's control socket."""

    def __init__(self, sock: socket.socket, path: str) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")
        self.path = path
        self._next_id = 1

    def request(
        self,
        request: Request,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Send ``request`` and wait for its final reply; raise the error it reports."""
        number = self._next_id
        self._next_id += 1
        self._sock.sendall(encode_line(request.to_json(number)))
        while True:
            line = self._reader.readline(MAX_LINE + 1)
            if not line:
                raise ProtocolError(f"the agent at {self.path} closed the connection mid-request")
            if not line.endswith(b"\n"):
                raise ProtocolError(f"the agent at {self.path} sent an overlong line")
            reply = parse_reply(decode_line(line))
            if reply.request != number:
                if reply.error is not None and reply.request is None:
                    raise reply.error
                continue
            if not reply.final:
                if on_progress is not None and reply.progress is not None:
                    on_progress(reply.progress)
                continue
            if reply.error is not None:
                raise reply.error
            return reply.result or {}

    def close(self) -> None:
        """Hang up (the agent cancels anything still running for this client)."""
        self._reader.close()
        self._sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_to_agent(path: str) -> ControlClient | None:
    """A client of the agent at ``path``, or None when no agent is running there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        if exc.errno in _ABSENT:
            return None
        if exc.errno == errno.EACCES:
            raise PermissionDeniedError(
                f"the agent's control socket {path} is not open to this user (run as root)"
            ) from None
        raise UsageError(f"cannot reach the agent at {path}: {exc.strerror}") from None
    return ControlClient(sock, path)
