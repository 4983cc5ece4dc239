"""The interface every congestion controller implements, so they can be swapped and compared.

The sender calls these hooks; a controller answers two questions: how many bytes may be in
flight (``window``) and when the next packet may leave (``next_send_time``, for rate-based
controllers; window-based ones answer "now"). All times are float seconds passed in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from mypy_extensions import mypyc_attr


# A controller registered from a module the native build does not compile subclasses this
# compiled class (docs/extending.md); mypyc refuses that unless told.
@mypyc_attr(allow_interpreted_subclasses=True)
class CongestionControl(ABC):
    """A sender-side congestion controller."""

    #: Short name, as selected by ``MrcConfig.congestion_control``.
    name: str = ""
    #: Whether ``next_send_time`` / ``on_sent`` matter (rate-based controllers). The sender
    #: skips both calls for window-only controllers: they run once per packet sent.
    paced: bool = False

    @property
    @abstractmethod
    def window(self) -> int:
        """Bytes allowed in flight."""

    def next_send_time(self, now: float) -> float:
        """Earliest time the next data packet may leave (pacing); ``now`` when unpaced."""
        return now

    def on_sent(self, now: float, size: int) -> None:  # noqa: B027 - optional hook
        """A data packet of ``size`` payload bytes left."""

    @abstractmethod
    def on_ack(
        self, now: float, acked_bytes: int, rtt: float | None, base_rtt: float | None, ecn: bool
    ) -> None:
        """A SACK arrived: ``acked_bytes`` newly acknowledged, the answered packet's RTT sample
        (None when ambiguous), the connection's minimum RTT, and whether it was CE-marked."""

    @abstractmethod
    def on_trim(self, now: float, last_hop: bool, base_rtt: float | None) -> None:
        """A packet was trimmed (NACK TRIMMED / TRIMMED_LASTHOP): a queue overflowed."""

    @abstractmethod
    def on_timeout(self, now: float) -> None:
        """Nothing was acknowledged for a whole RTO."""

    def on_spurious_timeout(self, now: float) -> None:  # noqa: B027 - optional hook
        """The last RTO was spurious: a packet sent before it was acknowledged after it (the
        flight was delayed, not lost). Undo that timeout's reduction (RFC 4015's Eifel
        response); controllers that reduce nothing on a timeout ignore it."""
