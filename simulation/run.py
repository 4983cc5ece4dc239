"""What every workload on a simulated fabric shares: running its events in chunks until it is
done, and what the run cost (the measure of the simulator's speed on a shared machine)."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.sim.scheduler import Scheduler
from simulation.fabric import FabricStats, SimFabric

#: Simulated events run between two looks at whether the workload is done.
EVENTS_PER_CHECK = 50_000


@dataclass(frozen=True)
class RunCost:
    """A run's simulated time, its counters and what it cost."""

    simulated_s: float
    wall_s: float
    #: CPU seconds of this process (the measure on a shared machine: one core's work).
    cpu_s: float
    stats: FabricStats
    max_rss_mb: float

    @property
    def events_per_cpu_s(self) -> float:
        """Simulated events run per CPU second."""
        return self.stats.events / self.cpu_s if self.cpu_s > 0 else 0.0


class Meter:
    """Measures a run from its creation to :meth:`cost`."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def cost(self, fabric: SimFabric) -> RunCost:
        """The run so far on ``fabric``."""
        return RunCost(
            simulated_s=fabric.scheduler.now,
            wall_s=time.perf_counter() - self._wall,
            cpu_s=time.process_time() - self._cpu,
            stats=fabric.stats(),
            max_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        )


def run_until(
    scheduler: Scheduler,
    limit_s: float,
    done: Callable[[], bool],
    *,
    after_chunk: Callable[[], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Run events until ``done()``, ``limit_s`` simulated seconds, or nothing is left to happen.

    ``done`` is asked between chunks of :data:`EVENTS_PER_CHECK` events, after ``after_chunk``
    (a look at what happened, too costly per event); ``stop``, if given, after every event.
    """
    while not done() and scheduler.now < limit_s:
        before = scheduler.events_run
        scheduler.run(until=limit_s, max_events=EVENTS_PER_CHECK, stop=stop)
        if after_chunk is not None:
            after_chunk()
        if scheduler.events_run == before:
            break  # nothing left to happen
