"""No congestion control: a constant window. The baseline that shows what NSCC buys."""

from __future__ import annotations

from agent.core.cc.base import CongestionControl


class FixedWindow(CongestionControl):
    """A constant window; ignores every signal."""

    name = "fixed"

    def __init__(self, window: int) -> None:
        self._window = window

    @property
    def window(self) -> int:
        """Bytes allowed in flight, always the same."""
        return self._window

    def on_ack(
        self, now: float, acked_bytes: int, rtt: float | None, base_rtt: float | None, ecn: bool
    ) -> None:
        """Ignored."""

    def on_trim(self, now: float, last_hop: bool, base_rtt: float | None) -> None:
        """Ignored."""

    def on_timeout(self, now: float) -> None:
        """Ignored."""
