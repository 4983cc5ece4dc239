"""How long a requester waits for an acknowledgement: the verbs timer, or an adaptive one.

The verbs timer (``RoceConfig.adaptive_retransmission`` off) is 4.096 us x 2**timeout, every
time, as the IBTA specifies and perftest and NCCL configure it.

The adaptive timer stands for a modern NIC's adaptive retransmission. NVIDIA does not publish
what its firmware does, so it is modelled plainly, on TCP's rules:

* RTT samples come from ACKs of packets that were not retransmitted, and no packet before them
  was either (Karn's rule: an ACK that may answer a retransmission says nothing of the RTT);
  the requester times one packet at a time.
* SRTT and RTTVAR follow RFC 6298 (gains 1/8 and 1/4; the first sample R sets SRTT = R and
  RTTVAR = R/2), and RTO = max(``min_rto``, SRTT + 4 RTTVAR); ``initial_rto`` before any sample.
* Each consecutive timeout doubles the RTO, up to the verbs local ACK timeout, which thus stays
  the longest the QP ever waits (the QP's configured timeout is the NIC's ceiling, an
  assumption); a measured RTO above it is kept, not cut, since a timer shorter than the RTT
  resends every packet before its answer can come. Progress (an ACK acknowledging something
  new) ends the backoff.

Either way ``retry_cnt`` bounds the timeouts in a row without progress (``agent.roce.requester``).
``timeout`` 0 means no timer at all, adaptive or not, as in verbs.
"""

from __future__ import annotations

from typing import Final

from agent.roce.config import MAX_BACKOFF_EXPONENT, RoceConfig

_ALPHA: Final = 1.0 / 8  # RFC 6298's gains
_BETA: Final = 1.0 / 4
_K: Final = 4.0


class RetransmitTimer:
    """The retransmission timeout of one requester, and what it was measured from."""

    __slots__ = (
        "_floor",
        "_initial",
        "adaptive",
        "backoff",
        "ceiling",
        "rttvar",
        "samples",
        "srtt",
    )

    def __init__(self, config: RoceConfig) -> None:
        #: The verbs local ACK timeout (None: no timer): the fixed timer, or the adaptive
        #: timer's backoff ceiling.
        self.ceiling: float | None = config.local_ack_timeout
        self.adaptive: bool = config.adaptive_retransmission and self.ceiling is not None
        self._floor = config.min_rto
        self._initial = config.initial_rto
        self.srtt: float | None = None
        self.rttvar = 0.0
        #: Consecutive timeouts without progress (the exponent of the backoff).
        self.backoff = 0
        #: RTT samples taken.
        self.samples = 0

    @property
    def rto(self) -> float | None:
        """Seconds to wait now, backoff included (None: no timer)."""
        ceiling = self.ceiling
        if ceiling is None or not self.adaptive:
            return ceiling
        srtt = self.srtt
        measured = self._initial if srtt is None else srtt + _K * self.rttvar
        base = max(self._floor, measured)
        return min(base * float(1 << self.backoff), max(ceiling, base))

    def on_sample(self, rtt: float) -> None:
        """Fold in one RTT sample (seconds); non-positive ones are ignored."""
        if rtt <= 0:
            return
        self.samples += 1
        srtt = self.srtt
        if srtt is None:
            self.srtt = rtt
            self.rttvar = rtt / 2
        else:
            self.rttvar = (1 - _BETA) * self.rttvar + _BETA * abs(srtt - rtt)
            self.srtt = (1 - _ALPHA) * srtt + _ALPHA * rtt

    def on_timeout(self) -> None:
        """The timer expired: the next one waits twice as long (adaptive only)."""
        if self.adaptive and self.backoff < MAX_BACKOFF_EXPONENT:
            self.backoff += 1

    def on_progress(self) -> None:
        """An ACK acknowledged something new: the backoff ends."""
        self.backoff = 0
