"""JSON lines over a stream socket: the framing of the side channel and the control socket.

One JSON object per line, UTF-8, ``\\n``-terminated: easy to type into ``socat`` or ``nc`` when
debugging, and a reader needs nothing but ``readline``. A line longer than ``MAX_LINE`` or one
that is not a JSON object is a protocol error: the channel reports it and closes, so a bad or
hostile peer costs one connection, never the agent.

``LineChannel`` is the non-blocking form the agent's loop drives; the tools' blocking clients
use ``encode_line`` / ``decode_line`` over a plain socket.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Callable, Mapping
from typing import Any

from agent.io.errors import ProtocolError
from agent.io.reactor import READ, WRITE, Reactor

#: Longest line accepted: messages are small (addresses, numbers, a file name, statistics).
MAX_LINE = 1 << 20
_RECV_SIZE = 1 << 16

Message = dict[str, Any]


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One message as a compact JSON line."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode_line(line: bytes) -> Message:
    """Parse one line; ``ProtocolError`` if it is not a JSON object."""
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"not a JSON line: {exc}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"expected a JSON object, got {type(value).__name__}")
    return value


class LineChannel:
    """A non-blocking stream socket exchanging JSON lines, driven by a ``Reactor``.

    ``on_message`` gets each decoded object, ``on_close`` the reason once the channel is gone
    (None for an orderly end from the peer). Writes are buffered; ``close_after_flush`` ends
    the channel once everything queued has been sent.
    """

    def __init__(
        self,
        sock: socket.socket,
        reactor: Reactor,
        on_message: Callable[[Message], None],
        on_close: Callable[[str | None], None],
    ) -> None:
        sock.setblocking(False)
        self.sock = sock
        self._reactor = reactor
        self._on_message = on_message
        self._on_close = on_close
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._closing = False
        self._watching_write = False
        self.closed = False
        reactor.watch(sock, READ, self._ready)

    def send(self, message: Mapping[str, Any]) -> None:
        """Queue one message."""
        if self.closed:
            return
        self._outbox += encode_line(message)
        self._flush()

    def close_after_flush(self) -> None:
        """Close once the queued messages are out."""
        self._closing = True
        if not self._outbox:
            self.close(None)

    def close(self, reason: str | None) -> None:
        """Close now; ``on_close(reason)`` runs once."""
        if self.closed:
            return
        self.closed = True
        self._reactor.unwatch(self.sock)
        self.sock.close()
        self._on_close(reason)

    def _ready(self, mask: int) -> None:
        if mask & WRITE:
            self._flush()
        if mask & READ and not self.closed:
            self._read()

    def _read(self) -> None:
        try:
            data = self.sock.recv(_RECV_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:
            self.close(f"connection error: {exc.strerror or exc}")
            return
        if not data:
            self.close(None if not self._inbox else "connection closed mid-message")
            return
        self._inbox += data
        while not self.closed:
            end = self._inbox.find(b"\n")
            if end < 0:
                if len(self._inbox) > MAX_LINE:
                    self.close(f"protocol error: line longer than {MAX_LINE} bytes")
                break
            line = bytes(self._inbox[:end])
            del self._inbox[: end + 1]
            if not line.strip():
                continue
            try:
                message = decode_line(line)
            except ProtocolError as exc:
                self.close(f"protocol error: {exc}")
                return
            self._on_message(message)

    def _flush(self) -> None:
        while self._outbox and not self.closed:
            try:
                sent = self.sock.send(self._outbox)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.close(f"connection error: {exc.strerror or exc}")
                return
            del self._outbox[:sent]
        if self.closed:
            return
        pending = bool(self._outbox)
        if pending != self._watching_write:
            self._watching_write = pending
            self._reactor.watch(self.sock, READ | WRITE if pending else READ, self._ready)
        if not pending and self._closing:
            self.close(None)
