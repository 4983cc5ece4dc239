"""The controller API against two in-process agents on the deterministic link: profiles that
drive spraying, EV states set at runtime, EV events from retired and revived EVs, EV probes,
CC profiles and port admin state."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.api.controller import Controller
from agent.api.errors import Busy, InvalidArgument, NotFound, TimedOut
from agent.api.types import (
    OPT_EP_OP_EV_PROBE,
    OPT_EV_EVENT,
    CtlEvState,
    EpRequest,
    Ev,
    EventType,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    PortAdminState,
    ProfileState,
    QpState,
    SendWR,
    Sge,
    WcStatus,
)
from agent.core import MrcConfig, OutgoingDatagram
from agent.core.ev_expansion import EvField
from tests.unit.agent.api.harness import Agents, Endpoint, connect, poll_until

OFF, ON = ProfileState.OFFLINE, ProfileState.ONLINE
EVS = [0xC1010000 + (i << 16) for i in range(8)]  # source ports 0xc101.., no flow label


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path, MrcConfig(peer_timeout=0.5))
    yield made
    made.close()


def _explicit_profile(ctl: Controller, profile: int = 1, event_mask: int = 0) -> None:
    ctl.modify_ev_fmt_profile(13, profile_state=OFF, ev_fmt_mode=FormatMode.STEV,
                              fmt_fields=[16, 16])  # fmt: skip
    ctl.modify_ev_fmt_profile(13, profile_state=ON)
    ctl.modify_ev_profile(profile, profile_state=OFF, ev_mode=EvMode.EXP, ev_fmt_profile_id=13,
                          ev_count=len(EVS), ev_min_active=0, ev_event_mask=event_mask,
                          fields=[EvField(16, mask=0xFFFF), EvField(16, mask=0xFFFF)])  # fmt: skip
    ctl.modify_ev_profile(profile, ev_op=EvOp.REPLACE_EV,
                          entries=[EvOpEntry(Ev(b"", 0), Ev.stev(v)) for v in EVS])  # fmt: skip
    ctl.modify_ev_profile(profile, profile_state=ON)


class Watch:
    """Records the source ports of A's data packets, and loses those ``cut`` picks."""

    def __init__(self, agents: Agents) -> None:
        self.ports: list[int] = []
        #: Where a test marked the record (e.g. the moment of a call).
        self.mark = 0
        self.cut: Callable[[int], bool] = lambda _port: False
        agents.drop("a", self)

    def __call__(self, datagram: OutgoingDatagram) -> bool:
        if len(datagram.payload) > 200:  # data, not probes or control
            self.ports.append(datagram.src_port)
        return self.cut(datagram.src_port)


def _send(a: Endpoint, b: Endpoint, size: int, wr_id: int = 1) -> None:
    a.qp.post_send(SendWR(wr_id, [Sge(a.mr.addr, size, a.mr.lkey)], b.mr.addr, b.mr.rkey))


def test_the_device_says_what_it_offers(agents):
    ctl = agents.controller("a")
    attr = ctl.query_device()
    assert attr["ev"]["ev_fmt_mode_mask"] == FormatMode.STEV | FormatMode.UDP
    assert attr["ev"]["ev_mode_mask"] == EvMode.AUTO | EvMode.EXP | EvMode.GEN
    assert attr["opt_attr"] & OPT_EV_EVENT and attr["opt_attr"] & OPT_EP_OP_EV_PROBE
    assert "uet-1.0-nscc" in attr["cc"]["algorithms"]
    assert attr["phy_port_mask"] == 0b10  # port 1, 1-based
    assert ctl.query_port(1)["port_admin_state"] == "ENABLED"


def test_an_explicit_profile_drives_spraying_and_a_denied_ev_carries_nothing(agents):
    ctl = agents.controller("a")
    _explicit_profile(ctl)
    watch = Watch(agents)
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=1)
    _send(a, b, 200_000)
    poll_until(a.cq, 1, agents)
    assert set(watch.ports) == {v >> 16 for v in EVS}, "every EV of the profile, and no other"
    denied = Ev.stev(EVS[3])
    ctl.set_ev_states(1, [(denied, CtlEvState.DENIED)])
    watch.ports.clear()
    _send(a, b, 200_000, wr_id=2)
    poll_until(a.cq, 1, agents)
    assert watch.ports and EVS[3] >> 16 not in watch.ports
    _, entries = ctl.query_ev_profile(1, EvOp.QUERY_EV_STATE, [EvOpEntry(denied)])
    assert entries[0].state is CtlEvState.DENIED
    ctl.set_ev_states(1, [(denied, CtlEvState.GOOD)])
    watch.ports.clear()
    _send(a, b, 200_000, wr_id=3)
    poll_until(a.cq, 1, agents)
    assert EVS[3] >> 16 in watch.ports
    with pytest.raises(NotFound) as raised:
        ctl.set_ev_states(1, [(Ev.stev(0xC0FF0000), CtlEvState.DENIED)])
    assert raised.value.field == "ev_op.entries[0].ev"
    with pytest.raises(Busy):
        ctl.modify_ev_profile(1, profile_state=OFF)  # a QP uses it
    a.qp.destroy()
    ctl.modify_ev_profile(1, profile_state=OFF)


def test_a_cut_path_raises_assumed_bad_events_and_its_repair_good_ones(agents):
    ctl = agents.controller("a")
    mask = int(CtlEvState.GOOD | CtlEvState.ASSUMED_BAD)
    _explicit_profile(ctl, event_mask=mask)
    events = ctl.create_ev_event_cq(64)
    watch = Watch(agents)
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=1)
    dead = {EVS[1] >> 16, EVS[5] >> 16}
    watch.cut = lambda port: port in dead
    _send(a, b, 300_000)
    assert poll_until(a.cq, 1, agents)[0].status is WcStatus.SUCCESS, "no byte lost"
    seen = _events_until(agents, events, CtlEvState.ASSUMED_BAD, dead)
    bad = [e for e in seen if e.state is CtlEvState.ASSUMED_BAD]
    assert {e.ev.as_int() >> 16 for e in bad} == dead
    assert all(e.profile_id == 1 and e.drop_count == 0 for e in bad)
    _, array = ctl.query_ev_profile(1, EvOp.QUERY_EV_ARRAY)
    states = {entry.ev.as_int() >> 16: entry.state for entry in array}
    assert {port for port, state in states.items() if state is CtlEvState.ASSUMED_BAD} == dead
    watch.cut = lambda _port: False  # repaired: probes bring them back
    _events_until(agents, events, CtlEvState.GOOD, dead)


def _events_until(agents: Agents, cq: object, state: CtlEvState, ports: set[int]) -> list:
    """Poll ``cq`` until events of ``state`` came for every EV of ``ports``."""
    seen: list = []
    while not {e.ev.as_int() >> 16 for e in seen if e.state is state} >= ports:
        seen += cq.poll_ev_events()  # type: ignore[attr-defined]
        agents.pump()
    return seen


def test_event_cq_overflow_is_counted_exactly(agents):
    ctl = agents.controller("a")
    _explicit_profile(ctl, event_mask=int(CtlEvState.ASSUMED_BAD | CtlEvState.GOOD))
    events = ctl.create_ev_event_cq(1)
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=1)
    states = [(Ev.stev(v), CtlEvState.ASSUMED_BAD) for v in EVS[:3]]
    ctl.set_ev_states(1, states)
    agents.run(1e-4)
    first = events.poll_ev_events()
    assert [e.drop_count for e in first] == [0]
    ctl.set_ev_states(1, [(Ev.stev(EVS[7]), CtlEvState.ASSUMED_BAD)])
    (late,) = events.poll_ev_events()
    assert late.drop_count == 2, "the two events the full CQ could not hold"


def test_probes_answer_a_live_ev_with_an_rtt_and_a_dead_one_with_a_timeout(agents):
    ctl = agents.controller("a")
    watch = Watch(agents)
    watch.cut = lambda port: port == 0xC202
    peer = "10.0.0.2"
    requests = [
        EpRequest(1, peer, Ev.stev(0xC2010000)),
        EpRequest(2, peer, Ev.stev(0xC2020000)),
        EpRequest(3, peer, Ev.stev(0xC2030000), sgid="10.0.0.1"),
    ]
    start = agents.clock()
    with pytest.raises(TimedOut) as timed_out:  # OCP's ETIMEDOUT: not every probe answered
        ctl.ep_batch_send_wait(requests, rsp_timeout=2_000_000)
    assert timed_out.value.field == "rsp_timeout"
    responses = timed_out.value.responses  # what came, in arrival order
    assert sorted(r.req_id for r in responses) == [1, 3]
    assert all(r.port == 1 and 0 < r.rtt < 2_000_000 for r in responses)
    assert timed_out.value.timed_out == [2]
    assert agents.clock() - start >= 2e-3, "waited out the dead EV's timeout"
    answered = ctl.ep_batch_send_wait([requests[0], requests[2]], rsp_timeout=2_000_000)
    assert sorted(r.req_id for r in answered) == [1, 3], "every probe answered: no error"
    with pytest.raises(InvalidArgument) as raised:
        ctl.ep_batch_send_wait([EpRequest(1, peer, Ev.stev(0xC2010000), sgid="10.9.9.9")], 1000)
    assert raised.value.field == "req[0].sgid"
    with pytest.raises(InvalidArgument) as raised:
        ctl.ep_batch_send_wait([EpRequest(1, peer, Ev.stev(0xC2010000, port=2))], 1000)
    assert raised.value.field == "req[0].req_ev.port"


def test_cc_profiles_configure_the_qps_that_name_them(agents):
    ctl = agents.controller("a")
    ctl.modify_cc_profile(2, profile_state=OFF, algorithm="uet-1.0-nscc")
    ctl.modify_cc_profile(2, profile_state=ON, cc_config={"target_delay": 40_000})
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, cc_profile_id=2)
    config = agents.a.pool.owner(a.qp.qp_num).config  # type: ignore[union-attr]
    assert config.nscc.target_queue_delay == pytest.approx(40e-6)
    assert a.qp.query()["cc_profile_id"] == 2
    _send(a, b, 10_000)
    assert poll_until(a.cq, 1, agents)[0].status is WcStatus.SUCCESS


def test_a_disabled_port_stops_its_plane_and_tells_applications(agents):
    ctl = agents.controller("a")
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b)
    assert ctl.modify_port(1, PortAdminState.DISABLED)["state"] == "DOWN"
    event = a.ctx.get_async_event(timeout=0)
    assert event is not None and (event.event_type, event.element) == (EventType.PORT_ERR, 1)
    assert a.ctx.query_port(1)["port_admin_state"] == "DISABLED"
    watch = Watch(agents)
    _send(a, b, 5000)
    agents.run(2e-3)
    assert watch.ports == [], "nothing leaves a disabled port"
    ctl.modify_port(1, PortAdminState.ENABLED)
    assert poll_until(a.cq, 1, agents)[0].status is WcStatus.SUCCESS
    event = a.ctx.get_async_event(timeout=0)
    assert event is not None and event.event_type is EventType.PORT_ACTIVE


def test_generated_profiles_go_online_and_list_their_evs(agents):
    ctl = agents.controller("a")
    ctl.modify_ev_fmt_profile(13, profile_state=OFF, ev_fmt_mode=FormatMode.STEV,
                              fmt_fields=[8, 4, 4])  # fmt: skip
    ctl.modify_ev_fmt_profile(13, profile_state=ON)
    tiers = [EvField(8, init_val=0xC0, mask=0x0F), EvField(4, mask=0xF), EvField(4, mask=0xF)]
    ctl.modify_ev_profile(4, profile_state=OFF, ev_mode=EvMode.GEN, ev_fmt_profile_id=13,
                          ev_count=32, fields=tiers)  # fmt: skip
    ctl.modify_ev_profile(4, profile_state=ProfileState.ONLINE)
    attrs, array = ctl.query_ev_profile(4, EvOp.QUERY_EV_ARRAY)
    assert attrs["cur_profile_state"] == "ONLINE" and len(array) == 32
    assert len({entry.ev for entry in array}) == 32
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=4)
    watch = Watch(agents)
    _send(a, b, 100_000)
    poll_until(a.cq, 1, agents)
    assert watch.ports and all(port >> 12 == 0xC for port in watch.ports)


def test_a_controller_goes_away_and_the_profiles_stay(agents):
    ctl = agents.controller("a")
    _explicit_profile(ctl)
    ctl.close()
    again = agents.controller("a")
    attrs, _ = again.query_ev_profile(1)
    assert attrs["cur_profile_state"] == "ONLINE"
    assert os.path.exists(agents.server_a.path)


def _deny_mid_message(agents: Agents, ctl: Controller, profile: int, victim: Ev) -> Watch:
    """A's QP to B on ``profile`` sends one large WRITE; ``victim`` is denied once it has
    carried some of it. Returns the watch, marked (``mark``) where the call was made."""
    watch = Watch(agents)
    a, b = (
        Endpoint(agents.context("a"), region=4 << 20),
        Endpoint(agents.context("b"), region=4 << 20),
    )
    connect(a, b, ev_profile_id=profile)
    _send(a, b, 4 << 20)
    port = victim.as_int(16)
    agents.run_until(lambda: port in watch.ports)
    watch.mark = len(watch.ports)
    ctl.set_ev_states(profile, [(victim, CtlEvState.DENIED)])
    (wc,) = poll_until(a.cq, 1, agents)
    assert wc.status is WcStatus.SUCCESS
    return watch


def test_a_denied_ev_carries_nothing_more_though_a_message_is_under_way(agents):
    ctl = agents.controller("a")
    _explicit_profile(ctl)
    victim = Ev.stev(EVS[2])
    watch = _deny_mid_message(agents, ctl, 1, victim)
    after = watch.ports[watch.mark :]
    assert after, "the message went on after the deny"
    assert victim.as_int(16) not in after, "no data packet on the EV once the call was made"


def test_an_auto_profiles_evs_on_a_live_qp_are_listed_and_can_be_denied(agents):
    ctl = agents.controller("a")
    ctl.modify_ev_profile(2, profile_state=OFF, ev_mode=EvMode.AUTO, ev_count=16)
    ctl.modify_ev_profile(2, profile_state=ON)
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=2)  # the agent's random EVs, 16 of them
    _, entries = ctl.query_ev_profile(2, EvOp.QUERY_EV_ARRAY)
    assert len(entries) == 16 and all(e.state is CtlEvState.GOOD for e in entries)
    a.qp.destroy()
    _, entries = ctl.query_ev_profile(2, EvOp.QUERY_EV_ARRAY)
    assert entries == [], "a QP's EVs leave with it"
    watch = Watch(agents)
    a = Endpoint(agents.context("a"))
    b = Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=2)
    _, entries = ctl.query_ev_profile(2, EvOp.QUERY_EV_ARRAY)
    _send(a, b, 200_000)
    agents.run_until(lambda: bool(watch.ports))
    used = watch.ports[0]
    victim = next(e.ev for e in entries if e.ev.as_int(16) == used)
    mark = len(watch.ports)
    ctl.set_ev_states(2, [(victim, CtlEvState.DENIED)])
    (wc,) = poll_until(a.cq, 1, agents)
    assert wc.status is WcStatus.SUCCESS
    assert watch.ports[mark:] and used not in watch.ports[mark:]
    _, states = ctl.query_ev_profile(2, EvOp.QUERY_EV_STATE, [EvOpEntry(victim)])
    assert states[0].state is CtlEvState.DENIED


def test_a_refused_ev_state_batch_leaves_the_profile_and_its_live_qps_alike(agents):
    """The second entry is refused: the first applies neither to the profile nor to the QP."""
    ctl = agents.controller("a")
    _explicit_profile(ctl)
    watch = Watch(agents)
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b, ev_profile_id=1)
    kept, freed = Ev.stev(EVS[3]), Ev.stev(EVS[5])
    ctl.set_ev_states(1, [(freed, CtlEvState.DENIED)])
    unknown = Ev.stev(0xC0FF0000)
    with pytest.raises(NotFound) as raised:
        ctl.set_ev_states(1, [(kept, CtlEvState.DENIED), (unknown, CtlEvState.DENIED)])
    assert raised.value.field == "ev_op.entries[1].ev"
    with pytest.raises(NotFound):
        ctl.set_ev_states(1, [(freed, CtlEvState.GOOD), (unknown, CtlEvState.GOOD)])
    _, states = ctl.query_ev_profile(1, EvOp.QUERY_EV_STATE, [EvOpEntry(kept), EvOpEntry(freed)])
    assert [entry.state for entry in states] == [CtlEvState.GOOD, CtlEvState.DENIED]
    _send(a, b, 200_000)
    poll_until(a.cq, 1, agents)
    assert EVS[3] >> 16 in watch.ports, "the QP still sprays on the EV the profile says is GOOD"
    assert EVS[5] >> 16 not in watch.ports, "and not on the one it says is DENIED"


def test_an_ev_denied_before_a_qp_connects_carries_nothing_of_it(agents):
    """The QP took its profile at INIT; the controller denies an EV before the QP's RTR: the
    QP connects with the profile's states of then, not of its INIT."""
    ctl = agents.controller("a")
    _explicit_profile(ctl)
    watch = Watch(agents)
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    a.qp.modify(QpState.INIT, ev_profile_id=1)
    ctl.set_ev_states(1, [(Ev.stev(EVS[3]), CtlEvState.DENIED)])
    b.qp.modify(QpState.INIT)
    for me, peer in ((a, b), (b, a)):
        info = peer.info()
        me.qp.modify(QpState.RTR, dest_qp_num=info["qpn"], rq_psn=info["psn"], dgid=info["gid"])  # type: ignore[arg-type]
    for me in (a, b):
        me.qp.modify(QpState.RTS, sq_psn=me.info()["psn"])  # type: ignore[arg-type]
    _send(a, b, 200_000)
    poll_until(a.cq, 1, agents)
    assert watch.ports and EVS[3] >> 16 not in watch.ports
