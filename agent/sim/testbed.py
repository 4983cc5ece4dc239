"""Ready-made scenarios on the simulated network: two hosts, one connection, a region to write.

Tests and the benchmark build on ``build_pair``; everything else (failures at chosen times,
impairments per path) is set through the returned objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent.core.config import MrcConfig
from agent.core.connection import ConnectionSpec
from agent.core.endpoint import Endpoint
from agent.core.events import MessageAcked, MessageFailed, MessageReceived
from agent.core.memory import MemoryRegion
from agent.sim.host import SimHost
from agent.sim.link import LinkConfig
from agent.sim.network import SimNetwork, SimPath, make_endpoint_addresses


@dataclass
class PairTestbed:
    """A sender host, a receiver host, one connection from the first to the second."""

    network: SimNetwork
    sender: SimHost
    receiver: SimHost
    send_qp: int
    receive_qp: int
    region: MemoryRegion
    paths: list[list[SimPath]]
    posted: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    _next_offset: int = 0

    @property
    def now(self) -> float:
        """Current simulated time."""
        return self.network.scheduler.now

    def post(self, data: bytes, immediate: int | None = None) -> int:
        """Write ``data`` into the next free part of the receiver's region; returns the MSN."""
        offset = self._next_offset
        if offset + len(data) > self.region.length:
            raise ValueError("the receiver's region is full: build the testbed with a larger one")
        self._next_offset += len(data)
        msn = self.sender.endpoint.post_write(
            self.send_qp, data, self.region.va + offset, self.region.rkey, immediate
        )
        self.posted[msn] = (offset, data)
        self.sender.pump()
        return msn

    def acked(self) -> set[int]:
        """MSNs the receiver confirmed."""
        return {e.msn for _t, e in self.sender.events if isinstance(e, MessageAcked)}

    def failed(self) -> list[MessageFailed]:
        """Messages that failed."""
        return [e for _t, e in self.sender.events if isinstance(e, MessageFailed)]

    def received(self) -> list[tuple[float, MessageReceived]]:
        """Completed messages at the receiver, with the simulated time they completed."""
        return [(t, e) for t, e in self.receiver.events if isinstance(e, MessageReceived)]

    def all_acked(self) -> bool:
        """Whether every posted message is confirmed."""
        return len(self.acked()) >= len(self.posted)

    def run(self, until: float | None = None, stop: Callable[[], bool] | None = None) -> None:
        """Advance simulated time."""
        self.network.scheduler.run(until=until, stop=stop)

    def run_until_acked(self, limit: float) -> bool:
        """Run until every posted message is acked (True) or simulated time reaches ``limit``."""
        acked = {e.msn for _t, e in self.sender.events if isinstance(e, MessageAcked)}
        target = len(self.posted)
        seen = len(self.sender.events)

        def done() -> bool:
            nonlocal seen
            events = self.sender.events
            if len(events) != seen:
                for _t, event in events[seen:]:
                    if isinstance(event, MessageAcked):
                        acked.add(event.msn)
                seen = len(events)
            return len(acked) >= target

        if done():
            return True
        self.network.scheduler.run(until=limit, stop=done)
        return done()

    def delivered_bytes(self, start: float, end: float) -> int:
        """Bytes of messages that completed at the receiver in ``[start, end)``."""
        return sum(e.length for t, e in self.received() if start <= t < end)


def build_pair(
    paths: Sequence[Sequence[LinkConfig]],
    *,
    config: MrcConfig | None = None,
    receiver_config: MrcConfig | None = None,
    seed: int = 0,
    region_size: int = 1 << 22,
    uplink: LinkConfig | None = None,
    downlink: LinkConfig | None = None,
    trace: bool = False,
    ipv6: bool = False,
    first_psn: int = 100,
) -> PairTestbed:
    """Two hosts joined by ``paths[plane]`` on each plane, connected sender -> receiver.

    ``first_psn`` is the sender's first PSN (set near 2**24 to exercise the wrap).
    """
    planes = len(paths)
    network = SimNetwork(seed=seed)
    sender = network.add_host(
        "tx", make_endpoint_addresses(1, planes, ipv6), config, uplink=uplink, downlink=downlink
    )
    receiver = network.add_host(
        "rx",
        make_endpoint_addresses(2, planes, ipv6),
        receiver_config or config,
        uplink=uplink,
        downlink=downlink,
    )
    made = [
        network.join(sender, receiver, plane, paths[plane], trace=trace) for plane in range(planes)
    ]
    tx, rx = sender.endpoint, receiver.endpoint
    assert isinstance(tx, Endpoint) and isinstance(rx, Endpoint)  # add_host makes MRC ones
    region = rx.register_memory(bytearray(region_size), va=0x10000)
    send_qp = tx.allocate_qp()
    receive_qp = rx.allocate_qp()
    tx.connect(ConnectionSpec(send_qp, receive_qp, rx.local_addresses, first_psn, 7))
    rx.connect(ConnectionSpec(receive_qp, send_qp, tx.local_addresses, 7, first_psn))
    return PairTestbed(network, sender, receiver, send_qp, receive_qp, region, made)
