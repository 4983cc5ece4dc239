"""A DCQCN-like rate controller: RoCE's usual congestion control, kept to compare with NSCC.

DCQCN reacts to congestion notifications (here: the ECN echo in SACKs, and trims) by cutting
its rate by alpha/2, where alpha is an EWMA of how often it is notified; without notifications
it recovers towards its target rate (fast recovery: halve the distance, a few steps), then
raises the target additively. Timers run lazily: elapsed increase periods are applied on the
next event. The rate paces packets; the window only caps how much may be outstanding.
"""

from __future__ import annotations

from agent.core.cc.base import CongestionControl
from agent.core.config import DcqcnConfig

#: Most increase periods applied at once after a quiet spell (the rest would change nothing).
_MAX_CATCH_UP_PERIODS = 64


class DcqcnRate(CongestionControl):
    """DCQCN-like rate controller with pacing."""

    name = "dcqcn"
    paced = True

    def __init__(self, config: DcqcnConfig, max_window: int) -> None:
        self._config = config
        self._max_window = max_window
        self.rate = config.line_rate
        self._target = config.line_rate
        self._alpha = 1.0
        self._last_decrease = float("-inf")
        self._period_start: float | None = None
        self._stage = 0
        self._next_send = 0.0
        #: The rate before the latest timeout, restored if that timeout proves spurious.
        self._before_timeout: float | None = None

    @property
    def window(self) -> int:
        """Outstanding bytes cap (the rate is what limits the sender)."""
        return self._max_window

    def next_send_time(self, now: float) -> float:
        """When the pacer lets the next packet go."""
        return max(now, self._next_send)

    def on_sent(self, now: float, size: int) -> None:
        """Space packets at the current rate."""
        self._next_send = max(now, self._next_send) + size / self.rate

    def on_ack(
        self, now: float, acked_bytes: int, rtt: float | None, base_rtt: float | None, ecn: bool
    ) -> None:
        """Recover during quiet periods; cut on an ECN echo."""
        self._advance(now)
        if ecn:
            self._decrease(now)

    def on_trim(self, now: float, last_hop: bool, base_rtt: float | None) -> None:
        """A trim is a congestion notification like an ECN echo."""
        self._advance(now)
        self._decrease(now)

    def on_timeout(self, now: float) -> None:
        """Halve the rate (remembering it, in case the timeout proves spurious)."""
        self._advance(now)
        self._before_timeout = self.rate
        self.rate = max(self._config.min_rate, self.rate / 2)

    def on_spurious_timeout(self, now: float) -> None:
        """Back to the rate before the spurious timeout(s), unless it has grown past it."""
        if self._before_timeout is not None:
            self.rate = max(self.rate, self._before_timeout)
            self._before_timeout = None

    def _decrease(self, now: float) -> None:
        config = self._config
        if now - self._last_decrease < config.decrease_interval:
            return
        self._last_decrease = now
        self._target = self.rate
        self.rate = max(config.min_rate, self.rate * (1 - self._alpha / 2))
        self._alpha = (1 - config.alpha_gain) * self._alpha + config.alpha_gain
        self._stage = 0
        self._period_start = now

    def _advance(self, now: float) -> None:
        config = self._config
        if self._period_start is None:
            self._period_start = now
            return
        periods = int((now - self._period_start) / config.increase_interval)
        if periods <= 0:
            return
        self._period_start += periods * config.increase_interval
        for _ in range(min(periods, _MAX_CATCH_UP_PERIODS)):
            self._alpha *= 1 - config.alpha_gain
            if self._stage >= config.fast_recovery_steps:
                self._target = min(config.line_rate, self._target + config.additive_increase)
            self.rate = min(config.line_rate, (self.rate + self._target) / 2)
            self._stage += 1
