"""NSCC, UET's sender-based window congestion control, as the MRC notes tabulate it.

Each SACK carries one RTT sample and one ECN bit; with the queueing delay
``qdelay = rtt - base_rtt`` against ``target_queue_delay``:

=====  ============  =====================================================================
ECN    delay         action
=====  ============  =====================================================================
no     below target  proportional increase: W += gain * (target - qdelay)/target * acked
no     above target  fair increase: W += fair_increase_bytes * acked / W (about 1 MSS/RTT)
yes    above target  multiplicative decrease W *= 1 - g*(rtt - target_rtt)/rtt, where
                     target_rtt = base_rtt + target; at most one cut per base RTT
yes    below target  no window change (the connection steers away from that EV instead)
=====  ============  =====================================================================

A silent loss does not cut the window: in MRC a loss means a broken path, which the EV
machinery routes around, while congestion shows up as ECN marks and trims. A trim is treated
as the "ECN and above target" case at ``trim_delay_factor`` times the target delay, because a
switch trims only when its queue is full. A timeout halves the window.
"""

from __future__ import annotations

import enum

from agent.core.cc.base import CongestionControl
from agent.core.config import NsccConfig


class NsccCase(enum.Enum):
    """Which row of the table the last SACK fell in."""

    PROPORTIONAL_INCREASE = "proportional_increase"
    FAIR_INCREASE = "fair_increase"
    MULTIPLICATIVE_DECREASE = "multiplicative_decrease"
    HOLD = "hold"


class Nscc(CongestionControl):
    """NSCC window controller."""

    name = "nscc"

    def __init__(
        self, config: NsccConfig, initial_window: int, min_window: int, max_window: int
    ) -> None:
        self._config = config
        self._window = float(initial_window)
        self._min = float(min_window)
        self._max = float(max_window)
        self._last_cut = float("-inf")
        self._last_rtt: float | None = None
        #: The window before the latest timeout, restored if that timeout proves spurious.
        self._before_timeout: float | None = None
        self.last_case: NsccCase | None = None

    @property
    def window(self) -> int:
        """Bytes allowed in flight."""
        return int(self._window)

    def on_ack(
        self, now: float, acked_bytes: int, rtt: float | None, base_rtt: float | None, ecn: bool
    ) -> None:
        """Apply the four-case table to one SACK."""
        if rtt is None:
            rtt = self._last_rtt
        else:
            self._last_rtt = rtt
        config = self._config
        target = config.target_queue_delay
        if rtt is None or base_rtt is None:
            qdelay = 0.0
            base = 0.0
        else:
            base = base_rtt
            qdelay = max(rtt - base_rtt, 0.0)
        if not ecn:
            if qdelay < target:
                self.last_case = NsccCase.PROPORTIONAL_INCREASE
                self._window += config.proportional_gain * (target - qdelay) / target * acked_bytes
            else:
                self.last_case = NsccCase.FAIR_INCREASE
                self._window += config.fair_increase_bytes * acked_bytes / self._window
        elif qdelay >= target and rtt is not None:
            self.last_case = NsccCase.MULTIPLICATIVE_DECREASE
            self._cut(now, rtt, base + target, base)
        else:
            self.last_case = NsccCase.HOLD
        self._clamp()

    def on_trim(self, now: float, last_hop: bool, base_rtt: float | None) -> None:
        """A trim: the case-3 cut at the queueing delay of a full queue."""
        base = base_rtt or 0.0
        target = self._config.target_queue_delay
        rtt = base + self._config.trim_delay_factor * target
        self._cut(now, rtt, base + target, base)
        self._clamp()

    def on_timeout(self, now: float) -> None:
        """Halve the window (remembering it, in case the timeout proves spurious)."""
        self._before_timeout = self._window
        self._window /= 2
        self._clamp()

    def on_spurious_timeout(self, now: float) -> None:
        """Back to the window before the spurious timeout(s), unless it has grown past it."""
        if self._before_timeout is not None:
            self._window = max(self._window, self._before_timeout)
            self._before_timeout = None
            self._clamp()

    def _cut(self, now: float, rtt: float, target_rtt: float, base_rtt: float) -> None:
        if now - self._last_cut < base_rtt:
            return
        self._last_cut = now
        self._window *= 1 - self._config.decrease_gain * (rtt - target_rtt) / rtt

    def _clamp(self) -> None:
        self._window = min(max(self._window, self._min), self._max)
