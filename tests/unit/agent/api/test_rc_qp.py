"""An RC QP (``QpType.RC``, the testbed's extension) is the agent's RoCEv2 baseline behind the
same host API: WRITE and WRITE WITH IMMEDIATE complete into posted receives as for MRC, the
packets on the wire are standard RoCE, and a QP whose ``retry_cnt`` runs out completes its
oldest WRITE with RETRY_EXC_ERR, the rest flushed, QP_FATAL raised. Two in-process agents on
the deterministic link."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.api.errors import InvalidArgument
from agent.api.types import (
    EventType,
    QpState,
    QpType,
    RecvWR,
    SendWR,
    Sge,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from agent.core import OutgoingDatagram
from tests.unit.agent.api.harness import Agents, Endpoint, poll_until
from wire.constants import MRC_OPCODE_MIN


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path)
    yield made
    made.close()


def _pair(
    agents: Agents, roce_profile: str | None = None, **rts: object
) -> tuple[Endpoint, Endpoint]:
    """Two RC QPs connected, ``a`` running ``roce_profile`` with these RTS attributes,
    receives posted on both."""
    a = Endpoint(agents.context("a"), qp_type=QpType.RC, roce_profile=roce_profile)
    b = Endpoint(agents.context("b"), qp_type=QpType.RC)
    for me in (a, b):
        me.qp.modify(QpState.INIT)
        me.qp.post_recv([RecvWR(100 + i) for i in range(4)])
    for me, peer in ((a, b), (b, a)):
        info = peer.info()
        me.qp.modify(QpState.RTR, dest_qp_num=info["qpn"], rq_psn=info["psn"], dgid=info["gid"])  # type: ignore[arg-type]
    for me, extra in ((a, rts), (b, {})):
        me.qp.modify(QpState.RTS, sq_psn=me.info()["psn"], **extra)  # type: ignore[arg-type]
    return a, b


def _write_imm(a: Endpoint, b: Endpoint, wr_id: int, offset: int, length: int, imm: int) -> None:
    a.qp.post_send(
        SendWR(
            wr_id,
            [Sge(a.mr.addr + offset, length, a.mr.lkey)],
            b.mr.addr + offset,
            b.mr.rkey,
            WrOpcode.RDMA_WRITE_WITH_IMM,
            imm_data=imm,
        )
    )


def test_an_rc_qp_pair_writes_with_immediate_into_posted_receives(agents):
    sent: list[int] = []

    def record(datagram: OutgoingDatagram) -> bool:
        sent.append(datagram.payload[0])
        return False

    agents.drop("a", record)
    a, b = _pair(agents)
    assert a.qp.qp_type is QpType.RC and a.qp.query()["qp_type"] == "RC"
    a.mr.buf[:10_000] = bytes(i % 251 for i in range(10_000))
    _write_imm(a, b, 1, 0, 10_000, 0xCAFE)  # ten 1024-byte packets: FIRST .. LAST_IMM
    _write_imm(a, b, 2, 10_000, 4, 7)
    sends = poll_until(a.qp, 2, agents)
    assert [(wc.wr_id, wc.status, wc.opcode) for wc in sends] == [
        (1, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE),
        (2, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE),
    ]
    received = poll_until(b.cq, 2, agents)
    assert [(wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.imm_data) for wc in received] == [
        (100, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, 10_000, 0xCAFE),
        (101, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, 4, 7),
    ]
    assert bytes(b.mr.buf[:10_000]) == bytes(a.mr.buf[:10_000])
    assert sent and all(opcode < MRC_OPCODE_MIN for opcode in sent), "standard RoCE opcodes only"
    # the peer writes back on the same QPs
    _write_imm(b, a, 3, 0, 64, 9)
    (back,) = poll_until(a.cq, 1, agents)
    assert (back.wr_id, back.imm_data, back.byte_len) == (100, 9, 64)


def test_an_rc_qp_out_of_retries_completes_in_error(agents):
    # timeout 10 (4.2 ms a wait), retry_cnt 2: the QP gives up after three waits.
    a, b = _pair(agents, timeout=10, retry=(2, 0))
    _write_imm(a, b, 1, 0, 64, 1)
    assert [wc.status for wc in poll_until(a.qp, 1, agents)] == [WcStatus.SUCCESS]
    agents.drop("b", lambda _datagram: True)
    _write_imm(a, b, 2, 0, 64, 2)
    _write_imm(a, b, 3, 64, 64, 3)
    agents.run(0.01)
    assert a.cq.poll(4) == [] and a.qp.query()["qp_state"] == "RTS", "retries not used up"
    agents.run(0.05)
    completions = [wc for wc in a.cq.poll(8) if wc.opcode is WcOpcode.RDMA_WRITE]
    assert [(wc.wr_id, wc.status) for wc in completions] == [
        (2, WcStatus.RETRY_EXC_ERR),
        (3, WcStatus.WR_FLUSH_ERR),
    ]
    assert "retry counter exceeded" in completions[0].vendor_err
    assert a.qp.query()["qp_state"] == "ERR"
    event = a.ctx.get_async_event(timeout=0)
    assert event is not None
    assert (event.event_type, event.element) == (EventType.QP_FATAL, a.qp.qp_num)


def test_an_rc_qp_refuses_mrc_profiles_and_exponential_retries(agents):
    a = Endpoint(agents.context("a"), qp_type=QpType.RC)
    with pytest.raises(InvalidArgument) as refused:
        a.qp.modify(QpState.INIT, ev_profile_id=1)
    assert refused.value.field == "ev_profile_id"
    a.qp.modify(QpState.INIT, ev_profile_id=0)
    a.qp.modify(QpState.RTR, dest_qp_num=5, rq_psn=0, dgid=a.ctx.device.ports[0])
    with pytest.raises(InvalidArgument) as refused:
        a.qp.modify(QpState.RTS, sq_psn=0, timeout=14, retry=(7, 1))
    assert refused.value.field == "retry.exp_cnt"
    assert a.qp.query()["qp_state"] == "RTR"


def test_reset_and_destroy_close_an_rc_qps_connection(agents):
    a, b = _pair(agents)
    assert {a.qp.qp_num} <= set(agents.a.pool.qps)
    a.qp.modify(QpState.RESET)
    assert a.qp.qp_num not in agents.a.pool.qps and a.qp.query()["qp_state"] == "RESET"
    b.qp.destroy()
    assert b.qp.qp_num not in agents.b.pool.qps


def test_an_rc_qp_refuses_a_bad_max_wimm_before_its_connection_opens(agents):
    a = Endpoint(agents.context("a"), qp_type=QpType.RC)
    a.qp.modify(QpState.INIT)
    a.qp.modify(QpState.RTR, dest_qp_num=5, rq_psn=0, dgid=a.ctx.device.ports[0])
    with pytest.raises(InvalidArgument) as refused:
        a.qp.modify(QpState.RTS, sq_psn=0, max_wimm=a.ctx.device.max_wimm + 1)
    assert refused.value.field == "max_wimm"
    assert a.qp.query()["qp_state"] == "RTR"
    assert a.qp.qp_num not in agents.a.pool.qps, "no connection opened"
    a.qp.modify(QpState.RTS, sq_psn=0, max_wimm=4)
    assert a.qp.qp_num in agents.a.pool.qps


def test_an_rc_qp_runs_the_roce_profile_it_was_made_with_rts_overriding_its_verbs_values(agents):
    a, b = _pair(agents, roce_profile="adaptive")
    assert a.qp.roce_profile == "adaptive" and a.qp.query()["roce_profile"] == "adaptive"
    assert b.qp.roce_profile == "perftest", "a QP naming none runs perftest's settings"
    made = agents.a.pool.roce.roce_stats(a.qp.qp_num)
    assert (made.local_ack_timeout, made.retry_cnt) == (4.096e-6 * 2**20, 7)
    assert made.selective_repeat and made.adaptive_retransmission
    assert agents.b.pool.roce.roce_stats(b.qp.qp_num).local_ack_timeout == 4.096e-6 * 2**14
    c, _ = _pair(agents, roce_profile="nccl", timeout=10, retry=(3, 0))
    given = agents.a.pool.roce.roce_stats(c.qp.qp_num)
    assert (given.local_ack_timeout, given.retry_cnt) == (4.096e-6 * 2**10, 3)
    assert not given.selective_repeat and not given.adaptive_retransmission
    assert c.qp.query()["timeout"] == 10


def test_a_roce_profile_is_refused_for_an_mrc_qp_and_when_unknown(agents):
    for options, message in (
        ({"roce_profile": "nccl"}, "an MRC QP runs no RoCE profile"),
        ({"qp_type": QpType.RC, "roce_profile": "fast"}, "unknown RoCE profile 'fast'"),
    ):
        with pytest.raises(InvalidArgument, match=message) as refused:
            Endpoint(agents.context("a"), **options)
        assert refused.value.field == "roce_profile"
    assert "roce_profile" not in Endpoint(agents.context("a")).qp.query()
