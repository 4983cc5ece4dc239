"""How the runtime reaches the network: the ``DatagramIO`` interface and its socket form.

The runtime only needs four things from the network: objects to watch for incoming
datagrams, a way to drain them, a non-blocking send, and counters. ``SocketDatagramIO`` is the
real thing (UDP 4791 in, raw IP out, see ``udp_receiver`` and ``raw_sender``); tests that
must run without root plug in an in-memory link instead, and so exercise the whole agent
(side channel, control socket, transfers) on an unprivileged machine.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from agent.core import IncomingDatagram, OutgoingDatagram
from agent.core.send_slots import SendSlots
from agent.io.errors import PermissionDeniedError
from agent.io.raw_sender import RawSender
from agent.io.reactor import HasFileno
from agent.io.udp_receiver import UdpReceiver
from wire.constants import ROCEV2_UDP_PORT


class DatagramIO(Protocol):
    """The runtime's datagram transport."""

    def sources(self) -> list[HasFileno]:
        """Objects to watch for readability; each is then passed to ``drain``."""
        ...

    def drain(
        self, source: HasFileno, handle: Callable[[IncomingDatagram], None], limit: int
    ) -> int:
        """Hand up to ``limit`` waiting datagrams of ``source`` to ``handle``."""
        ...

    def send(self, datagram: OutgoingDatagram) -> bool:
        """Send one datagram; False when it must wait until ``send_waiters`` are writable."""
        ...

    def send_many(self, datagrams: Sequence[OutgoingDatagram], start: int = 0) -> int:
        """Send ``datagrams[start:]`` in order, as ``send`` would one by one; returns the index
        of the first one refused for now (``len(datagrams)``: none was). ``send_each`` is the
        plain implementation; a transport that can batch system calls does better."""
        ...

    def send_waiters(self) -> list[int]:
        """File descriptors that become writable when a refused send may be retried."""
        ...

    def counters(self) -> dict[str, object]:
        """Datagrams in and out, and what was dropped below the core, by reason."""
        ...

    def close(self) -> None:
        """Release every socket."""
        ...


class PacketSender(Protocol):
    """What ``SocketDatagramIO`` sends through: ``RawSender``, or ``Srv6Sender`` in SRv6 mode."""

    @property
    def sent(self) -> int: ...

    @property
    def send_errors(self) -> dict[str, int]: ...

    def open(self, ipv4: bool, ipv6: bool) -> None: ...

    def filenos(self) -> list[int]: ...

    def send(self, datagram: OutgoingDatagram) -> bool: ...

    def send_many(self, datagrams: Sequence[OutgoingDatagram], start: int = 0) -> int: ...

    def make_slots(self, sink: Callable[[SendSlots], None]) -> SendSlots | None: ...

    def send_slots(self, slots: SendSlots) -> int: ...

    def close(self) -> None: ...


def send_each(
    send: Callable[[OutgoingDatagram], bool], datagrams: Sequence[OutgoingDatagram], start: int
) -> int:
    """``DatagramIO.send_many`` by one ``send`` per datagram."""
    for index in range(start, len(datagrams)):
        if not send(datagrams[index]):
            return index
    return len(datagrams)


class SocketDatagramIO:
    """UDP port 4791 (all MRC traffic arrives there) and raw IP sockets to send.

    Raises ``PermissionDeniedError`` without CAP_NET_RAW and ``PortInUseError`` when the
    port is taken; nothing stays open when it fails. ``sender`` replaces the plain raw sender
    (SRv6 mode: ``agent.io.srv6_sender``).
    """

    def __init__(
        self, ipv6: bool, port: int = ROCEV2_UDP_PORT, sender: PacketSender | None = None
    ) -> None:
        self.port = port
        self.sender: PacketSender = sender if sender is not None else RawSender()
        try:
            self.sender.open(ipv4=not ipv6, ipv6=ipv6)
        except PermissionError:
            raise PermissionDeniedError(
                "sending MRC packets needs a raw IP socket (CAP_NET_RAW): run as root"
            ) from None
        try:
            self.receiver = UdpReceiver(ipv4=not ipv6, ipv6=ipv6, port=port)
        except BaseException:
            self.sender.close()
            raise

    def sources(self) -> list[HasFileno]:
        """The bound UDP socket(s)."""
        return list(self.receiver.sockets)

    def drain(
        self, source: HasFileno, handle: Callable[[IncomingDatagram], None], limit: int
    ) -> int:
        """See ``UdpReceiver.drain``."""
        return self.receiver.drain(cast(socket.socket, source), handle, limit)

    def send(self, datagram: OutgoingDatagram) -> bool:
        """See ``RawSender.send``."""
        return self.sender.send(datagram)

    def send_many(self, datagrams: Sequence[OutgoingDatagram], start: int = 0) -> int:
        """See ``RawSender.send_many`` (``sendmmsg`` batches where available)."""
        return self.sender.send_many(datagrams, start)

    def make_slots(self, sink: Callable[[SendSlots], None]) -> SendSlots | None:
        """See ``RawSender.make_slots`` (the runtime looks for this method; transports
        without it get every datagram as an object)."""
        return self.sender.make_slots(sink)

    def send_slots(self, slots: SendSlots) -> int:
        """See ``RawSender.send_slots``."""
        return self.sender.send_slots(slots)

    def send_waiters(self) -> list[int]:
        """The raw sockets."""
        return self.sender.filenos()

    def counters(self) -> dict[str, object]:
        """Datagrams received and sent, receive drops and send errors by reason."""
        return {
            "udp_port": self.port,
            "datagrams_received": self.receiver.received,
            "datagrams_sent": self.sender.sent,
            "receive_drops": dict(self.receiver.drops),
            "send_errors": dict(self.sender.send_errors),
            **getattr(self.sender, "counters", dict)(),
        }

    def close(self) -> None:
        """Release the port and the raw sockets."""
        self.receiver.close()
        self.sender.close()
