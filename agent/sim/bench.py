"""Benchmark entry: how many datagrams per second the protocol core gets through.

``run_core_benchmark`` pushes messages between two endpoints over the simulated network and
counts the datagrams they exchanged, each once (at the endpoint that produced it; the other
endpoint's core consumed it, so each one counted is one produced and one consumed). The
simulator never reads a
clock, so the caller passes one (``time.perf_counter``) and the wall time of the run is taken
with it; the figure therefore includes the simulator's own overhead and is a lower bound on the
core's rate, a context figure for ``make bench-agent`` rather than a hardware comparison.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass

from agent.core.config import MrcConfig
from agent.sim.link import LinkConfig
from agent.sim.testbed import build_pair


@dataclass(frozen=True, slots=True)
class CoreBenchResult:
    """Outcome of one benchmark run."""

    messages: int
    message_bytes: int
    #: Datagrams the two endpoints sent each other (data and answers), each counted once.
    datagrams: int
    wall_seconds: float
    simulated_seconds: float
    #: ``datagrams`` per wall-clock second: datagrams exchanged, not endpoint operations
    #: (each is produced by one core and consumed by the other).
    packets_per_second: float
    simulated_goodput: float

    def as_dict(self) -> dict[str, float | int]:
        """JSON-ready form."""
        return asdict(self)


def run_core_benchmark(
    clock: Callable[[], float],
    *,
    messages: int = 200,
    message_bytes: int = 64 * 1024,
    paths: int = 4,
    seed: int = 0,
    config: MrcConfig | None = None,
) -> CoreBenchResult:
    """Send ``messages`` writes of ``message_bytes`` over ``paths`` paths; measure with ``clock``.

    Raises ``RuntimeError`` if the transfer does not complete (a benchmark of a broken core
    would be meaningless).
    """
    if messages < 1 or message_bytes < 0 or paths < 1:
        raise ValueError("need messages >= 1, message_bytes >= 0, paths >= 1")
    testbed = build_pair(
        [[LinkConfig(rate=1.25e9, delay=20e-6, queue_bytes=256 * 1100)] * paths],
        config=config,
        seed=seed,
        region_size=max(messages * message_bytes, 1),
    )
    rng = random.Random(seed)
    payload = rng.randbytes(message_bytes)
    start = clock()
    for _ in range(messages):
        testbed.post(payload)
    done = testbed.run_until_acked(limit=60.0)
    wall = clock() - start
    if not done:
        raise RuntimeError("benchmark transfer did not complete within 60 simulated seconds")
    datagrams = testbed.sender.datagrams_out + testbed.receiver.datagrams_out
    simulated = testbed.now
    return CoreBenchResult(
        messages=messages,
        message_bytes=message_bytes,
        datagrams=datagrams,
        wall_seconds=wall,
        simulated_seconds=simulated,
        packets_per_second=datagrams / wall if wall > 0 else float("inf"),
        simulated_goodput=messages * message_bytes / simulated if simulated > 0 else 0.0,
    )
