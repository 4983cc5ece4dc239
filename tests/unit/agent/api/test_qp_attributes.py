"""A QP's verbs attributes act on its connection: ``timeout`` and ``retry`` bound how long it
may go unanswered before it fails (ERR, RETRY_EXC_ERR, QP_FATAL), ``path_mtu`` sets its payload
per packet within what the agent's link allows. Two in-process agents on the deterministic
link; the peer is silenced by dropping everything it sends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.api.errors import InvalidArgument
from agent.api.types import EventType, QpState, SendWR, Sge, WcStatus
from agent.core import MrcConfig, OutgoingDatagram
from tests.unit.agent.api.harness import Agents, Endpoint

#: The agents' own silence limit, far beyond every budget below: a QP failing sooner failed by
#: its attributes.
AGENT_PEER_TIMEOUT = 3.0


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path, MrcConfig(peer_timeout=AGENT_PEER_TIMEOUT))
    yield made
    made.close()


def _connect(
    agents: Agents, rtr: dict[str, object], rts: dict[str, object]
) -> tuple[Endpoint, Endpoint]:
    """``a`` (with these RTR and RTS attributes) and ``b`` connected, RTS both."""
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    for me in (a, b):
        me.qp.modify(QpState.INIT)
    for me, peer, extra in ((a, b, rtr), (b, a, {})):
        info = peer.info()
        me.qp.modify(
            QpState.RTR, dest_qp_num=info["qpn"], rq_psn=info["psn"], dgid=info["gid"], **extra
        )  # type: ignore[arg-type]
    for me, extra in ((a, rts), (b, {})):
        me.qp.modify(QpState.RTS, sq_psn=me.info()["psn"], **extra)  # type: ignore[arg-type]
    return a, b


def _write(a: Endpoint, b: Endpoint, length: int, wr_id: int = 1) -> None:
    a.qp.post_send(SendWR(wr_id, [Sge(a.mr.addr, length, a.mr.lkey)], b.mr.addr, b.mr.rkey))


def _silence_b_and_write(agents: Agents, a: Endpoint, b: Endpoint) -> None:
    _write(a, b, 64, wr_id=1)
    agents.run(2e-3)
    assert [wc.status for wc in a.cq.poll(4)] == [WcStatus.SUCCESS], "the path worked"
    agents.drop("b", lambda _datagram: True)
    _write(a, b, 64, wr_id=2)


def test_retries_exhausted_within_the_qps_budget_fail_it(agents):
    # timeout 14: 16.8 ms a wait; one wait, no retry.
    a, b = _connect(agents, {}, {"timeout": 14, "retry": (0, 0)})
    _silence_b_and_write(agents, a, b)
    agents.run(0.1)  # six budgets, a thirtieth of the agent's own limit
    (wc,) = a.cq.poll(4)
    assert (wc.wr_id, wc.status) == (2, WcStatus.RETRY_EXC_ERR)
    assert a.qp.query()["qp_state"] == "ERR"
    event = a.ctx.get_async_event(timeout=0)
    assert event is not None
    assert (event.event_type, event.element) == (EventType.QP_FATAL, a.qp.qp_num)


def test_a_qp_is_not_failed_before_its_budget_is_spent(agents):
    # timeout 16: 67.1 ms a wait; 1 linear and 1 exponential retry: 1 + 1 + 2 waits, 268 ms.
    a, b = _connect(agents, {}, {"timeout": 16, "retry": (1, 1)})
    _silence_b_and_write(agents, a, b)
    agents.run(0.2)
    assert a.cq.poll(4) == [] and a.qp.query()["qp_state"] == "RTS", "budget not spent yet"
    agents.run(0.2)
    (wc,) = a.cq.poll(4)
    assert wc.status is WcStatus.RETRY_EXC_ERR and a.qp.query()["qp_state"] == "ERR"


def test_infinite_retries_outlast_the_agents_own_limit(tmp_path):
    agents = Agents(tmp_path, MrcConfig(peer_timeout=0.05))
    try:
        a, b = _connect(agents, {}, {"timeout": 8, "retry": (7, 25)})  # OCP's example's
        _silence_b_and_write(agents, a, b)
        agents.run(0.2)  # four times the agent's limit
        assert a.cq.poll(4) == [] and a.qp.query()["qp_state"] == "RTS"
    finally:
        agents.close()


def _largest_datagram(agents: Agents, a: Endpoint, b: Endpoint, length: int) -> int:
    sizes: list[int] = []

    def record(datagram: OutgoingDatagram) -> bool:
        sizes.append(len(datagram.payload))
        return False

    agents.drop("a", record)
    _write(a, b, length)
    agents.run(5e-3)
    assert [wc.status for wc in a.cq.poll(4)] == [WcStatus.SUCCESS]
    return max(sizes)


def test_path_mtu_sets_the_payload_per_packet(agents):
    a, b = _connect(agents, {"path_mtu": 1}, {})  # IBV_MTU_256
    largest = _largest_datagram(agents, a, b, 10_000)
    assert 256 < largest < 512, "256 bytes of payload and the headers"
    assert agents.a.pool.owner(a.qp.qp_num).config.payload_size == 256


def test_path_mtu_is_bounded_by_what_the_agents_link_allows(agents):
    link = agents.a.pool.default.config.payload_size  # 1024: a 1500-byte frame
    a, b = _connect(agents, {"path_mtu": 5}, {})  # IBV_MTU_4096
    largest = _largest_datagram(agents, a, b, 10_000)
    assert link < largest < 2 * link
    assert a.ctx.query_port(1)["active_mtu"] == 3  # IBV_MTU_1024
    assert a.qp.query()["path_mtu"] == 5


@pytest.mark.parametrize("path_mtu", [0, 6])
def test_a_path_mtu_outside_verbs_enum_is_refused(agents, path_mtu):
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    a.qp.modify(QpState.INIT)
    info = b.info()
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(
            QpState.RTR, dest_qp_num=info["qpn"], rq_psn=0, dgid=info["gid"], path_mtu=path_mtu
        )  # type: ignore[arg-type]
    assert raised.value.field == "path_mtu"
    assert a.qp.query()["qp_state"] == "INIT"
