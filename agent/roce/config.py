"""Every tunable of the RoCE baseline, with its default and why.

The baseline stands for a RoCEv2 NIC running one reliable connection (RC) per QP, so its
defaults are a NIC's where verbs or the DCQCN paper give one (``timeout`` 14, ``retry_cnt`` 7,
the CNP interval of 50 us, DCQCN's g, K and F), and the testbed's where a software agent on
veth pairs and BMv2 needs its own (rates, the outstanding-packet cap, ACK coalescing). Times are
float seconds, rates bytes per second, sizes bytes, as in ``agent.core.config``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

from agent.core.cc.dcqcn_law import DcqcnLawParams
from wire.constants import DEFAULT_PAYLOAD
from wire.dscp import DscpMap

#: Path MTUs InfiniBand defines (verbs ``IBV_MTU_256`` .. ``IBV_MTU_4096``): a RoCE payload
#: per packet is one of these, every packet but a message's last carries exactly that much.
PATH_MTUS: Final = (256, 512, 1024, 2048, 4096)
#: Unit of the verbs ``timeout`` exponent: the local ACK timeout is 4.096 us x 2**timeout.
LOCAL_ACK_TIMEOUT_UNIT: Final = 4.096e-6
#: Largest ``timeout`` exponent (a 5-bit field; 0 means no timeout at all).
MAX_TIMEOUT_EXPONENT: Final = 31
#: Largest ``retry_cnt`` (a 3-bit field).
MAX_RETRY_CNT: Final = 7
#: Largest backoff exponent of the adaptive timer: past 2**30 times its floor the ceiling (the
#: local ACK timeout) has long been reached, and the exponent stays a small integer.
MAX_BACKOFF_EXPONENT: Final = 30
#: A quiet spell longer than this many DCQCN timer periods (225 ms at 55 us) counts as this
#: many: additive increase alone has long brought the rate from the floor to the line rate, and
#: alpha is below 1e-7 of itself.
MAX_CATCH_UP_PERIODS: Final = 4096
#: Slowest line rate a scaled DCQCN takes (bytes/s): 100 kbit/s, a quarter of the slowest link
#: the testbed emulates (0.4 Mbit/s). Below it DCQCN's floor, a thousandth of it, sends a 1 KiB
#: packet every 80 s or more: a QP cut down to it would outlast any run.
MIN_LINE_RATE: Final = 12_500.0
#: Fastest line rate a scaled DCQCN takes (bytes/s): 1.6 Tbit/s, above any NIC port sold.
MAX_LINE_RATE: Final = 2e11
#: Least byte counter a scaled DCQCN keeps: the largest path MTU, so that one packet never
#: counts as several increase stages (at 0.4 Mbit/s the scaled 1 MiB would be 42 bytes).
MIN_BYTE_COUNTER: Final = max(PATH_MTUS)


@dataclass(frozen=True, slots=True)
class DcqcnParams:
    """DCQCN as the NIC runs it (Zhu et al., "Congestion Control for Large-Scale RDMA
    Deployments", SIGCOMM 2015), in the paper's names.

    The reaction point (RP, the sender) keeps a current rate R_C and a target rate R_T. A CNP
    sets R_T = R_C, cuts R_C by alpha/2 and raises alpha; without CNPs alpha decays every K and
    the rate climbs back in stages counted by a timer (period T) and a byte counter (every B
    bytes sent): fast recovery (R_C halves its distance to R_T) until either count reaches F,
    then additive increase (R_T += R_AI), then, once both have passed F, hyper increase
    (R_T += i x R_HAI). The notification point (NP, the receiver) sends at most one CNP per
    QP every N.
    """

    #: The rate a QP starts at and never exceeds (the NIC port's): 10 Gbit/s, above what one
    #: software agent sends, so the rate limits a QP only once CNPs brought it down.
    line_rate: float = 1.25e9
    #: Floor of R_C: 10 Mbit/s, so a cut-down QP still makes progress.
    min_rate: float = 1.25e6
    #: g, alpha's EWMA gain: the paper's 1/256.
    g: float = 1.0 / 256
    #: K, alpha's update period without CNPs: the paper's 55 us (longer than N, as it must be).
    alpha_timer: float = 55e-6
    #: T, the rate-increase timer: 55 us, so recovery takes some hundreds of microseconds,
    #: a few round trips of the testbed.
    rate_timer: float = 55e-6
    #: B, the rate-increase byte counter: 1 MiB, a second, slower clock at the testbed's
    #: gigabit rates (the paper's 10 MB is sized for 40 Gbit/s).
    byte_counter: int = 1 << 20
    #: F, the stage count at which fast recovery ends: the paper's 5.
    fast_recovery_steps: int = 5
    #: R_AI, the additive-increase step of R_T: 40 Mbit/s.
    additive_increase: float = 5e6
    #: R_HAI, the hyper-increase step of R_T: ten times R_AI.
    hyper_increase: float = 5e7
    #: N, the NP's CNP interval: at most one CNP per QP per 50 us, as the paper and NICs do.
    cnp_interval: float = 50e-6

    @classmethod
    def scaled_to(cls, line_rate: float, sharers: int = 1) -> DcqcnParams:
        """DCQCN of a NIC whose port runs at ``line_rate`` (bytes/s): the defaults' rates and
        byte counter in the same proportion to it as theirs to 10 Gbit/s (floor a thousandth,
        R_AI a 250th, R_HAI a 25th), the byte counter at least ``MIN_BYTE_COUNTER``. A QP
        that shares the port with ``sharers - 1`` others, all always sending (a transfer
        striped over them), runs at most at its even share, ``line_rate / sharers``, as the
        NIC's arbiter gives it; the rest stays the port's.

        A NIC's DCQCN is small against its port (NVIDIA's ``rpg_min_rate`` is in Mbit/s on
        100-400 Gbit/s ports); the defaults' floor, 10 Mbit/s, is 25 times a testbed link
        slowed to 0.4 Mbit/s, so a QP there could never be slowed to its link. The timers
        (K, T and the CNP interval N) stay: they are the NIC's clock, which vendors set in
        microseconds, not in proportion to the port (NVIDIA's ``rpg_time_reset``,
        ``min_time_between_cnps``). So at any line rate a QP climbs from its floor back to
        line rate in about 14 ms without CNPs; on a link whose packets take 5-20 ms a cut
        lasts a packet or two, and what keeps such a QP to its link is mostly the line rate it
        is paced at and never exceeds. ``ValueError`` outside ``MIN_LINE_RATE``-
        ``MAX_LINE_RATE``."""
        if not (math.isfinite(line_rate) and MIN_LINE_RATE <= line_rate <= MAX_LINE_RATE):
            raise ValueError(
                f"a NIC's line rate must be {MIN_LINE_RATE * 8:g}-{MAX_LINE_RATE * 8:g} bit/s, "
                f"got {line_rate * 8:g}"
            )
        if sharers < 1:
            raise ValueError(f"a port is shared by at least one QP, got {sharers}")
        defaults = cls()
        scale = line_rate / defaults.line_rate
        share = line_rate / sharers
        return cls(
            line_rate=share,
            min_rate=min(defaults.min_rate * scale, share),
            additive_increase=defaults.additive_increase * scale,
            hyper_increase=defaults.hyper_increase * scale,
            byte_counter=max(MIN_BYTE_COUNTER, round(defaults.byte_counter * scale)),
        )

    def __post_init__(self) -> None:
        self.law()  # refuses what the law cannot run
        # A NIC's RP always counts bytes and always has a hyper-increase step.
        _positive("byte_counter", self.byte_counter)
        _positive("hyper_increase", self.hyper_increase)
        _positive("cnp_interval", self.cnp_interval)

    def law(self) -> DcqcnLawParams:
        """The reaction point's constants (``agent.core.cc.dcqcn_law``): these, and a quiet
        spell counted as ``MAX_CATCH_UP_PERIODS`` periods at most."""
        return DcqcnLawParams(
            line_rate=self.line_rate,
            min_rate=self.min_rate,
            g=self.g,
            alpha_timer=self.alpha_timer,
            rate_timer=self.rate_timer,
            fast_recovery_steps=self.fast_recovery_steps,
            additive_increase=self.additive_increase,
            hyper_increase=self.hyper_increase,
            byte_counter=self.byte_counter,
            catch_up_limit=MAX_CATCH_UP_PERIODS,
        )


@dataclass(frozen=True, slots=True)
class RoceConfig:
    """Configuration of one RoCE QP (verbs sets these per QP, ``ibv_modify_qp`` to RTS)."""

    #: Path MTU: RDMA payload per packet, 1024 as for MRC (a 1500-byte frame's usual PMTU).
    pmtu: int = DEFAULT_PAYLOAD
    #: Verbs ``timeout``: the local ACK timeout is 4.096 us x 2**timeout, 14 -> 67.1 ms, the
    #: usual value; 0 disables the timer (the QP then waits for ever).
    timeout: int = 14
    #: Verbs ``retry_cnt``: retries (after a local ACK timeout or a sequence-error NAK) before
    #: the QP enters the error state and its work requests fail; 7, the usual and the most.
    retry_cnt: int = MAX_RETRY_CNT
    #: Selective repeat instead of go-back-N: the responder keeps packets that arrive ahead of
    #: the PSN it expects (placing them at once), NAKs each gap once with the testbed's
    #: selective NAK (``agent.roce.packets.SELECTIVE_NAK``), and the requester resends only
    #: what is named missing. Off: the IBTA's RC, as perftest and NCCL run it on most NICs.
    selective_repeat: bool = False
    #: An adaptive retransmission timer instead of the fixed local ACK timeout: RFC 6298's
    #: SRTT + 4 RTTVAR from the QP's own RTT samples, at least ``min_rto``, doubled on each
    #: consecutive timeout up to the local ACK timeout (``agent.roce.rto``). Off: the verbs
    #: timer, 4.096 us x 2**timeout every time.
    adaptive_retransmission: bool = False
    #: The adaptive timer's floor: 1 ms, MRC's (``MrcConfig.rto_min``): below it a software
    #: agent's scheduling jitter fires the timer. A NIC's floor is lower (IRN simulates
    #: 100 us); what NVIDIA's firmware uses is not published.
    min_rto: float = 1e-3
    #: The adaptive timer before the QP's first RTT sample: 10 ms, MRC's ``rto_initial``, above
    #: a loaded BMv2 path's RTT so the first packets are not resent before their ACK can come.
    initial_rto: float = 10e-3
    #: The responder acknowledges after this many packets even inside a message (it also
    #: acknowledges every message's last packet, which carries AckReq): 16 returns several
    #: ACKs per 64 KiB message, so a long write frees its requester's window as it goes.
    ack_every: int = 16
    #: Most packets sent and not yet acknowledged (the testbed's bound on what go-back-N may
    #: have to resend; a NIC's is its scheduler's): 256 packets, 256 KiB, a few times the
    #: testbed's bandwidth-delay product. Under selective repeat it is also the responder's
    #: window: it keeps packets up to this many PSNs ahead of the one it expects, all a
    #: requester of the same setting can have sent, so no packet of it is refused for being
    #: too far ahead.
    max_outstanding: int = 256
    #: Most work requests posted and not completed (the send queue's depth, ``max_send_wr``).
    send_queue_depth: int = 1024
    #: How far the pacer lets a QP catch up after the event loop was busy elsewhere: a NIC
    #: spaces every packet, a software loop sends in turns, and without slack a QP paced at
    #: line rate would send one packet per turn.
    pacing_slack: float = 100e-6
    #: UDP source ports a QP's one fixed port is drawn from: RoCEv2's entropy range.
    src_port_min: int = 0xC000
    src_port_max: int = 0xFFFF
    #: DSCP values: RoCE data, ACKs and NAKs, and CNPs take ``roce_data``, ``roce_ack`` and
    #: ``roce_cnp``, the classes the fabric's switches are programmed with.
    dscp: DscpMap = field(default_factory=DscpMap)
    dcqcn: DcqcnParams = field(default_factory=DcqcnParams)

    def __post_init__(self) -> None:
        if self.pmtu not in PATH_MTUS:
            raise ValueError(
                f"a RoCE path MTU is one of {', '.join(map(str, PATH_MTUS))}, got {self.pmtu}"
            )
        if not 0 <= self.timeout <= MAX_TIMEOUT_EXPONENT:
            raise ValueError(
                f"timeout is an exponent in 0-{MAX_TIMEOUT_EXPONENT} (0: none), got {self.timeout}"
            )
        if not 0 <= self.retry_cnt <= MAX_RETRY_CNT:
            raise ValueError(f"retry_cnt must be in 0-{MAX_RETRY_CNT}, got {self.retry_cnt}")
        if self.ack_every < 1:
            raise ValueError(f"ack_every must be >= 1, got {self.ack_every}")
        if not 1 <= self.max_outstanding < 1 << 22:
            raise ValueError(f"max_outstanding must be in 1-{(1 << 22) - 1}")
        if self.send_queue_depth < 1:
            raise ValueError(f"send_queue_depth must be >= 1, got {self.send_queue_depth}")
        if self.pacing_slack < 0:
            raise ValueError("pacing_slack must be >= 0")
        _positive("min_rto", self.min_rto)
        _positive("initial_rto", self.initial_rto)
        if not 1 <= self.src_port_min <= self.src_port_max <= 0xFFFF:
            raise ValueError("source ports must satisfy 1 <= min <= max <= 65535")

    @property
    def local_ack_timeout(self) -> float | None:
        """Seconds without an acknowledgement before the requester retries (None: never)."""
        if self.timeout == 0:
            return None
        return LOCAL_ACK_TIMEOUT_UNIT * (1 << self.timeout)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
