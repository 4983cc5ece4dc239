"""A bound on how fast peers can make the agent write its log.

Every refused caller, malformed line and failed handler is logged with the peer's address, once
per event. A hostile peer can make such events as fast as it can open connections, so the
handler the CLI installs passes at most ``burst`` records of each logger per ``window``
seconds and then one line saying how many it held back, as the kernel's ``net_ratelimit`` does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: Records each logger may write per window before the rest are counted instead.
DEFAULT_BURST = 20
#: Seconds in one window.
DEFAULT_WINDOW = 10.0


class RateLimitFilter(logging.Filter):
    """Passes ``burst`` records per logger name per ``window`` seconds; counts the rest and
    reports their number with the first record of a later window."""

    def __init__(
        self,
        burst: int = DEFAULT_BURST,
        window: float = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if burst < 1 or window <= 0:
            raise ValueError("burst must be at least 1 and window positive")
        self.burst = burst
        self.window = window
        self._clock = clock
        #: Per logger name: [window start, records passed in it, records held back].
        self._state: dict[str, list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now = self._clock()
        state = self._state.get(record.name)
        if state is None or now - state[0] >= self.window:
            held = int(state[2]) if state is not None else 0
            self._state[record.name] = [now, 1, 0]
            if held:
                record.msg = f"{record.msg} ({held} similar messages suppressed)"
            return True
        if state[1] < self.burst:
            state[1] += 1
            return True
        state[2] += 1
        return False
