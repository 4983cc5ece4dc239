"""Round-trip-time estimation (RFC 6298) and the retransmission timeout derived from it.

Spraying over many paths makes RTT samples come from paths of different delays, so rttvar here
measures the spread across paths as much as jitter; the loss detector uses it to size its
reordering window, the RTO to stay above the slowest working path.
"""

from __future__ import annotations

from typing import Final

from agent.core.config import MrcConfig

_ALPHA: Final = 1.0 / 8  # RFC 6298 smoothing gains
_BETA: Final = 1.0 / 4


class RttEstimator:
    """Smoothed RTT, RTT variation and minimum RTT of one connection."""

    __slots__ = ("_config", "latest", "min_rtt", "rttvar", "srtt")

    def __init__(self, config: MrcConfig) -> None:
        self._config = config
        self.srtt: float | None = None
        self.rttvar: float = 0.0
        self.min_rtt: float | None = None
        self.latest: float | None = None

    def update(self, sample: float) -> None:
        """Fold in one RTT sample (seconds); non-positive samples are ignored."""
        if sample <= 0:
            return
        self.latest = sample
        if self.min_rtt is None or sample < self.min_rtt:
            self.min_rtt = sample
        if self.srtt is None:
            self.srtt = sample
            self.rttvar = sample / 2
        else:
            self.rttvar = (1 - _BETA) * self.rttvar + _BETA * abs(self.srtt - sample)
            self.srtt = (1 - _ALPHA) * self.srtt + _ALPHA * sample

    def rto(self, backoff_exponent: int = 0) -> float:
        """The retransmission timeout after ``backoff_exponent`` consecutive timeouts.

        ``rto_max`` caps the *backoff*, never the measured RTO: a path whose queues hold
        seconds of packets (the spray experiment's slowed fabric) has an RTT above ``rto_max``,
        and an RTO below the RTT resends every packet before its answer can arrive.
        """
        config = self._config
        measured = config.rto_initial if self.srtt is None else self.srtt + 4 * self.rttvar
        base = max(measured, config.rto_min)
        ceiling = max(config.rto_max, base)
        return float(min(base * config.rto_backoff**backoff_exponent, ceiling))

    def reorder_window(self, multiplier: int = 1) -> float:
        """How long a packet may trail later-sent packets before it is declared lost.

        ``multiplier`` widens the base window after spurious losses (RFC 8985's
        ``reo_wnd_mult``); a widened window never exceeds srtt (or the base, if larger).
        """
        config = self._config
        if self.srtt is None or self.min_rtt is None:
            return config.rto_initial
        base = max(
            self.min_rtt * config.reorder_window_min_rtt_fraction,
            self.rttvar * config.reorder_window_rttvar_factor,
        )
        if multiplier <= 1:
            return base
        return min(base * multiplier, max(base, self.srtt))

    def loss_delay(self, multiplier: int = 1) -> float:
        """Age at which a packet overtaken by a delivered later one is declared lost."""
        if self.srtt is None:
            return self._config.rto_initial
        return self.srtt + self.reorder_window(multiplier)
