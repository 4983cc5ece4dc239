"""A host's port (one plane's NIC) going down and up, on the simulated network.

The runtime learns the port state from the kernel (``agent.io.carrier``) and calls
``Endpoint.set_plane_up``; here the simulation does both halves: the plane's paths fail (what
was on the wire is lost) and, a little later, the endpoint hears of it.
"""

from __future__ import annotations

import random

from agent.core import MrcConfig
from agent.core.connection import ConnectionSpec
from agent.core.events import PeerPlaneStateChanged
from agent.sim.link import LinkConfig
from agent.sim.testbed import PairTestbed, build_pair
from wire.constants import EvState

#: How long after the port fails the endpoint hears of it (a netlink notification's delay;
#: the packets sent meanwhile are lost on the dead port).
NOTICE_DELAY = 20e-6
#: Per path: 1 Gbit/s, 20 us one way.
PATH = LinkConfig(rate=125e6, delay=20e-6)


def _two_planes(seed: int) -> PairTestbed:
    return build_pair([[PATH] * 4, [PATH] * 4], config=MrcConfig(ev_set_size=32), seed=seed)


def _post(testbed: PairTestbed, count: int, size: int, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(count):
        testbed.post(rng.randbytes(size))


def _port(testbed: PairTestbed, plane: int, up: bool, at: float) -> None:
    """The sender's port on ``plane`` fails (or returns) at ``at``; it hears a bit later."""
    scheduler = testbed.network.scheduler
    for path in testbed.paths[plane]:
        scheduler.at(at, path.repair if up else path.fail)

    def notice() -> None:
        testbed.sender.endpoint.set_plane_up(plane, up)
        testbed.sender.pump()

    scheduler.at(at + NOTICE_DELAY, notice)


def _plane_data_offered(testbed: PairTestbed, plane: int) -> int:
    return sum(path.forward.counters.data_offered for path in testbed.paths[plane])


def _plane_evs(testbed: PairTestbed, plane: int) -> list:
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    return [ev for ev in stats.evs if ev.plane == plane]


def test_a_port_down_mid_transfer_loses_its_packets_but_retires_none_of_its_evs():
    testbed = _two_planes(seed=6)
    _post(testbed, 40, 32 * 1024, seed=6)
    _port(testbed, 0, up=False, at=2e-3)
    testbed.run(until=2e-3)
    assert _plane_data_offered(testbed, 0) > 0  # the plane carried part of the transfer
    assert testbed.run_until_acked(limit=2.0)
    # Packets were queued on the port when it died (a seed where they were: without them
    # there would be no loss on the plane to retire an EV for).
    assert sum(path.forward.counters.dropped_down for path in testbed.paths[0]) > 0
    evs = _plane_evs(testbed, 0)
    assert all(ev.losses == 0 for ev in evs), [ev for ev in evs if ev.losses]
    # Every slot keeps its home EV, in service (SKIP: an ECN mark, passed over once).
    assert all(ev.home and ev.state in (EvState.GOOD, EvState.SKIP) for ev in evs)


def test_spraying_leaves_a_dead_port_and_resumes_on_it_once_it_is_back():
    testbed = _two_planes(seed=2)
    _post(testbed, 30, 32 * 1024, seed=2)
    _port(testbed, 0, up=False, at=1e-3)
    _port(testbed, 0, up=True, at=4e-3)
    testbed.run(until=1e-3 + NOTICE_DELAY)
    while_down = _plane_data_offered(testbed, 0)
    testbed.run(until=4e-3)
    assert _plane_data_offered(testbed, 0) == while_down  # nothing sent on the dead port
    _post(testbed, 30, 32 * 1024, seed=3)
    assert testbed.run_until_acked(limit=2.0)
    assert _plane_data_offered(testbed, 0) > while_down + 100  # back in the rotation
    assert all(ev.losses == 0 for ev in _plane_evs(testbed, 0))


def test_the_peer_stops_using_the_plane_of_a_dead_port():
    testbed = _two_planes(seed=3)
    testbed.sender.endpoint.set_plane_up(1, False)
    testbed.sender.pump()
    testbed.run(until=1e-3)
    events = [e for _t, e in testbed.receiver.events]
    assert PeerPlaneStateChanged(testbed.receive_qp, 1, False) in events


def test_a_connection_opened_while_a_port_is_down_tells_the_peer_before_it_sprays_there():
    testbed = build_pair([[PATH] * 2, [PATH] * 2], config=MrcConfig(ev_set_size=8), seed=4)
    sender = testbed.sender.endpoint
    sender.set_plane_up(1, False)
    qp = sender.allocate_qp()
    peer_qp = testbed.receiver.endpoint.allocate_qp()
    sender.connect(ConnectionSpec(qp, peer_qp, testbed.receiver.endpoint.local_addresses, 1, 1))
    testbed.receiver.endpoint.connect(ConnectionSpec(peer_qp, qp, sender.local_addresses, 1, 1))
    testbed.sender.pump()
    testbed.run(until=1e-3)
    events = [e for _t, e in testbed.receiver.events]
    assert PeerPlaneStateChanged(peer_qp, 1, False) in events
