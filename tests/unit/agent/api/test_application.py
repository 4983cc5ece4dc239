"""The application API against two in-process agents on the deterministic link: WRITE and
WRITE with immediate, completions and their order, the QP state machine, completion
channels, asynchronous events, bad input and a client that goes away."""

from __future__ import annotations

import os
import selectors
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.api.errors import (
    ApiError,
    InvalidArgument,
    NotFound,
    NotSupported,
    OutOfResources,
    PermissionDenied,
)
from agent.api.inprocess import open_in_process
from agent.api.types import (
    Access,
    EventType,
    QpState,
    RecvWR,
    SendFlags,
    SendWR,
    Sge,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from agent.core import MrcConfig
from tests.unit.agent.api.harness import Agents, Endpoint, connect, poll_until


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path, MrcConfig(peer_timeout=0.05))
    yield made
    made.close()


@pytest.fixture
def pair(agents: Agents) -> tuple[Endpoint, Endpoint]:
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(a, b)
    return a, b


def _write(a: Endpoint, b: Endpoint, data: bytes, offset: int = 0, imm: int | None = None,
           wr_id: int = 1, flags: SendFlags = SendFlags.SIGNALED) -> None:  # fmt: skip
    a.mr.buf[: len(data)] = data
    opcode = WrOpcode.RDMA_WRITE if imm is None else WrOpcode.RDMA_WRITE_WITH_IMM
    a.qp.post_send(SendWR(wr_id, [Sge(a.mr.addr, len(data), a.mr.lkey)], b.mr.addr + offset,
                          b.mr.rkey, opcode, imm, flags))  # fmt: skip


def test_write_with_immediate_completes_with_its_immediate_and_data(agents, pair):
    a, b = pair
    b.qp.post_recv([RecvWR(70), RecvWR(71)])
    payload = os.urandom(70_000)  # many packets, sprayed over the EVs
    _write(a, b, payload, offset=4096, imm=0xDEADBEEF, wr_id=9)
    (sent,) = poll_until(a.cq, 1, agents)
    assert (sent.wr_id, sent.status, sent.opcode) == (9, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE)
    (got,) = poll_until(b.cq, 1, agents)
    assert (got.wr_id, got.status, got.opcode) == (70, WcStatus.SUCCESS,
                                                   WcOpcode.RECV_RDMA_WITH_IMM)  # fmt: skip
    assert (got.imm_data, got.byte_len, got.qp_num) == (0xDEADBEEF, 70_000, b.qp.qp_num)
    assert bytes(b.mr.buf[4096 : 4096 + 70_000]) == payload, "placed in the shared memory"


def test_plain_writes_are_silent_at_the_responder_and_complete_in_order(agents, pair):
    a, b = pair
    for index in range(5):
        a.mr.buf[index * 10 : index * 10 + 10] = bytes([index]) * 10
    a.qp.post_send([
        SendWR(i, [Sge(a.mr.addr + i * 10, 10, a.mr.lkey)], b.mr.addr + i * 10, b.mr.rkey)
        for i in range(5)
    ])  # fmt: skip
    assert [wc.wr_id for wc in poll_until(a.cq, 5, agents)] == [0, 1, 2, 3, 4]
    agents.run(1e-3)
    assert b.cq.poll() == []
    assert bytes(b.mr.buf[:50]) == b"".join(bytes([i]) * 10 for i in range(5))


def test_unsignaled_writes_free_the_send_queue_without_completions(agents):
    a = Endpoint(agents.context("a"), max_send_wr=4)
    b = Endpoint(agents.context("b"))
    connect(a, b)
    for round_ in range(3):
        for i in range(3):
            _write(a, b, b"x" * 100, wr_id=i, flags=SendFlags(0))
        _write(a, b, b"y" * 100, wr_id=100 + round_)  # one signaled WR retires those before
        (wc,) = poll_until(a.cq, 1, agents)
        assert wc.wr_id == 100 + round_
        agents.run_until(lambda: a.qp.send_queue_free == 4)
    with pytest.raises(OutOfResources, match="room for 4 of 5"):
        a.qp.post_send([SendWR(i, [Sge(a.mr.addr, 1, a.mr.lkey)], b.mr.addr, b.mr.rkey)
                        for i in range(5)])  # fmt: skip


def test_a_write_with_immediate_before_its_receive_waits_for_it(agents, pair):
    a, b = pair
    _write(a, b, b"", imm=5)  # zero bytes: the immediate alone
    poll_until(a.cq, 1, agents)
    assert b.cq.poll() == []
    b.qp.post_recv(RecvWR(3))
    (wc,) = poll_until(b.cq, 1, agents)
    assert (wc.wr_id, wc.imm_data, wc.byte_len) == (3, 5, 0)


def test_the_qp_state_machine_refuses_steps_out_of_order(agents):
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    with pytest.raises(InvalidArgument, match="RTR follows INIT") as raised:
        a.qp.modify(QpState.RTR, dest_qp_num=b.qp.qp_num, rq_psn=0, dgid=b.ctx.device.ports[0])
    assert raised.value.field == "qp_state"
    with pytest.raises(InvalidArgument, match="post_send needs RTS"):
        _write(a, b, b"early")
    a.qp.modify(QpState.INIT)
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.RTR, rq_psn=0, dgid=b.ctx.device.ports[0])
    assert raised.value.field == "dest_qp_num"
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.RTR, dest_qp_num=b.qp.qp_num, rq_psn=0, dgid="10.0.0.0.1")
    assert raised.value.field == "ah_attr.dgid[0]"
    a.qp.modify(QpState.RTR, dest_qp_num=b.qp.qp_num, rq_psn=0, dgid=b.ctx.device.ports[0])
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.RTS)
    assert raised.value.field == "sq_psn"
    assert a.qp.query()["qp_state"] == "RTR"
    with pytest.raises(InvalidArgument, match="the QP is RTR"):
        a.qp.modify(QpState.RTS, cur_qp_state=QpState.INIT, sq_psn=1)
    a.qp.modify(QpState.RTS, sq_psn=1)
    assert a.qp.state is QpState.RTS
    a.qp.modify(QpState.RESET)
    assert a.qp.query()["qp_state"] == "RESET"
    a.qp.modify(QpState.INIT)  # the QP number is kept and can be connected again


def test_moving_to_err_flushes_queued_work(agents, pair):
    a, b = pair
    b.qp.post_recv([RecvWR(1), RecvWR(2)])
    b.qp.modify(QpState.ERR)
    flushed = poll_until(b.cq, 2, agents)
    assert [(wc.wr_id, wc.status) for wc in flushed] == [(1, WcStatus.WR_FLUSH_ERR),
                                                         (2, WcStatus.WR_FLUSH_ERR)]  # fmt: skip
    with pytest.raises(InvalidArgument, match="the QP is ERR"):
        _write(b, a, b"late")


@pytest.mark.parametrize(
    ("change", "field", "error"),
    [
        ({"lkey": 0x1234}, "wr[0].sg_list[0].lkey", InvalidArgument),
        ({"addr": -1}, "wr[0].sg_list[0].addr", InvalidArgument),
        ({"length": (1 << 20) + 1}, "wr[0].sg_list[0].addr", InvalidArgument),
        ({"opcode": WrOpcode.RDMA_READ}, "wr[0].opcode", NotSupported),
        ({"opcode": WrOpcode.SEND}, "wr[0].opcode", NotSupported),
        ({"opcode": WrOpcode.RDMA_WRITE_WITH_IMM}, "wr[0].imm_data", InvalidArgument),
        ({"imm_data": 1}, "wr[0].imm_data", InvalidArgument),
        ({"rkey": 1 << 32}, "wr[0].rkey", InvalidArgument),
    ],
)
def test_bad_send_requests_name_the_field_and_disturb_nothing(agents, pair, change, field, error):
    a, b = pair
    sge = {"addr": a.mr.addr, "length": 8, "lkey": a.mr.lkey, **{k: v for k, v in change.items()
           if k in ("addr", "length", "lkey")}}  # fmt: skip
    wr = {"opcode": WrOpcode.RDMA_WRITE, "imm_data": None, "rkey": b.mr.rkey,
          **{k: v for k, v in change.items() if k in ("opcode", "imm_data", "rkey")}}  # fmt: skip
    with pytest.raises(error) as raised:
        a.qp.post_send(SendWR(1, [Sge(**sge)], b.mr.addr, wr["rkey"], wr["opcode"],
                              wr["imm_data"]))  # fmt: skip
    assert raised.value.field == field
    _write(a, b, b"fine afterwards", wr_id=2)
    (wc,) = poll_until(a.cq, 1, agents)
    assert (wc.wr_id, wc.status) == (2, WcStatus.SUCCESS)


def test_a_region_of_another_protection_domain_is_refused(agents, pair):
    a, _b = pair
    other = a.ctx.alloc_pd().reg_mr(4096)
    with pytest.raises(InvalidArgument, match="protection domain") as raised:
        a.qp.post_send(SendWR(1, [Sge(other.addr, 8, other.lkey)], 0, 1))
    assert raised.value.field == "wr[0].sg_list[0].lkey"


def test_a_wrong_rkey_fails_that_qp_alone(agents, pair):
    a, b = pair
    c, d = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(c, d)
    a.qp.post_send(SendWR(4, [Sge(a.mr.addr, 64, a.mr.lkey)], b.mr.addr, b.mr.rkey ^ 0x5A5A))
    (wc,) = poll_until(a.cq, 1, agents)
    assert (wc.wr_id, wc.status) == (4, WcStatus.REM_ACCESS_ERR)
    agents.run_until(lambda: a.qp.query()["qp_state"] == "ERR")
    # A region of the other client's protection domain is not writable through this QP.
    c.qp.post_send(SendWR(5, [Sge(c.mr.addr, 8, c.mr.lkey)], b.mr.addr, b.mr.rkey))
    (wc,) = poll_until(c.cq, 1, agents)
    assert wc.status is WcStatus.REM_ACCESS_ERR
    e, f = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    connect(e, f)
    _write(e, f, b"still fine", wr_id=6)
    assert poll_until(e.cq, 1, agents)[0].status is WcStatus.SUCCESS


def test_a_completion_channel_is_a_descriptor_selectors_can_wait_on(agents, pair):
    a, b = pair
    b.qp.post_recv([RecvWR(i) for i in range(3)])
    b.cq.req_notify()
    selector = selectors.DefaultSelector()
    selector.register(b.channel, selectors.EVENT_READ)
    assert selector.select(0) == []
    _write(a, b, b"wake up", imm=1)
    agents.run_until(lambda: bool(selector.select(0)))
    assert b.channel.get_cq_event(timeout=0) is b.cq
    b.channel.ack_cq_events(b.cq, 1)
    assert [wc.imm_data for wc in b.cq.poll()] == [1]
    # A completion that came before the CQ was armed wakes it at once (no lost wake-up).
    _write(a, b, b"again", imm=2)
    (agent_side,) = agents.api_b.sessions.values()
    agents.run_until(lambda: agent_side.objects.cqs[b.cq.handle].seq >= 2)  # sent, not yet read
    b.cq.req_notify()
    assert b.channel.get_cq_event(timeout=1.0) is b.cq
    assert [wc.imm_data for wc in b.cq.poll()] == [2]
    b.cq.req_notify()  # nothing new since: no wake-up
    assert b.channel.get_cq_event(timeout=1e-3) is None
    selector.close()


def test_a_peer_that_goes_away_fails_the_qp_with_an_async_event(agents, pair):
    a, b = pair
    agent_a = agents.api_a
    rkey = a.mr.rkey
    qp_num = a.qp.qp_num
    a.ctx.close()  # the application dies: its agent releases everything it held
    agents.run(1e-3)
    assert not agent_a.sessions
    assert qp_num not in agents.a.pool.qps
    assert agents.a.pool.default.memory.region(rkey) is None
    _write(b, a, b"anyone there?", wr_id=8)
    (wc,) = poll_until(b.cq, 1, agents)
    assert wc.wr_id == 8 and wc.status is not WcStatus.SUCCESS
    event = b.ctx.get_async_event(timeout=1.0)
    assert event is not None
    assert (event.event_type, event.element) == (EventType.QP_FATAL, b.qp.qp_num)
    assert b.qp.query()["qp_state"] == "ERR"


def test_an_unprivileged_client_gets_the_application_api_only(agents, tmp_path):
    agents.server_a.is_privileged = lambda _credentials: False
    ctx = open_in_process(agents.server_a, agents.pump)
    assert not ctx.privileged
    with pytest.raises(PermissionDenied):
        ctx.link.request("api.ctl.query_device")
    with pytest.raises(ApiError):
        ctx.link.request("status")  # the agent's own ops stay root's too
    Endpoint(ctx)  # the application API works


def test_hostile_requests_are_refused_and_the_agent_keeps_serving(agents, pair):
    a, b = pair
    link = a.ctx.link
    pd = a.pd.handle
    read_end, write_end = os.pipe()
    with pytest.raises(InvalidArgument) as raised:
        link.request("api.mr.reg", fds=[read_end], pd=pd, length=4096, access=3)
    assert raised.value.field == "fd"
    unsealed = os.memfd_create("x")
    os.ftruncate(unsealed, 4096)
    with pytest.raises(InvalidArgument, match="F_SEAL_SHRINK"):
        link.request("api.mr.reg", fds=[unsealed], pd=pd, length=4096, access=3)
    with pytest.raises(NotFound) as raised:
        link.request("api.qp.modify", qp=0x123456, qp_state="INIT")
    assert raised.value.field == "qp_num"
    with pytest.raises(ApiError, match="unknown op"):
        link.request("api.teleport")
    with pytest.raises(InvalidArgument) as raised:
        link.request("api.qp.create", pd=pd, send_cq=a.cq.handle, recv_cq=a.cq.handle,
                     max_send_wr=0, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)  # fmt: skip
    assert raised.value.field == "cap.max_send_wr"
    for fd in (read_end, write_end, unsealed):
        os.close(fd)
    # A WR the client library would have refused, sent raw: the agent fails it and the QP.
    link.submit("api.post_send", qp=a.qp.qp_num,
                wr=[[7, 0, a.mr.addr, 8, 0xBAD, b.mr.addr, b.mr.rkey, None, 2]])  # fmt: skip
    (wc,) = poll_until(a.cq, 1, agents)
    assert (wc.wr_id, wc.status) == (7, WcStatus.LOC_QP_OP_ERR)
    assert "lkey" in wc.vendor_err
    event = a.ctx.get_async_event(timeout=1.0)
    assert event is not None and event.event_type is EventType.QP_FATAL
    # Everything else is untouched.
    c, d = Endpoint(a.ctx), Endpoint(b.ctx)
    connect(c, d)
    _write(c, d, b"ok", wr_id=1)
    assert poll_until(c.cq, 1, agents)[0].status is WcStatus.SUCCESS


def test_a_socket_that_is_not_the_agents_is_refused():
    with pytest.raises(ApiError):
        from agent.api.client import Context

        Context.open("/nonexistent/mrc.sock")


def test_regions_need_remote_write_for_the_peer_and_local_write_for_it(agents):
    ctx = agents.context("a")
    pd = ctx.alloc_pd()
    local_only = pd.reg_mr(4096, Access.LOCAL_WRITE)
    assert local_only.rkey == 0
    with pytest.raises(InvalidArgument) as raised:
        pd.reg_mr(4096, Access.REMOTE_WRITE)
    assert raised.value.field == "access"
    with pytest.raises(NotSupported):
        pd.reg_mr(4096, Access.LOCAL_WRITE | Access.REMOTE_READ)
    with pytest.raises(ApiError):
        pd.dealloc()  # a region still uses it
    local_only.dereg()
    pd.dealloc()


def test_a_socketpair_client_is_served_like_an_accepted_one(agents):
    mine, theirs = socket.socketpair()
    agents.server_b.adopt(theirs)
    from agent.api.client import Context

    ctx = Context(mine, agents.pump)
    assert ctx.device.ports == ("10.0.0.2",)
    assert ctx.query_port(1)["state"] == "ACTIVE"
    with pytest.raises(InvalidArgument) as raised:
        ctx.query_port(2)
    assert raised.value.field == "port_num"


def test_an_application_cannot_make_an_ev_event_cq(agents):
    """EV events are the controller's (``api.ctl.ev_cq.create``): a plain CQ refuses them,
    whoever asks."""
    agents.server_a.is_privileged = lambda _credentials: False
    ctx = open_in_process(agents.server_a, agents.pump)
    with pytest.raises(InvalidArgument) as raised:
        ctx.link.request("api.cq.create", cqe=16, channel=None, ev_events=True)
    assert raised.value.field == "ev_events"
    ctx.create_cq(16)  # a CQ without them is made


def test_a_refused_move_to_init_keeps_the_profiles_the_qp_took(agents):
    """INIT -> INIT naming a profile that is not ONLINE is refused, and the QP keeps its
    profiles: it still connects with them."""
    a, b = Endpoint(agents.context("a")), Endpoint(agents.context("b"))
    a.qp.modify(QpState.INIT)
    with pytest.raises(InvalidArgument) as raised:
        a.qp.modify(QpState.INIT, ev_profile_id=9)
    assert raised.value.field == "ev_profile_id"
    assert a.qp.query()["ev_profile_id"] == 0
    b.qp.modify(QpState.INIT)
    for me, peer in ((a, b), (b, a)):
        info = peer.info()
        me.qp.modify(QpState.RTR, dest_qp_num=info["qpn"], rq_psn=info["psn"], dgid=info["gid"])  # type: ignore[arg-type]
    for me in (a, b):
        me.qp.modify(QpState.RTS, sq_psn=me.info()["psn"])  # type: ignore[arg-type]
    _write(a, b, b"kept")
    assert poll_until(a.cq, 1, agents)[0].status is WcStatus.SUCCESS
