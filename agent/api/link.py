"""The application's side of the wire to the agent: the JSON-lines connection over the
control socket (requests, their replies, and the lines the agent sends unasked), and the
reading of the wake-up sockets (completion channels, asynchronous events).

``agent.api.client`` builds the application API on it, ``agent.api.controller`` the
controller's; with a ``pump`` (in-process agents on the test network) every wait turns the
agent instead of blocking.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Sequence
from typing import Any

from agent.api.errors import AgentGone, from_json
from agent.io.json_lines import MAX_LINE, decode_line, encode_line

Message = dict[str, Any]
Pump = Callable[[], None]


class AgentLink:
    """The JSON-lines connection to the agent: requests, their replies, and the lines the
    agent sends unasked (completions, QP errors, EV events), handed to ``on_push``.

    With a ``pump`` (in-process agents), waiting means calling it until data arrives: the
    agent runs in the same thread."""

    def __init__(self, sock: socket.socket, pump: Pump | None = None) -> None:
        self.sock = sock
        self.pump = pump
        self.on_push: Callable[[Message], None] = lambda _message: None
        self._buffer = bytearray()
        self._next_id = 1
        self._replies: dict[int, Message] = {}
        self.closed = False

    def send(self, message: Message, fds: Sequence[int] = ()) -> None:
        if self.closed:
            raise AgentGone("the context is closed")
        data = encode_line(message)
        try:
            if fds:
                sent = socket.send_fds(self.sock, [data], list(fds))
                data = data[sent:]
            if data:
                self.sock.sendall(data)
        except OSError as exc:
            self.closed = True
            raise AgentGone(f"the agent went away: {exc.strerror or exc}") from None

    def request(self, op: str, fds: Sequence[int] = (), **fields: Any) -> dict[str, Any]:
        """Send a request and wait for its reply; raise the error the agent reports."""
        number = self._next_id
        self._next_id += 1
        message = {"op": op, "id": number, **fields}
        if fds:
            message["fds"] = len(fds)
        self.send(message, fds)
        while number not in self._replies:
            self.read(block=True)
        reply = self._replies.pop(number)
        if reply.get("ok") is True:
            result = reply.get("result")
            return result if isinstance(result, dict) else {}
        raise from_json(reply.get("error"))

    def submit(self, op: str, **fields: Any) -> None:
        """Send a request that gets no reply."""
        self.send({"op": op, "id": 0, **fields})

    def read(self, block: bool) -> bool:
        """Take what the agent sent (waiting for something if ``block``); False if nothing."""
        got = False
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._dispatch(decode_line(line))
                got = True
                continue
            if got and not self._ready():
                return True
            if not self._fill(block and not got):
                return got

    def _ready(self) -> bool:
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)

    def _fill(self, block: bool) -> bool:
        while True:
            try:
                data = self.sock.recv(1 << 16, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if not block:
                    return False
                if self.pump is not None:
                    self.pump()
                else:
                    select.select([self.sock], [], [])
                continue
            except OSError as exc:
                self.closed = True
                raise AgentGone(f"the agent went away: {exc.strerror or exc}") from None
            if not data:
                self.closed = True
                raise AgentGone("the agent closed the connection")
            self._buffer += data
            if len(self._buffer) > MAX_LINE and b"\n" not in self._buffer:
                self.closed = True
                raise AgentGone("the agent sent an overlong line")
            return True

    def _dispatch(self, message: Message) -> None:
        if "p" in message:
            self.on_push(message)
            return
        number = message.get("id")
        if type(number) is int:
            self._replies[number] = message

    def close(self) -> None:
        self.closed = True
        self.sock.close()


def wait_readable(
    sock: socket.socket, timeout: float | None, pump: Pump | None, clock: Callable[[], float]
) -> bool:
    """Wait until ``sock`` has data, at most ``timeout`` seconds of ``clock`` (pumping an
    in-process agent meanwhile, whose clock that then is)."""
    if pump is None:
        readable, _, _ = select.select([sock], [], [], timeout)
        return bool(readable)
    deadline = None if timeout is None else clock() + timeout
    while True:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            return True
        if deadline is not None and clock() >= deadline:
            return False
        pump()


def read_line(sock: socket.socket, buffer: bytearray) -> Message | None:
    """One line from a wake-up socket, or None when none is complete yet."""
    while b"\n" not in buffer:
        try:
            data = sock.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        if not data:
            raise AgentGone("the agent closed the channel")
        buffer += data
    end = buffer.find(b"\n")
    line = bytes(buffer[:end])
    del buffer[: end + 1]
    return decode_line(line)
