"""The RoCE baseline: one RoCEv2 reliable connection (RC) per QP, as a NIC runs it, sans-IO.

This is what MRC replaces, kept beside it to compare against: RDMA WRITE (FIRST / MIDDLE /
LAST / ONLY, with or without immediate) with the standard opcodes, on one path (one fixed UDP
source port per QP), a responder that takes only the expected PSN and NAKs a gap once, a
requester that goes back N from the NAKed PSN and retries on its local ACK timeout until
``retry_cnt`` is used up (then the QP is in the error state and its writes fail), and DCQCN
driven by CNPs. A modern NIC's selective repeat and adaptive retransmission timer are options
of the same QP, and ``profiles`` names the settings deployments run (perftest's, NCCL's, a
modern NIC's). Like ``agent.core`` it never opens a socket nor reads a clock (an
import-linter contract holds it): datagrams and the time go in, datagrams and events come out,
and the I/O layer owns the IP and UDP headers.

Setup, driving and events are ``agent.core.Endpoint``'s (see ``endpoint``)::

    endpoint = RoceEndpoint([local_addr], seed=...)
    region = endpoint.register_memory(bytearray(size))
    qp = endpoint.allocate_qp()
    endpoint.connect(RoceQpSpec(qp, peer_qp, peer_addr, send_psn, receive_psn, RoceConfig()))
    endpoint.post_write(qp, data, remote_va, rkey)

Modules, one job each: ``config`` (every default and why), ``profiles`` (named sets of
settings and their sources), ``packets`` and ``codec`` (the wire format; the ICRC is
``agent.core.icrc``'s), ``requester`` (sending, go-back-N or selective repeat, retries),
``rto`` (the local ACK timer, fixed or adaptive), ``responder`` (in-order placement, one NAK
per gap, coalesced ACKs, CNPs), ``selective_responder`` (out-of-order placement, selective
NAKs), ``qp`` (a QP: both halves on one path, its statistics; DCQCN's points are
``agent.core.cc.dcqcn_law``'s) and ``endpoint`` (QPs, memory, demultiplexing).
"""

from __future__ import annotations

from agent.roce.config import DcqcnParams, RoceConfig
from agent.roce.endpoint import RoceEndpoint
from agent.roce.qp import RoceQpSpec, RoceStats

__all__ = ["DcqcnParams", "RoceConfig", "RoceEndpoint", "RoceQpSpec", "RoceStats"]
