"""Simulated time: an event queue. Nothing in the simulator reads a real clock.

Events at the same time run in the order they were scheduled (a sequence number breaks ties),
so a run is a pure function of its inputs and seed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

Action = Callable[[], None]


class Scheduler:
    """A discrete-event scheduler in float seconds."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Action]] = []
        self._seq = 0
        self.events_run = 0

    def at(self, time: float, action: Action) -> None:
        """Run ``action`` at ``time`` (not before now)."""
        self._seq += 1
        heapq.heappush(self._queue, (max(time, self.now), self._seq, action))

    def after(self, delay: float, action: Action) -> None:
        """Run ``action`` ``delay`` seconds from now."""
        self.at(self.now + delay, action)

    def run(
        self,
        until: float | None = None,
        stop: Callable[[], bool] | None = None,
        max_events: int | None = None,
    ) -> None:
        """Run events in time order until the queue is empty, time passes ``until``, ``stop()``
        turns true (checked after each event) or ``max_events`` more events have run."""
        queue = self._queue
        budget = max_events
        while queue:
            time, _seq, action = queue[0]
            if until is not None and time > until:
                self.now = until
                return
            heapq.heappop(queue)
            self.now = time
            action()
            self.events_run += 1
            if stop is not None and stop():
                return
            if budget is not None:
                budget -= 1
                if budget <= 0:
                    return
        if until is not None:
            self.now = max(self.now, until)
