"""A deterministic in-process network for the sans-IO core: simulated time, no sockets.

``SimNetwork`` holds hosts (each an ``Endpoint`` driven like the real runtime drives it) joined
by several paths per plane; each path direction is a ``Link`` with its own rate, delay, queue,
ECN marking, trimming, random loss/reordering/duplication, and failure/repair at chosen times.
Packets pick a path by hashing their EV, as ECMP does. One seed fixes everything random.
``build_pair`` (``agent.sim.testbed``) sets up the usual two-host scenario and
``run_core_benchmark`` (``agent.sim.bench``) measures the core's packet rate.
"""

from __future__ import annotations

from agent.sim.bench import CoreBenchResult, run_core_benchmark
from agent.sim.host import SimHost
from agent.sim.link import Link, LinkConfig
from agent.sim.network import SimNetwork, SimPath, make_endpoint_addresses
from agent.sim.scheduler import Scheduler
from agent.sim.testbed import PairTestbed, build_pair

__all__ = [
    "CoreBenchResult",
    "Link",
    "LinkConfig",
    "PairTestbed",
    "Scheduler",
    "SimHost",
    "SimNetwork",
    "SimPath",
    "build_pair",
    "make_endpoint_addresses",
    "run_core_benchmark",
]
