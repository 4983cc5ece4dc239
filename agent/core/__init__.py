"""The sans-IO MRC protocol core: bytes and time in, bytes and events out.

Nothing here opens a socket, reads a clock or starts a thread (an import-linter contract checks
it): the caller passes every received datagram and the current time in (float seconds, on any
monotonic clock), and sends what the core returns. That keeps the protocol deterministic, lets
the simulator (``agent.sim``) run it in virtual time, and lets the socket runtime
(``agent.io``) stay a thin loop. The public API, in the order a runtime uses it:

Setup::

    endpoint = Endpoint([local_addr_plane0, ...], MrcConfig(), seed=...)
    region = endpoint.register_memory(bytearray(size))          # R_Key + VA to give the peer
    qp = endpoint.allocate_qp()                                 # QP number to give the peer
    endpoint.connect(ConnectionSpec(qp, peer_qp, (peer_addr_plane0, ...)))

Work: ``endpoint.post_write(qp, data, remote_va, rkey, immediate=None) -> msn``.

Driving it (aioquic style)::

    endpoint.receive_datagram(IncomingDatagram(...), now)   # for each datagram to UDP 4791
    endpoint.handle_timer(now)                              # once now >= endpoint.next_timer()
    for d in endpoint.datagrams_to_send(now): send(d)       # after each of the two calls above
    while (event := endpoint.next_event()) is not None: ... # MessageAcked, MessageReceived, ...

Each ``OutgoingDatagram`` says exactly how to send it: the plane (local address), the EV as UDP
source port (+ IPv6 flow label), DSCP and ECN, and the ``IpContext`` (IPv4 ID 0, DF set) whose
fields the ICRC covers; an ``IncomingDatagram`` brings the same back from the receive side.

Observing it: ``endpoint.stats`` (datagrams in/out, drops by ``DropReason``) and
``endpoint.connection_stats(qp)`` (bytes, packets, retransmits by cause, trims, ECN marks, RTT,
window, and every EV's state and use count).

Modules: ``config`` (every default, with reasons), ``codec`` / ``packets`` / ``icrc`` (wire
format), ``ev`` (EV set and health), ``sender`` / ``messages`` / ``recovery`` / ``receiver`` /
``rtt`` (reliability), ``cc`` (NSCC, DCQCN-like, fixed window), ``memory`` (regions and write
checks), ``connection`` and ``endpoint`` (assembly and demux), ``data_encoder`` and
``send_slots`` (the data path's encoding), ``stats``, ``events``, ``drops``, ``datagram``.
"""

from __future__ import annotations

import agent.core.cc  # noqa: F401  (registers the built-in congestion controls)
from agent.core.config import DcqcnConfig, DscpMap, MrcConfig, NsccConfig
from agent.core.connection import ConnectionClosed, ConnectionSpec
from agent.core.datagram import IncomingDatagram, IpContext, OutgoingDatagram
from agent.core.drops import DropReason
from agent.core.endpoint import Endpoint
from agent.core.events import (
    ConnectionFailed,
    Event,
    MessageAcked,
    MessageFailed,
    MessageReceived,
    PeerPlaneStateChanged,
    WriteRejected,
)
from agent.core.memory import MemoryRegion
from agent.core.messages import SendQueueFull
from agent.core.stats import ConnectionStats, EndpointStats, EvReport, RetransmitCause

__all__ = [
    "ConnectionClosed",
    "ConnectionFailed",
    "ConnectionSpec",
    "ConnectionStats",
    "DcqcnConfig",
    "DropReason",
    "DscpMap",
    "Endpoint",
    "EndpointStats",
    "EvReport",
    "Event",
    "IncomingDatagram",
    "IpContext",
    "MemoryRegion",
    "MessageAcked",
    "MessageFailed",
    "MessageReceived",
    "MrcConfig",
    "NsccConfig",
    "OutgoingDatagram",
    "PeerPlaneStateChanged",
    "RetransmitCause",
    "SendQueueFull",
    "WriteRejected",
]
