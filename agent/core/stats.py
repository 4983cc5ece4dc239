"""Statistics: per-connection counters and snapshots, per-endpoint drop counters.

Counters are plain mutable attributes bumped on the hot path; ``ConnectionStats`` is the frozen
snapshot an application or a test reads (``Endpoint.connection_stats``), so a reader never
sees a half-updated set and the core never hands out its live state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from agent.core.drops import DropReason
from wire.constants import EvState


class RetransmitCause(Enum):
    """Why a data packet was sent again."""

    #: The receiver NACKed it (a switch trimmed it): retransmitted at once.
    NACK = "nack"
    #: Later-sent packets were SACKed and it was not (RACK-style loss detection).
    SACK_GAP = "sack_gap"
    #: Nothing was acknowledged for a whole RTO.
    TIMEOUT = "timeout"


class ConnectionCounters:
    """Live counters of one connection (both halves)."""

    __slots__ = (
        "bytes_acked",
        "completion_probes",
        "data_bytes_received",
        "data_bytes_sent",
        "data_packets_received",
        "data_packets_sent",
        "duplicates_received",
        "ecn_echoes",
        "ecn_marks_received",
        "ev_probes_answered",
        "ev_probes_sent",
        "evs_reinstated",
        "losses",
        "messages_acked",
        "messages_failed",
        "messages_posted",
        "messages_received",
        "nacks_other",
        "packets_acked",
        "retransmits",
        "spurious_losses",
        "spurious_timeouts",
        "tail_probes",
        "timeouts",
        "trims_lasthop_seen",
        "trims_received",
        "trims_seen",
        "writes_rejected",
    )

    def __init__(self) -> None:
        # sender half
        self.messages_posted = 0
        self.messages_acked = 0
        self.messages_failed = 0
        self.data_packets_sent = 0
        self.data_bytes_sent = 0
        self.packets_acked = 0
        self.bytes_acked = 0
        self.retransmits: dict[RetransmitCause, int] = {cause: 0 for cause in RetransmitCause}
        self.losses: dict[RetransmitCause, int] = {cause: 0 for cause in RetransmitCause}
        #: Losses declared from SACK gaps that the answer to the "lost" copy later disproved.
        self.spurious_losses = 0
        self.evs_reinstated = 0
        #: RTOs whose packet's original was acknowledged after all (reduction undone).
        self.spurious_timeouts = 0
        self.timeouts = 0
        self.tail_probes = 0
        self.completion_probes = 0
        self.trims_seen = 0
        self.trims_lasthop_seen = 0
        self.nacks_other = 0
        self.ecn_echoes = 0
        self.ev_probes_sent = 0
        self.ev_probes_answered = 0
        # receiver half
        self.data_packets_received = 0
        self.data_bytes_received = 0
        self.duplicates_received = 0
        self.trims_received = 0
        self.ecn_marks_received = 0
        self.messages_received = 0
        self.writes_rejected = 0


@dataclass(frozen=True, slots=True)
class EvReport:
    """One EV of a connection's set: where it leaves from, its state and how it was used.

    ``home`` is False for a stand-in that holds a retired EV's slot. ``trims`` counts the
    trim NACKs about a packet's copy sent on it, ``ecn_echoes`` the ECN-echoing SACKs of a
    packet sent on it: congestion on the EV's path, where ``losses`` counts its failures.
    """

    plane: int
    ev: int
    state: EvState
    home: bool
    uses: int
    losses: int
    trims: int = 0
    ecn_echoes: int = 0


@dataclass(frozen=True, slots=True)
class ConnectionStats:
    """Snapshot of one connection's statistics."""

    qp: int
    messages_posted: int
    messages_acked: int
    messages_failed: int
    messages_received: int
    data_packets_sent: int
    data_bytes_sent: int
    packets_acked: int
    bytes_acked: int
    data_packets_received: int
    data_bytes_received: int
    duplicates_received: int
    retransmits: dict[RetransmitCause, int]
    losses: dict[RetransmitCause, int]
    #: SACK-gap losses later disproved (reordering, not loss); the window widens on them.
    spurious_losses: int
    #: Of the EVs those losses retired, the ones given their slot back at once for it.
    evs_reinstated: int
    timeouts: int
    #: Of those, the ones shown spurious (their congestion reduction undone).
    spurious_timeouts: int
    tail_probes: int
    completion_probes: int
    trims_seen: int
    trims_lasthop_seen: int
    trims_received: int
    nacks_other: int
    ecn_echoes: int
    ecn_marks_received: int
    writes_rejected: int
    ev_probes_sent: int
    ev_probes_answered: int
    srtt: float | None
    min_rtt: float | None
    rttvar: float
    #: The RTO in force now, backoff included.
    rto: float
    #: How long a packet may trail later-sent ones before it counts as lost (seconds) ...
    reorder_window: float
    #: ... in widths of its base (min_rtt / 4 or 4 rttvar): 1 until spurious losses widen it.
    reorder_multiplier: int
    cwnd: int
    bytes_in_flight: int
    evs: tuple[EvReport, ...]

    @property
    def total_retransmits(self) -> int:
        """Data packets sent again, whatever the cause."""
        return sum(self.retransmits.values())


@dataclass(slots=True)
class EndpointStats:
    """Counters of one endpoint: datagrams in and out, and every drop by reason."""

    datagrams_received: int = 0
    datagrams_sent: int = 0
    drops: dict[DropReason, int] = field(default_factory=lambda: {r: 0 for r in DropReason})

    @property
    def total_drops(self) -> int:
        """Datagrams dropped, whatever the reason."""
        return sum(self.drops.values())
