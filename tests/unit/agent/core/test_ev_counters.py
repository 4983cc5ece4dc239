"""Per-EV congestion counters: a trim NACK counts on the EV its packet's copy travelled on, an
ECN echo on the EV of the packet whose SACK echoed it; the other EVs count nothing, and the
connection's totals still count every one."""

from __future__ import annotations

import random
from dataclasses import replace

from agent.core.codec import trimmed_length
from agent.core.packets import DataPacket
from tests.unit.agent.core.loopback import Loopback
from wire.constants import ECN_CE, DscpClass

DATA = bytes(random.Random(7).randbytes(5000))


def _per_ev(link: Loopback) -> dict[int, tuple[int, int]]:
    return {r.ev: (r.trims, r.ecn_echoes) for r in link.a.connection_stats(link.qp_a).evs}


def test_a_trim_counts_on_the_ev_its_packet_travelled():
    link = Loopback.create()
    link.post(DATA)
    victim = link.in_flight[2]

    def trim(flight, incoming):
        if flight is not victim:
            return incoming
        cut = trimmed_length(incoming.payload)
        assert cut is not None
        return replace(incoming, payload=incoming.payload[:cut], dscp=DscpClass.TRIMMED)

    link.exchange(rewrite=trim)
    link.run(1e-3)
    counts = _per_ev(link)
    assert counts[victim.datagram.ev] == (1, 0)
    assert sum(t for t, _ in counts.values()) == 1
    assert link.a.connection_stats(link.qp_a).trims_seen == 1


def test_an_ecn_echo_counts_on_the_ev_of_the_marked_packet():
    link = Loopback.create()
    link.post(DATA)
    marked = link.in_flight[0]
    assert isinstance(marked.packet(), DataPacket)
    link.exchange(rewrite=lambda f, d: replace(d, ecn=ECN_CE) if f is marked else d)
    link.run(1e-3)
    counts = _per_ev(link)
    assert counts[marked.datagram.ev] == (0, 1)
    assert sum(e for _, e in counts.values()) == 1
    assert link.a.connection_stats(link.qp_a).ecn_echoes == 1


def test_a_quiet_transfer_counts_nothing_per_ev():
    link = Loopback.create()
    link.post(DATA)
    link.run(1e-3)
    assert set(_per_ev(link).values()) == {(0, 0)}
