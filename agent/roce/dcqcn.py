"""DCQCN, RoCE's congestion control as NICs run it: the notification and reaction points.

From Zhu et al., "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM 2015); the
parameter names are the paper's (see ``agent.roce.config.DcqcnParams``):

* the **congestion point** is the switch, which marks ECN (CE) on data as its queue grows;
* the **notification point** (NP, the receiving NIC) answers CE-marked packets of a QP with a
  CNP, at most one per QP every N (``CnpPacer``);
* the **reaction point** (RP, the sending NIC) cuts its rate on each CNP and raises it again
  in stages when CNPs stop (``ReactionPoint``).

``agent.core.cc.dcqcn`` is a different thing: a DCQCN-like window for MRC, driven by the ECN
echoes in MRC's SACKs. RC has no SACKs; its sender hears of congestion only through CNPs.

Sans-IO: time is passed in. The RP's two timers (alpha's K and the rate timer T) are applied
lazily, whenever the RP is next told anything: each elapsed period is applied in turn, as if
the timer had fired on time. Alpha's decay and the rate increase do not depend on each other
between two CNPs, so each is caught up on its own.
"""

from __future__ import annotations

from typing import Final

from agent.roce.config import DcqcnParams

#: Most rate-timer periods applied one by one after a quiet spell; beyond it the rate has long
#: reached the line rate (additive increase alone gets there from the floor well within it).
_MAX_CATCH_UP: Final = 4096


class CnpPacer:
    """The NP of one QP: whether a CE-marked packet arriving now is answered with a CNP."""

    __slots__ = ("_interval", "_last", "sent", "suppressed")

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._last = float("-inf")
        #: CNPs sent, and CE marks that arrived within N of the last CNP (answered by it).
        self.sent = 0
        self.suppressed = 0

    def on_marked(self, now: float) -> bool:
        """A CE-marked packet arrived: True when a CNP goes out for it."""
        if now - self._last < self._interval:
            self.suppressed += 1
            return False
        self._last = now
        self.sent += 1
        return True


class ReactionPoint:
    """The RP of one QP: the current rate R_C (``rate``, bytes/s) the QP is paced at."""

    __slots__ = (
        "_alpha_due",
        "_byte_stages",
        "_bytes",
        "_params",
        "_rate_due",
        "_timer_stages",
        "alpha",
        "cnps",
        "rate",
        "target",
    )

    def __init__(self, params: DcqcnParams) -> None:
        self._params = params
        #: R_C and R_T: a QP starts at line rate, as NICs start it.
        self.rate = params.line_rate
        self.target = params.line_rate
        #: alpha starts at 1, so the first CNP halves the rate.
        self.alpha = 1.0
        #: When alpha's timer and the rate timer next expire: they start with the RP's first
        #: event (the QP's first packet), as a NIC's start when the QP does.
        self._alpha_due: float | None = None
        self._rate_due: float | None = None
        #: The paper's T and BC: rate-timer periods and byte-counter expiries since the last
        #: CNP, which choose between fast recovery, additive and hyper increase.
        self._timer_stages = 0
        self._byte_stages = 0
        self._bytes = 0
        self.cnps = 0

    @property
    def stage(self) -> str:
        """The increase stage the QP is in: the one its latest increase event applied."""
        return _stage_name(self._timer_stages, self._byte_stages, self._params)

    def on_cnp(self, now: float) -> None:
        """A CNP arrived: R_T = R_C, R_C *= 1 - alpha/2, alpha = (1 - g) alpha + g; both
        increase counters and both timers start over."""
        self.advance(now)
        params = self._params
        self.cnps += 1
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
        self._bytes += size
        limit = self._params.byte_counter
        while self._bytes >= limit:
            self._bytes -= limit
            self._byte_stages += 1
            self._increase()

    def advance(self, now: float) -> None:
        """Apply every alpha-timer and rate-timer period that ended by ``now``."""
        params = self._params
        alpha_due, rate_due = self._alpha_due, self._rate_due
        if alpha_due is None or rate_due is None:
            self._alpha_due = now + params.alpha_timer
            self._rate_due = now + params.rate_timer
            return
        if now >= alpha_due:
            periods = int((now - alpha_due) / params.alpha_timer) + 1
            self.alpha *= (1 - params.g) ** periods
            self._alpha_due = alpha_due + periods * params.alpha_timer
        if now >= rate_due:
            periods = int((now - rate_due) / params.rate_timer) + 1
            self._rate_due = rate_due + periods * params.rate_timer
            applied = 0
            while applied < periods and applied < _MAX_CATCH_UP:
                if self.rate >= params.line_rate and self.target >= params.line_rate:
                    break  # at line rate: the periods left change nothing but the count
                self._timer_stages += 1
                self._increase()
                applied += 1
            self._timer_stages = min(self._timer_stages + periods - applied, 1 << 30)

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


def _stage_name(timer: int, counted: int, params: DcqcnParams) -> str:
    f = params.fast_recovery_steps
    if max(timer, counted) < f:
        return "fast_recovery"
    if min(timer, counted) > f:
        return "hyper_increase"
    return "additive_increase"
