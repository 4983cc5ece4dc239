"""EV-probe answers travel together: the probes that reach a receiver in one turn are answered
by one endpoint response per plane, which carries every answer (one more EPH each), and the
prober credits each answer to its own EV.

Why: at 1 % loss every lost packet costs about four probes (one to admit a stand-in, three to
revive the retired EV), and each answer, alone in its datagram, cost the prober a datagram to
receive and decode: a quarter of what a sender at line rate received.
"""

from __future__ import annotations

from agent.core import MrcConfig
from agent.core.drops import DropReason
from agent.core.packets import EndpointMessage
from agent.core.stats import EvState
from tests.unit.agent.core.loopback import Flight, Loopback
from wire.constants import MAX_EV_PROBE_ANSWERS, EpType


def _probing(link: Loopback, count: int, allow: bool = False) -> list[int]:
    """Deny ``count`` home EVs of ``a``: each stand-in drawn for their slots is probed at once
    (and with ``allow``, the denied EV too, lifting the denial)."""
    evs = [report.ev for report in link.a.connection_stats(link.qp_a).evs][:count]
    for ev in evs:
        link.a.deny_ev(link.qp_a, 0, ev, link.now)
        if allow:
            link.a.allow_ev(link.qp_a, 0, ev, link.now)
    link.collect()
    return evs


def _endpoint_messages(flights: list[Flight], response: bool) -> list[EndpointMessage]:
    packets = [flight.packet() for flight in flights]
    return [p for p in packets if isinstance(p, EndpointMessage) and p.response is response]


def test_probes_that_arrive_together_are_answered_in_one_response_carrying_each_answer():
    link = Loopback.create(MrcConfig(ev_set_size=8, probes_to_revive=1))
    evs = _probing(link, 3, allow=True)
    probes = _endpoint_messages(link.exchange(), response=False)
    assert set(evs) <= {p.value for p in probes}  # and the stand-ins in their slots
    responses = _endpoint_messages(link.exchange(), response=True)
    assert len(responses) == 1
    answers = [(responses[0].seq, responses[0].value), *responses[0].more_answers]
    assert sorted(answers) == sorted((p.seq, p.value) for p in probes)
    stats = link.a.connection_stats(link.qp_a)
    assert stats.ev_probes_answered == len(probes) > 3
    revived = {r.ev for r in stats.evs if r.state is EvState.GOOD and r.home}
    assert set(evs) <= revived


def test_a_lone_probe_is_answered_by_a_plain_response():
    link = Loopback.create(MrcConfig(ev_set_size=8))
    _probing(link, 1)
    assert len(_endpoint_messages(link.exchange(), response=False)) == 1
    responses = _endpoint_messages(link.exchange(), response=True)
    assert len(responses) == 1
    assert responses[0].more_answers == ()
    assert responses[0].ep_type == EpType.EV_PROBE


def test_more_probes_than_one_response_holds_take_several_responses():
    count = MAX_EV_PROBE_ANSWERS + 3
    link = Loopback.create(MrcConfig(ev_set_size=2 * count))
    _probing(link, count)
    probes = _endpoint_messages(link.exchange(), response=False)
    assert len(probes) == count
    responses = _endpoint_messages(link.exchange(), response=True)
    assert [1 + len(r.more_answers) for r in responses] == [MAX_EV_PROBE_ANSWERS, 3]
    assert link.a.connection_stats(link.qp_a).ev_probes_answered == count


def test_a_response_answering_only_probes_given_up_on_is_dropped_as_unexpected():
    link = Loopback.create(MrcConfig(ev_set_size=8))
    _probing(link, 2)
    link.exchange()  # the probes reach b
    held = [f for f in link.in_flight if f.source is link.b]  # b's one response: held back
    assert len(_endpoint_messages(held, response=True)) == 1
    link.in_flight = [f for f in link.in_flight if f.source is not link.b]
    link.now += 1.0  # long past every probe's timeout: a gave them up
    link.idle_until_timer()
    answered = link.a.connection_stats(link.qp_a).ev_probes_answered
    unexpected = link.a.stats.drops[DropReason.UNEXPECTED]
    link.in_flight = held
    link.exchange(drop=lambda flight: flight.source is link.a)
    assert link.a.connection_stats(link.qp_a).ev_probes_answered == answered
    assert link.a.stats.drops[DropReason.UNEXPECTED] == unexpected + 1
