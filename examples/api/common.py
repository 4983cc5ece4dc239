"""What the host API examples share: the out-of-band exchange of QP details over TCP (the job
of ``do_exchange`` in OCP's benchmark), and the options every example takes.

Two processes meet on a TCP port (18516 by default: the agent's side channel holds perftest's
18515): the server listens, the client connects (trying again while the server is not
listening yet, so the two may start in any order), each sends one JSON line with what its
peer needs (QP number, first PSN, R_Key and address of its region, its plane addresses) and
reads the other's. ``barrier`` is a one-byte handshake on the same connection, to line up phases.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import time
from dataclasses import asdict, dataclass

from agent.api import CQ, CompChannel, WorkCompletion

EXCHANGE_PORT = 18516


@dataclass(frozen=True)
class Wire:
    """One side's connection details (OCP's ``struct wire``)."""

    qpn: int
    psn: int
    rkey: int
    addr: int
    gids: list[str]


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """``--socket`` (the agent's control socket) and ``--port`` (the exchange's)."""
    parser.add_argument(
        "--socket",
        default=os.environ.get("MRC_AGENT_SOCKET"),
        help="the agent's control socket (default $MRC_AGENT_SOCKET or /run/mrc-agent.sock)",
    )
    parser.add_argument("--port", type=int, default=EXCHANGE_PORT, help="TCP port to meet on")


def random_psn() -> int:
    """A first PSN (24 bits)."""
    return secrets.randbelow(1 << 24)


class Exchange:
    """The TCP connection between the two sides."""

    def __init__(self, peer: str | None, port: int, timeout: float = 60.0) -> None:
        if peer is None:
            listener = socket.create_server(("", port), reuse_port=False)
            listener.settimeout(timeout)
            with listener:
                self.sock, _address = listener.accept()
        else:
            self.sock = _connect(peer, port, timeout)
        self.sock.settimeout(timeout)
        self._reader = self.sock.makefile("rb")

    def swap(self, mine: Wire) -> Wire:
        """Send ours, return theirs."""
        self.sock.sendall(json.dumps(asdict(mine)).encode() + b"\n")
        line = self._reader.readline()
        if not line:
            raise ConnectionError("the peer closed the exchange")
        return Wire(**json.loads(line))

    def send(self, message: dict[str, object]) -> None:
        """One JSON line to the peer."""
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, object]:
        """One JSON line from the peer."""
        line = self._reader.readline()
        if not line:
            raise ConnectionError("the peer closed the exchange")
        return json.loads(line)

    def barrier(self) -> None:
        """Wait until the peer reaches the same point."""
        self.sock.sendall(b".")
        if self._reader.read(1) != b".":
            raise ConnectionError("the peer left the exchange")

    def close(self) -> None:
        """Hang up."""
        self._reader.close()
        self.sock.close()


def _connect(peer: str, port: int, timeout: float) -> socket.socket:
    """A connection to ``peer``, tried again while it refuses (its server is still starting)
    until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((peer, port), timeout=timeout)
        except ConnectionRefusedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def wait_completions(channel: CompChannel, cq: CQ, timeout: float = 30.0) -> list[WorkCompletion]:
    """Block on the completion channel (after ``cq.req_notify()``) until ``cq`` has a
    completion, and return what ``poll`` then gives."""
    while True:
        if channel.get_cq_event(timeout=timeout) is None:
            raise TimeoutError(f"no completion within {timeout:g} s")
        channel.ack_cq_events(cq, 1)
        completions = cq.poll(16)
        if completions:
            return completions
        cq.req_notify()
