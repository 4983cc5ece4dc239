"""A DCQCN rate controller for MRC: RoCE's usual congestion control, kept to compare with NSCC.

The rate law is DCQCN's (``agent.core.cc.dcqcn_law``), the RoCE baseline's own. MRC has no
CNPs, so its notifications are the ECN echoes in SACKs and trims, at most one acted on per
``decrease_interval`` as a NIC's notification point sends at most one CNP per interval. It
counts increase stages by the timer alone (no byte counter, so no hyper increase). The rate
paces packets; the window only caps how much may be outstanding. A timeout, which DCQCN has
no rule for, halves the rate.
"""

from __future__ import annotations

from typing import Final

from agent.core.cc.base import CongestionControl
from agent.core.cc.dcqcn_law import CnpPacer, DcqcnLawParams, ReactionPoint
from agent.core.config import DcqcnConfig

#: Most increase periods one catch-up applies: a quiet spell longer than 64 periods (3.5 ms at
#: the default 55 us) counts as 64, for alpha's decay as for the rate.
_MAX_CATCH_UP_PERIODS: Final = 64


def law_params(config: DcqcnConfig) -> DcqcnLawParams:
    """The rate law's constants for ``config``: one timer (``increase_interval``) for alpha and
    the rate, no byte counter. ``fast_recovery_steps`` counts fast-recovery periods; the law's
    F is the stage at which fast recovery ends, one more."""
    return DcqcnLawParams(
        line_rate=config.line_rate,
        min_rate=config.min_rate,
        g=config.alpha_gain,
        alpha_timer=config.increase_interval,
        rate_timer=config.increase_interval,
        fast_recovery_steps=config.fast_recovery_steps + 1,
        additive_increase=config.additive_increase,
        hyper_increase=0.0,
        byte_counter=0,
        catch_up_limit=_MAX_CATCH_UP_PERIODS,
    )


class DcqcnRate(CongestionControl):
    """DCQCN rate controller with pacing."""

    name = "dcqcn"
    paced = True

    def __init__(self, config: DcqcnConfig, max_window: int) -> None:
        self._min_rate = config.min_rate
        self._max_window = max_window
        self._law = ReactionPoint(law_params(config))
        self._notifications = CnpPacer(config.decrease_interval)
        self._next_send = 0.0
        #: The rate before the latest timeout, restored if that timeout proves spurious.
        self._before_timeout: float | None = None

    @property
    def rate(self) -> float:
        """The current rate, bytes/s."""
        return self._law.rate

    @property
    def window(self) -> int:
        """Outstanding bytes cap (the rate is what limits the sender)."""
        return self._max_window

    def next_send_time(self, now: float) -> float:
        """When the pacer lets the next packet go."""
        return max(now, self._next_send)

    def on_sent(self, now: float, size: int) -> None:
        """Space packets at the current rate."""
        self._next_send = max(now, self._next_send) + size / self._law.rate

    def on_ack(
        self, now: float, acked_bytes: int, rtt: float | None, base_rtt: float | None, ecn: bool
    ) -> None:
        """Recover during quiet periods; cut on an ECN echo."""
        self._law.advance(now)
        if ecn:
            self._notified(now)

    def on_trim(self, now: float, last_hop: bool, base_rtt: float | None) -> None:
        """A trim is a congestion notification like an ECN echo."""
        self._law.advance(now)
        self._notified(now)

    def on_timeout(self, now: float) -> None:
        """Halve the rate (remembering it, in case the timeout proves spurious)."""
        law = self._law
        law.advance(now)
        self._before_timeout = law.rate
        law.rate = max(self._min_rate, law.rate / 2)

    def on_spurious_timeout(self, now: float) -> None:
        """Back to the rate before the spurious timeout(s), unless it has grown past it."""
        if self._before_timeout is not None:
            self._law.rate = max(self._law.rate, self._before_timeout)
            self._before_timeout = None

    def _notified(self, now: float) -> None:
        if self._notifications.on_marked(now):
            self._law.on_cnp(now)
