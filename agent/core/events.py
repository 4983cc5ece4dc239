"""Events the core hands to its application (``Endpoint.next_event()``).

Sender side: ``MessageAcked`` means the *receiver* confirmed that every byte of the message was
placed (an ACK, not merely SACKs), so an application may report success on it; ``MessageFailed``
that it never will be. Receiver side: ``MessageReceived`` when the last byte of a write is in
its region, ``WriteRejected`` when a write was refused (unknown R_Key, outside its region).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MessageReceived:
    """Every byte of message ``msn`` is in region ``rkey`` at ``[va, va + length)``."""

    qp: int
    msn: int
    rkey: int
    va: int
    length: int
    immediate: int | None


@dataclass(frozen=True, slots=True)
class WriteRejected:
    """Message ``msn`` was refused (``reason``: a ``DropReason`` value); nothing was written."""

    qp: int
    msn: int
    reason: str


@dataclass(frozen=True, slots=True)
class MessageAcked:
    """The receiver confirmed message ``msn`` (``length`` bytes) placed in full."""

    qp: int
    msn: int
    length: int


@dataclass(frozen=True, slots=True)
class MessageFailed:
    """Message ``msn`` will not be delivered: the receiver refused it or the connection died."""

    qp: int
    msn: int
    reason: str


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """Connection ``qp`` is dead (``reason`` says why); its unconfirmed messages failed."""

    qp: int
    reason: str


@dataclass(frozen=True, slots=True)
class PeerPlaneStateChanged:
    """The peer reported its port on ``plane`` up or down; that plane's EVs follow suit."""

    qp: int
    plane: int
    up: bool


@dataclass(frozen=True, slots=True)
class EvStateChanged:
    """Home EV ``value`` of ``plane`` on connection ``qp`` entered ``state`` (an ``EvState``):
    retired (ASSUMED_BAD), revived or reinstated (GOOD), denied or allowed by the operator.
    A controller's EV events come from these."""

    qp: int
    plane: int
    value: int
    state: int


@dataclass(frozen=True, slots=True)
class EvProbeAnswered:
    """A connectionless EV probe (``Endpoint.send_ev_probe``) was answered after ``rtt``
    seconds; ``qp`` is 0, the QP connectionless requests are addressed to."""

    qp: int
    seq: int
    plane: int
    value: int
    rtt: float


Event = (
    MessageReceived
    | WriteRejected
    | MessageAcked
    | MessageFailed
    | ConnectionFailed
    | PeerPlaneStateChanged
    | EvStateChanged
    | EvProbeAnswered
)
