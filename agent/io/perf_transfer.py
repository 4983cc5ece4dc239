"""Measuring goodput, as ib_write_bw does: the same region overwritten by message after message.

The server registers one message's worth of region (``sink``) and discards what lands there.
The client keeps enough messages posted to cover the largest congestion window and counts
what the receiver *confirmed* (``MessageAcked``), so retransmissions and duplicates never
inflate the figure. It stops posting after ``duration`` seconds or ``total_bytes`` bytes,
waits for the messages in flight, and reports:

* goodput = confirmed bytes / (last confirmation - first post);
* the connection's statistics (retransmits by cause, trims, ECN, RTT, window, per-EV table);
* the receiver's statistics, which it sends back in its ``farewell``;
* one sample per ``interval`` (also handed to ``on_progress`` for a live progress line).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.core import MessageAcked, MrcConfig
from agent.io.addresses import PeerAddress
from agent.io.errors import AgentError, ProtocolError, UsageError
from agent.io.outbound import STALL_TIMEOUT, OutboundTransfer
from agent.io.reactor import Timer
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import Bye, Farewell, Purpose, SideMessage
from agent.io.transport import MRC, RoceSetup, Transport
from agent.native import running_build

#: ib_write_bw's default message size.
DEFAULT_PERF_MESSAGE_SIZE = 1 << 16
#: iperf3's default test length.
DEFAULT_DURATION = 10.0
#: Seconds between progress samples.
DEFAULT_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class PerfSample:
    """Progress over one interval."""

    elapsed: float
    interval_bytes: int
    interval_seconds: float
    total_bytes: int
    retransmits: int
    cwnd: int
    srtt: float | None

    @property
    def goodput_bps(self) -> float:
        """Confirmed bits per second over the interval."""
        return self.interval_bytes * 8 / self.interval_seconds if self.interval_seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON form (for --json and the control socket)."""
        return {
            "elapsed_s": self.elapsed,
            "bytes": self.interval_bytes,
            "seconds": self.interval_seconds,
            "goodput_bps": self.goodput_bps,
            "total_bytes": self.total_bytes,
            "retransmits": self.retransmits,
            "cwnd_bytes": self.cwnd,
            "srtt_s": self.srtt,
        }


class PerfTransfer(OutboundTransfer):
    """One goodput measurement against a peer's sink."""

    purpose = Purpose.SINK

    def __init__(
        self,
        runtime: AgentRuntime,
        peer: PeerAddress,
        *,
        message_size: int = DEFAULT_PERF_MESSAGE_SIZE,
        duration: float | None = None,
        total_bytes: int | None = None,
        config: MrcConfig | None = None,
        interval: float = DEFAULT_INTERVAL,
        on_progress: Callable[[PerfSample], None] | None = None,
        stall_timeout: float = STALL_TIMEOUT,
        transport: Transport = MRC,
        roce: RoceSetup | None = None,
    ) -> None:
        if message_size < 1:
            raise UsageError(f"message size must be positive, got {message_size}")
        if duration is not None and duration <= 0:
            raise UsageError(f"duration must be positive, got {duration}")
        if total_bytes is not None and total_bytes < 1:
            raise UsageError(f"byte count must be positive, got {total_bytes}")
        if interval <= 0:
            raise UsageError(f"interval must be positive, got {interval}")
        super().__init__(
            runtime,
            peer,
            length=message_size,
            message_size=message_size,
            config=config,
            stall_timeout=stall_timeout,
            transport=transport,
            roce=roce,
        )
        self.duration = duration if duration is not None or total_bytes else DEFAULT_DURATION
        self.total_bytes = total_bytes
        self.interval = interval
        self.on_progress = on_progress
        self._payload = os.urandom(message_size)
        self._outstanding = 0
        self._posted_bytes = 0
        self._stopping = False
        self.bytes_acked = 0
        self.messages_acked = 0
        self.samples: list[PerfSample] = []
        self._started_at = 0.0
        self._last_ack_at = 0.0
        self._sample_at = 0.0
        self._sample_bytes = 0
        self._timers: list[Timer] = []

    def _begin(self) -> None:
        now = self.runtime.clock()
        self._started_at = self._last_ack_at = self._sample_at = now
        reactor = self.runtime.reactor
        if self.duration is not None:
            self._timers.append(reactor.call_at(now + self.duration, self._stop))
        self._timers.append(reactor.call_at(now + self.interval, self._sample))
        self._post_more()

    def _post_more(self) -> None:
        size = self.message_size
        while not self._stopping and self._outstanding < self.max_outstanding:
            if self.total_bytes is not None:
                left = self.total_bytes - self._posted_bytes
                if left <= 0:
                    self._stopping = True
                    break
                data = self._payload if left >= size else self._payload[:left]
            else:
                data = self._payload
            if not self.post(data, 0):
                return
            self._outstanding += 1
            self._posted_bytes += len(data)

    def _on_acked(self, event: MessageAcked) -> None:
        self._outstanding -= 1
        self.bytes_acked += event.length
        self.messages_acked += 1
        self._last_ack_at = self.runtime.clock()
        self._post_more()
        if self._stopping and self._outstanding == 0:
            self._say_bye()

    def _stop(self) -> None:
        self._stopping = True
        if self._outstanding == 0:
            self._say_bye()

    def _say_bye(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self.welcome is not None and not self.finished:
            self.send_side(Bye(), "farewell")

    def _sample(self) -> None:
        if self.finished or self._stopping:
            return
        now = self.runtime.clock()
        stats = self.connection_stats()
        sample = PerfSample(
            elapsed=now - self._started_at,
            interval_bytes=self.bytes_acked - self._sample_bytes,
            interval_seconds=now - self._sample_at,
            total_bytes=self.bytes_acked,
            retransmits=stats.total_retransmits if stats else 0,
            cwnd=stats.cwnd if stats else 0,
            srtt=stats.srtt if stats else None,
        )
        self._sample_at = now
        self._sample_bytes = self.bytes_acked
        self.samples.append(sample)
        if self.on_progress is not None:
            self.on_progress(sample)
        self._timers = [t for t in self._timers if not t.cancelled]
        self._timers.append(self.runtime.reactor.call_at(now + self.interval, self._sample))

    def _on_side_message(self, message: SideMessage) -> None:
        if not isinstance(message, Farewell):
            self._fail(ProtocolError(f"expected 'farewell' from {self.peer}, got {message}"))
            return
        seconds = max(self._last_ack_at - self._started_at, 1e-9)
        self.finish(
            {
                "peer": str(self.peer),
                "bytes": self.bytes_acked,
                "messages": self.messages_acked,
                "message_size": self.message_size,
                "seconds": seconds,
                "goodput_bps": self.bytes_acked * 8 / seconds,
                # a RoCE QP is one path, as an EV is
                "evs": len(self.qps) if self.roce is not None else self.config.ev_set_size,
                "cc": "roce-dcqcn" if self.roce is not None else self.config.congestion_control,
                "planes": len(self.runtime.local_addresses),
                "agent_build": running_build(),
                "intervals": [sample.to_json() for sample in self.samples],
                "receiver": message.receiver,
            }
        )

    def _end(self, result: dict[str, Any] | None, error: AgentError | None) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        super()._end(result, error)
