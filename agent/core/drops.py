"""Why the core dropped a datagram: every drop is counted under one of these reasons.

Bad input never raises out of the core; it is dropped and counted here, so a test (or an
operator reading the stats) can tell a corrupted packet from a stray one or a rejected write.
"""

from __future__ import annotations

from enum import Enum


class DropReason(Enum):
    """Reasons a received datagram is dropped (and counted) instead of processed."""

    #: Shorter than the headers its opcode calls for.
    TRUNCATED = "truncated"
    #: BTH opcode that MRC does not define.
    UNKNOWN_OPCODE = "unknown_opcode"
    #: ICRC does not match the packet and its IP/UDP context.
    BAD_ICRC = "bad_icrc"
    #: A header field holds a value the protocol forbids (e.g. payload longer than the message,
    #: an unknown endpoint-request type, a trimmed DSCP on a non-data packet).
    BAD_FIELD = "bad_field"
    #: Not addressed to UDP port 4791.
    WRONG_PORT = "wrong_port"
    #: Addressed to an IP address that is none of this endpoint's planes.
    UNKNOWN_DESTINATION = "unknown_destination"
    #: Destination QP that no connection of this endpoint has.
    UNKNOWN_QP = "unknown_qp"
    #: Source address that is not the connection's peer on that plane.
    WRONG_SOURCE = "wrong_source"
    #: PSN outside the receive window (too far ahead, or too far behind to answer).
    OUT_OF_WINDOW = "out_of_window"
    #: Acknowledges PSNs never sent, answers a probe never sent, or similar.
    UNEXPECTED = "unexpected"
    #: RDMA write with an R_Key that names no registered region (rejected and counted).
    BAD_RKEY = "bad_rkey"
    #: RDMA write outside the bounds of its region (rejected and counted).
    OUT_OF_BOUNDS = "out_of_bounds"
    #: Arrived for a connection that has already failed or been closed.
    CONNECTION_CLOSED = "connection_closed"
