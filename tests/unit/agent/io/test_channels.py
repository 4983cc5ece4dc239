"""The event loop's parts: reactor timers, JSON-line channels, the endpoint pool, and the
control socket served by a runtime and used by the blocking client."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core import ConnectionSpec, IncomingDatagram, IpContext, MessageAcked, MrcConfig
from agent.core.drops import DropReason
from agent.io.addresses import PeerAddress
from agent.io.control_client import ControlClient, connect_to_agent
from agent.io.control_protocol import PerfRequest, SendRequest, StatusRequest
from agent.io.control_server import ControlServer
from agent.io.endpoints import EndpointPool
from agent.io.errors import PeerUnreachableError, PortInUseError, UsageError
from agent.io.inbound import InboundPolicy, SideChannelServer
from agent.io.json_lines import MAX_LINE, LineChannel
from agent.io.reactor import Reactor
from agent.io.runtime import AgentRuntime
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B, SteppedClock, memory_link


def test_timers_run_in_deadline_order_and_cancelled_ones_never_run():
    reactor = Reactor()
    ran: list[str] = []
    reactor.call_at(2.0, lambda: ran.append("late"))
    reactor.call_at(1.0, lambda: ran.append("early"))
    reactor.call_at(1.5, lambda: ran.append("cancelled")).cancel()
    assert reactor.next_deadline() == 1.0
    reactor.run_timers(1.7)
    assert ran == ["early"]
    assert reactor.next_deadline() == 2.0
    reactor.run_timers(5.0)
    assert ran == ["early", "late"]
    assert reactor.next_deadline() is None
    reactor.close()


class _Endpoint:
    """A LineChannel on one end of a socketpair, recording what it receives."""

    def __init__(self, reactor: Reactor, sock: socket.socket) -> None:
        self.messages: list[dict] = []
        self.closed_with: list[str | None] = []
        self.channel = LineChannel(sock, reactor, self.messages.append, self.closed_with.append)


@pytest.fixture
def wired() -> Iterator[tuple[Reactor, _Endpoint, socket.socket]]:
    reactor = Reactor()
    ours, theirs = socket.socketpair()
    endpoint = _Endpoint(reactor, ours)
    yield reactor, endpoint, theirs
    theirs.close()
    endpoint.channel.close(None)
    reactor.close()


def _pump(reactor: Reactor, rounds: int = 5) -> None:
    for _ in range(rounds):
        reactor.poll(0.01)


def test_a_message_split_across_reads_is_delivered_once_whole(wired):
    reactor, endpoint, theirs = wired
    theirs.sendall(b'{"a":')
    _pump(reactor)
    assert endpoint.messages == []
    theirs.sendall(b' 1}\n\n{"b": 2}\n')
    _pump(reactor)
    assert endpoint.messages == [{"a": 1}, {"b": 2}]


def test_a_non_object_line_closes_the_channel_with_a_protocol_error(wired):
    reactor, endpoint, theirs = wired
    theirs.sendall(b"[1,2]\n")
    _pump(reactor)
    assert endpoint.channel.closed
    assert endpoint.closed_with == ["protocol error: expected a JSON object, got list"]


def test_an_endless_line_is_cut_off_at_the_limit(wired):
    reactor, endpoint, theirs = wired
    theirs.setblocking(False)
    chunk = b"x" * 65536
    sent = 0
    while sent <= MAX_LINE and not endpoint.channel.closed:
        with contextlib.suppress(BlockingIOError):
            sent += theirs.send(chunk)
        reactor.poll(0.01)
    assert endpoint.channel.closed
    assert "longer than" in (endpoint.closed_with[0] or "")


def test_an_orderly_close_by_the_peer_reports_no_error_exactly_once(wired):
    reactor, endpoint, theirs = wired
    theirs.shutdown(socket.SHUT_WR)
    _pump(reactor)
    endpoint.channel.close("again")
    assert endpoint.closed_with == [None]


def test_queued_messages_are_flushed_before_close_after_flush(wired):
    reactor, endpoint, theirs = wired
    endpoint.channel.send({"n": 1})
    endpoint.channel.send({"n": 2})
    endpoint.channel.close_after_flush()
    _pump(reactor)
    data = b""
    while chunk := theirs.recv(4096):
        data += chunk
    assert data == b'{"n":1}\n{"n":2}\n'


def _pool_pair() -> tuple[EndpointPool, EndpointPool]:
    return EndpointPool([PLANE_A], MrcConfig(), seed=1), EndpointPool([PLANE_B], MrcConfig(), 2)


def _deliver(source: EndpointPool, target: EndpointPool, now: float) -> int:
    out = source.datagrams_to_send(now)
    for d in out:
        target.receive_datagram(
            IncomingDatagram(d.payload, d.ip, d.src_port, d.dscp, d.ecn, d.flow_label), now
        )
    return len(out)


def test_the_pool_routes_each_datagram_to_the_endpoint_owning_its_qp():
    client, server = _pool_pair()
    single_path = client.endpoint_for(MrcConfig(ev_set_size=1))
    assert single_path is not client.default
    assert client.endpoint_for(MrcConfig(ev_set_size=1)) is single_path
    region = server.default.register_memory(bytearray(4096))
    specs = []
    for endpoint in (client.default, single_path):
        qp, peer_qp = client.allocate_qp(endpoint), server.allocate_qp(server.default)
        client.connect(endpoint, ConnectionSpec(qp, peer_qp, (PLANE_B,)))
        server.connect(server.default, ConnectionSpec(peer_qp, qp, (PLANE_A,)))
        endpoint.post_write(qp, b"m" * 3000, region.va, region.rkey)
        specs.append((endpoint, qp))
    now = 0.0
    acked: set[int] = set()
    for _ in range(50):
        now += 1e-4
        _deliver(client, server, now)
        _deliver(server, client, now)
        while (event := client.next_event()) is not None:
            assert isinstance(event, MessageAcked)
            acked.add(event.qp)
        while server.next_event() is not None:
            pass
        client.handle_timer(now)
        server.handle_timer(now)
        if len(acked) == 2:
            break
    assert acked == {qp for _endpoint, qp in specs}
    evs_used = [
        sum(1 for ev in client.connection_stats(qp).evs if ev.uses) for _endpoint, qp in specs
    ]
    assert evs_used[1] == 1 and evs_used[0] > 1
    assert client.drops() == {}


def test_datagrams_for_no_known_qp_are_dropped_and_counted_by_the_default_endpoint():
    client, _server = _pool_pair()
    client.endpoint_for(MrcConfig(ev_set_size=2))
    ip = IpContext(src=PLANE_B, dst=PLANE_A)
    client.receive_datagram(IncomingDatagram(b"\xdc" * 3, ip, 0xC000, 46, 0), 0.0)
    client.receive_datagram(IncomingDatagram(b"\xdc" + b"\x00" * 40, ip, 0xC000, 46, 0), 0.0)
    drops = client.drops()
    assert sum(drops.values()) == 2
    assert set(drops) <= {r.value for r in DropReason}


def test_a_qp_number_is_never_handed_out_twice_while_reserved():
    pool, _ = _pool_pair()
    other = pool.endpoint_for(MrcConfig(ev_set_size=2))
    seen = {pool.allocate_qp(pool.default) for _ in range(200)}
    seen |= {pool.allocate_qp(other) for _ in range(200)}
    assert len(seen) == 400


class _Agents:
    """A serving runtime (side channel + control socket + out dir) and a sink peer, their
    loops on a background thread. Both run on a stepped clock, ``STEP`` s a round of turns,
    so that a perf run's samples and end fall where its duration and interval say, however
    long the machine keeps the thread waiting."""

    STEP = 100e-6

    def __init__(self, tmp_path: Path) -> None:
        link_a, link_b = memory_link()
        self.out_dir = tmp_path / "out"
        self.out_dir.mkdir()
        self.socket_path = str(tmp_path / "agent.sock")
        self.clock = SteppedClock()
        self.local = AgentRuntime(
            [PLANE_A], MrcConfig(), datagram_io=link_a, seed=3, clock=self.clock
        )
        self.remote = AgentRuntime(
            [PLANE_B], MrcConfig(), datagram_io=link_b, seed=4, clock=self.clock
        )
        self.control = ControlServer(self.local, self.socket_path)
        side = SideChannelServer(
            self.remote, PeerAddress("127.0.0.1", 0), InboundPolicy(self.out_dir)
        )
        self.peer = f"127.0.0.1:{side.address.port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.clock.advance(self.STEP)
            self.local.turn(max_wait=0.0)
            self.remote.turn(max_wait=0.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.local.close()
        self.remote.close()


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[_Agents]:
    made = _Agents(tmp_path)
    yield made
    made.close()


def _client(agents: _Agents) -> ControlClient:
    client = connect_to_agent(agents.socket_path)
    assert client is not None
    return client


def test_a_control_client_sends_a_file_through_the_running_agent(agents, tmp_path):
    data = os.urandom(100_000)
    source = tmp_path / "payload.bin"
    source.write_bytes(data)
    with _client(agents) as client:
        result = client.request(SendRequest(str(source), agents.peer, "stored.bin"))
    assert (agents.out_dir / "stored.bin").read_bytes() == data
    assert result["bytes"] == len(data)


def test_a_control_client_gets_perf_progress_then_the_result(agents):
    progress: list[dict] = []
    with _client(agents) as client:
        result = client.request(
            PerfRequest(agents.peer, duration=0.3, interval=0.1, evs=4, message_size=4096),
            on_progress=progress.append,
        )
    assert result["evs"] == 4
    assert [round(line["elapsed_s"], 3) for line in progress] == [0.1, 0.2]
    assert all(line["goodput_bps"] > 0 for line in progress)


def test_status_lists_planes_and_counters(agents):
    with _client(agents) as client:
        status = client.request(StatusRequest())
    assert status["planes"] == ["10.0.0.1"]
    assert status["connections"] == []
    assert "datagrams_sent" in status


def test_a_failed_request_raises_the_error_the_agent_reported(agents):
    with _client(agents) as client:
        with pytest.raises(UsageError, match="cannot read"):
            client.request(SendRequest("/nonexistent/file", agents.peer))
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
        with pytest.raises(PeerUnreachableError, match="connection refused"):
            client.request(PerfRequest(f"127.0.0.1:{port}", duration=0.1))
        assert client.request(StatusRequest())["planes"] == ["10.0.0.1"]


def test_a_second_agent_on_the_same_control_socket_is_refused(agents):
    link, _ = memory_link()
    other = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=link)
    try:
        with pytest.raises(PortInUseError, match="already answers"):
            ControlServer(other, agents.socket_path)
    finally:
        other.close()


def test_a_stale_control_socket_file_is_replaced(tmp_path):
    path = str(tmp_path / "stale.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(path)
    link, _ = memory_link()
    runtime = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=link)
    try:
        ControlServer(runtime, path)
        client = connect_to_agent(path)
        assert client is not None
        client.close()
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    finally:
        runtime.close()
    assert not os.path.exists(path)


def test_no_agent_at_a_missing_socket_means_none():
    assert connect_to_agent("/nonexistent/dir/agent.sock") is None
