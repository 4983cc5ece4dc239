"""What the agent writes to one host-API client: replies, completions and events on its
control socket, and wake-ups on its completion channels and its async-event socket.

Replies and pushed lines share the control socket, in order. A wake-up goes on a socket of its
own that the client can wait on (``channel.fileno()``, ``ctx.async_fd``); one the client does
not read is dropped, since it then has older wake-ups pending.
"""

from __future__ import annotations

import errno
import logging
import socket
from typing import Any

from agent.api.errors import ApiError
from agent.api.resources import CqRecord
from agent.api.types import EventType
from agent.io.json_lines import LineChannel, Message, encode_line

log = logging.getLogger(__name__)


class Outbox:
    """One client's lines out."""

    def __init__(self, channel: LineChannel) -> None:
        self._channel = channel
        #: The socket ``mrc_get_async_event`` reads, adopted at ``api.open``.
        self.async_sock: socket.socket | None = None
        self._wake_errors = 0

    @property
    def unread_bytes(self) -> int:
        """What the client has not yet read of its replies and pushed lines."""
        return self._channel.pending_bytes

    def send(self, message: Message) -> None:
        """A line to the client."""
        self._channel.send(message)

    def reply(self, request: int, result: dict[str, Any]) -> None:
        """The answer to request ``request``."""
        self.send({"id": request, "ok": True, "result": result})

    def fail(self, request: int, error: ApiError) -> None:
        """Request ``request`` refused, or failed, with ``error``."""
        self.send({"id": request, "ok": False, "error": error.to_json()})

    def push(self, message: Message) -> None:
        """An unrequested line (completions, QP errors, EV events)."""
        self.send(message)

    def wake(self, sock: socket.socket | None, message: Message) -> None:
        """A line on a completion channel or the async-event socket."""
        if sock is None:
            return
        try:
            sock.send(encode_line(message))
        except OSError as exc:
            self._wake_errors += 1
            if self._wake_errors == 1 or exc.errno not in (errno.EAGAIN, errno.EPIPE):
                log.warning("host API client: a wake-up could not be written: %s", exc)

    def async_event(self, kind: EventType, element: int, reason: str = "") -> None:
        """An asynchronous event for this client (``mrc_get_async_event``)."""
        self.wake(self.async_sock, {"t": int(kind), "e": element, "r": reason})

    def complete(self, cq: CqRecord, entry: Message) -> None:
        """An entry on ``cq``, and its channel woken if the client armed it."""
        cq.seq += 1
        self.push({"p": "wc", "cq": cq.handle, "s": cq.seq, **entry})
        if cq.armed:
            self.notify(cq)

    def notify(self, cq: CqRecord) -> None:
        """Wake ``cq``'s channel (``req_notify`` is one-shot: the CQ is disarmed)."""
        cq.armed = False
        if cq.channel is not None:
            self.wake(cq.channel.sock, {"cq": cq.handle, "s": cq.seq})

    def close(self) -> None:
        """The client is gone: its async-event socket closes."""
        if self.async_sock is not None:
            self.async_sock.close()
            self.async_sock = None
