"""Several transfers on one clock: when they started, their goodput together, their stalls.

The agent samples each transfer on its own clock (``elapsed_s`` since that transfer began),
and transfers started together begin a few milliseconds apart (each sets up its connection
first). :class:`RunClock` places them on one clock, whose zero is the earliest start seen:
a sample that arrives at runner time ``a`` with ``elapsed_s`` ``e`` says its transfer began
no later than ``a - e`` (late by at most the sample's delivery delay), and the estimate only
ever moves earlier. The link cuts and restores are timed on the same clock, so the figures
and the cut line up.

The other functions are pure: :func:`aggregate` re-bins several transfers' samples onto one
grid (a sample's bytes spread evenly over its interval); :func:`longest_stall` is the longest
run of bins in which a transfer had nothing confirmed, at the resolution of its bins.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

from experiments.documents import PerfSample

Series = list[dict[str, float]]


class RunClock:
    """Seconds since the earliest transfer of a run began (see the module's docstring);
    thread-safe, since each transfer's samples arrive on a thread of its own."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._zero: float | None = None
        self._starts: dict[int, float] = {}

    def observe(self, flow: int, sample: PerfSample) -> None:
        """A sample of transfer ``flow`` arrived now."""
        start = self._monotonic() - float(sample["elapsed_s"])
        with self._lock:
            known = self._starts.get(flow)
            self._starts[flow] = start if known is None else min(known, start)
            self._zero = start if self._zero is None else min(self._zero, start)

    @property
    def started(self) -> bool:
        """Whether any sample arrived yet (before that there is no clock)."""
        with self._lock:
            return self._zero is not None

    def now(self) -> float:
        """Seconds on the run's clock (RuntimeError before the first sample)."""
        return self.at(self._monotonic())

    def failed_at(self, monotonic: float, launched: float) -> float:
        """When a transfer failed, on the run's clock; before any sample arrived (a transfer
        that failed at once), from ``launched``, when the runner asked for the transfers."""
        with self._lock:
            zero = launched if self._zero is None else self._zero
        return monotonic - zero

    def at(self, monotonic: float) -> float:
        """A ``time.monotonic()`` reading on the run's clock."""
        with self._lock:
            if self._zero is None:
                raise RuntimeError("no sample has arrived: the run's clock has not started")
            return monotonic - self._zero

    def offset(self, flow: int) -> float:
        """How long after the run's zero transfer ``flow`` began (0 if never sampled)."""
        with self._lock:
            start = self._starts.get(flow)
            return 0.0 if start is None or self._zero is None else start - self._zero


def flow_series(samples: Sequence[PerfSample], offset: float) -> Series:
    """A transfer's samples on the run's clock: ``t_s`` (end of the bin), ``goodput_bps``,
    ``bytes`` and ``seconds`` (its length)."""
    return [
        {
            "t_s": float(sample["elapsed_s"]) + offset,
            "goodput_bps": float(sample["goodput_bps"]),
            "bytes": float(sample.get("bytes", 0)),
            "seconds": float(sample.get("seconds", 0.0)),
        }
        for sample in samples
    ]


def aggregate(series: Sequence[Series], bin_s: float) -> Series:
    """Several transfers' goodput together, in ``bin_s`` bins from 0 (bin ``k`` ends at
    ``(k + 1) * bin_s``); each sample's bytes are spread evenly over its interval, so bins
    of transfers that started apart still add up. One transfer's series is returned as is."""
    if bin_s <= 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    if len(series) == 1:
        return list(series[0])
    totals: dict[int, float] = {}
    for points in series:
        for point in points:
            end, length = point["t_s"], point.get("seconds", 0.0)
            start = end - length
            if length <= 0:
                continue
            rate = point.get("bytes", 0.0) / length
            for k in range(max(0, math.floor(start / bin_s)), math.ceil(end / bin_s)):
                overlap = min(end, (k + 1) * bin_s) - max(start, k * bin_s)
                if overlap > 0:
                    totals[k] = totals.get(k, 0.0) + rate * overlap
    if not totals:
        return []
    return [
        {
            "t_s": (k + 1) * bin_s,
            "goodput_bps": totals.get(k, 0.0) * 8 / bin_s,
            "bytes": totals.get(k, 0.0),
            "seconds": bin_s,
        }
        for k in range(max(totals) + 1)
    ]


def longest_stall(series: Series, ended_s: float | None = None) -> float:
    """The longest run of consecutive bins with nothing confirmed, in seconds (the bins'
    lengths added up); with ``ended_s`` (when a transfer failed), the time from its last
    sample to its failure joins the run that was going on then. At the bins' resolution:
    a stall can be up to two bins longer than it shows (it may begin and end inside bins
    that confirmed something)."""
    longest = current = 0.0
    for point in series:
        if point.get("bytes", 0.0) > 0:
            current = 0.0
            continue
        current += point.get("seconds", 0.0)
        longest = max(longest, current)
    if ended_s is not None:
        last = series[-1]["t_s"] if series else 0.0
        longest = max(longest, current + max(0.0, ended_s - last))
    return longest
