"""DCQCN's rate law, one for both users: MRC's ``--cc dcqcn`` and the RoCE baseline's QPs.

From Zhu et al., "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM 2015), in the
paper's names (``DcqcnLawParams``):

* the **congestion point** is the switch, which marks ECN (CE) on data as its queue grows;
* the **notification point** (NP, the receiver) answers CE marks of a QP with a CNP, at most
  one every N (``CnpPacer``);
* the **reaction point** (RP, the sender) keeps a current rate R_C and a target rate R_T
  (``ReactionPoint``). A notification sets R_T = R_C, cuts R_C by alpha/2 and raises alpha;
  without notifications alpha decays every K and the rate climbs back in stages counted by a
  timer (period T) and a byte counter (every B bytes sent): fast recovery (R_C halves its
  distance to R_T) until either count reaches F, then additive increase (R_T += R_AI), then,
  once both have passed F, hyper increase (R_T += i x R_HAI).

The two users differ in parameters only. The RoCE requester hears CNPs and feeds the byte
counter (``agent.roce.config.DcqcnParams``). MRC has no CNPs: the ECN echoes in its SACKs and
its trims are the notifications, paced as an NP would pace CNPs, and it counts stages by the
timer alone (``agent.core.cc.dcqcn``).

Sans-IO: time is passed in. The RP's two timers (alpha's K and the rate timer T) are applied
lazily, whenever the RP is next told anything: each elapsed period is applied in turn, as if the
timer had fired on time, up to ``catch_up_limit`` periods; a longer quiet spell counts as that
many. Alpha's decay and the rate increase do not depend on each other between two
notifications, so each is caught up on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: The timer's stage count stops growing here (a quiet QP's timer runs on for ever), so that it
#: stays a machine integer.
_MAX_STAGES: Final = 1 << 30


@dataclass(frozen=True, slots=True)
class DcqcnLawParams:
    """The reaction point's constants, in the paper's names (rates in bytes/s, times in s)."""

    #: The rate an RP starts at and never exceeds.
    line_rate: float
    #: The floor of R_C.
    min_rate: float
    #: g, alpha's EWMA gain.
    g: float
    #: K, alpha's update period without notifications.
    alpha_timer: float
    #: T, the rate-increase timer.
    rate_timer: float
    #: F, the stage count at which fast recovery ends: F - 1 fast-recovery stages at most.
    fast_recovery_steps: int
    #: R_AI, the additive-increase step of R_T.
    additive_increase: float
    #: R_HAI, the hyper-increase step of R_T.
    hyper_increase: float
    #: B, bytes sent per byte-counter stage; 0: no byte counter, the timer alone counts stages
    #: (and hyper increase, which needs both counts past F, never comes).
    byte_counter: int
    #: Most timer periods one catch-up applies (module docstring).
    catch_up_limit: int

    def __post_init__(self) -> None:
        _positive("line_rate", self.line_rate)
        _positive("min_rate", self.min_rate)
        if self.min_rate > self.line_rate:
            raise ValueError("min_rate must not exceed line_rate")
        if not 0 < self.g <= 1:
            raise ValueError(f"g must be in (0, 1], got {self.g}")
        _positive("alpha_timer", self.alpha_timer)
        _positive("rate_timer", self.rate_timer)
        if self.fast_recovery_steps < 0:
            raise ValueError("fast_recovery_steps must be >= 0")
        _positive("additive_increase", self.additive_increase)
        if self.hyper_increase < 0:
            raise ValueError(f"hyper_increase must be >= 0, got {self.hyper_increase}")
        if self.byte_counter < 0:
            raise ValueError(f"byte_counter must be >= 0 (0: none), got {self.byte_counter}")
        if self.catch_up_limit < 1:
            raise ValueError(f"catch_up_limit must be >= 1, got {self.catch_up_limit}")


class CnpPacer:
    """The NP's pacing: whether a notification arriving now is acted on (at most one per
    ``interval``)."""

    __slots__ = ("_interval", "_last", "sent", "suppressed")

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._last = float("-inf")
        #: Notifications acted on, and those that arrived within the interval of the last.
        self.sent = 0
        self.suppressed = 0

    def on_marked(self, now: float) -> bool:
        """A notification arrived (a CE mark at the NP): True when it is acted on."""
        if now - self._last < self._interval:
            self.suppressed += 1
            return False
        self._last = now
        self.sent += 1
        return True


class ReactionPoint:
    """The RP of one sender: the current rate R_C (``rate``, bytes/s) it is paced at.

    ``rate`` may be set from outside (MRC halves it on a timeout, which DCQCN has no rule
    for); the law goes on from the rate set.
    """

    __slots__ = (
        "_alpha_due",
        "_byte_stages",
        "_bytes",
        "_params",
        "_rate_due",
        "_timer_stages",
        "alpha",
        "rate",
        "target",
    )

    def __init__(self, params: DcqcnLawParams) -> None:
        self._params = params
        #: R_C and R_T: an RP starts at line rate, as NICs start a QP.
        self.rate = params.line_rate
        self.target = params.line_rate
        #: alpha starts at 1, so the first notification halves the rate.
        self.alpha = 1.0
        #: When alpha's timer and the rate timer next expire: they start with the RP's first
        #: event (the QP's first packet), as a NIC's start when the QP does.
        self._alpha_due: float | None = None
        self._rate_due: float | None = None
        #: The paper's T and BC: rate-timer periods and byte-counter expiries since the last
        #: notification, which choose between fast recovery, additive and hyper increase.
        self._timer_stages = 0
        self._byte_stages = 0
        self._bytes = 0

    @property
    def stage(self) -> str:
        """The increase stage the RP is in: the one its latest increase event applied."""
        f = self._params.fast_recovery_steps
        timer, counted = self._timer_stages, self._byte_stages
        if max(timer, counted) < f:
            return "fast_recovery"
        if min(timer, counted) > f:
            return "hyper_increase"
        return "additive_increase"

    def on_cnp(self, now: float) -> None:
        """A notification (a CNP, or MRC's paced ECN echo or trim): R_T = R_C,
        R_C *= 1 - alpha/2, alpha = (1 - g) alpha + g; both increase counters and both timers
        start over."""
        self.advance(now)
        params = self._params
        self.target = self.rate
        self.rate = max(params.min_rate, self.rate * (1 - self.alpha / 2))
        self.alpha = (1 - params.g) * self.alpha + params.g
        self._alpha_due = now + params.alpha_timer
        self._rate_due = now + params.rate_timer
        self._timer_stages = 0
        self._byte_stages = 0
        self._bytes = 0

    def on_sent(self, now: float, size: int) -> None:
        """``size`` bytes left: every B bytes the byte counter raises the rate one stage."""
        self.advance(now)
        limit = self._params.byte_counter
        if limit == 0:
            return
        self._bytes += size
        while self._bytes >= limit:
            self._bytes -= limit
            self._byte_stages += 1
            self._increase()

    def advance(self, now: float) -> None:
        """Apply every alpha-timer and rate-timer period that ended by ``now`` (at most
        ``catch_up_limit`` of each)."""
        params = self._params
        alpha_due, rate_due = self._alpha_due, self._rate_due
        if alpha_due is None or rate_due is None:
            self._alpha_due = now + params.alpha_timer
            self._rate_due = now + params.rate_timer
            return
        limit = params.catch_up_limit
        if now >= alpha_due:
            periods = int((now - alpha_due) / params.alpha_timer) + 1
            self.alpha *= (1 - params.g) ** min(periods, limit)
            self._alpha_due = alpha_due + periods * params.alpha_timer
        if now >= rate_due:
            periods = int((now - rate_due) / params.rate_timer) + 1
            self._rate_due = rate_due + periods * params.rate_timer
            counted = min(periods, limit)
            applied = 0
            while applied < counted:
                if self.rate >= params.line_rate and self.target >= params.line_rate:
                    break  # at line rate: the periods left change nothing but the count
                self._timer_stages += 1
                self._increase()
                applied += 1
            self._timer_stages = min(self._timer_stages + counted - applied, _MAX_STAGES)

    def _increase(self) -> None:
        """One increase event: fast recovery while both counts are below F, hyper increase
        once both are above it, additive increase in between."""
        params = self._params
        timer, counted = self._timer_stages, self._byte_stages
        f = params.fast_recovery_steps
        if max(timer, counted) < f:
            pass  # fast recovery: R_T stays, R_C closes half its distance to it
        elif min(timer, counted) > f:
            self.target += (min(timer, counted) - f) * params.hyper_increase
        else:
            self.target += params.additive_increase
        self.target = min(self.target, params.line_rate)
        self.rate = min((self.rate + self.target) / 2, params.line_rate)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
