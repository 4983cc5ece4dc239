"""The simulated network: serialisation, strict priority, trimming, ECN marking, impairments,
failure and repair, ECMP hashing, and reproducibility from a seed."""

from __future__ import annotations

import random

import pytest

from agent.core import IpContext, MrcConfig, OutgoingDatagram
from agent.core.codec import decode, encode
from agent.core.config import DscpMap
from agent.core.packets import DataPacket, SackPacket, TrimmedDataHeader
from agent.sim import LinkConfig, Scheduler, build_pair
from agent.sim.link import Link
from agent.sim.network import SimNetwork, make_endpoint_addresses
from agent.sim.packet import SimPacket
from wire.constants import ECN_CE, ECN_ECT0, ECN_NOT_ECT, DscpClass, Opcode

IP = IpContext(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]))


def _data(psn: int = 1, size: int = 1024, dscp: int = DscpClass.TRIMMABLE) -> SimPacket:
    packet = DataPacket(Opcode.WRITE_ONLY, 7, psn, 0, 0, 0x1000, 5, size, bytes(size), None, 3)
    return SimPacket(OutgoingDatagram(encode(packet, IP, 0xC000), IP, 0, 0xC000, 0, dscp, ECN_ECT0))


WIRE = _data().wire_size


def _control(psn: int = 1) -> SimPacket:
    sack = SackPacket(7, psn, psn, 0, 0, 0)
    return SimPacket(
        OutgoingDatagram(encode(sack, IP, 0xC000), IP, 0, 0xC000, 0, DscpClass.CONTROL, 0)
    )


def _link(config: LinkConfig, *, last_hop: bool = False, seed: int = 1):
    scheduler = Scheduler()
    link = Link("l", config, scheduler, random.Random(seed), DscpMap(), last_hop=last_hop)
    arrivals: list[tuple[float, SimPacket]] = []
    link.deliver = lambda packet: arrivals.append((scheduler.now, packet))
    return scheduler, link, arrivals


def test_a_link_serialises_at_its_rate_then_adds_its_delay():
    scheduler, link, arrivals = _link(LinkConfig(rate=1e6, delay=1e-3, ecn=False))
    first, second = _data(1), _data(2)
    link.send(first)
    link.send(second)
    scheduler.run()
    size = first.wire_size
    assert [t for t, _ in arrivals] == pytest.approx([size / 1e6 + 1e-3, 2 * size / 1e6 + 1e-3])


def test_control_packets_overtake_queued_data():
    scheduler, link, arrivals = _link(LinkConfig(rate=1e6, delay=0.0, ecn=False))
    for psn in range(3):
        link.send(_data(psn))
    link.send(_control(99))
    scheduler.run()
    kinds = [packet.dscp for _, packet in arrivals]
    assert kinds == [
        DscpClass.TRIMMABLE,
        DscpClass.CONTROL,
        DscpClass.TRIMMABLE,
        DscpClass.TRIMMABLE,
    ]


@pytest.mark.parametrize(
    ("last_hop", "dscp"), [(False, DscpClass.TRIMMED), (True, DscpClass.TRIMMED_LASTHOP)]
)
def test_a_full_queue_trims_data_to_its_headers_and_forwards_them_first(last_hop, dscp):
    config = LinkConfig(rate=1e6, delay=0.0, queue_bytes=2 * WIRE, ecn=False)
    scheduler, link, arrivals = _link(config, last_hop=last_hop)
    for psn in range(5):
        link.send(_data(psn))
    scheduler.run()
    trimmed = [p for _, p in arrivals if p.dscp == dscp]
    assert len(trimmed) == 2 and link.counters.trimmed == 2
    header = decode(trimmed[0].payload, IP, 0xC000, trimmed=True)
    assert isinstance(header, TrimmedDataHeader) and header.psn == 3
    assert arrivals[1][1] is trimmed[0]  # right after the packet on the wire when it came


def test_without_trimming_a_full_queue_drops():
    config = LinkConfig(rate=1e6, delay=0.0, queue_bytes=2 * WIRE, trim=False, ecn=False)
    scheduler, link, arrivals = _link(config)
    for psn in range(5):
        link.send(_data(psn))
    scheduler.run()
    assert len(arrivals) == 3 and link.counters.dropped_overflow == 2


def test_no_trim_class_is_dropped_rather_than_trimmed():
    config = LinkConfig(rate=1e6, delay=0.0, queue_bytes=WIRE, ecn=False)
    scheduler, link, _arrivals = _link(config)
    for psn in range(4):  # one on the wire, one queued, two over
        link.send(_data(psn, dscp=DscpClass.NO_TRIM))
    scheduler.run()
    assert link.counters.trimmed == 0 and link.counters.dropped_overflow == 2


def test_ect_data_is_marked_above_the_ecn_threshold_but_never_on_a_last_hop():
    config = LinkConfig(
        rate=1e6, delay=0.0, queue_bytes=100 * WIRE, ecn_min_bytes=0, ecn_max_bytes=1
    )
    # the first two find the queue empty (one goes straight onto the wire)
    for last_hop, expected in ((False, 18), (True, 0)):
        scheduler, link, arrivals = _link(config, last_hop=last_hop)
        for psn in range(20):
            link.send(_data(psn))
        scheduler.run()
        assert sum(p.ecn == ECN_CE for _, p in arrivals) == expected


def test_not_ect_packets_are_never_marked():
    config = LinkConfig(rate=1e6, delay=0.0, ecn_min_bytes=0, ecn_max_bytes=1)
    scheduler, link, arrivals = _link(config)
    for psn in range(10):
        packet = _data(psn)
        packet.ecn = ECN_NOT_ECT
        link.send(packet)
    scheduler.run()
    assert len(arrivals) == 10  # all arrived, through the queue that marks ECT ones
    assert all(p.ecn == ECN_NOT_ECT for _, p in arrivals)


def _roce_data(psn: int) -> SimPacket:
    # Only the DSCP decides the class: a RoCE data packet is one marked roce_data.
    packet = _data(psn)
    packet.dscp = DscpMap().roce_data
    return packet


def test_roce_data_waits_in_the_lossless_class_never_trimmed_nor_dropped_while_it_has_room():
    config = LinkConfig(
        rate=1e6, delay=0.0, queue_bytes=2 * WIRE, lossless_bytes=50 * WIRE, ecn=False
    )
    scheduler, link, arrivals = _link(config)
    for psn in range(20):
        link.send(_roce_data(psn))
    scheduler.run()
    assert len(arrivals) == 20
    assert link.counters.trimmed == link.counters.dropped_overflow == 0


def test_a_full_lossless_class_drops_at_its_tail():
    config = LinkConfig(rate=1e6, delay=0.0, lossless_bytes=2 * WIRE, ecn=False)
    scheduler, link, arrivals = _link(config)
    for psn in range(5):  # one on the wire, two queued, two over
        link.send(_roce_data(psn))
    scheduler.run()
    assert len(arrivals) == 3 and link.counters.dropped_overflow == 2


def test_strict_priority_control_then_lossless_roce_then_mrc_data():
    config = LinkConfig(rate=1e6, delay=0.0, ecn=False)
    scheduler, link, arrivals = _link(config)
    link.send(_data(0))  # straight onto the wire
    link.send(_data(1))
    link.send(_roce_data(2))
    link.send(_control(3))
    scheduler.run()
    roce = DscpMap().roce_data
    assert [p.dscp for _, p in arrivals] == [
        DscpClass.TRIMMABLE,
        DscpClass.CONTROL,
        roce,
        DscpClass.TRIMMABLE,
    ]


def test_lossless_data_is_marked_on_its_own_queue_depth_not_the_mrc_queue():
    config = LinkConfig(
        rate=1e6,
        delay=0.0,
        queue_bytes=100 * WIRE,
        lossless_bytes=100 * WIRE,
        ecn_min_bytes=4 * WIRE,
        ecn_max_bytes=5 * WIRE,
        lossless_ecn_min_bytes=4 * WIRE,
        lossless_ecn_max_bytes=5 * WIRE,
        ecn_max_probability=1.0,
    )
    scheduler, link, arrivals = _link(config)
    for psn in range(10):  # MRC data fills its own queue past the thresholds
        link.send(_data(psn))
    link.send(_roce_data(10))  # the lossless queue is empty: not marked
    for psn in range(11, 20):
        link.send(_roce_data(psn))
    scheduler.run()
    roce = [p for _, p in arrivals if p.dscp == DscpMap().roce_data]
    assert roce[0].ecn == ECN_ECT0
    assert any(p.ecn == ECN_CE for p in roce[5:])


def test_a_failed_link_loses_what_it_holds_and_carries_again_once_repaired():
    scheduler, link, arrivals = _link(LinkConfig(rate=1e6, delay=1e-3, ecn=False))
    for psn in range(3):
        link.send(_data(psn))
    scheduler.at(1.5e-3, link.fail)  # one packet on the wire, one queued
    scheduler.run(until=5e-3)
    assert len(arrivals) == 0
    link.send(_data(7))
    assert link.first_down_drop == 5e-3
    link.repair()
    link.send(_data(8))
    scheduler.run()
    assert [decode(p.payload, IP, 0xC000).psn for _, p in arrivals] == [8]


def test_random_loss_duplication_and_reordering_follow_their_probabilities():
    config = LinkConfig(rate=None, delay=1e-3, loss=0.1, duplicate=0.1, reorder=0.3)
    scheduler, link, arrivals = _link(config, seed=11)
    for psn in range(2000):
        link.send(_data(psn, size=16))
    scheduler.run()
    counters = link.counters
    assert 150 < counters.lost < 250
    assert 130 < counters.duplicated < 230
    psns = [decode(p.payload, IP, 0xC000).psn for _, p in arrivals]
    assert psns != sorted(psns)
    assert len(psns) == 2000 - counters.lost + counters.duplicated


def test_ecmp_spreads_evs_over_paths_and_ignores_direction():
    network = SimNetwork(seed=3)
    counts = [0, 0, 0, 0]
    for port in range(0xC000, 0xC000 + 4000):
        counts[network.path_index(port << 16, 4)] += 1
    assert min(counts) > 800
    a = network.add_host("a", make_endpoint_addresses(1, 1))
    b = network.add_host("b", make_endpoint_addresses(2, 1))
    network.join(a, b, 0, [LinkConfig()] * 4)
    for ev in (0xC0010000, 0xD0020000, 0xFFFF0000):
        assert network.path_of(a, b, 0, ev) is network.path_of(b, a, 0, ev)


def _run(seed: int) -> tuple[float, int, int]:
    link = LinkConfig(delay=20e-6, loss=0.05, reorder=0.1, queue_bytes=8 * 1100)
    testbed = build_pair([[link] * 3], config=MrcConfig(ev_set_size=32), seed=seed)
    rng = random.Random(seed)
    for _ in range(10):
        testbed.post(rng.randbytes(20_000))
    assert testbed.run_until_acked(limit=1.0)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    return testbed.now, stats.data_packets_sent, testbed.network.scheduler.events_run


def test_the_same_seed_replays_the_same_run_and_another_seed_differs():
    assert _run(4) == _run(4)
    assert _run(4) != _run(5)
