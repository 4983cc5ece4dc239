"""Time as the controller sees it: a monotonic clock for intervals, a wall clock for logs.

Injected everywhere time matters, so that liveness, failover timing and the event log can be
tested with a fake clock instead of sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of the two kinds of time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (intervals, deadlines)."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch (timestamps people read)."""
        ...


class SystemClock:
    """The process's real clocks."""

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def wall(self) -> float:
        """``time.time()``."""
        return time.time()


def wall_time_of(clock: Clock, monotonic_at: float) -> float:
    """The wall-clock time of a past monotonic instant (for showing it to people)."""
    return clock.wall() - (clock.monotonic() - monotonic_at)
