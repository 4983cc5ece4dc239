"""The permutation workload: every host writes one message of the same size to another host,
each host receiving exactly one (a random derangement), all starting at once; over several
QPs (RoCE's profiles stripe a transfer), each QP writes its contiguous stripe.

It is the standard stress of a fabric's multipathing (htsim, NDP and EQDS use it): every host's
uplink is full, and only load spread evenly over the core keeps the core from being the
bottleneck. Each flow's completion is the sender's last ``MessageAcked`` of its QPs, its
failure the first ``MessageFailed``; with ``check`` every receiver's region is compared with
what was sent.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from agent.core.events import MessageAcked, MessageFailed
from simulation.fabric import Connected, SimFabric
from simulation.run import Meter, RunCost, run_until


@dataclass(frozen=True)
class FlowOutcome:
    """One flow: when it completed (simulated seconds from the start), or why it failed."""

    sender: str
    receiver: str
    completed_s: float | None
    failed: str | None
    exact: bool | None


@dataclass(frozen=True)
class PermutationResult:
    """A permutation run: its flows, the fabric's counters and what the run cost."""

    hosts: int
    flow_bytes: int
    flows: tuple[FlowOutcome, ...]
    cost: RunCost

    @property
    def completed(self) -> int:
        """Flows the receiver confirmed in full."""
        return sum(flow.completed_s is not None for flow in self.flows)

    @property
    def finished_s(self) -> float | None:
        """Simulated time the last flow completed (None if any did not)."""
        times = [flow.completed_s for flow in self.flows]
        return None if None in times else max(t for t in times if t is not None)


def derangement(names: list[str], rng: random.Random) -> list[tuple[str, str]]:
    """Pairs (sender, receiver): every name sends once and receives once, never to itself."""
    if len(names) < 2:
        raise ValueError("a permutation needs at least two hosts")
    while True:
        receivers = names[:]
        rng.shuffle(receivers)
        if all(a != b for a, b in zip(names, receivers, strict=True)):
            return list(zip(names, receivers, strict=True))


def stripes(size: int, parts: int) -> list[tuple[int, int]]:
    """``size`` bytes cut into ``parts`` contiguous stripes as even as can be: (start, end)."""
    bounds = [size * index // parts for index in range(parts + 1)]
    return list(itertools.pairwise(bounds))


def run_permutation(
    fabric: SimFabric,
    flow_bytes: int,
    *,
    seed: int = 0,
    limit_s: float = 10.0,
    check: bool = True,
) -> PermutationResult:
    """Run the permutation on ``fabric`` until every flow ends or ``limit_s`` simulated
    seconds pass; failures and cuts are whatever the caller scheduled on the fabric."""
    meter = Meter()
    rng = random.Random(seed)
    payload = rng.randbytes(flow_bytes)
    pairs = derangement(sorted(fabric.hosts), rng)
    flows = [fabric.connect(sender, receiver, flow_bytes) for sender, receiver in pairs]
    for flow in flows:
        parts = stripes(flow_bytes, len(flow.send_qps))
        for qp, (start, end) in zip(flow.send_qps, parts, strict=True):
            flow.sender.endpoint.post_write(
                qp, payload[start:end], flow.region.va + start, flow.region.rkey
            )
    for flow in flows:
        flow.sender.pump()
    outcome: dict[str, tuple[float | None, str | None]] = {}
    unacked = {flow.sender.name: set(flow.send_qps) for flow in flows}
    seen = {name: 0 for name in fabric.hosts}

    def look() -> None:
        for flow in flows:
            host = flow.sender
            events = host.events
            waiting = unacked[host.name]
            for at, event in events[seen[host.name] :]:
                if host.name in outcome:
                    break
                if isinstance(event, MessageAcked) and event.qp in waiting:
                    waiting.discard(event.qp)
                    if not waiting:  # its last stripe: the flow is complete
                        outcome[host.name] = (at, None)
                elif isinstance(event, MessageFailed) and event.qp in waiting:
                    outcome[host.name] = (None, event.reason)
            seen[host.name] = len(events)

    run_until(fabric.scheduler, limit_s, lambda: len(outcome) == len(flows), after_chunk=look)
    cost = meter.cost(fabric)
    results = tuple(_outcome(flow, outcome.get(flow.sender.name), payload, check) for flow in flows)
    return PermutationResult(
        hosts=len(fabric.hosts),
        flow_bytes=flow_bytes,
        flows=results,
        cost=cost,
    )


def _outcome(
    flow: Connected, ended: tuple[float | None, str | None] | None, payload: bytes, check: bool
) -> FlowOutcome:
    completed, failed = ended or (None, None)
    exact = bytes(flow.region.buffer) == payload if check and completed is not None else None
    return FlowOutcome(flow.sender.name, flow.receiver.name, completed, failed, exact)
