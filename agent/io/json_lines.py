"""JSON lines over a stream socket: the framing of the side channel and the control socket.

One JSON object per line, UTF-8, ``\\n``-terminated: easy to type into ``socat`` or ``nc`` when
debugging, and a reader needs nothing but ``readline``. A line longer than ``MAX_LINE``, nested
deeper than ``MAX_DEPTH`` or holding more than ``MAX_ELEMENTS`` elements, or one that is not a
UTF-8 JSON object, is a protocol error (``wire.bounded_json`` decodes it within those bounds):
the channel reports it and closes, so a bad or hostile peer costs one connection, never the
agent. The same holds for a handler that fails on a message: the
failure is logged once with the peer's name and ends that channel alone.

``LineChannel`` is the non-blocking form the agent's loop drives; the tools' blocking clients
use ``encode_line`` / ``decode_line`` over a plain socket. Over a Unix socket a line may come
with file descriptors (``SCM_RIGHTS``: the host API hands the agent its shared memory that
way); they queue in ``fds`` in the order they came, for the line's handler to ``take_fds``,
and whatever no handler took is closed with the channel. More than ``MAX_PENDING_FDS``
untaken, or descriptors the kernel had to cut short, is a protocol error.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from agent.io.errors import ProtocolError
from agent.io.reactor import READ, WRITE, Reactor
from wire.bounded_json import JsonRejected, decode_bounded

#: Longest line accepted: messages are small (addresses, numbers, a file name, statistics).
MAX_LINE = 1 << 20
#: Deepest nesting of arrays and objects accepted (the deepest real message, a status reply,
#: nests five levels).
MAX_DEPTH = 16
#: Most elements (array items and object values together) one line may hold.
MAX_ELEMENTS = 100_000
#: File descriptors a channel holds for its handlers at most.
MAX_PENDING_FDS = 16
_RECV_SIZE = 1 << 16

Message = dict[str, Any]

log = logging.getLogger(__name__)


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One message as a compact JSON line."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode_line(line: bytes) -> Message:
    """Parse one line; ``ProtocolError`` (naming the reason) if it is not a JSON object within
    the bounds, and no other exception whatever the bytes."""
    try:
        value = decode_bounded(
            line, max_bytes=MAX_LINE, max_elements=MAX_ELEMENTS, max_depth=MAX_DEPTH
        )
    except JsonRejected as exc:
        raise ProtocolError(f"not a JSON line we accept: {exc}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"expected a JSON object, got {type(value).__name__}")
    return value


class LineChannel:
    """A non-blocking stream socket exchanging JSON lines, driven by a ``Reactor``.

    ``on_message`` gets each decoded object, ``on_close`` the reason once the channel is gone
    (None for an orderly end from the peer). Writes are buffered; ``close_after_flush`` ends
    the channel once everything queued has been sent. ``peer`` names the other end in logs.
    An exception escaping ``on_message`` (a bug) is logged once and closes this channel only.
    """

    def __init__(
        self,
        sock: socket.socket,
        reactor: Reactor,
        on_message: Callable[[Message], None],
        on_close: Callable[[str | None], None],
        peer: str = "peer",
    ) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.peer = peer
        self._reactor = reactor
        self._on_message = on_message
        self._on_close = on_close
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._closing = False
        self._watching_write = False
        self.closed = False
        self._unix = sock.family == socket.AF_UNIX
        #: Descriptors received and not yet taken by a handler, oldest first.
        self.fds: deque[int] = deque()
        reactor.watch(sock, READ, self._ready, self._failed)

    @property
    def pending_bytes(self) -> int:
        """Bytes queued for the peer and not yet taken by its socket."""
        return len(self._outbox)

    def take_fds(self, count: int) -> list[int] | None:
        """The ``count`` oldest descriptors received, now the caller's to close (None if
        fewer arrived: the line that announced them lied)."""
        if count > len(self.fds):
            return None
        return [self.fds.popleft() for _ in range(count)]

    def _failed(self, exc: BaseException) -> None:
        """The reactor's report that a callback of this channel raised: end the channel."""
        log.error("%s: internal error, connection closed: %r", self.peer, exc)
        self.close(f"internal error: {type(exc).__name__}")

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
        while self.fds:
            os.close(self.fds.popleft())
        # The buffers go now: the channel and its owner form a cycle that the agent's
        # infrequent garbage collection may not reach for a long time.
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._on_close(reason)

    def _ready(self, mask: int) -> None:
        if mask & WRITE:
            self._flush()
        if mask & READ and not self.closed:
            self._read()

    def _read(self) -> None:
        try:
            if self._unix:
                data, fds, flags, _address = socket.recv_fds(self.sock, _RECV_SIZE, MAX_PENDING_FDS)
                self.fds.extend(fds)
                if flags & socket.MSG_CTRUNC or len(self.fds) > MAX_PENDING_FDS:
                    self.close("protocol error: too many file descriptors")
                    return
            else:
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
            try:
                self._on_message(message)
            except Exception as exc:
                self._failed(exc)
                return

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
            events = READ | WRITE if pending else READ
            self._reactor.watch(self.sock, events, self._ready, self._failed)
        if not pending and self._closing:
            self.close(None)
