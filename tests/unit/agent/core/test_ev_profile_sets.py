"""EV sets given by a profile, operator EV states and their events, connectionless EV probes,
a send PSN set late, and writes posted straight from a shared buffer: the core's side of the
host API."""

from __future__ import annotations

import random
from collections import deque

import pytest

from agent.core import ConnectionSpec, Endpoint, MrcConfig
from agent.core.config import MrcConfig as Config
from agent.core.drops import DropReason
from agent.core.ev import EvSet
from agent.core.events import Event, EvProbeAnswered, EvStateChanged, MessageReceived
from tests.unit.agent.core.loopback import Loopback, to_incoming
from wire.constants import EvState

INTERVAL = 1e-3
HOMES = [(0, 0xC0010000), (0, 0xC0020000), (0, 0xC0030000), (0, 0xC0040000)]


def _fixed(min_active: int = 0, homes=HOMES) -> tuple[EvSet, deque[Event]]:
    events: deque[Event] = deque()
    config = Config(probe_interval=INTERVAL)
    evs = EvSet(config, 1, False, random.Random(1), homes, min_active, events, qp=7)
    return evs, events


def _states(events: deque[Event]) -> list[tuple[int, EvState]]:
    out = []
    while events:
        event = events.popleft()
        assert isinstance(event, EvStateChanged) and event.qp == 7
        out.append((event.value, EvState(event.state)))
    return out


def test_a_given_set_sprays_over_exactly_its_evs():
    evs, _events = _fixed()
    values = []
    for _ in range(8):
        entry = evs.next_for_data()
        assert entry is not None
        values.append(entry.value)
        evs.release(entry)
    assert set(values) == {value for _plane, value in HOMES}


def test_a_retired_ev_leaves_its_slot_empty_and_returns_after_its_probes():
    evs, events = _fixed()
    entry = next(e for e in evs.active_entries() if e.value == 0xC0020000)
    assert evs.retire(entry, now=0.0)
    assert _states(events) == [(0xC0020000, EvState.ASSUMED_BAD)]
    assert evs.active_entries()[1] is entry, "no stand-in takes a profile EV's slot"
    used = set()
    for _ in range(12):
        picked = evs.next_for_data()
        assert picked is not None
        used.add(picked.value)
        evs.release(picked)
    assert 0xC0020000 not in used
    now = 0.0
    rounds = 0
    while entry.state is not EvState.GOOD:  # retired EVs are probed within a budget
        rounds += 1
        assert rounds < 200, "never revived"
        now += INTERVAL
        for probed, seq in evs.probes_due(now, timeout=INTERVAL):
            assert evs.on_probe_answered(seq, probed.value)
    assert _states(events) == [(0xC0020000, EvState.GOOD)]


def test_no_ev_is_retired_below_the_minimum_active():
    evs, events = _fixed(min_active=3)
    first, second = evs.active_entries()[:2]
    assert evs.retire(first, 0.0)
    assert not evs.retire(second, 0.0), "3 left: at the floor, the EV stays in use"
    assert second.state is EvState.GOOD
    assert _states(events) == [(first.value, EvState.ASSUMED_BAD)]
    evs.force_retire(0, second.value, 0.0)  # the operator may go below it
    assert second.state is EvState.ASSUMED_BAD


def test_operator_states_deny_admit_and_report_events():
    evs, events = _fixed()
    evs.deny(0, 0xC0030000, 0.0)
    assert evs.state_of(0, 0xC0030000) is EvState.DENIED
    for _ in range(8):
        picked = evs.next_for_data()
        assert picked is not None and picked.value != 0xC0030000
        evs.release(picked)
    assert evs.probes_due(1.0, timeout=INTERVAL) == [], "a denied EV is never probed"
    evs.force_good(0, 0xC0030000)
    assert evs.state_of(0, 0xC0030000) is EvState.GOOD
    assert _states(events) == [(0xC0030000, EvState.DENIED), (0xC0030000, EvState.GOOD)]
    assert [state for _p, _v, state in evs.homes()] == [EvState.GOOD] * 4
    with pytest.raises(KeyError):
        evs.deny(0, 0xC0990000, 0.0)


def test_a_given_set_refuses_duplicates_and_unknown_planes():
    with pytest.raises(ValueError, match="twice"):
        _fixed(homes=[(0, 0xC0010000), (0, 0xC0010000)])
    with pytest.raises(ValueError, match="plane 1"):
        _fixed(homes=[(1, 0xC0010000)])
    with pytest.raises(ValueError, match="at least one"):
        _fixed(homes=[])


def test_random_sets_report_home_evs_only_when_asked():
    config = MrcConfig(ev_set_size=4)
    quiet = EvSet(config, 1, False, random.Random(1))
    quiet.retire(quiet.active_entries()[0], 0.0)  # no queue: nothing to report to
    events: deque[Event] = deque()
    loud = EvSet(config, 1, False, random.Random(1), events=events, qp=7)
    home = loud.active_entries()[0]
    loud.retire(home, 0.0)
    standin = loud.active_entries()[0]
    assert standin is not home
    assert _states(events) == [(home.value, EvState.ASSUMED_BAD)], "stand-ins go unreported"


def _pair() -> tuple[Endpoint, Endpoint]:
    a = Endpoint([bytes([10, 0, 0, 1])], MrcConfig(ev_set_size=8), seed=1)
    b = Endpoint([bytes([10, 0, 0, 2])], MrcConfig(ev_set_size=8), seed=2)
    return a, b


def _deliver(source: Endpoint, target: Endpoint, now: float) -> int:
    sent = source.datagrams_to_send(now)
    for datagram in sent:
        target.receive_datagram(to_incoming(datagram), now)
    return len(sent)


def test_connectionless_probes_are_answered_without_a_connection():
    a, b = _pair()
    a.send_ev_probe(0, b.local_addresses[0], 0xC1230000, seq=9, now=1.0)
    (probe,) = a.datagrams_to_send(1.0)
    assert probe.src_port == 0xC123 and probe.ip.dst == b.local_addresses[0]
    b.receive_datagram(to_incoming(probe), 1.0001)
    (answer,) = b.datagrams_to_send(1.0001)
    assert answer.src_port == 0xC123, "the answer comes back on the probed EV"
    a.receive_datagram(to_incoming(answer), 1.0003)
    event = a.next_event()
    assert isinstance(event, EvProbeAnswered)
    assert (event.qp, event.seq, event.plane, event.value) == (0, 9, 0, 0xC1230000)
    assert event.rtt == pytest.approx(0.0003)
    # The same answer again, or one for a probe given up, is dropped and counted.
    a.receive_datagram(to_incoming(answer), 1.0004)
    assert a.stats.drops[DropReason.UNEXPECTED] == 1
    a.send_ev_probe(0, b.local_addresses[0], 0xC1240000, seq=10, now=2.0)
    a.cancel_ev_probe(10)
    _deliver(a, b, 2.0)
    _deliver(b, a, 2.0)
    assert a.next_event() is None
    assert a.stats.drops[DropReason.UNEXPECTED] == 2


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"plane": 1}, "no plane 1"),
        ({"peer": bytes(16)}, "IP version"),
        ({"seq": 1 << 16}, "16 bits"),
        ({"ev": 0x1234}, "source port"),
    ],
)
def test_probes_that_cannot_go_on_the_wire_are_refused(kwargs, words):
    a, b = _pair()
    args = {"plane": 0, "peer": b.local_addresses[0], "ev": 0xC0010000, "seq": 1, "now": 0.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=words):
        a.send_ev_probe(**args)
    assert a.datagrams_to_send(0.0) == []


def test_a_probe_sequence_number_in_use_is_refused():
    a, b = _pair()
    a.send_ev_probe(0, b.local_addresses[0], 0xC0010000, seq=1, now=0.0)
    with pytest.raises(ValueError, match="already"):
        a.send_ev_probe(0, b.local_addresses[0], 0xC0020000, seq=1, now=0.0)


def test_the_send_psn_can_be_set_until_something_is_posted():
    loop = Loopback.create()
    loop.a.set_send_psn(loop.qp_a, 0x800005)
    # The receiver expects PSN 5 (its spec): data half the PSN space away is outside its window.
    loop.post(b"x" * 10)
    loop.exchange()
    assert loop.b.stats.drops[DropReason.OUT_OF_WINDOW] >= 1
    with pytest.raises(ValueError, match="before anything"):
        loop.a.set_send_psn(loop.qp_a, 5)


def test_a_memoryview_is_read_when_its_packets_are_sent_not_when_posted():
    loop = Loopback.create()
    shared = bytearray(b"before" * 10)
    loop.a.post_write(loop.qp_a, memoryview(shared), loop.va, loop.rkey)
    shared[:6] = b"after!"  # changed before the packet went out, as a NIC would read it
    loop.collect()
    for _ in range(4):
        loop.exchange()
    received = [e for e in loop.events_b if isinstance(e, MessageReceived)]
    assert received and received[0].length == 60
    assert loop.b.memory.read(loop.rkey, loop.va, 6) == b"after!"


def test_a_connection_given_evs_sends_on_them_and_reports_their_states():
    a, b = _pair()
    qp_a, qp_b = a.allocate_qp(), b.allocate_qp()
    homes = ((0, 0xD0010000), (0, 0xD0020000))
    a.connect(ConnectionSpec(qp_a, qp_b, b.local_addresses, evs=homes, ev_events=True))
    b.connect(ConnectionSpec(qp_b, qp_a, a.local_addresses))
    region = b.register_memory(bytearray(1 << 16))
    a.post_write(qp_a, b"y" * 4000, region.va, region.rkey)
    ports = {d.src_port for d in a.datagrams_to_send(0.0) if len(d.payload) > 100}
    assert ports == {0xD001, 0xD002}
    a.retire_ev(qp_a, 0, 0xD0020000, 0.0)
    a.admit_ev(qp_a, 0, 0xD0020000)
    events = [a.next_event(), a.next_event()]
    assert [(e.value, e.state) for e in events if isinstance(e, EvStateChanged)] == [
        (0xD0020000, EvState.ASSUMED_BAD),
        (0xD0020000, EvState.GOOD),
    ]
    assert a.ev_states(qp_a) == [(0, 0xD0010000, EvState.GOOD), (0, 0xD0020000, EvState.GOOD)]


def _exact(homes) -> EvSet:
    config = Config(probe_interval=INTERVAL, probes_to_admit=0)
    return EvSet(config, 1, False, random.Random(3), homes, standin_when_starved=True)


def test_exact_path_evs_keep_their_slots_empty_while_another_can_carry():
    evs = _exact(HOMES)
    entry = next(e for e in evs.active_entries() if e.value == 0xC0020000)
    assert evs.retire(entry, now=0.0)
    assert evs.active_entries()[1] is entry, "three others carry: no stand-in"


def test_the_last_exact_path_ev_to_die_gets_a_random_stand_in():
    """A connection of one EV whose path died finds another, as hashing would."""
    evs = _exact([(0, 0xC0010000)])
    (only,) = evs.active_entries()
    assert evs.retire(only, now=0.0)
    (standin,) = evs.active_entries()
    assert standin is not only and not standin.home
    picked = evs.next_for_data()
    assert picked is standin, "data goes on at once on the stand-in"
    # a profile's given EV (no stand-ins) starves instead
    fixed, _ = _fixed(homes=[(0, 0xC0010000)])
    (alone,) = fixed.active_entries()
    assert fixed.retire(alone, now=0.0)
    assert fixed.next_for_data() is None
