"""Every tunable of the MRC protocol core, with its default and the reason for that default.

This is the one place defaults live: modules take a ``MrcConfig`` (or one of its parts) and never
hard-code a number of their own. Times are float seconds, sizes bytes, as everywhere in the core.

The defaults target the testbed, not an ASIC: a software agent over veth pairs, Mininet hosts and
BMv2 switches, where a round trip is some tens of microseconds to a few milliseconds. Where the
public MRC/UET material gives a value (EV set size, probes to revive, NSCC's g, the 64-bit SACK
bitmap, 1 KiB payload) it is used as given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from agent.core.cc_registry import congestion_control_spec
from wire.constants import DEFAULT_PAYLOAD
from wire.dscp import DscpMap

#: Largest PSN window the wire allows: SETH's ack_psn_offset and sack_offset are signed 16 bits.
MAX_PSN_WINDOW = (1 << 15) - 1
#: Packets of queueing NSCC aims for, as its default target delay is at 1 Gbit/s.
TARGET_QUEUE_PACKETS = 10


@dataclass(frozen=True, slots=True)
class NsccConfig:
    """NSCC (UET's sender-based congestion control): ECN + RTT against a target queueing delay."""

    #: Queueing delay NSCC aims for. About ten 1 KiB packets queued at 1 Gbps, the depth of a
    #: software switch queue; below it the window grows in proportion to the headroom.
    target_queue_delay: float = 100e-6
    #: Multiplicative-decrease gain g of W*(1 - g*(rtt-target)/rtt): the notes' "g ~ 0.8".
    decrease_gain: float = 0.8
    #: Proportional increase: bytes of window added per byte acked at an empty queue. 1.0 makes
    #: it double per RTT when there is no queue (slow-start speed), less as the queue fills.
    proportional_gain: float = 1.0
    #: Fair increase: window bytes added per RTT once the delay is above target (one packet,
    #: TCP-like additive increase, so competing flows converge to fair shares).
    fair_increase_bytes: int = DEFAULT_PAYLOAD
    #: Queueing delay assumed for a trimmed packet, in multiples of the target: a switch trims
    #: only with a full queue, which sits above its ECN threshold, so a trim is treated as the
    #: "ECN and above target" case at twice the target delay.
    trim_delay_factor: float = 2.0

    def scaled_to(self, packets_per_s: float) -> NsccConfig:
        """This configuration on a fabric whose slowest links send ``packets_per_s``: the
        target queueing delay becomes ``TARGET_QUEUE_PACKETS`` packets at that rate (never
        less than this one's). The default's ten packets at 1 Gbit/s are 1/50 of a packet
        on a link of 200 packets/s: NSCC then took every queue for congestion and held the
        window at the path's bare bandwidth-delay product, acknowledged packet by packet."""
        if not packets_per_s > 0:
            raise ValueError(f"a fabric rate must be > 0 packets/s, got {packets_per_s}")
        target = max(self.target_queue_delay, TARGET_QUEUE_PACKETS / packets_per_s)
        return dataclasses.replace(self, target_queue_delay=target)

    def __post_init__(self) -> None:
        _positive("target_queue_delay", self.target_queue_delay)
        if not 0 < self.decrease_gain < 1:
            raise ValueError(f"decrease_gain must be in (0, 1), got {self.decrease_gain}")
        _positive("proportional_gain", self.proportional_gain)
        _positive("fair_increase_bytes", self.fair_increase_bytes)
        _positive("trim_delay_factor", self.trim_delay_factor)


@dataclass(frozen=True, slots=True)
class DcqcnConfig:
    """A DCQCN-like rate controller, kept for comparison with NSCC (RoCE's usual choice)."""

    #: Starting and maximum rate: 10 Gbit/s, above what one software agent core sends, so
    #: the rate only matters once congestion marks bring it down.
    line_rate: float = 1.25e9
    #: Floor: 10 Mbit/s keeps probes of a congested path alive without adding load.
    min_rate: float = 1.25e6
    #: EWMA gain of alpha, DCQCN's congestion estimate (the DCQCN paper's g = 1/256 is for
    #: per-55us updates at 40G; 1/16 reacts within a few RTTs at software rates).
    alpha_gain: float = 1.0 / 16
    #: At most one rate cut per this interval (DCQCN's CNP interval: 50 us).
    decrease_interval: float = 50e-6
    #: Rate increase timer (DCQCN's 55 us): each period without marks raises the rate.
    increase_interval: float = 55e-6
    #: Additive increase step of the target rate per period after fast recovery: 40 Mbit/s.
    additive_increase: float = 5e6
    #: Fast-recovery periods (halving the distance to the target rate) before additive increase.
    fast_recovery_steps: int = 5

    def __post_init__(self) -> None:
        _positive("line_rate", self.line_rate)
        _positive("min_rate", self.min_rate)
        if self.min_rate > self.line_rate:
            raise ValueError("min_rate must not exceed line_rate")
        if not 0 < self.alpha_gain <= 1:
            raise ValueError(f"alpha_gain must be in (0, 1], got {self.alpha_gain}")
        _positive("decrease_interval", self.decrease_interval)
        _positive("increase_interval", self.increase_interval)
        _positive("additive_increase", self.additive_increase)
        if self.fast_recovery_steps < 0:
            raise ValueError("fast_recovery_steps must be >= 0")


@dataclass(frozen=True, slots=True)
class MrcConfig:
    """Configuration of an MRC endpoint and of every connection it holds."""

    # --- Entropy values (EVs) -------------------------------------------------------------
    #: EVs per connection, split evenly across planes: the notes' "typically 128-256"; 256
    #: covers every ECMP path of a 2-tier Clos with 64-port T0s several times over.
    ev_set_size: int = 256
    #: UDP source ports EVs are drawn from: RoCEv2's entropy range 0xC000-0xFFFF.
    ev_port_min: int = 0xC000
    ev_port_max: int = 0xFFFF
    #: Successful background probes that bring a retired (ASSUMED_BAD) EV back: the spec's 3,
    #: enough that one lucky probe over a flapping path does not re-admit it.
    probes_to_revive: int = 3
    #: Successful probes a freshly drawn EV needs before it carries data. One: it costs one RTT
    #: per replaced slot, but when a path dies a quarter of random replacements (with four
    #: paths) would hash onto the same dead path and lose data again.
    probes_to_admit: int = 1
    #: Period of background EV probes; also the shortest time a probe is given to be answered.
    #: 1 ms is several RTTs of the testbed, so a repaired path is back within ~3 ms.
    probe_interval: float = 1e-3
    #: Probes per data packet sent that may go to retired EVs with no answered probe yet (a
    #: round without data counts as one packet). Without a budget every retired EV was probed
    #: every interval: a dead path holding a quarter of 256 EVs drew 64 probes per ms, more
    #: packets than the data on the BMv2 testbed (128,614 probes against 16,315 data packets
    #: after a spine link cut), and a software switch pays per packet, however small. 3 %
    #: keeps all probes (stand-ins' admission probes included) under ~10 % of the packets in
    #: the simulator's slow-fabric failover test; EVs whose probe was answered, and stand-ins,
    #: are probed every round regardless, so a repaired path returns within a few rounds of
    #: one of its EVs being probed (at 1 Gbit/s, 64 retired EVs are all probed every ~6 ms).
    probe_share: float = 0.03

    # --- Reliability ------------------------------------------------------------------------
    #: RDMA payload bytes per data packet: RoCE's usual path MTU for a 1500-byte frame.
    payload_size: int = DEFAULT_PAYLOAD
    #: Most PSNs in flight (sent, not yet cumulatively acked). 4096 packets = 4 MiB, above the
    #: bandwidth-delay product of 10 Gbit/s x 3 ms; must stay below 2**15 (signed SETH offsets).
    max_psn_window: int = 4096
    #: How far a sender's MSNs may run past its oldest unconfirmed message (the RQMSN), and so
    #: the most it keeps unconfirmed; below ``completion_history`` so the receiver still
    #: remembers the outcome of any message the sender asks about again.
    max_unconfirmed_messages: int = 2048
    #: Outcomes of completed messages the receiver remembers, to re-answer a sender whose
    #: completion ACK was lost.
    completion_history: int = 4096
    #: RTO before any RTT sample: 10 ms, above a loaded BMv2 path's RTT, so the first packets
    #: are not retransmitted spuriously.
    rto_initial: float = 10e-3
    #: RTO floor: 1 ms; lower would fire on the scheduling jitter of a software agent.
    rto_min: float = 1e-3
    #: RTO ceiling after backoff: 1 s, so a returning path is retried within a second. It
    #: caps the backoff, not the measured RTO (srtt + 4 rttvar): where queues hold seconds of
    #: packets an RTO below the RTT resent every packet before its answer could arrive.
    rto_max: float = 1.0
    #: RTO multiplier per consecutive timeout (classic exponential backoff).
    rto_backoff: float = 2.0
    #: Reordering tolerated before a packet is declared lost, as a fraction of the minimum
    #: RTT (RACK's default of min_rtt/4) ...
    reorder_window_min_rtt_fraction: float = 0.25
    #: ... or as multiples of the RTT variation, whichever is larger: spraying over paths of
    #: different delays makes the RTT spread, and rttvar measures exactly that spread.
    reorder_window_rttvar_factor: float = 4.0
    #: Loss episodes after which a reordering window widened by spurious losses returns to
    #: its base (RFC 8985's 16). A loss declared from a SACK gap that the original copy's
    #: answer later disproves widens the window by one more base width (at most once per
    #: flight, up to srtt): a software fabric's queues reorder by more than rttvar shows
    #: (the failover experiment resent 1,612 of 84,251 packets that had arrived).
    reorder_window_persist: int = 16
    #: Declare losses from SACK gaps (RACK-style). Off leaves NACKs and the RTO only, for
    #: ablation experiments ("timeout-only recovery").
    sack_loss_detection: bool = True
    #: Send a reliability probe (0xDE) when the tail of a burst goes unanswered, so tail losses
    #: are found by a SACK within about an RTT instead of by the RTO.
    tail_loss_probe: bool = True
    #: Most data packets one SACK answers. The receiver answers whatever arrived since its last
    #: SACK whenever the caller asks for output (the runtime: after each receive batch of up
    #: to 64 datagrams), and at the latest after this many packets. 64, the runtime's batch,
    #: makes it one SACK per batch: SACK processing is a large part of the sender's per-packet
    #: work, and this still returns several acknowledgements per window of the size NSCC
    #: settles at on a veth pair. 1 restores one SACK per packet.
    sack_coalesce_max: int = 64
    #: A connection with work outstanding that hears nothing from its peer for this long
    #: fails: 3 s is far beyond any path repair the testbed does and short enough for a CLI.
    peer_timeout: float = 3.0
    #: ... or this many RTOs (measured, without backoff), whichever is longer: on a path whose
    #: queues hold seconds of packets (the spray experiment's slowed fabric) one round trip can
    #: take longer than 3 s, and the peer is silent only as long as a few of them.
    peer_timeout_rtos: float = 4.0

    # --- Congestion control -------------------------------------------------------------------
    #: Algorithm, a name of ``agent.core.cc_registry``: "nscc" (default, MRC's), "dcqcn"
    #: (rate-based, RoCE's), "fixed" (no control), or one registered there.
    congestion_control: str = "nscc"
    #: Starting window: 64 packets, about one BDP of a few Gbit/s over a 100 us RTT, as UET
    #: starts at one BDP; NSCC finds the real value within a few RTTs.
    initial_window: int = 64 * DEFAULT_PAYLOAD
    #: Smallest window: one packet, so a connection always makes progress.
    min_window: int = DEFAULT_PAYLOAD
    #: Largest window: the PSN window's worth of payload.
    max_window: int = 4096 * DEFAULT_PAYLOAD
    nscc: NsccConfig = field(default_factory=NsccConfig)
    dcqcn: DcqcnConfig = field(default_factory=DcqcnConfig)

    # --- Traffic classes ----------------------------------------------------------------------
    dscp: DscpMap = field(default_factory=DscpMap)

    def __post_init__(self) -> None:
        if self.ev_set_size < 1:
            raise ValueError(f"ev_set_size must be >= 1, got {self.ev_set_size}")
        if not 1 <= self.ev_port_min <= self.ev_port_max <= 0xFFFF:
            raise ValueError(
                f"EV source ports must satisfy 1 <= min <= max <= 65535, "
                f"got {self.ev_port_min}-{self.ev_port_max}"
            )
        if self.ev_port_max - self.ev_port_min + 1 < 2 * self.ev_set_size:
            raise ValueError(
                "the EV source-port range must hold at least twice ev_set_size values, so that "
                "retired EVs can be replaced by fresh ones"
            )
        if self.probes_to_revive < 1 or self.probes_to_admit < 0:
            raise ValueError("probes_to_revive must be >= 1 and probes_to_admit >= 0")
        _positive("probe_interval", self.probe_interval)
        if not 0 < self.probe_share <= 1:
            raise ValueError(f"probe_share must be in (0, 1], got {self.probe_share}")
        if not 1 <= self.payload_size <= 9000:
            raise ValueError(f"payload_size must be in 1-9000 bytes, got {self.payload_size}")
        if not 64 <= self.max_psn_window <= MAX_PSN_WINDOW:
            raise ValueError(
                f"max_psn_window must be in 64-{MAX_PSN_WINDOW}, got {self.max_psn_window}"
            )
        if not 1 <= self.max_unconfirmed_messages < self.completion_history:
            raise ValueError("max_unconfirmed_messages must be >= 1 and < completion_history")
        if self.completion_history >= 1 << 15:
            raise ValueError("completion_history must stay below 2**15 (16-bit MSNs)")
        _positive("rto_initial", self.rto_initial)
        _positive("rto_min", self.rto_min)
        if not self.rto_min <= self.rto_max:
            raise ValueError("rto_min must not exceed rto_max")
        if self.rto_backoff < 1:
            raise ValueError(f"rto_backoff must be >= 1, got {self.rto_backoff}")
        if self.reorder_window_min_rtt_fraction < 0 or self.reorder_window_rttvar_factor < 0:
            raise ValueError("reorder window factors must be >= 0")
        if self.reorder_window_persist < 1:
            raise ValueError("reorder_window_persist must be >= 1")
        if self.sack_coalesce_max < 1:
            raise ValueError(f"sack_coalesce_max must be >= 1, got {self.sack_coalesce_max}")
        _positive("peer_timeout", self.peer_timeout)
        _positive("peer_timeout_rtos", self.peer_timeout_rtos)
        congestion_control_spec(self.congestion_control)
        if not 0 < self.min_window <= self.initial_window <= self.max_window:
            raise ValueError("windows must satisfy 0 < min_window <= initial_window <= max_window")


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
